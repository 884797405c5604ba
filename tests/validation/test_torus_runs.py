"""Torus group (TPU v4, 3D torus + OCS; tests/validation/torus_runs.csv): MaxText's published TPU v4
runs, held out (nothing is fitted on them; the shipped constants come from published_runs.csv).

Measured with the constants of this commit: 22B on 64 chips +14.6 %, 52B on 192 chips +7.8 %,
MAPE 11.2 %: the model is too slow on both. The exposed torus communication is under 0.2 % of the
modelled step, so the group tests the TPU v4 compute estimate far more than the torus. tpu-v4's
matmul_peak_fraction is a measured TPU v4 matmul rate (89.2 %, SCALE-Sim's xprof GEMM sweep; it was
the H100 figure, 80.3 %, borrowed, with +26.0 / +18.9 %), not fitted on this group. Bounds are those
figures plus a small margin, in the direction found: they record where the model stands, not a target.
"""
import numpy as np
import pytest

import explore
from explore import validation_torus as T
from explore.scenario import load_scenario

CASES = T.load_cases()
ROWS = {r["run_id"]: r for r in T.load_rows()}


@pytest.fixture(scope="module")
def evaluated():
    return T.evaluate_cases(CASES)


@pytest.fixture(scope="module")
def errors(evaluated):
    return {rid: float(evaluated[rid]["step_time_s"][0]) / t - 1 for rid, _, _, t in CASES}


@pytest.mark.parametrize("row", T.load_rows(), ids=lambda r: r["run_id"])
def test_committed_scenarios_match_the_csv(row):
    assert load_scenario(T.SCENARIO_DIR / f"{row['run_id']}.toml") == T.build_scenario(row)
    assert row["source"] and row["source_location"] and "DERIVED" in row["step_time_kind"]


@pytest.mark.parametrize("row", T.load_rows(), ids=lambda r: r["run_id"])
def test_derived_step_time_follows_maxtext_flop_count(row):
    """step = 6 N s b / published TFLOP/s, N recounted from the run's config (qk norms from
    281e04bf3 on, i.e. the 22B run); MFU x 275 agrees with the TFLOP/s column within 0.1 %."""
    qk = row["run_id"] == "maxtext23_v4_22b_64"
    n = T.maxtext_params(int(row["layers"]), int(row["hidden"]), int(row["attn_heads"]), 256,
                         int(row["ffn_hidden"]), int(row["vocab"]), qk)
    assert abs(n / 1e9 - float(row["params_B"])) < 5e-4
    step = 6 * n * int(row["seq_len"]) * int(row["microbatch"]) / (float(row["tflops_per_gpu"]) * 1e12)
    assert step == pytest.approx(float(row["step_time_s"]), rel=1e-4)
    assert float(row["mfu_pct"]) / 100 * T.PEAK_TFLOPS == pytest.approx(float(row["tflops_per_gpu"]), rel=1e-3)


def test_group_is_a_torus_group_on_tpu_v4_and_held_out():
    from explore import validation as V
    assert len(CASES) == 2
    for rid, sc, _, _ in CASES:
        so = sc["system"]["scale_out"]
        assert sc["system"]["accelerator"] == "tpu-v4" and so["topology"] == "ocs-torus"
        assert so["torus_x"] * so["torus_y"] * so["torus_z"] == sc["system"]["devices"]
        assert all(so[k] % 4 == 0 for k in ("torus_x", "torus_y", "torus_z"))
    # not in the calibration CSVs, so no fit can see it
    assert not {r["run_id"] for r in V.load_rows()} & set(ROWS)


def test_every_run_fits_memory(evaluated):
    for rid, ds in evaluated.items():
        assert bool(ds["valid"][0]), f"{rid}: {ds['reason'].values[0]}"
        assert float(ds["memory_per_device_bytes"][0]) <= 34.36e9


def test_model_too_slow_on_every_run_within_bounds(errors):
    """Measured +14.6 % (22B, 64 chips) and +7.8 % (52B, 192 chips); MAPE 11.2 %."""
    assert all(0.05 <= e <= 0.17 for e in errors.values()), errors
    assert np.mean(np.abs(list(errors.values()))) <= 0.125


def test_torus_communication_is_nearly_all_hidden(evaluated):
    """FSDP over the slice's torus: the exposed collectives are under 0.5 % of the modelled step, so
    the error above is not the torus model's."""
    for rid, ds in evaluated.items():
        comm = sum(float(ds[k][0]) for k in ("time_s_dp_comm", "time_s_zero3_comm") if k in ds)
        assert comm < 0.005 * float(ds["step_time_s"][0]), rid


def test_published_rates_sit_at_the_model_gemm_ceiling():
    """Why the model is still too slow: the published model TFLOP/s (6 N per token) with the
    rematerialised forward added (x 8/6, still without attention) is within 1.5 % of what the model
    lets a linear GEMM reach on tpu-v4 (peak x matmul_peak_fraction x gemm_efficiency, 207 TFLOP/s:
    208 and 205), so the chips ran their linear layers at about the model's ceiling and everything
    else the model times on top (attention, elementwise work, optimizer) is what it adds. With the
    borrowed H100 fraction (0.803) the ceiling was 186 TFLOP/s, 10 % below both."""
    ceiling = T.gemm_ceiling_tflops()
    assert 200 < ceiling < 215
    for row in ROWS.values():
        assert abs(float(row["tflops_per_gpu"]) * 8 / 6 / ceiling - 1) < 0.015, row["run_id"]


def test_excluded_runs_carry_a_reason():
    assert len(T.EXCLUDED) >= 3 and all(len(v) > 40 for v in T.EXCLUDED.values())
