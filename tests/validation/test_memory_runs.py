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
    """MAPE 2.4 %, 11 of 11 compared runs within 10 % (README: validation). The 405B interleaved
    1F1B row (published 10 GiB below 1F1B; the authors' own log lines in pytorch/torchtitan issue
    773 pair 72.69 GiB with the interleaved run's 128 TPS, so the columns are as printed): -1.8 %
    (was +15.1 %, then -3.2 %) once each model chunk's gradients live from its first backward to its
    last only, which at m = p keeps one chunk's gradients at the peak (runtime_memory docstring;
    tests/explore/test_memory.py step-through). 405B FSDP 1 x CP 8 at -7.9 %; 1F1B at -9.7 % since the
    stage inputs' gradients that torch's pipeline stage keeps until the next step are counted (it was
    -10.1 % with its own 10.5 % bound, now removed). A regression guard on all three."""
    err = {r["run_id"]: abs(r["error"]) for r in ROWS if r["compared"]}
    assert len(err) >= 11 and np.all(np.isfinite(list(err.values())))
    assert all(e <= vm.TOLERANCE for e in err.values()), err
    assert np.mean(list(err.values())) <= 0.03
    for rid in ("tt24_t5_interleaved", "tt24_t6_cp8", "tt24_t5_1f1b"):
        assert abs(BY_ID[rid]["error"]) <= vm.TOLERANCE, BY_ID[rid]


def test_interleaving_lowers_the_405b_peak_as_published():
    """Table 5: interleaved 1F1B published 9.8 GiB below 1F1B (72.7 against 82.5 GiB); the model's
    interleaved figure must be lower too (the gradients of one chunk at the peak outweigh the
    16 chunk-forwards that ranks 0-3 hold)."""
    assert BY_ID["tt24_t5_interleaved"]["model_gib"] < BY_ID["tt24_t5_1f1b"]["model_gib"]


def test_every_compared_run_fits_its_96_gb():
    """torchtitan ran every row on 96 GB H100s: the model's peak (reserved + context) must fit."""
    import explore
    for run in vm.load_runs():
        if vm.expressible(run):
            ds = explore.evaluate(vm.scenario(run), keep_invalid=True)
            assert bool(ds["fits_memory"][0]), (run["run_id"], float(ds["memory_per_device_bytes"][0]))


def test_table6_memory_does_not_fall_as_cp_grows():
    """Published Table 6 memory grows with CP at fixed tokens per GPU (75.3 -> 84.9 GiB); the
    model's may not fall (the all-gathered keys/values grow with the sequence: 74.3, 76.4, 77.0,
    78.2 GiB)."""
    got = [BY_ID[f"tt24_t6_cp{cp}"]["model_gib"] for cp in (1, 2, 4, 8)]
    assert all(b >= a for a, b in zip(got, got[1:])), got


def test_allocator_overhead_is_the_fitted_value_and_in_the_gmlake_range():
    """calibration.ALLOCATOR_OVERHEAD is at the runs' MAPE minimum (python -m explore.validation_memory
    --fit, grid 0.005) within one grid step, and inside GMLake's measured range (0 - 0.49)."""
    from explore.model import calibration as cal
    f = cal.ALLOCATOR_OVERHEAD
    assert 0.0 < f <= 0.49
    runs = [r for r in vm.load_runs() if vm.expressible(r)]
    mape = lambda x: np.mean([abs(r["error"]) for r in vm.compare(runs, x)])  # noqa: E731
    # Fitted with the two hidden-dropout masks in every torchtitan run's count; without them (torchtitan's
    # Llama has no dropout) the grid's minimum moved one step, to 0.200 (MAPE 2.63 % against 2.67 % at
    # 0.195; docs/validation.md "Dropout-free layers"). The constant is not refitted here: the check is
    # that it stays within one grid step (0.005) of the minimum and within 0.1 point of its MAPE.
    grid = np.round(f + np.arange(-0.01, 0.0101, 0.005), 3)
    errs = [mape(x) for x in grid]
    best = grid[int(np.argmin(errs))]
    assert abs(best - f) <= 0.005 + 1e-9, (best, errs)
    assert mape(f) - min(errs) <= 0.001, (best, errs)


def test_torch_runtime_holds_at_least_what_megatron_does():
    """The torch runtime's buffers (pipeline outputs and receive buffers, gathered SP inputs,
    per-step weights and gradients under the allocator) only add memory: on every compared run."""
    import copy
    import explore
    for run in vm.load_runs():
        if not vm.expressible(run):
            continue
        torch_sc = vm.scenario(run)
        mega = copy.deepcopy(torch_sc)
        mega["parallelism"]["runtime"] = "megatron"
        m = lambda sc: float(explore.evaluate(sc, keep_invalid=True)["memory_per_device_bytes"][0])  # noqa: E731
        assert m(torch_sc) > m(mega), run["run_id"]


def test_unfused_loss_and_full_recompute_working_set_raise_memory():
    """Table 2's first run (tp 1, no PP: torchtitan deletes the logits before the backward):
    the unfused loss's peak holds 12 B per logit (saved log-softmax output, nll gradient,
    log-softmax gradient, 4 B each), the fused 4 B, both above the recomputed layer's working set;
    under the allocator overhead of the torch runtime's per-step allocations."""
    import copy
    import explore
    from explore.model import calibration as cal
    base = vm.scenario(vm.load_runs()[2])
    fused = copy.deepcopy(base)
    fused["training"]["loss"] = "fused"
    m = lambda sc: float(explore.evaluate(sc, keep_invalid=True)["memory_per_device_bytes"][0])  # noqa: E731
    tokens, vocab = 32768, 128256
    assert np.isclose(m(base) - m(fused), (12.0 - 4.0) * tokens * vocab * (1.0 + cal.ALLOCATOR_OVERHEAD))
    none = copy.deepcopy(base)
    none["parallelism"]["recompute"] = "none"
    assert m(base) < m(none)
