"""Rail-optimized fat-tree (NVIDIA DGX SuperPOD style): GPU r of every server
connects to the leaf switches of rail r, so same-rank GPUs of different servers
are one leaf apart and cross-rail traffic first moves over the scale-up
domain (NVLink, "PXN") and then rides a rail.

With servers of ``rails`` GPUs, one NIC per GPU and radix-k leaves at
oversubscription o, one rail leaf serves L = k o / (1 + o) servers:

    leaves = rails * ceil(servers / L);  spines sized as a fat-tree over all NIC ports
    per-GPU scale-out bandwidth = nics_per_gpu * B_nic   (DGX H100: 8 x 400G, one per GPU)

A group whose members share a rail (stride a multiple of the server size)
and whose servers fit under one rail leaf never leaves that leaf, so it does
not see the oversubscription.
"""
from __future__ import annotations

import numpy as np

from topologies.fat_tree import leaf_down_ports


def leaves(servers, rails, radix, oversubscription=1.0):
    return np.asarray(rails, dtype=float) * np.ceil(np.asarray(servers, dtype=float)
                                                    / leaf_down_ports(radix, oversubscription))


def per_gpu_bandwidth_bps(nics_per_gpu, nic_bandwidth_bps):
    return np.asarray(nics_per_gpu, dtype=float) * nic_bandwidth_bps


def rail_optimized_graph(servers: int, rails: int, servers_per_leaf: int, spines: int,
                         bandwidth_bps: float = 400e9, nvlink_bandwidth_bps: float = 3.6e12,
                         latency_s: float = 1e-6):
    """Two-tier rail-optimized fabric: hosts ("host", server, rail); a scale-up switch per server;
    rail leaves ("leaf", rail, block) each uplinked once to every spine."""
    import networkx as nx
    g = nx.Graph()
    a = dict(bandwidth_bps=float(bandwidth_bps), latency_s=float(latency_s))
    nv = dict(bandwidth_bps=float(nvlink_bandwidth_bps), latency_s=float(latency_s))
    blocks = -(-servers // servers_per_leaf)
    for s in range(spines):
        g.add_node(("spine", s), kind="spine")
    for r in range(rails):
        for b in range(blocks):
            g.add_node(("leaf", r, b), kind="leaf", rail=r)
            for s in range(spines):
                g.add_edge(("leaf", r, b), ("spine", s), **a)
    for sv in range(servers):
        g.add_node(("nvswitch", sv), kind="scale-up")
        for r in range(rails):
            h = ("host", sv, r)
            g.add_node(h, kind="host", rail=r, server=sv)
            g.add_edge(h, ("leaf", r, sv // servers_per_leaf), **a)
            g.add_edge(h, ("nvswitch", sv), **nv)
    return g
