"""Torus / all-to-all collectives and placement contention: exact facts and invariants."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import explore
from topologies import collectives as c

CANON = "studies/scenarios/gpt3-175b-1024-a100.toml"


def test_torus_collectives_reduce_to_rings():
    size, bw = 1e9, 8e9
    assert c.torus_all_reduce_s(size, [8], [bw], 0.0) == pytest.approx(c.ring_all_reduce_s(size, 8, bw, 0.0))
    # two dimensions: second ring works on the 1/n1 shard
    t = c.torus_reduce_scatter_s(size, [4, 8], [bw, bw], 0.0)
    assert t == pytest.approx(3 / 4 + 7 / 8 / 4)
    # a 2-D torus beats one flat ring on the same per-dimension bandwidth in latency terms
    assert c.torus_all_reduce_s(0.0, [8, 8], [bw, bw], 1e-6) == pytest.approx(2 * 14e-6)
    assert c.ring_all_reduce_s(0.0, 64, bw, 1e-6) == pytest.approx(126e-6)



def test_torus_dimensions_run_fastest_first():
    """A group interleaved with 3 others on one dimension (ring of 2, a quarter of its bandwidth)
    and alone on another (ring of 8): reducing on the fast ring first sends the slow ring 1/8 of
    the buffer. Enumerated by hand: both orders, each ring a plain ring reduce-scatter."""
    size, bw = 1e9, 8e9
    slow_first = c.ring_reduce_scatter_s(size, 2, bw / 4, 0.0) + c.ring_reduce_scatter_s(size / 2, 8, bw, 0.0)
    fast_first = c.ring_reduce_scatter_s(size, 8, bw, 0.0) + c.ring_reduce_scatter_s(size / 8, 2, bw / 4, 0.0)
    assert fast_first == pytest.approx(7 / 8 + 1 / 16 * 4) and fast_first < slow_first
    for ns, bws in (([2, 8], [bw / 4, bw]), ([8, 2], [bw, bw / 4])):
        assert c.torus_reduce_scatter_s(size, ns, bws, 0.0) == pytest.approx(fast_first)
    # per design (broadcast arrays): each design gets its own order
    t = c.torus_reduce_scatter_s(size, [np.array([2, 8]), np.array([8, 2])],
                                 [np.array([bw / 4, bw]), np.array([bw, bw / 4])], 0.0)
    np.testing.assert_allclose(t, [fast_first, fast_first])


def test_bisection_limited_all_to_all():
    size = 1e9
    inj = 8e9
    assert c.bisection_all_to_all_s(size, 8, inj, np.inf, 0.0) == pytest.approx(7 / 8)
    assert c.bisection_all_to_all_s(size, 8, inj, inj / 4, 0.0) == pytest.approx(2.0)  # half over 1/4 rate
    assert c.bisection_all_to_all_s(size, 1, inj, inj, 1.0) == 0.0


def _eval(**so):
    sc = explore.load_scenario(CANON)
    sc["system"]["scale_out"].update(so)
    return explore.evaluate(sc)


def test_oversubscription_slows_cross_leaf_groups_but_never_speeds_up():
    """DP rings (stride 8) have ~leaf_down/8 ranks under each leaf, and a ring needs one uplink
    per leaf it visits: a 4:1 leaf still carries them at full rate, a 16:1 leaf does not."""
    ds = _eval(oversubscription=[1.0, 2.0, 4.0, 16.0])
    dp = ds.time_s_dp_comm.values
    assert np.all(np.diff(dp) >= -1e-12 * dp[:-1]) and dp[3] > dp[0]
    assert (ds.capex_usd_switches.values[1:] < ds.capex_usd_switches.values[0]).all()


def test_rail_optimized_keeps_same_rail_groups_under_one_leaf():
    """With 16:1 oversubscription, a DP group (stride 8 = one GPU per server, same rail) over 16
    servers fits under one rail leaf (60 servers per leaf of a 64-port switch), so it sees full
    rate on the rail-optimized fabric; on a plain fat-tree its ring has 7.5 ranks per leaf and
    needs more uplinks than the 16:1 leaf has."""
    ds = _eval(topology=["fat-tree", "rail-optimized"], oversubscription=16.0)
    dp = ds.time_s_dp_comm.values
    assert dp[1] < dp[0]


def test_torus_shares_injection_across_dimensions():
    """A group along one torus dimension gets 1/D of the node's injection bandwidth (both
    directions of one dimension), so DP is slower than on a full-bisection fat-tree."""
    ds = _eval(topology=["fat-tree", "torus"], link="ib-ndr-400", torus_x=16, torus_y=4, torus_z=2)
    assert ds.time_s_dp_comm.values[1] > ds.time_s_dp_comm.values[0]
    assert ds.capex_usd_switches.values[1] == 0


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(["fat-tree", "rail-optimized", "torus", "dragonfly", "ocs-torus", "ocs-reconfigurable"]),
       st.sampled_from([(8, 8, 16), (8, 16, 8), (4, 8, 32)]))
def test_faster_nic_never_slows_a_step(topology, plan):
    sc = explore.load_scenario(CANON)
    sc["parallelism"].update(tp=plan[0], pp=plan[1], dp=plan[2])
    sc["system"]["scale_out"].update(topology=topology, bandwidth_bps=[100e9, 200e9, 400e9])
    t = explore.evaluate(sc).step_time_s.values
    assert t[0] >= t[1] - 1e-12 and t[1] >= t[2] - 1e-12
