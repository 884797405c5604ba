"""Dragonfly (Kim, Dally, Scott, Abts, ISCA 2008): groups of ``a`` routers, ``p``
terminals and ``h`` global links per router, routers of a group fully connected.

    radix k = p + (a - 1) + h;  balanced: a = 2p = 2h  =>  p = h = (k + 1) // 4
    groups g <= a h + 1 (one global link between every pair of groups at g = a h + 1)
    routers = a g;  terminals = p a g;  local links = g a (a - 1) / 2;  global links = g a h / 2
    router diameter (minimal routing) = 3 hops: local, global, local

A group pattern whose ranks stay inside one dragonfly group sees the local
links only; one that spans groups is limited by the global links, min(1, h/p)
of the terminal rate, halved by Valiant routing for adversarial (neighbour-
group) patterns such as a ring over consecutive groups (Kim et al. 2008 Sec. 4).

Tapered global links (``system.scale_out.global_link_fraction`` f in (0, 1]): real
machines populate fewer global ports than the balanced ``a h`` per group, because
the global links are the long optical (costly) ones. A group keeps its ``a`` routers,
``p a`` terminals and local links, and wires

    G = ceil(a h f) global ports per group   (h_eff = G / a per router on average)
    global links = g G / 2;   groups g <= G + 1 (every pair of groups joined at least once)
    cross-group share = min(1, h_eff / p) = min(1, G / (p a))   (/2 with Valiant routing)

A design whose endpoints fill more groups than G + 1 (``counts``: ``feasible``,
``max_groups``) cannot be built: ``explore.evaluate`` marks it invalid
(``DRAGONFLY_RULE``), and ``dragonfly_graph`` refuses it. Pipeline pairs and collective
rings that cross group edges share the group's G ports
(``topologies.placement.Placement.dragonfly_pairs_bw``).

i.e. the global bandwidth out of a group over its injection bandwidth (the cut
around one group; ``tests/topologies/test_graphs_closed_forms.py`` checks it and the
global bisection against networkx max-flow on tapered graphs). Kim et al. 2008
balance the channels (a = 2p = 2h) so that uniform traffic loads global and local
links alike; a taper trades that global bandwidth for fewer long links. Frontier (OLCF, HPE Slingshot on 64-port Rosetta switches, p = h = 16,
a = 32): each group has 4 links to each of its 73 other groups, G = 292 of the
balanced 512, f = 292 / 512 = 0.5703, blocking factor 512 / 292 = 1.753
(https://glennklockwood.com/garden/systems/frontier, "Network architecture").
"""
from __future__ import annotations

import numpy as np


def balanced(radix):
    """(p, a, h) of the balanced dragonfly for router radix k."""
    p = np.floor((np.asarray(radix, dtype=float) + 1) / 4)
    return p, 2 * p, p


def global_ports_per_group(a, h, global_link_fraction=1.0):
    """Populated global ports per group, G = ceil(a h f) (a group has whole links; at least one)."""
    f = np.asarray(global_link_fraction, dtype=float)
    # rounded to 1e-9 first: a fraction typed in decimal (0.57, 0.1) must not gain a port from float noise
    return np.maximum(np.ceil(np.round(np.asarray(a, dtype=float) * np.asarray(h, dtype=float) * f, 9)), 1.0)


def global_links_per_router(a, h, global_link_fraction=1.0):
    """Mean populated global ports per router, h_eff = G / a (h at f = 1)."""
    return global_ports_per_group(a, h, global_link_fraction) / np.asarray(a, dtype=float)


def counts(endpoints, p, a, h, global_link_fraction=1.0):
    """Routers, groups, local and global links to attach ``endpoints`` terminals, with
    ``global_link_fraction`` of the balanced ``a h`` global ports of a group populated."""
    n = np.asarray(endpoints, dtype=float)
    routers = np.ceil(n / p)
    groups = np.ceil(routers / a)
    routers = groups * a
    ports = global_ports_per_group(a, h, global_link_fraction)
    global_links = np.where(groups > 1, np.ceil(groups * ports / 2), 0.0)
    return {"routers": routers, "groups": groups, "terminals": routers * p,
            "local_links": groups * a * (a - 1) / 2, "global_links": global_links,
            "global_ports_per_group": ports, "max_groups": ports + 1, "feasible": groups <= ports + 1}


def global_bisection_links(groups, links_per_pair=1):
    """Global links cut between two halves of the groups when every pair of groups has
    ``links_per_pair`` links: floor(g/2) ceil(g/2) m."""
    g = np.asarray(groups, dtype=float)
    return np.floor(g / 2) * np.ceil(g / 2) * np.asarray(links_per_pair, dtype=float)


def cross_group_factor(p, h, valiant=True):
    """Fraction of terminal bandwidth a group-spanning pattern gets: min(1, h / p) (/2 with Valiant);
    for a tapered dragonfly pass ``h = global_links_per_router(a, h, f)``."""
    f = np.minimum(1.0, np.asarray(h, dtype=float) / np.asarray(p, dtype=float))
    return f / 2.0 if valiant else f


def dragonfly_graph(p: int, a: int, h: int, groups: int | None = None, bandwidth_bps: float = 400e9,
                    latency_s: float = 1e-6, global_link_fraction: float = 1.0):
    """networkx dragonfly with G = ``global_ports_per_group(a, h, global_link_fraction)`` global
    ports per group; ``groups`` defaults to G + 1 (one global link per group pair) and must leave
    every pair of groups the same number of links, m = G / (groups - 1) (a whole number, at most a).

    Group i's link k (0 <= k < m) to group j leaves from its global port
    q = ((j - i - 1) mod g) m + k, on router q mod a (ports dealt round the routers, so each
    router has floor or ceil of G / a <= h of them), and lands on group j's port for i and k;
    the m links of a pair therefore join m distinct router pairs."""
    import networkx as nx
    G = int(global_ports_per_group(a, h, global_link_fraction))
    g_ = G + 1 if groups is None else int(groups)
    if g_ < 2 or G % (g_ - 1) or G // (g_ - 1) > a:
        raise ValueError(f"dragonfly_graph: {g_} groups cannot share {G} global ports per group evenly "
                         f"(allowed: groups - 1 a divisor of {G} with at most a = {a} links per pair)")
    m = G // (g_ - 1)
    gr = nx.Graph()
    attrs = dict(bandwidth_bps=float(bandwidth_bps), latency_s=float(latency_s))
    for i in range(g_):
        for r in range(a):
            gr.add_node(("router", i, r), kind="router", group=i)
            for t in range(p):
                gr.add_node(("host", i, r, t), kind="host", group=i)
                gr.add_edge(("host", i, r, t), ("router", i, r), link="terminal", **attrs)
        for r1 in range(a):
            for r2 in range(r1 + 1, a):
                gr.add_edge(("router", i, r1), ("router", i, r2), link="local", **attrs)
    for i in range(g_):
        for j in range(i + 1, g_):
            for k in range(m):
                qi = ((j - i - 1) % g_) * m + k
                qj = ((i - j - 1) % g_) * m + k
                gr.add_edge(("router", i, qi % a), ("router", j, qj % a), link="global", **attrs)
    return gr
