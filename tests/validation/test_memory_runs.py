"""Peak memory per device against torchtitan's published measurements (explore.validation_memory)."""
import numpy as np

from explore import validation_memory as vm

ROWS = vm.compare()
BY_ID = {r["run_id"]: r for r in ROWS}


def test_every_run_cites_its_table_and_the_exclusion_rule_is_the_only_filter():
    runs = vm.load_runs()
    assert len(runs) == len(ROWS) >= 10
    for run in runs:
        assert "pytorch/torchtitan:benchmarks/llama3_h100_202412_torchtitan.md" in run["source"]
        assert run["source_location"].startswith("Table ")
        assert BY_ID[run["run_id"]]["compared"] == vm.expressible(run)
    assert sum(r["compared"] for r in ROWS) >= 10


def test_fsdp_context_parallel_runs_within_10_percent():
    """Llama 3.1 8B, FSDP x CP on 8 GPUs, 32k tokens per GPU (Table 2): 83.9-84.5 GiB published."""
    for cp in (1, 2, 4, 8):
        r = BY_ID[f"tt24_t2_cp{cp}"]
        assert abs(r["error"]) <= vm.TOLERANCE, r


def test_compared_runs_summary():
    """5 of 11 compared runs within 10 % (the fifth, 405B interleaved 1F1B at -9.99 %, rests on an
    estimated microbatch and stage count, so only the four Table 2 runs are required); the 70B/405B
    runs with TP are under-predicted by up to 25 % (README: validation). A regression guard: none
    may drift past 30 %."""
    err = np.array([abs(r["error"]) for r in ROWS if r["compared"]])
    assert np.all(np.isfinite(err))
    assert (err <= vm.TOLERANCE).sum() >= 4
    assert err.max() <= 0.30


def test_unfused_loss_and_full_recompute_working_set_raise_memory():
    """The two mechanisms this comparison needed, checked in isolation on Table 2's first run."""
    import copy
    import explore
    base = vm.scenario(vm.load_runs()[2])
    fused = copy.deepcopy(base)
    fused["training"]["loss"] = "fused"
    m = lambda sc: float(explore.evaluate(sc, keep_invalid=True)["memory_per_device_bytes"][0])  # noqa: E731
    tokens, vocab = 32768, 128256
    assert np.isclose(m(base) - m(fused), 10.0 * tokens * vocab)   # 14 B - 4 B per logit, tp = 1
    none = copy.deepcopy(base)
    none["parallelism"]["recompute"] = "none"
    assert m(base) < m(none)
