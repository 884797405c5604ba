"""Call counts from the plan: every collective call pays its latency (hand-counted here)."""
import copy

import numpy as np
import pytest

import explore
from explore.model.fabric import library
from hwmodels import get_part

BASE = explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml")


def _dp_only(**par):
    """tp 8 inside a node, dp 16 across nodes (one GPU per node in each DP ring), no pipeline;
    a small model on links at the scenario's 1e16 b/s cap, so that only latencies remain
    (the bandwidth term of its ~1e7-byte gradients is ~1e-8 s on a ring, under 1e-7 s on the
    tree with NCCL's size-dependent tree correction, twice that with the low-latency protocol's
    half bandwidth that such latency-bound calls run: the tests allow 1e-3 relative or 2.5e-7 s,
    against latencies of ~5e-5 s per call).
    Its ~ms steps make the reliability model call it invalid (checkpoints outpace it), so the
    tests read the raw figures (keep_invalid)."""
    sc = copy.deepcopy(BASE)
    sc["model"] = {"layers": 2, "hidden": 512, "heads": 8, "seq_len": 2048, "vocab": 32000}
    sc["parallelism"].update({"tp": 8, "pp": 1, "dp": 16, "microbatch": 1, "zero": 0,
                              "overlap_grad_reduce": False, "overlap_param_gather": False, **par})
    sc["training"]["global_batch"] = 16 * 4
    sc["system"]["devices"] = 128
    sc["system"]["scale_out"]["bandwidth_bps"] = 1e16
    sc["system"]["scale_up"]["bandwidth_bps"] = 1e16
    return sc


def _latency_all_reduce(n):
    """NCCL's model by hand for n ranks on n nodes (one rank per node): ring = base + 2(n-1)
    network steps (x plateau), tree = base + 2 log2(n) network levels; the faster wins, on the
    Simple protocol with its per-call pipeline time: NCCL's own estimate (tuning.cc) caps LL's
    bus bandwidth at llMaxBw (20.4 GB/s from 3 nodes), whatever the links, so it runs these
    0.5-6 MB buckets on Simple (LL tree on 16 nodes: 46.8 us + 2 S / (20.4 GB/s x its tree
    correction 0.4-0.6) above Simple's 120 us estimate from 0.5 MB)."""
    lib = library()
    lat = get_part("links", "ib-hdr-200")["latency_s"]
    ring = (lib["base_latency_s"] + 2 * (n - 1) * lat) * lib["ring_latency_plateau"]
    tree = lib["base_latency_s"] + 2 * np.log2(n) * lat
    return min(ring, tree) + lib["simple_pipeline_s"]


@pytest.mark.parametrize("buckets", [1, 4, 10])
def test_each_gradient_bucket_pays_its_latency(buckets):
    sc = _dp_only()
    params = float(explore.evaluate(sc, keep_invalid=True).params_per_device[0])
    sc["parallelism"]["grad_bucket_params"] = params / buckets * (1 + 1e-9)
    t = float(explore.evaluate(sc, keep_invalid=True).time_s_dp_comm[0])
    assert t == pytest.approx(buckets * _latency_all_reduce(16), rel=1e-3, abs=2.5e-7)


def test_zero2_reduce_scatters_every_microbatch():
    """ZeRO-2: one gradient reduce-scatter per microbatch (4 here) plus one parameter gather;
    ZeRO-1: one reduce-scatter and one gather per step (ring latency: base + 15 network steps,
    on Simple with its pipeline time: LL capped at 20.4 GB/s, see _latency_all_reduce)."""
    lib = library()
    lat = get_part("links", "ib-hdr-200")["latency_s"]
    rs = lib["base_latency_s"] + 15 * lat + lib["simple_pipeline_s"]
    got = {}
    for z in (1, 2):
        sc = _dp_only(zero=z, grad_bucket_params=1e12)
        got[z] = float(explore.evaluate(sc, keep_invalid=True).time_s_dp_comm[0])
    assert got[1] == pytest.approx(2 * rs, rel=1e-3)
    assert got[2] == pytest.approx(4 * rs + rs, rel=1e-3)
