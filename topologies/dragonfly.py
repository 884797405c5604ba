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
"""
from __future__ import annotations

import numpy as np


def balanced(radix):
    """(p, a, h) of the balanced dragonfly for router radix k."""
    p = np.floor((np.asarray(radix, dtype=float) + 1) / 4)
    return p, 2 * p, p


def counts(endpoints, p, a, h):
    """Routers, groups, local and global links to attach ``endpoints`` terminals."""
    n = np.asarray(endpoints, dtype=float)
    routers = np.ceil(n / p)
    groups = np.ceil(routers / a)
    routers = groups * a
    global_links = np.where(groups > 1, groups * a * h / 2, 0.0)
    return {"routers": routers, "groups": groups, "terminals": routers * p,
            "local_links": groups * a * (a - 1) / 2, "global_links": global_links,
            "max_groups": a * h + 1, "feasible": groups <= a * h + 1}


def global_bisection_links(groups):
    """Global links cut between two halves of the groups when every pair has one link: floor(g/2) ceil(g/2)."""
    g = np.asarray(groups, dtype=float)
    return np.floor(g / 2) * np.ceil(g / 2)


def cross_group_factor(p, h, valiant=True):
    """Fraction of terminal bandwidth a group-spanning pattern gets: min(1, h / p) (/2 with Valiant)."""
    f = np.minimum(1.0, np.asarray(h, dtype=float) / np.asarray(p, dtype=float))
    return f / 2.0 if valiant else f


def dragonfly_graph(p: int, a: int, h: int, groups: int | None = None, bandwidth_bps: float = 400e9,
                    latency_s: float = 1e-6):
    """networkx dragonfly; ``groups`` defaults to a h + 1 (one global link per group pair).

    Group i's global port q (0 <= q < a h) goes to group (i + q + 1) mod g on that
    group's port g - 2 - q, so every pair of groups is joined exactly once."""
    import networkx as nx
    g_ = a * h + 1 if groups is None else groups
    assert g_ == a * h + 1, "the builder implements the maximal (one link per group pair) dragonfly"
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
        for q in range(a * h):
            j = (i + q + 1) % g_
            q2 = g_ - 2 - q
            gr.add_edge(("router", i, q // h), ("router", j, q2 // h), link="global", **attrs)
    return gr
