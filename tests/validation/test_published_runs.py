"""Step time against published training runs (tests/validation/published_runs.csv).

Bounds: issues 2 and 10 ask for MAPE <= 5 % and every run within 12 %, which are asserted; with
the per-step memory traffic of the cross-entropy, embedding gradient and gradient buffer modelled
the fit reaches MAPE 3.52 % and 11.0 % at worst over 42 runs (README says where). MT-NLG (held
out, explore.validation.HELD_OUT_GROUPS) is not bounded; DeepSpeed ZeRO-3 (Narayanan et al. 2021
Table 2, held out too) has its own honest bound below.
The calibration constants in explore/model/calibration.py were fitted on this set
(`python -m explore.validation --fit`); the errors are in-sample.
"""
import numpy as np
import pytest

from explore import validation as V
from explore.scenario import load_scenario

CASES = V.load_cases()


def test_every_published_run_has_a_scenario():
    rows = V.load_rows()
    assert len(rows) == 51
    assert [c[0] for c in CASES] == [r["run_id"] for r in rows]


@pytest.mark.parametrize("row", V.load_rows(), ids=lambda r: r["run_id"])
def test_committed_scenarios_match_the_csv(row):
    """The shipped scenario files are exactly what the CSV and the stated assumptions give."""
    committed = load_scenario(V.SCENARIO_DIR / f"{row['run_id']}.toml")
    assert committed == V.build_scenario(row)


CALIB = V.calibration_cases(CASES)


@pytest.fixture(scope="module")
def errors():
    """In-sample errors of the calibration set (MT-NLG, held out, is reported but not bounded)."""
    return dict(zip([c[0] for c in CALIB], V.errors(CALIB)))


@pytest.mark.parametrize("run_id", [c[0] for c in CALIB])
def test_step_time_within_12_percent(errors, run_id):
    assert abs(errors[run_id]) <= 0.12, f"{run_id}: error {100 * errors[run_id]:.1f} %"


def test_mape_at_most_5_percent(errors):
    mape = float(np.mean(np.abs(list(errors.values()))))
    assert mape <= 0.05, f"MAPE {100 * mape:.2f} %"


def test_mfu_of_korthikanti_runs_matches_published():
    """Table 5 / Megatron README MFU (41.5 % ... 56.3 %) within 12 % relative."""
    from explore.evaluate import evaluate
    for row in V.load_rows():
        if row["run_id"].startswith("korthikanti") and row["mfu_pct"]:
            sc = load_scenario(V.SCENARIO_DIR / f"{row['run_id']}.toml")
            mfu = float(evaluate(sc, keep_invalid=True)["mfu"][0])   # as V.predict
            assert mfu == pytest.approx(float(row["mfu_pct"]) / 100, rel=0.12), row["run_id"]


MEMORY_XFAIL = {
    "zero3n21_t2_530B_640": ("ZeRO-3 memory: explore/model/memory.py holds two whole layers' 16-bit "
                             "parameters unsharded (2 x 10 GB for 530B); DeepSpeed gathers per submodule "
                             "and caps the live parameters (stage3_max_live_parameters), so the paper's run "
                             "fit at 640 GPUs (Table 2 caption) while the model gives 87 GB"),
}


@pytest.mark.parametrize("run_id", [pytest.param(c[0], marks=pytest.mark.xfail(strict=True, reason=MEMORY_XFAIL[c[0]]))
                                    if c[0] in MEMORY_XFAIL else c[0] for c in CASES])
def test_every_published_run_is_valid_and_fits_memory(run_id):
    """Each published run ran on its GPUs, so its published plan must be valid and fit."""
    from explore.evaluate import evaluate
    sc = dict((c[0], c[1]) for c in CASES)[run_id]
    ds = evaluate(sc)
    assert bool(ds["valid"][0]), f"{run_id}: {ds['reason'].values[0]}"
    assert float(ds["memory_per_device_bytes"][0]) <= 80e9


ZERO3 = [c for c in CASES if V.group_of(c[0]) == "zero3n21"]


def test_zero3_group_is_held_out_with_its_error_bounded():
    """Narayanan et al. 2021 Table 2, DeepSpeed ZeRO-3 without model parallelism (6 runs, held out of
    every fit): the model is too fast on every run, by 29-35 % where the published runs are
    compute-bound (384 / 640 GPUs, as MT-NLG's DeepSpeed runs) and by 53-77 % where the published
    step stops falling (768-2,240 GPUs) while the model's 8-NIC NCCL ring hides the ZeRO-3 traffic
    under compute (README "Where the model is still wrong"). Honest bound on today's out-of-sample
    error (MAPE 54.0 %, max 77.0 %): not a pass mark, a guard against getting worse."""
    assert "zero3n21" in V.HELD_OUT_GROUPS
    assert len(ZERO3) == 6
    e = V.errors(ZERO3)
    assert np.all(e < 0), e
    assert float(np.mean(np.abs(e))) <= 0.60
    assert float(np.max(np.abs(e))) <= 0.80


def test_zero3_plateau_is_not_deepspeed_2021_prefetch_or_overlap():
    """README: DeepSpeed's stage 3 of 2021 may have run its gathers and its gradient reduction on the
    critical path (prefetch switched off by the v0.3.14-v0.5.10 tracing bug; PR #1170). Even so, at
    the model's NCCL ring the largest runs (1,536 / 2,240 GPUs, where the published step stops
    falling) stay more than half too fast: the plateau needs a bandwidth that no such code path
    removes (benchmarks/zero3_bounds.py)."""
    import copy
    serial = []
    for rid, sc, kind, t in ZERO3:
        s = copy.deepcopy(sc)
        s["parallelism"].update(overlap_param_gather=False, overlap_grad_reduce=False)
        serial.append((rid, s, kind, t))
    e_opt, e_ser = V.errors(ZERO3), V.errors(serial)
    assert np.all(e_ser > e_opt + 0.03), (e_opt, e_ser)   # the flags bite: >= 3 points slower each
    top = [i for i, c in enumerate(ZERO3) if c[0].endswith(("_1536", "_2240"))]
    assert len(top) == 2
    assert np.all(e_ser[top] < -0.5), e_ser[top]
