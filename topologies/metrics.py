"""Graph metrics of topology builders (networkx), the reference the closed forms are tested against.

Every builder returns a graph whose edges carry ``bandwidth_bps`` (per direction)
and ``latency_s``; ``check_edge_attrs`` asserts it (networkx silently defaults
a misspelled weight to 1). Bisection is a max-flow / min-cut between two host
sets (Ford-Fulkerson; networkx ``maximum_flow``), each undirected link counted
with its per-direction capacity.
"""
from __future__ import annotations

import itertools

import networkx as nx

EDGE_ATTRS = ("bandwidth_bps", "latency_s")


def check_edge_attrs(g: nx.Graph) -> None:
    """Raise ValueError if any edge lacks a unit-named attribute."""
    for u, v, d in g.edges(data=True):
        for a in EDGE_ATTRS:
            if a not in d:
                raise ValueError(f"edge {u}-{v} has no {a!r}")


def hosts(g: nx.Graph, kind: str = "host") -> list:
    return [n for n, d in g.nodes(data=True) if d.get("kind") == kind]


def cut_bandwidth_bps(g: nx.Graph, side_a, side_b) -> float:
    """Max flow (b/s, one direction) from host set ``side_a`` to ``side_b`` = the min cut between them."""
    check_edge_attrs(g)
    d = nx.DiGraph()
    for u, v, a in g.edges(data=True):
        d.add_edge(u, v, capacity=a["bandwidth_bps"])
        d.add_edge(v, u, capacity=a["bandwidth_bps"])
    for h in side_a:
        d.add_edge("_src", h)           # no capacity attribute: infinite
    for h in side_b:
        d.add_edge(h, "_dst")
    return float(nx.maximum_flow_value(d, "_src", "_dst"))


def host_diameter_hops(g: nx.Graph, host_nodes=None) -> int:
    """Largest shortest-path length (links) between two hosts."""
    hs = host_nodes if host_nodes is not None else hosts(g)
    hs = set(hs)
    best = 0
    for h in hs:
        dist = nx.single_source_shortest_path_length(g, h)
        best = max(best, max(l for n, l in dist.items() if n in hs))
    return best


def mean_host_distance_hops(g: nx.Graph, host_nodes=None) -> float:
    """Mean shortest-path length over ordered pairs of distinct hosts."""
    hs = list(host_nodes if host_nodes is not None else hosts(g))
    s = set(hs)
    tot = 0
    for h in hs:
        dist = nx.single_source_shortest_path_length(g, h)
        tot += sum(l for n, l in dist.items() if n in s)
    n = len(hs)
    return tot / (n * (n - 1))


def count_kinds(g: nx.Graph) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, d in g.nodes(data=True):
        out[d.get("kind", "")] = out.get(d.get("kind", ""), 0) + 1
    return out


def pairs(xs):
    return itertools.combinations(xs, 2)
