"""PyTorch FSDP runs (llm-foundry MPT benchmarks, tests/validation/fsdp_runs.csv): issue 10's new
communication-bound group, out of sample.

The group is held out of every fit (explore.validation.HELD_OUT_GROUPS), so the shipped constants
(explore/model/calibration.py) were fitted without it and its errors below are out of sample.
Measured with the constants of this commit: MAPE 8.56 % over 20 runs (issue 10's 10 %; 8.64 % before
Composer's per-batch scalar collectives, tests/explore/test_step_syncs.py; 9.49 % before the training
metrics' per-step synchronization, tests/explore/test_metric_sync.py; 10.30 % before their kernels,
tests/explore/test_train_metrics.py), worst 16.7 % (MPT-7B, 512 H100, too fast);
activation-checkpointed FULL_SHARD runs 5.3 % (worst 9.0 %); every H100 run too fast, those without
activation checkpointing by 10.1-16.7 %. Bounds are those figures plus a
small margin: they record where the model stands, not a target.
"""
import copy

import numpy as np
import pytest

import explore
from explore import validation as V
from explore import validation_fsdp as F
from explore.scenario import ScenarioError

CASES = [c for c in V.load_cases() if V.group_of(c[0]) == F.GROUP]


@pytest.fixture(scope="module")
def errors():
    return dict(zip([c[0] for c in CASES], V.errors(CASES)))


def test_group_is_complete_and_held_out():
    assert len(CASES) == 20
    assert sum("_h100_" in c[0] for c in CASES) == 18
    assert F.GROUP in V.HELD_OUT_GROUPS          # the shipped constants never saw it
    assert F.GROUP in V.COMM_GROUPS


def test_prefetch_follows_the_script_that_ran():
    """H100 table: sweep.py passes BACKWARD_PRE (llm-foundry 5e85bd62d); A100 table: Composer's
    default BACKWARD_POST."""
    for run_id, sc, _, _ in CASES:
        want = "pre" if "_h100_" in run_id else "post"
        assert sc["parallelism"]["backward_prefetch"] == want, run_id


@pytest.mark.parametrize("run_id", [c[0] for c in CASES])
def test_every_fsdp_run_is_valid_and_fits_memory(run_id):
    sc = dict((c[0], c[1]) for c in CASES)[run_id]
    ds = explore.evaluate(sc)
    assert bool(ds["valid"][0]), f"{run_id}: {ds['reason'].values[0]}"
    assert float(ds["memory_per_device_bytes"][0]) <= 80e9


def test_out_of_sample_mape_within_10_percent(errors):
    """Issue 10's target for the new communication-bound group: <= 10 % out of sample."""
    e = np.array(list(errors.values()))
    assert np.mean(np.abs(e)) <= 0.10, f"MAPE {100 * np.mean(np.abs(e)):.2f} %"
    assert np.max(np.abs(e)) <= 0.20, f"worst {100 * np.max(np.abs(e)):.2f} %"


def test_checkpointed_full_shard_runs_within_6_percent(errors):
    e = np.array([v for k, v in errors.items() if F.SUBTABLES[next(iter(F.SUBTABLES))](k)])
    assert len(e) == 9
    assert np.mean(np.abs(e)) <= 0.06 and np.max(np.abs(e)) <= 0.10


def test_model_is_still_optimistic_on_every_h100_run(errors):
    """Honest sign: the model is too fast on all 18 H100 runs, on the 9 without activation
    checkpointing by 10.2-16.8 %, even with MPT's eager memory-bound kernels, FSDP's exposed root
    unit and Composer's training metrics (kernels and per-step sync) counted (README, 'still
    optimistic')."""
    assert all(v < 0 for k, v in errors.items() if "_h100_" in k)
    e = [v for k, v in errors.items() if "_h100_" in k and k.split("_")[2] in ("1b", "3b", "7b")]
    assert len(e) == 9 and all(-0.18 <= v <= -0.095 for v in e), e


def test_step_time_growth_with_gpus_is_not_reproduced():
    """Published step time grows from 128 to 512 GPUs for every model (2.6-10.8 %). With FSDP's
    BACKWARD_PRE prefetch (what sweep.py ran) the model hides every per-layer gather and
    reduce-scatter at all three scales (tests/validation/test_fsdp_schedule.py replays the stream
    schedule); only the root unit's gather and reduce-scatter and the first layer's at the two ends
    are exposed, and their ring latency grows with the ranks; with Composer's per-step metric
    synchronization over all ranks (a barrier and a list all_gather per metric state, host work per
    rank: tests/explore/test_metric_sync.py) and Composer's other per-batch scalar collectives
    (tests/explore/test_step_syncs.py) the model's step grows by 0.1-4.5 %, still not by the
    published 2.6-10.8 %: an open gap (README, 'still optimistic')."""
    by = {c[0]: c for c in CASES}
    pred = dict(zip(by, V.predict(CASES)))
    for size in ("1b", "3b", "7b", "13b", "30b", "70b"):
        lo, hi = f"{F.GROUP}_h100_{size}_128", f"{F.GROUP}_h100_{size}_512"
        assert by[hi][3] / by[lo][3] - 1 >= 0.025
        assert 0.0 <= pred[hi] / pred[lo] - 1 <= 0.05
        assert by[hi][3] / by[lo][3] - pred[hi] / pred[lo] >= 0.02


def test_backward_prefetch_post_exposes_the_backward_gathers_at_line_rate_or_slower():
    """FSDP BACKWARD_POST: every backward all-gather waits (torch.distributed.fsdp.BackwardPrefetch).
    Independent bound: each 8-GPU node must receive (n-8)/n of a layer's bf16 weights (2 x 12 d^2
    bytes) through its 8 x 400 Gb/s NICs, so 80 layers take at least 80 x that / 400 GB/s; NCCL
    reaches well over half of line rate on such messages (collective_bench.csv), so at most 2 x."""
    sc = copy.deepcopy(dict((c[0], c[1]) for c in CASES)[f"{F.GROUP}_h100_70b_512"])
    sc["parallelism"]["backward_prefetch"] = "post"
    post = explore.evaluate(sc, keep_invalid=True)
    sc["parallelism"]["backward_prefetch"] = "pre"
    pre = explore.evaluate(sc, keep_invalid=True)
    n, d, L = 512, 8192, 80
    bound = L * 2 * 12 * d * d * (n - 8) / n / (8 * 400e9 / 8)
    extra = float(post["step_time_s"][0] - pre["step_time_s"][0])
    assert bound <= extra <= 2 * bound, (extra, bound)
    assert float(pre["time_s_zero3_comm"][0]) < 0.1 * bound      # prefetched: hidden under compute


def test_backward_prefetch_bad_value_names_field_value_and_allowed():
    sc = copy.deepcopy(CASES[0][1])
    sc["parallelism"]["backward_prefetch"] = "sideways"
    with pytest.raises(ScenarioError) as e:
        explore.evaluate(sc)
    msg = str(e.value)
    assert "parallelism.backward_prefetch" in msg and "'sideways'" in msg and "'pre', 'post'" in msg


def test_root_unit_adds_its_exposed_ends_only_where_set():
    """parallelism.fsdp_root_unit (default false) adds the root unit's exposed gather and
    reduce-scatter: turned off, the 1B run at 512 GPUs is faster and exposes less; the field keeps
    its default in every group that did not run FSDP (they are unchanged:
    tests/validation/test_published_runs.py); OPT-175B (opt22, fairscale FSDP) sets it too."""
    sc = copy.deepcopy(dict((c[0], c[1]) for c in CASES)[f"{F.GROUP}_h100_1b_512"])
    on = explore.evaluate(sc, keep_invalid=True)
    sc["parallelism"]["fsdp_root_unit"] = False
    off = explore.evaluate(sc, keep_invalid=True)
    gain = float(on["step_time_s"][0] - off["step_time_s"][0])
    assert 0.004 <= gain <= 0.010, gain
    others = [c for c in V.load_cases() if V.group_of(c[0]) not in (F.GROUP, "opt22")]
    assert not any(c[1]["parallelism"].get("fsdp_root_unit", False) for c in others)
