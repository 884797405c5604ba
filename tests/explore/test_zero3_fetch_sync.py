"""DeepSpeed 2021 stage 3's fetch (``parallelism.zero3_fetch_sync``) and list-collective copies.

Checked against figures the model does not compute itself: an event simulation of the order in which
DeepSpeed v0.3.14 (microsoft/DeepSpeed commit 0cd9abf2041, deepspeed/runtime/zero/stage3.py) issues
and waits for the gradient reduce-scatters, an enumeration of the zero-filled gather buffers from the
GPT layer's parameter shapes, and the A100's HBM datasheet bandwidth.
"""
import copy

import numpy as np
import pytest

from explore.evaluate import evaluate
from explore.model import overlap


def _simulate_backward(compute, comm):
    """Wall time of one backward over weights in backward order, as DeepSpeed v0.3.14 schedules it.

    Every weight's gradient exceeds reduce_bucket_size, so weight k's gradient hook
    (reduce_independent_p_g_buckets_and_remove_grads) first reduces the bucket holding weight k - 1
    (reduce_ipg_grads, on the reduction stream, not waiting for the compute stream); the gather before
    weight k + 1 runs torch.cuda.synchronize(), which waits for the compute and for that reduction; the
    last weight's reduction is issued by independent_gradient_partition_epilogue, which waits for it."""
    t, rs_end = 0.0, 0.0
    for k, c in enumerate(compute):
        t = max(t, rs_end)                 # fetch: torch.cuda.synchronize() before the gather
        if k > 0:                          # hook of weight k issues the reduction of weight k - 1
            rs_end = t + comm[k - 1]
        t += c                             # weight k's backward GEMMs
    t = max(t, rs_end)                     # epilogue: reduction_stream.synchronize()
    return t + comm[-1]                    # the last reduction, then synchronize again


@pytest.mark.parametrize("c, r, n", [(1.0, 0.3, 8), (1.0, 1.7, 8), (0.2, 0.2, 3), (5.0, 0.01, 1),
                                     (0.4, 2.5, 384)])
def test_hook_serialized_matches_an_event_simulation_of_deepspeed_hooks(c, r, n):
    sim = _simulate_backward([c] * n, [r] * n) - n * c
    assert float(overlap.hook_serialized(c, r, n, 0.0)) == pytest.approx(sim, rel=1e-12)


def test_hook_serialized_is_never_below_the_overlapped_stream_reading():
    """The synchronized reading exposes at least what one stream under the whole backward would
    (max(total - window, last call))."""
    rng = np.random.default_rng(0)
    c, r, n = rng.uniform(0.01, 2, 500), rng.uniform(0.01, 2, 500), rng.integers(1, 50, 500)
    sync = overlap.hook_serialized(c, r, n, 0.0)
    stream = np.maximum(n * r - n * c, r)
    assert np.all(sync >= stream - 1e-12)


def _small_zero3(n_ranks=64, layers=4, hidden=2048):
    return {"name": "z3-sync", "model": {"layers": layers, "hidden": hidden, "heads": 16, "vocab": 32000,
                                          "seq_len": 1024},
            "training": {"global_batch": n_ranks * 8, "precision": "fp16", "flash_attention": False},
            "parallelism": {"tp": 1, "pp": 1, "dp": n_ranks, "microbatch": 8, "zero": 3, "recompute": "full",
                            "sequence_parallel": False, "overlap_grad_reduce": True,
                            "overlap_param_gather": False, "grad_reduce_bytes": 2,
                            "zero3_calls_per_layer": 4.0, "zero3_gather_passes": 3.0},
            "system": {"accelerator": "a100-sxm-80gb", "devices": n_ranks,
                       "scale_up": {"size": 8, "link": "nvlink3"},
                       "scale_out": {"topology": "fat-tree", "link": "ib-hdr-200", "nics_per_device": 1.0}}}


def test_zero_fill_matches_the_gathered_weights_of_the_layer_shapes():
    """With the reductions hidden (microbatch 8: a weight's backward GEMMs outlast its reduce-scatter),
    zero3_fetch_sync adds exactly the zero-fill of every gather buffer: torch.zeros over each weight
    matrix of the layers (the tensors at or above stage3_param_persistence_threshold, enumerated from
    the GPT layer's shapes) and over the input embedding and the (untied) output layer, which the model
    gathers with the layers, 2 B per element, once per gather pass, at the model's HBM rate."""
    from explore.model import calibration as cal
    from hwmodels.parts import get_part
    from tests.validation.test_published_runs import PERSISTENCE_THRESHOLD, _gpt_layer_params
    sc = _small_zero3()
    on = copy.deepcopy(sc)
    on["parallelism"]["zero3_fetch_sync"] = True
    r0, r1 = (evaluate(s, keep_invalid=True) for s in (sc, on))
    h, layers, passes = sc["model"]["hidden"], sc["model"]["layers"], 3
    gathered = sum(int(np.prod(s)) for _, s in _gpt_layer_params(h) if np.prod(s) >= PERSISTENCE_THRESHOLD)
    hbm = float(get_part("accelerators", "a100-sxm-80gb")["hbm_bandwidth_bytes_per_s"]) * cal.DEFAULT.hbm_efficiency
    embeddings = 2 * sc["model"]["vocab"] * h
    fill = passes * (layers * gathered + embeddings) * 2.0 / hbm
    delta = float(r1["step_time_s"][0] - r0["step_time_s"][0])
    # the model's layer gather also carries the layer's persistent biases and norms (13 h of 12 h^2 + 13 h
    # elements here, 0.05 %), which DeepSpeed keeps whole
    assert delta == pytest.approx(fill, rel=1e-3)
    assert delta >= fill


def test_sync_exposes_the_reduce_scatters_the_recompute_would_hide_and_never_shortens():
    """Without the sync the gradient reduction runs under the whole backward, the recomputed forward
    included; with it, each reduce-scatter hides under one weight's backward GEMMs only. Where a call
    outlasts its weight's GEMMs (microbatch 1, 1,024 ranks: ring latency and a copy per rank) the step
    is longer; it is never shorter, at any microbatch or rank count here."""
    grid = [(n, mb) for n in (64, 256, 1024) for mb in (1, 2, 8)]
    steps = {}
    for n, mb in grid:
        for sync in (False, True):
            sc = _small_zero3(n_ranks=n)
            sc["parallelism"].update(microbatch=mb, list_collectives=True, list_reduce_host_calls=2.0,
                                     zero3_fetch_sync=sync)
            sc["training"]["global_batch"] = n * mb
            steps[n, mb, sync] = float(evaluate(sc, keep_invalid=True)["step_time_s"][0])
    assert all(steps[n, mb, True] >= steps[n, mb, False] for n, mb in grid)
    assert steps[1024, 1, True] > steps[1024, 1, False] * 1.005, (steps[1024, 1, False], steps[1024, 1, True])


def test_list_copies_are_never_faster_than_hbm():
    """A list-form gather copies its whole buffer out of PyTorch's flat NCCL buffer (a read and a
    write per byte): never faster than the A100 80 GB's HBM datasheet rate, 2,039 GB/s (NVIDIA A100
    datasheet), whatever the host's issue rate; for few ranks and a large buffer the copies, not their
    launches, set the time."""
    from explore.evaluate import Resolved, fit, resolve
    from explore.model import calibration as cal
    from explore.model.fabric import Fabric
    from explore.model.system import build_system
    r = resolve(_small_zero3(n_ranks=16))
    d = Resolved(r.n, {k: fit(a, r.n) for k, a in r.values.items()}, r.name)
    fab = Fabric(build_system(d), cal.DEFAULT)
    hbm = 2.039e12 * cal.DEFAULT.hbm_efficiency
    big = float(np.ravel(fab.list_overhead(16, 1.0, 0.0, 1e9, hbm))[0])
    assert big >= 2 * 1e9 / 2.039e12
    assert big == pytest.approx(2 * 1e9 / hbm)               # 16 launches take ~50 us, the copy ~1 ms
    small = float(np.ravel(fab.list_overhead(16, 1.0, 0.0, 1e3, hbm))[0])
    assert small == pytest.approx(float(np.ravel(fab.list_overhead(16, 1.0, 0.0))[0]))   # launches
