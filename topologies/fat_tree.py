"""Closed-form size of a folded-Clos (fat-tree) scale-out fabric.

A T-tier fat-tree of radix-k switches with full bisection connects up to
2 (k/2)^T endpoints (Leiserson 1985; Al-Fares et al., SIGCOMM 2008 for the
3-tier k^3/4 case). With oversubscription o >= 1 at the leaf, the upper tiers
carry 1/o of the endpoint bandwidth. Port count:

    ports = N (1 + 2 (T - 1) / o),   switches = ports / k,

and every inter-switch link (N (T - 1) / o of them) plus every endpoint link
uses two transceivers (one per end).
"""
from __future__ import annotations

import numpy as np


def tiers(endpoints, radix):
    """Smallest T >= 1 with 2 (k/2)^T >= N (T = 1 for a single switch)."""
    n = np.maximum(np.asarray(endpoints, dtype=float), 1.0)
    k = np.asarray(radix, dtype=float)
    t = np.ceil(np.log(n / 2.0) / np.log(k / 2.0) - 1e-9)
    return np.where(n <= k, 1.0, np.maximum(t, 2.0))


def bill_of_materials(endpoints, radix, oversubscription=1.0):
    """Switches, switch ports, inter-switch links and transceivers of a fat-tree; ``o`` is the
    leaves' real down:up ratio at the radix (``leaf_oversubscription``; 1 at full bisection)."""
    n = np.asarray(endpoints, dtype=float)
    o = np.where(np.asarray(oversubscription, dtype=float) > 1.0,
                 leaf_oversubscription(radix, oversubscription), 1.0)
    t = tiers(n, radix)
    ports = n * (1.0 + 2.0 * (t - 1.0) / o)
    switches = np.ceil(ports / np.asarray(radix, dtype=float))
    links_up = n * (t - 1.0) / o
    transceivers = 2.0 * (n + links_up)
    return {"tiers": t, "switches": switches, "switch_ports": ports,
            "inter_switch_links": links_up, "transceivers": transceivers}


def k_ary_counts(k):
    """Exact counts of the 3-tier k-ary fat-tree (Al-Fares et al. 2008): k^3/4 hosts,
    5k^2/4 switches (k^2 edge+aggregation, k^2/4 core), k^3/2 switch-to-switch links."""
    k = np.asarray(k, dtype=float)
    return {"hosts": k ** 3 / 4, "switches": 5 * k ** 2 / 4, "core_switches": k ** 2 / 4,
            "inter_switch_links": k ** 3 / 2, "host_links": k ** 3 / 4}


def bisection_bandwidth_bps(endpoints, bandwidth_bps, oversubscription=1.0):
    """Bisection of a fat-tree: half the endpoints at full rate over the oversubscription, N/2 * B / o."""
    return np.asarray(endpoints, dtype=float) / 2.0 * bandwidth_bps / np.asarray(oversubscription, float)


def diameter_hops(tiers_):
    """Longest shortest endpoint-to-endpoint path in links: up T tiers and down again, 2T."""
    return 2.0 * np.asarray(tiers_, dtype=float)


def leaf_down_ports(radix, oversubscription=1.0):
    """Endpoint ports of a leaf switch with down:up = o:1: k o / (1 + o) (k/2 at full bisection)."""
    k = np.asarray(radix, dtype=float)
    o = np.asarray(oversubscription, dtype=float)
    return np.floor(k * o / (1.0 + o))


def leaf_oversubscription(radix, oversubscription=1.0):
    """The leaf's real down:up ratio at an integer port split: its ``k o / (1 + o)`` endpoint ports
    (rounded down) over the ``k - down`` ports left for uplinks (a radix-64 leaf at a nominal 2:1
    has 42 down and 22 up, 1.91:1; 4:1 gives 51 / 13, 3.92:1; 1:1 stays 32 / 32). Non-decreasing
    in o, as the down ports are. The placement and the bill of materials both use it, so a leaf's
    uplinks are the ports it has (the networkx leaf-spines of the tests are wired the same way)."""
    down = leaf_down_ports(radix, oversubscription)
    return down / np.maximum(np.asarray(radix, dtype=float) - down, 1.0)


def k_ary_fat_tree_graph(k: int, bandwidth_bps: float = 400e9, latency_s: float = 1e-6):
    """networkx graph of the k-ary fat-tree: nodes have ``kind`` in host/edge/agg/core and ``pod``;
    every edge has ``bandwidth_bps`` (per direction) and ``latency_s``."""
    import networkx as nx
    assert k % 2 == 0 and k >= 2, "k must be even"
    g = nx.Graph()
    half = k // 2
    attrs = dict(bandwidth_bps=float(bandwidth_bps), latency_s=float(latency_s))
    for c in range(half * half):
        g.add_node(("core", c), kind="core", pod=-1)
    for p in range(k):
        for i in range(half):
            e, a = ("edge", p, i), ("agg", p, i)
            g.add_node(e, kind="edge", pod=p)
            g.add_node(a, kind="agg", pod=p)
            for j in range(half):
                h = ("host", p, i, j)
                g.add_node(h, kind="host", pod=p)
                g.add_edge(h, e, **attrs)
                g.add_edge(a, ("core", i * half + j), **attrs)
        for i in range(half):
            for j in range(half):
                g.add_edge(("edge", p, i), ("agg", p, j), **attrs)
    return g


def leaf_spine_graph(leaves: int, hosts_per_leaf: int, spines: int, bandwidth_bps: float = 400e9,
                     latency_s: float = 1e-6):
    """Two-tier Clos: each leaf has ``hosts_per_leaf`` hosts and one uplink to each spine
    (oversubscription = hosts_per_leaf / spines)."""
    import networkx as nx
    g = nx.Graph()
    attrs = dict(bandwidth_bps=float(bandwidth_bps), latency_s=float(latency_s))
    for s in range(spines):
        g.add_node(("spine", s), kind="spine", pod=-1)
    for l in range(leaves):
        g.add_node(("leaf", l), kind="edge", pod=l)
        for h in range(hosts_per_leaf):
            g.add_node(("host", l, h), kind="host", pod=l)
            g.add_edge(("host", l, h), ("leaf", l), **attrs)
        for s in range(spines):
            g.add_edge(("leaf", l), ("spine", s), **attrs)
    return g
