"""Exact properties of the topology builders, and closed forms == networkx on small instances."""
import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from topologies import dragonfly, fat_tree, metrics, ocs, rail_optimized, scale_up, torus

BW = 100e9


@pytest.mark.parametrize("k", [4, 6, 8])
def test_k_ary_fat_tree_counts_diameter_bisection(k):
    g = fat_tree.k_ary_fat_tree_graph(k, BW)
    metrics.check_edge_attrs(g)
    kinds = metrics.count_kinds(g)
    cf = fat_tree.k_ary_counts(k)
    assert kinds["host"] == cf["hosts"] == k ** 3 / 4
    assert kinds["edge"] + kinds["agg"] + kinds["core"] == cf["switches"] == 5 * k * k / 4
    assert kinds["core"] == cf["core_switches"]
    n_sw_links = sum(1 for u, v in g.edges if g.nodes[u]["kind"] != "host" and g.nodes[v]["kind"] != "host")
    assert n_sw_links == cf["inter_switch_links"]
    # the general T-tier closed form gives the same switch count and links at N = k^3/4, radix k
    bom = fat_tree.bill_of_materials(cf["hosts"], k)
    assert bom["tiers"] == 3 and bom["switches"] == cf["switches"]
    assert bom["inter_switch_links"] == cf["inter_switch_links"]
    hs = metrics.hosts(g)
    assert metrics.host_diameter_hops(g, hs) == fat_tree.diameter_hops(bom["tiers"]) == 6
    left = [h for h in hs if g.nodes[h]["pod"] < k // 2]
    right = [h for h in hs if g.nodes[h]["pod"] >= k // 2]
    assert metrics.cut_bandwidth_bps(g, left, right) == pytest.approx(
        fat_tree.bisection_bandwidth_bps(len(hs), BW))


@pytest.mark.parametrize("leaves,hosts,spines", [(4, 4, 4), (4, 4, 2), (6, 8, 2)])
def test_leaf_spine_oversubscription_bisection(leaves, hosts, spines):
    g = fat_tree.leaf_spine_graph(leaves, hosts, spines, BW)
    o = hosts / spines
    hs = metrics.hosts(g)
    left = [h for h in hs if g.nodes[h]["pod"] < leaves // 2]
    right = [h for h in hs if g.nodes[h]["pod"] >= leaves // 2]
    assert metrics.cut_bandwidth_bps(g, left, right) == pytest.approx(
        fat_tree.bisection_bandwidth_bps(len(hs), BW, max(o, 1.0)))
    assert fat_tree.leaf_down_ports(hosts + spines, o) == hosts


@pytest.mark.parametrize("dims", [(4,), (6, 4), (4, 4, 4), (3, 5), (2, 4, 6), (8, 2)])
def test_torus_closed_forms_equal_networkx(dims):
    g = torus.torus_graph(dims, BW)
    metrics.check_edge_attrs(g)
    n = g.number_of_nodes()
    assert n == torus.nodes(dims)
    assert g.number_of_edges() == torus.links(dims)
    assert nx.diameter(g) == torus.diameter_hops(dims)
    assert nx.average_shortest_path_length(g) == pytest.approx(torus.mean_distance_hops(dims) * n / (n - 1))
    if max(dims) % 2 == 0:
        i = int(np.argmax(dims))
        left = [r for r in g if g.nodes[r]["coord"][i] < dims[i] // 2]
        right = [r for r in g if g.nodes[r]["coord"][i] >= dims[i] // 2]
        assert metrics.cut_bandwidth_bps(g, left, right) == pytest.approx(
            torus.bisection_bandwidth_bps(dims, BW))


def test_torus_degree_histogram():
    g = torus.torus_graph((4, 4, 4))
    assert nx.degree_histogram(g) == [0] * 6 + [64]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=3, max_size=3), st.integers(0, 4), st.integers(0, 4))
def test_group_dims_match_member_coordinates(dim_pows, stride_pow, size_pow):
    """Ring sizes per dimension equal the distinct coordinates the group's members occupy
    (power-of-two layouts)."""
    dims = [2 ** k for k in dim_pows]
    n = int(np.prod(dims))
    stride, size = 2 ** stride_pow, 2 ** size_pow
    if stride * size > n:
        return
    ns, ss = torus.group_dims(stride, size, dims)
    coords = [np.unravel_index(stride * j, dims, order="F") for j in range(size)]
    prod = 1.0
    for i in range(3):
        distinct = len({c[i] for c in coords})
        assert ns[i] >= 1 and ns[i] <= dims[i]
        prod *= float(ns[i])
        assert distinct == ns[i]
    assert prod == size  # the rings cover every member exactly


def test_dragonfly_counts_diameter_bisection():
    p, a, h = 2, 4, 2
    g = dragonfly.dragonfly_graph(p, a, h, bandwidth_bps=BW)
    metrics.check_edge_attrs(g)
    c = dragonfly.counts(p * a * (a * h + 1), p, a, h)
    kinds = metrics.count_kinds(g)
    assert c["groups"] == c["max_groups"] == a * h + 1 == 9
    assert kinds["router"] == c["routers"] and kinds["host"] == c["terminals"]
    glob = [e for e in g.edges(data=True) if e[2]["link"] == "global"]
    loc = [e for e in g.edges(data=True) if e[2]["link"] == "local"]
    assert len(glob) == c["global_links"] and len(loc) == c["local_links"]
    pairs = {frozenset((g.nodes[u]["group"], g.nodes[v]["group"])) for u, v, _ in glob}
    assert len(pairs) == 9 * 8 / 2  # every pair of groups joined once
    routers = [n for n, d in g.nodes(data=True) if d["kind"] == "router"]
    assert nx.diameter(g.subgraph(routers)) == 3
    hs = metrics.hosts(g)
    left = [x for x in hs if g.nodes[x]["group"] < 4]
    right = [x for x in hs if g.nodes[x]["group"] >= 4]
    assert metrics.cut_bandwidth_bps(g, left, right) == pytest.approx(dragonfly.global_bisection_links(9) * BW)
    assert dragonfly.balanced(63) == (16, 32, 16)


TAPERED = [  # (p, a, h, global_link_fraction, groups): G = ceil(a h f) ports a group, m = G / (groups - 1) a pair
    (2, 4, 2, 1.0, 5), (2, 4, 2, 1.0, 3),          # balanced, 2 and 4 links a pair
    (2, 4, 2, 0.5, 5), (2, 4, 2, 0.5, 3),          # half the global ports
    (2, 4, 2, 0.75, 7), (2, 4, 2, 0.75, 4),        # G = 6 dealt 2, 2, 1, 1 over the routers
    (2, 4, 2, 0.25, 3),                            # G = 2: one link a pair
    (3, 6, 3, 0.55, 6), (3, 6, 3, 0.55, 11),       # a h f = 9.9 -> 10 ports
    (4, 8, 4, 0.5, 5),                             # Frontier-like: 4 links a group pair, half of a h
]


def _tapered_case(p, a, h, f, groups):
    return int(dragonfly.global_ports_per_group(a, h, f)), dragonfly.dragonfly_graph(
        p, a, h, groups=groups, bandwidth_bps=BW, global_link_fraction=f)


@pytest.mark.parametrize("p,a,h,f,groups", TAPERED)
def test_tapered_dragonfly_counts_and_cross_group_bandwidth_against_networkx(p, a, h, f, groups):
    """A dragonfly with ceil(a h f) of its a h global ports a group: the closed-form counts equal the
    graph's, every router keeps at most h global ports and the router diameter stays 3, and the
    cross-group share min(1, h_eff / p) (before Valiant's halving) equals networkx's max flow out of
    one group's hosts into all the others' over that group's injection p a B."""
    G, g = _tapered_case(p, a, h, f, groups)
    metrics.check_edge_attrs(g)
    c = dragonfly.counts(p * a * groups, p, a, h, f)
    kinds = metrics.count_kinds(g)
    assert c["groups"] == groups and c["global_ports_per_group"] == G
    assert kinds["router"] == c["routers"] and kinds["host"] == c["terminals"]
    glob = [(u, v) for u, v, d in g.edges(data=True) if d["link"] == "global"]
    loc = [(u, v) for u, v, d in g.edges(data=True) if d["link"] == "local"]
    assert len(glob) == c["global_links"] and len(loc) == c["local_links"]
    assert bool(c["feasible"]) and groups <= c["max_groups"]
    deg = {}
    for u, v in glob:
        for x in (u, v):
            deg[x] = deg.get(x, 0) + 1
    for i in range(groups):
        assert sum(deg.get(("router", i, r), 0) for r in range(a)) == G
    assert max(deg.values()) <= h
    routers = [n for n, d in g.nodes(data=True) if d["kind"] == "router"]
    assert nx.diameter(g.subgraph(routers)) <= 3
    hs = metrics.hosts(g)
    own = [x for x in hs if g.nodes[x]["group"] == 0]
    rest = [x for x in hs if g.nodes[x]["group"] != 0]
    share = dragonfly.cross_group_factor(p, dragonfly.global_links_per_router(a, h, f), valiant=False)
    assert metrics.cut_bandwidth_bps(g, own, rest) == pytest.approx(float(share) * p * a * BW)
    assert dragonfly.cross_group_factor(p, dragonfly.global_links_per_router(a, h, f)) == pytest.approx(share / 2)


@pytest.mark.parametrize("p,a,h,f,groups", TAPERED)
def test_tapered_dragonfly_global_bisection_against_networkx(p, a, h, f, groups):
    """Max flow between the hosts of two halves of the groups = floor(g/2) ceil(g/2) m global links."""
    G, g = _tapered_case(p, a, h, f, groups)
    m = G // (groups - 1)
    hs = metrics.hosts(g)
    left = [x for x in hs if g.nodes[x]["group"] < groups // 2]
    right = [x for x in hs if g.nodes[x]["group"] >= groups // 2]
    assert metrics.cut_bandwidth_bps(g, left, right) == pytest.approx(dragonfly.global_bisection_links(groups, m) * BW)


def test_tapered_builder_refuses_uneven_group_pairs():
    with pytest.raises(ValueError, match="4 groups cannot share 4 global ports"):
        dragonfly.dragonfly_graph(2, 4, 2, groups=4, global_link_fraction=0.5)


def test_global_ports_round_up_to_whole_links_and_fall_with_the_fraction():
    """ceil(a h f): decimal fractions gain no port from float noise (100 x 0.55 = 55.00000000000001 -> 55);
    a port fewer never means more; Frontier's 292 of 512 is f = 0.5703125 exactly."""
    assert 20 * 5 * 0.55 > 55 and dragonfly.global_ports_per_group(20, 5, 0.55) == 55
    assert dragonfly.global_ports_per_group(32, 16, 292 / 512) == 292
    assert dragonfly.global_ports_per_group(32, 16, 1e-6) == 1
    f = np.linspace(1e-3, 1.0, 997)
    ports = dragonfly.global_ports_per_group(32, 16, f)
    assert np.all(np.diff(ports) >= 0) and ports[-1] == 512
    c = dragonfly.counts(np.array([512.0, 1024.0, 512 * 74]), 16, 32, 16, 292 / 512)
    assert c["global_links"].tolist() == [0.0, 292.0, 74 * 292 / 2]     # one group has none


def test_nvl72_domain():
    g = scale_up.nvl_domain_graph(72, 18, BW)
    hs = metrics.hosts(g)
    c = scale_up.counts(72, 18)
    assert metrics.count_kinds(g)["switch"] == c["switch_chips"] == 18 and c["trays"] == 9
    assert g.number_of_edges() == c["cables"] == 72 * 18
    assert metrics.host_diameter_hops(g) == 2
    assert metrics.cut_bandwidth_bps(g, hs[:36], hs[36:]) == pytest.approx(
        scale_up.bisection_bandwidth_bps(72, 18, BW))
    assert scale_up.per_gpu_bandwidth_bps(18, 400e9) == 7.2e12  # NVLink5: 18 x 50 GB/s per direction


def test_rail_optimized_same_rail_one_leaf_and_rails():
    g = rail_optimized.rail_optimized_graph(servers=8, rails=4, servers_per_leaf=4, spines=4, bandwidth_bps=BW)
    metrics.check_edge_attrs(g)
    assert metrics.count_kinds(g)["leaf"] == rail_optimized.leaves(8, 4, 8, 1.0)
    net = g.subgraph([n for n, d in g.nodes(data=True) if d["kind"] != "scale-up"])
    assert nx.shortest_path_length(net, ("host", 0, 1), ("host", 3, 1)) == 2   # same rail, same leaf
    assert nx.shortest_path_length(net, ("host", 0, 1), ("host", 5, 1)) == 4   # same rail, via spine
    assert nx.shortest_path_length(net, ("host", 0, 1), ("host", 1, 2)) == 4   # other rail: via spine
    no_spine = g.subgraph([n for n, d in g.nodes(data=True) if d["kind"] != "spine"])
    assert nx.shortest_path_length(no_spine, ("host", 0, 1), ("host", 1, 2)) == 4  # or NVLink, then rail 2's leaf


def test_ocs_torus_tpu_v4_counts_from_graph():
    """TPU v4 pod: 64 cubes of 4^3, 48 OCS, 6,144 optical ports (Jouppi et al. ISCA 2023)."""
    g = ocs.ocs_torus_graph((4, 4, 4), 4)
    c = ocs.counts(g.number_of_nodes(), 4, 136)
    optical = [d for _, _, d in g.edges(data=True) if d["medium"] == "optical"]
    assert g.number_of_nodes() == 4096
    assert len(optical) == c["optical_circuits"] == 3072
    assert 2 * len(optical) == c["optical_ports"] == 6144
    used = {d["ocs"] for d in optical}
    assert len(used) == c["ocs"] == 48
    per_ocs = {}
    for d in optical:
        per_ocs[d["ocs"]] = per_ocs.get(d["ocs"], 0) + 2
    assert set(per_ocs.values()) == {128} and 128 <= 136
    assert sum(1 for _, _, d in g.edges(data=True) if d["medium"] == "copper") == c["copper_links"]
