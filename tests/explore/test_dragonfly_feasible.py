"""A dragonfly needing more groups than its global ports can join is not buildable: invalid, with a reason.

Each group of a dragonfly wires G = ceil(a h f) global ports (``topologies.dragonfly``); for every
pair of groups to be joined by at least one global link, a group's G ports must reach the g - 1
others, so g <= G + 1 (Kim et al. 2008: g <= a h + 1 balanced). ``dragonfly.counts`` computes it
(``feasible``, ``max_groups``); ``explore.evaluate`` marks a design past it invalid with a reason
naming the endpoints, the groups, the maximum for the radix and global_link_fraction, and what to
change. The checks below are against the networkx builder's own constraint and the pigeonhole count
on its graphs, and against the evaluate path.
"""
import copy

import networkx as nx
import numpy as np
import pytest

import explore
from explore.evaluate import DRAGONFLY_RULE
from explore.search.problem import PLAN_RULES
from topologies import dragonfly

BASE = explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml")


@pytest.mark.parametrize("p,a,h,f", [(2, 4, 2, 1.0), (2, 4, 2, 0.5), (2, 4, 2, 0.25), (3, 6, 3, 1.0),
                                     (3, 6, 3, 1 / 3), (4, 8, 4, 0.05)])
def test_networkx_builder_joins_at_most_ports_plus_one_groups(p, a, h, f):
    """The builder wires every group count it can share evenly; at each, every group uses its G
    global ports and every pair of groups is joined (the quotient graph is complete), which the
    pigeonhole bound allows only for g - 1 <= G. Past G + 1 groups the builder refuses, and
    ``counts`` says infeasible exactly there."""
    G = int(dragonfly.global_ports_per_group(a, h, f))
    built = []
    for groups in range(2, G + 4):
        c = dragonfly.counts(p * a * groups, p, a, h, f)
        assert c["groups"] == groups and c["max_groups"] == G + 1
        assert bool(c["feasible"]) == (groups <= G + 1)
        try:
            g = dragonfly.dragonfly_graph(p, a, h, groups=groups, global_link_fraction=f)
        except ValueError as e:
            assert "cannot share" in str(e)
            continue
        built.append(groups)
        quotient = nx.Graph()
        ports = {i: 0 for i in range(groups)}
        for u, v, d in g.edges(data=True):
            if d["link"] == "global":
                gu, gv = g.nodes[u]["group"], g.nodes[v]["group"]
                assert gu != gv
                quotient.add_edge(gu, gv)
                ports[gu] += 1
                ports[gv] += 1
        assert set(ports.values()) == {G}                         # every group uses its G ports
        assert quotient.number_of_edges() == groups * (groups - 1) // 2    # every pair joined
        assert groups - 1 <= G                                    # the pigeonhole bound
    assert max(built) == G + 1                                    # the largest group count it wires
    # the builder's own constraint: no group count past G + 1 passes it
    for groups in range(G + 2, G + 6):
        with pytest.raises(ValueError):
            dragonfly.dragonfly_graph(p, a, h, groups=groups, global_link_fraction=f)


def _job(devices_dp, f, switch="quantum-2-qm9700", link="ib-ndr-400", nics=1.0):
    """175B at tp 8, pp 8 and the given dp on a dragonfly (16,384 devices at dp 256)."""
    sc = copy.deepcopy(BASE)
    sc["parallelism"]["dp"] = devices_dp
    sc["system"]["devices"] = 64 * devices_dp
    sc["training"]["global_batch"] = 8 * devices_dp
    sc["system"]["accelerator"] = "h100-sxm-80gb"
    sc["system"]["scale_up"] = {"size": 8, "link": "nvlink4"}
    sc["system"]["scale_out"].update(topology="dragonfly", switch=switch, link=link, nics_per_device=nics,
                                     global_link_fraction=f)
    return sc


def test_evaluate_marks_a_dragonfly_with_too_many_groups_invalid():
    """16,384 endpoints on 64-port switches (groups of p a = 16 x 32 = 512) fill 32 groups, which need
    31 global ports per group: ceil(512 f) >= 31, f > 30 / 512 = 0.0586. Below it the design is invalid
    with a reason naming the numbers; above it the design is valid and its figures are those it has on
    its own (the rule moves nothing else)."""
    f = np.array([1.0, 0.0587, 0.0585, 0.05])
    ds = explore.evaluate(_job(256, f))
    assert ds["valid"].values.tolist() == [True, True, False, False]
    r = ds["reason"].values
    assert r[0] == r[1] == ""
    assert r[2].startswith("system.scale_out.topology = dragonfly: 16384 endpoints")
    assert "global_link_fraction = 0.0585 wires ceil(a h f) = 30 of the 512 global ports" in r[2]
    assert "join at most 31 groups (15872 endpoints)" in r[2]
    assert "need 32 groups of p a = 512 (radix 64: p = 16, a = 32, h = 16)" in r[3]
    assert "global_link_fraction = 0.05 wires ceil(a h f) = 26 of the 512 global ports" in r[3]
    assert "join at most 27 groups (13824 endpoints)" in r[3]
    for text in r[2:]:
        assert "system.scale_out.global_link_fraction > 0.0585938 (ceil(a h f) >= 31 of the a h = 512" in text
        assert "a switch of higher radix" in text
    assert all(np.isnan(ds["step_time_s"].values[2:]))
    # a feasible design is unchanged by the rule: the same figures evaluated alone
    for i in (0, 1):
        one = explore.evaluate(_job(256, float(f[i])))
        for m in ("step_time_s", "capex_usd", "power_w", "time_s_pp_p2p", "network_switches"):
            assert one[m].values[0] == ds[m].values[i], m
    # keep_invalid keeps its figures (a network that cannot be built, as an optical budget that does
    # not close), and the reason's codes (sweeps) name the rule
    kept = explore.evaluate(_job(256, f), keep_invalid=True)
    assert np.isfinite(kept["step_time_s"].values).all()
    coded = explore.evaluate(_job(256, f), reason_codes=True)
    codes = np.asarray(coded["reason"].attrs["codes"], dtype=object)[coded["reason"].values]
    assert codes.tolist()[2:] == [DRAGONFLY_RULE, DRAGONFLY_RULE]
    # the rule depends on the hardware: design-space search never prunes a plan for it
    assert not any(DRAGONFLY_RULE.startswith(p) or r[3].startswith(p) for p in PLAN_RULES)


def test_threshold_follows_the_networkx_builder():
    """At f = 0.05 (26 global ports a group on 64-port switches) the builder wires 27 groups and
    refuses 28; evaluate accepts 13,312 endpoints (26 groups) and refuses 16,384 (32): the same
    bound, g <= ceil(a h f) + 1."""
    p, a, h = (int(x) for x in dragonfly.balanced(64))
    dragonfly.dragonfly_graph(1, a, h, groups=27, global_link_fraction=0.05)     # 1 host a router: small
    with pytest.raises(ValueError):
        dragonfly.dragonfly_graph(1, a, h, groups=28, global_link_fraction=0.05)
    ds = explore.evaluate(_job(208, 0.05))                 # 13,312 devices: 26 groups of 512
    assert bool(ds["valid"].values[0]), ds["reason"].values[0]
    assert not bool(explore.evaluate(_job(256, 0.05))["valid"].values[0])


def test_no_fraction_saves_a_job_past_the_radix():
    """65,536 endpoints on 40-port switches (p = 10, a = 20, h = 10: groups of 200, a h + 1 = 201 at
    most) need 328 groups: invalid at f = 1 too, and the reason asks for a switch of higher radix."""
    ds = explore.evaluate(_job(1024, 1.0, switch="quantum-qm8700", link="ib-hdr-200"))
    r = ds["reason"].values[0]
    assert not bool(ds["valid"].values[0])
    assert "65536 endpoints" in r and "need 328 groups of p a = 200" in r
    assert "even global_link_fraction = 1 joins at most a h + 1 = 201 groups" in r
    assert "a switch of higher radix" in r


def test_rule_reads_the_bill_of_materials_endpoints():
    """Endpoints are NIC ports (devices x nics_per_device): 8,192 devices at 2 NICs fill 32 groups as
    16,384 devices at 1 do; a job inside one scale-up domain has no network to build, so no fraction
    makes it invalid (f = 1e-6: one global port a group)."""
    ds = explore.evaluate(_job(128, 0.05, nics=np.array([1.0, 2.0])))
    assert ds["valid"].values.tolist() == [True, False]
    assert "16384 endpoints" in ds["reason"].values[1] and "need 32 groups" in ds["reason"].values[1]
    small = copy.deepcopy(BASE)
    small["model"] = {"preset": "megatron-7.5b"}
    small["parallelism"].update(tp=8, pp=1, dp=1)
    small["system"]["devices"] = 8
    small["training"]["global_batch"] = 8
    small["system"]["scale_out"].update(topology="dragonfly", global_link_fraction=1e-6)
    assert bool(explore.evaluate(small)["valid"].values[0])
    # the reason never depends on which designs share the batch
    both = explore.evaluate(_job(128, np.array([0.05, 0.05]), nics=np.array([2.0, 1.0])))
    assert both["reason"].values[0] == ds["reason"].values[1]
    assert both["valid"].values.tolist() == [False, True]
