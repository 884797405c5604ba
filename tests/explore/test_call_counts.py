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
    links so fast that only latencies remain."""
    sc = copy.deepcopy(BASE)
    sc["parallelism"].update({"tp": 8, "pp": 1, "dp": 16, "microbatch": 1, "zero": 0,
                              "overlap_grad_reduce": False, "overlap_param_gather": False, **par})
    sc["training"]["global_batch"] = 16 * 4
    sc["system"]["devices"] = 128
    sc["system"]["scale_out"]["bandwidth_bps"] = 1e20
    sc["system"]["scale_up"]["bandwidth_bps"] = 1e20
    return sc


def _latency_all_reduce(n):
    """NCCL's model by hand for n ranks on n nodes (one rank per node): ring = base + 2(n-1)
    network steps (x plateau), tree = base + 2 log2(n) network levels; the faster wins."""
    lib = library()
    lat = get_part("links", "ib-hdr-200")["latency_s"]
    ring = (lib["base_latency_s"] + 2 * (n - 1) * lat) * lib["ring_latency_plateau"]
    tree = lib["base_latency_s"] + 2 * np.log2(n) * lat
    return min(ring, tree)


@pytest.mark.parametrize("buckets", [1, 4, 10])
def test_each_gradient_bucket_pays_its_latency(buckets):
    sc = _dp_only()
    params = float(explore.evaluate(sc).params_per_device[0])
    sc["parallelism"]["grad_bucket_params"] = params / buckets * (1 + 1e-9)
    t = float(explore.evaluate(sc).time_s_dp_comm[0])
    assert t == pytest.approx(buckets * _latency_all_reduce(16), rel=1e-3)


def test_zero2_reduce_scatters_every_microbatch():
    """ZeRO-2: one gradient reduce-scatter per microbatch (4 here) plus one parameter gather;
    ZeRO-1: one reduce-scatter and one gather per step (ring latency: base + 15 network steps)."""
    lib = library()
    lat = get_part("links", "ib-hdr-200")["latency_s"]
    rs = lib["base_latency_s"] + 15 * lat
    got = {}
    for z in (1, 2):
        sc = _dp_only(zero=z, grad_bucket_params=1e12)
        got[z] = float(explore.evaluate(sc).time_s_dp_comm[0])
    assert got[1] == pytest.approx(2 * rs, rel=1e-3)
    assert got[2] == pytest.approx(4 * rs + rs, rel=1e-3)
