"""Pipeline pairs and collective rings on a dragonfly: which streams cross a group edge, and the
global-link load they make.

Rings (``_rings``): groups of n ranks stride apart tile the job in blocks of stride n; each rank sends to
the next member of its ring and the last to the first. The model once gave a ring the full rate whenever
its span fitted a group (even straddling a group edge) and charged every spanning ring as if every
device's stream left its group.

Devices fill dragonfly groups of p a terminal ports in rank order (below one NIC per device, 1 / nics
devices share a port). A pipeline's stage pairs are rank i to i + stride: as a chain (more than two
stages, or interleaved chunks) every stage sends at once, so the pairs at every group edge cross it;
as pairs of a two-stage pipeline (blocks of 2 stride ranks) only blocks that straddle an edge do. The
model (``Placement.dragonfly_pairs_bw``) once gave any pair whose 2 x stride fitted a group the full
rate, even where its pairs cross a group edge.

The truth here is independent of the closed form: every flow of the pattern is enumerated on a
networkx dragonfly (``dragonfly_graph``, tapered or not), routed by Valiant (over all the global ports
of its source group, then over the links from that intermediate group into its destination group;
directly when the port leads to the destination), and each directed global link shares its port rate
over the flows crossing it in proportion to their fractions. A flow gets the smallest 1 / load of the
links it uses; the pattern's rate is its worst flow's.
"""
from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest

from topologies import dragonfly
from topologies.network import DRAGONFLY
from topologies.placement import Placement
from rank_flows import rings

P, A, H = 2, 4, 2                        # a radix-7 balanced dragonfly: groups of 8 ports, a h = 8 global


def _worst_share(f, groups, nics, flows, minimal=False):
    """(worst crossing flow's share of its device rate, most pairs leaving one group) on the
    networkx dragonfly of ``groups`` groups, ``f`` of the global ports; 1 and 0 when no flow crosses.
    ``minimal``: each flow over the direct links between its two groups instead of Valiant's."""
    g = dragonfly.dragonfly_graph(P, A, H, groups=groups, global_link_fraction=f)
    per_port = round(1 / min(nics, 1.0))
    D = P * A * per_port                               # devices per dragonfly group
    w = min(nics, 1.0)                                 # a device's flow in port rates
    links = defaultdict(list)                          # (group, group) -> directed global links
    for u, v, d in g.edges(data=True):
        if d["link"] == "global":
            gu, gv = g.nodes[u]["group"], g.nodes[v]["group"]
            links[(gu, gv)].append((u, v))
            links[(gv, gu)].append((v, u))
    out = {i: [e for (x, _), es in links.items() if x == i for e in es] for i in range(groups)}
    load, used = defaultdict(float), []
    leaving = defaultdict(int)
    for s, t in flows:
        gs, gt = s // D, t // D
        if gs == gt:
            continue
        leaving[gs] += 1                               # pairs that leave the source's group
        mine = []
        if minimal:
            for e in links[(gs, gt)]:
                load[e] += w / len(links[(gs, gt)])
                mine.append(e)
            used.append(mine)
            continue
        for u, v in out[gs]:                           # Valiant: first hop over every global port
            load[(u, v)] += w / len(out[gs])
            mine.append((u, v))
            j = g.nodes[v]["group"]
            if j != gt:                                # then over the links into the destination group
                for e in links[(j, gt)]:
                    load[e] += w / len(out[gs]) / len(links[(j, gt)])
                    mine.append(e)
        used.append(mine)
    if not used:
        return 1.0, 0
    return min(min(1.0, 1.0 / max(load[e] for e in m)) for m in used), max(leaving.values())


def _chain(devices, stride, stages=None, wrap=False):
    """Every stage's rank i to i + stride (and with interleaved chunks the last stage back to the first)."""
    flows = [(i, i + stride) for i in range(devices - stride)]
    if wrap:
        flows += [(i + (stages - 1) * stride, i) for i in range(devices) if (i // stride) % stages == 0]
    return flows


def _pairs(devices, stride):
    """A two-stage pipeline: rank i to i + stride within each block of 2 stride ranks."""
    return [(i, i + stride) for i in range(devices - stride) if (i // stride) % 2 == 0]


def _placement(f, nics, devices, domain=1.0):
    net = SimpleNamespace(family=np.array(DRAGONFLY), torus_dims=(np.array(1.0),), reconfigs_per_step=0.0,
                          ocs_reconfig_s=0.0, global_link_fraction=f)
    radix = 4 * P - 1                                  # balanced(7) = (2, 4, 2)
    assert tuple(map(float, dragonfly.balanced(radix))) == (P, A, H)
    return Placement(net, domain, nics, 0.0, nics, 1.0, 1.0, 1.0, float(radix), float(devices))


def _model(f, nics, devices, stride, chain):
    place = _placement(f, nics, devices)
    share = float(place.switched_bw(float(stride), 2.0, p2p=True, chain=chain)) / float(place.bw)
    return share


# (global_link_fraction, groups, NICs per device): every group count the builder can wire evenly
CASES = [(1.0, 3, 1.0), (1.0, 5, 1.0), (1.0, 9, 1.0), (0.5, 3, 1.0), (0.5, 5, 1.0), (0.25, 3, 1.0),
         (0.5, 3, 0.5), (0.25, 3, 0.5), (1.0, 5, 2.0)]


@pytest.mark.parametrize("f,groups,nics", CASES)
def test_chain_crossing_and_global_load_against_networkx(f, groups, nics):
    """Chains of every stride on every job size of whole groups: the model keeps the full rate exactly
    where no pair crosses a group edge (the whole job in one group), charges the pairs crossing the
    worst edge, min(stride, D) (the enumeration's count while the job has that many pairs), and its
    rate min(1, G / (2 S)) of a port
    equals the Valiant worst flow's wherever a third group lets one group's outgoing and another's
    incoming pairs meet on a link (stride <= devices - 2 D); elsewhere (the few long pairs of a
    short job, one source group and one destination) it is low, never high."""
    D = P * A / min(nics, 1.0)
    devices = int(groups * D)
    exact = 0
    for stride in range(1, devices):
        truth, crossing = _worst_share(f, groups, nics, _chain(devices, stride))
        got = _model(f, nics, devices, stride, chain=True)
        assert crossing == min(stride, D, devices - stride)   # the pairs at the worst edge (as many as exist)
        if stride <= devices - 2 * D:
            assert got == pytest.approx(truth, rel=1e-12), (stride, got, truth)
            exact += 1
        else:
            assert got <= truth + 1e-12, (stride, got, truth)
    assert exact >= devices - 2 * D - 1
    # the defect this replaces: 2 x stride inside a group was the full rate
    small = int(D // 2)
    truth, crossing = _worst_share(f, groups, nics, _chain(devices, small))
    assert crossing == small and _model(f, nics, devices, small, chain=True) == pytest.approx(truth)


def test_chain_inside_one_group_keeps_the_full_rate():
    """A job inside one dragonfly group (16 devices at 0.5 NIC per device) crosses no global link."""
    for stride in range(1, 16):
        assert _worst_share(0.5, 2, 0.5, [(i, i + stride) for i in range(16 - stride)])[1] == 0
        assert _model(0.5, 0.5, 16, stride, chain=True) == 1.0


@pytest.mark.parametrize("f,groups,nics", [(1.0, 9, 1.0), (0.5, 5, 1.0), (0.25, 3, 0.5)])
@pytest.mark.parametrize("stages", [2, 4, 8])
def test_interleaved_chain_wrap_never_faster_than_networkx(f, groups, nics, stages):
    """With interleaved chunks the last stage also sends back to the first: the model's rate stays at or
    below the enumeration's (the wrap-round adds at most one pair per device), exact at the strides
    whose pipelines span the job's three or more groups."""
    devices = int(groups * P * A / min(nics, 1.0))
    if devices % stages:
        pytest.skip("stages must divide the devices")
    stride = devices // stages
    truth, _ = _worst_share(f, groups, nics, _chain(devices, stride, stages, wrap=True))
    got = _model(f, nics, devices, stride, chain=True)
    assert got <= truth + 1e-12
    assert got >= truth / 2 - 1e-12


@pytest.mark.parametrize("f,groups,nics", CASES)
def test_two_stage_pairs_against_networkx(f, groups, nics):
    """Pairs of a two-stage pipeline (blocks of 2 stride ranks): full rate exactly where no block
    straddles a group edge (a group holds whole blocks, or the job is one group). A straddling layout
    is charged min(stride, D) pairs at its worst edge, an upper bound on the enumeration's count (an
    edge cuts a block at its offset r, min(r, 2 stride - r) pairs cross): never faster than the
    enumeration, and exact where stride is a multiple of D and a third group lets the loads meet."""
    D = P * A / min(nics, 1.0)
    devices = int(groups * D)
    for stride in range(1, devices // 2 + 1):
        if devices % (2 * stride):
            continue
        truth, crossing = _worst_share(f, groups, nics, _pairs(devices, stride))
        got = _model(f, nics, devices, stride, chain=False)
        if crossing == 0:
            assert got == 1.0, stride
            continue
        assert crossing <= min(stride, D)
        assert got <= truth + 1e-12, (stride, got, truth)
        if stride % D == 0 and devices >= 2 * stride + 2 * D:
            assert got == pytest.approx(truth, rel=1e-12), (stride, got, truth)


def test_defect_example_on_a_radix_64_dragonfly():
    """The case that was wrong, at full size: 64-port switches (groups of 512 ports, 1,024 devices at 0.5
    NIC per device), a pipeline chain 384 apart on 4,096 devices (2 x 384 <= 1,024: it was the full
    rate). At f = 0.05 (26 global ports a group) the 384 pairs crossing each group edge, half a port
    each, load Valiant's busiest global link 2 x 384 x 0.5 / 26 times over: 26 / 384 of the device rate."""
    net = SimpleNamespace(family=np.array(DRAGONFLY), torus_dims=(np.array(1.0),), reconfigs_per_step=0.0,
                          ocs_reconfig_s=0.0, global_link_fraction=0.05)
    place = Placement(net, 8.0, 0.5, 0.0, 0.5, 1.0, 1.0, 1.0, 64.0, 4096.0)
    share = float(place.switched_bw(384.0, 2.0, p2p=True, chain=True)) / float(place.bw)
    assert share == pytest.approx(26 / (2 * 384 * 0.5))
    # a broadcast over designs: chains and rings of two, inside and across groups, in one call
    got = place.switched_bw(np.array([384.0, 384.0, 256.0, 1024.0]), 2.0, p2p=True,
                            chain=np.array([True, False, False, True])) / place.bw
    # 2 x 384 = 768 does not divide a group of 1,024: blocks straddle, 384 pairs cross; 2 x 256 does
    assert got.tolist() == pytest.approx([26 / 384, 26 / 384, 1.0, 26 / 1024])


def _ring_model(f, nics, devices, stride, n, domain=1.0):
    place = _placement(f, nics, devices, domain)
    return float(place.switched_bw(float(stride), float(n))) / float(place.bw)


RING_CASES = [(1.0, 3, 1.0), (1.0, 5, 1.0), (0.5, 3, 1.0), (0.5, 5, 1.0), (0.25, 3, 0.5), (1.0, 5, 2.0)]


@pytest.mark.parametrize("f,groups,nics", RING_CASES)
def test_rings_against_networkx(f, groups, nics):
    """Ring collectives of every stride and size that tile a job of whole groups, each ring stream routed
    by Valiant on the networkx dragonfly: the model keeps the full rate exactly where no ring leaves a
    group, is never faster than the enumeration, counts at least the rings leaving the worst group, and
    is exact where the blocks' span is a whole number of groups and a third group lets one group's
    outgoing and another's incoming streams meet (``stride n`` a multiple of D, devices >= 3 D; rings of
    two need stride a multiple of D too: else a group's pairs go to two groups, 2/3 of the model's load).
    Misaligned layouts (blocks straddling group edges) are charged min(2 stride, D) streams, the most two
    edges can cut; the enumeration's worst group sees fewer where the cuts fall off the blocks' middles."""
    D = int(P * A / min(nics, 1.0))
    devices = groups * D
    cases = exact = conservative = 0
    for n in range(2, devices + 1):
        for stride in range(1, devices // n + 1):
            if devices % (stride * n):
                continue
            flows = rings(devices, stride, n)
            truth, leaving = _worst_share(f, groups, nics, flows)
            got = _ring_model(f, nics, devices, stride, n)
            cases += 1
            if leaving == 0:
                assert got == 1.0, (stride, n)
                continue
            assert got <= truth + 1e-12, (stride, n, got, truth)
            # the streams the model charges bound the enumeration's from above
            G = dragonfly.global_ports_per_group(A, H, f)
            w = min(nics, 1.0)
            if got < 1.0:
                assert G / (2 * w * got) >= leaving - 1e-9, (stride, n, got, leaving)
            if (stride * n) % D == 0 and groups >= 3 and (n > 2 or stride % D == 0):
                assert got == pytest.approx(truth, rel=1e-12), (stride, n, got, truth)
                exact += 1
            elif got < truth - 1e-12:
                conservative += 1
    assert cases > 10 and exact >= 3


@pytest.mark.parametrize("f,groups,nics", [(1.0, 5, 1.0), (0.5, 3, 1.0)])
def test_rings_minimal_routing_is_no_better_beyond_two_groups(f, groups, nics):
    """The closed form assumes Valiant (adaptive) routing. Routed minimally instead, every stream of a ring
    over consecutive groups takes the few direct links between its two groups: on three or more groups
    that is never faster than Valiant's, so the model's rate stays at or below the better of the two."""
    D = int(P * A / min(nics, 1.0))
    devices = groups * D
    for n, stride in [(groups, D), (2 * groups, D // 2), (devices, 1), (4, 2), (3, 1)]:
        if devices % (stride * n):
            continue
        flows = rings(devices, stride, n)
        valiant, _ = _worst_share(f, groups, nics, flows)
        minimal, _ = _worst_share(f, groups, nics, flows, minimal=True)
        got = _ring_model(f, nics, devices, stride, n)
        assert minimal <= valiant + 1e-12, (stride, n, minimal, valiant)
        assert got <= max(minimal, valiant) + 1e-12


@pytest.mark.parametrize("domain", [2, 4])
def test_rings_below_the_domain_run_one_ring_per_rank_of_a_domain(domain):
    """A ring with ``inner`` ranks per scale-up domain runs ``inner`` rings across the domains (one rank of
    each domain): ``inner`` times the streams at a group edge of a flat ring. The model is never faster
    than the enumeration of those rings, and exact on aligned spans."""
    f, groups, nics = 0.5, 5, 1.0
    D = P * A
    devices = groups * D
    for n in (2 * D, D, 4 * D // domain):
        for stride in range(1, domain):
            if domain % stride or devices % (stride * n):
                continue
            inner = domain // stride
            if n % inner or stride * n <= D:
                continue
            truth, leaving = _worst_share(f, groups, nics, rings(devices, stride, n, inner))
            got = _ring_model(f, nics, devices, stride, n, float(domain))
            flat, _ = _worst_share(f, groups, nics, rings(devices, stride, n))
            assert leaving > 0 and got <= truth + 1e-12, (stride, n, got, truth)
            if (stride * n) % D == 0:
                assert got == pytest.approx(truth, rel=1e-12), (stride, n, got, truth)
                assert truth < flat                     # the flat ring's one stream per edge undercounts


def test_rings_inside_a_group_misaligned_are_charged():
    """The defect this replaces: a ring whose span fits a group but straddles a group edge was the full
    rate. Rings of 3 ranks 4 apart (blocks of 12) in groups of 16 devices (half a NIC each, G = 2 global
    ports at f = 0.25) on 48 devices: blocks straddle the edges at 16 and 32, 8 rings leave the worst group
    and Valiant's busiest link gives a stream half its rate. The model charges the most two edges can cut,
    2 x 4 = 8 streams of half a port over G = 2 ports twice: a quarter (conservative by 2 here)."""
    f, groups, nics = 0.25, 3, 0.5
    truth, leaving = _worst_share(f, groups, nics, rings(48, 4, 3))
    got = _ring_model(f, nics, 48, 4, 3)
    assert (leaving, truth) == (8, pytest.approx(0.5))
    assert got == pytest.approx(0.25)


def test_rings_broadcast_over_designs():
    """One call evaluates several designs: aligned, misaligned, inside and across groups, on a radix-64
    dragonfly (groups of 512 devices at one NIC each, 4,096 devices, f = 0.05: G = 26 global ports)."""
    net = SimpleNamespace(family=np.array(DRAGONFLY), torus_dims=(np.array(1.0),), reconfigs_per_step=0.0,
                          ocs_reconfig_s=0.0, global_link_fraction=0.05)
    place = Placement(net, 8.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 64.0, 4096.0)
    stride = np.array([8.0, 64.0, 512.0, 8.0, 8.0])
    n = np.array([64.0, 16.0, 8.0, 24.0, 16.0])
    got = place.switched_bw(stride, n) / place.bw
    one = [float(place.switched_bw(s, k) / place.bw) for s, k in zip(stride, n)]
    assert got.tolist() == pytest.approx(one)
    # span 512 (a group) and 128 (divides it): full rate; span 1,024, aligned: 64 rings cross a group,
    # 26 / (2 x 64); stride 512: every device's ring crosses, 26 / (2 x 512), the old all-crossing
    # df_factor; span 192, misaligned: at most 2 x 8 streams, 26 / 32 (was the full rate)
    assert got.tolist() == pytest.approx([1.0, 26 / 128, 26 / 1024, 26 / 32, 1.0])


def _all_to_all(devices, stride, n):
    """Every rank of each group of ``n`` ranks ``stride`` apart to every other (blocks of ``stride n``)."""
    flows = []
    for b in range(0, devices, stride * n):
        for o in range(stride):
            members = [b + o + j * stride for j in range(n)]
            flows += [(x, y) for x in members for y in members if x != y]
    return flows


@pytest.mark.parametrize("f,groups,nics", [(1.0, 3, 1.0), (0.5, 3, 1.0), (0.5, 5, 1.0), (0.25, 3, 0.5),
                                           (1.0, 5, 2.0)])
@pytest.mark.parametrize("domain", [1, 2])
def test_all_to_all_against_networkx(f, groups, nics, domain):
    """All-to-all of every stride and size that tiles a job of whole groups. Each rank's S-byte buffer goes
    S / n to each peer; the ``inner`` peers in its scale-up domain over the scale-up links, the other
    S (n - inner) / n over the dragonfly, every pair's flow routed by Valiant. The enumeration's rate is
    the injection's or the busiest global link's: min(1, (n - inner) / L), L the busiest link's load in
    device rates with one unit per crossing pair. The model keeps the full rate exactly where no pair
    crosses a group edge and is never faster. It is low where Valiant's first hop lands in the destination
    group (1/(g - 1) of the flows on g groups: no second hop, which the model charges) and on misaligned
    layouts whose worst group sends less than the worst-layout share; on these 3 and 5 groups at least
    a third of the enumeration's rate (aligned spans: at least 0.70)."""
    D = int(P * A / min(nics, 1.0))
    devices = groups * D
    cases = crossing = 0
    for n in range(2, devices + 1):
        for stride in range(1, devices // n + 1):
            if devices % (stride * n) or (stride < domain and domain % stride):
                continue
            inner = min(domain // stride, n) if stride < domain else 1
            if n % inner:
                continue
            share, leaving = _worst_share(f, groups, nics, _all_to_all(devices, stride, n))
            truth = 1.0 if share >= 1.0 else min(1.0, (n - inner) * share)
            place = _placement(f, nics, devices, float(domain))
            got = float(place.switched_bw(float(stride), float(n), all_to_all=True)) / float(place.bw)
            cases += 1
            if leaving == 0:
                assert got == 1.0, (stride, n)
                continue
            crossing += 1
            assert got <= truth + 1e-12, (stride, n, got, truth)
            floor = 0.70 if (stride * n) % D == 0 else 1 / 3
            assert got >= floor * truth - 1e-12, (stride, n, got, truth)
    assert crossing >= 10 and cases > crossing


def test_all_to_all_inside_a_group_misaligned_is_charged():
    """The defect this replaces: an all-to-all whose span fits a group had the full rate even where its
    blocks straddle a group edge. 3 ranks 4 apart (blocks of 12) in groups of 16 devices (half a NIC per
    device, G = 2 global ports at f = 0.25) on 48 devices: blocks straddle the edges at 16 and 32, and both
    the enumeration and the model fall below the full rate; 4 ranks 2 apart (blocks of 8, two to a group)
    keep it."""
    f, groups, nics = 0.25, 3, 0.5
    share, leaving = _worst_share(f, groups, nics, _all_to_all(48, 4, 3))
    truth = min(1.0, 2 * share)
    place = _placement(f, nics, 48)
    got = float(place.switched_bw(4.0, 3.0, all_to_all=True)) / float(place.bw)
    assert leaving > 0 and truth < 1.0 and got <= truth + 1e-12
    aligned = float(place.switched_bw(2.0, 4.0, all_to_all=True)) / float(place.bw)
    assert aligned == 1.0                         # blocks of 8 fill groups of 16 whole
