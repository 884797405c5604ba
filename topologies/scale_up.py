"""Switched scale-up domains (NVLink / NVSwitch, GB200 NVL72-like).

``gpus`` accelerators each with ``links_per_gpu`` links, one to each of
``switch_chips`` switch chips (NVL72: 72 GPUs x 18 NVLink5 links, 18 NVLink
switch chips in 9 trays of 2; docs/reference/hardware.md sec.4 [N4]):

    per-GPU bandwidth = links_per_gpu * B_link      (NVLink5: 18 x 50 GB/s per direction = 7.2 Tb/s)
    bisection         = gpus / 2 * links_per_gpu * B_link
    diameter          = 2 hops (GPU - switch - GPU);  trays = switch_chips / chips_per_tray
    cables            = gpus * links_per_gpu (copper spine)
"""
from __future__ import annotations

import numpy as np


def counts(gpus, links_per_gpu, chips_per_tray=2):
    g = np.asarray(gpus, dtype=float)
    l_ = np.asarray(links_per_gpu, dtype=float)
    return {"switch_chips": l_, "trays": np.ceil(l_ / chips_per_tray), "cables": g * l_,
            "ports_per_chip": g}


def per_gpu_bandwidth_bps(links_per_gpu, link_bandwidth_bps):
    return np.asarray(links_per_gpu, dtype=float) * link_bandwidth_bps


def bisection_bandwidth_bps(gpus, links_per_gpu, link_bandwidth_bps):
    return np.asarray(gpus, dtype=float) / 2 * per_gpu_bandwidth_bps(links_per_gpu, link_bandwidth_bps)


def nvl_domain_graph(gpus: int = 72, links_per_gpu: int = 18, link_bandwidth_bps: float = 400e9,
                     latency_s: float = 3e-7):
    import networkx as nx
    g = nx.Graph()
    a = dict(bandwidth_bps=float(link_bandwidth_bps), latency_s=float(latency_s))
    for c in range(links_per_gpu):
        g.add_node(("switch", c), kind="switch")
    for i in range(gpus):
        g.add_node(("host", i), kind="host")
        for c in range(links_per_gpu):
            g.add_edge(("host", i), ("switch", c), **a)
    return g


def switches_per_domain(gpus, per_gpu_bandwidth_bps, switch_radix, switch_port_bandwidth_bps):
    """Switches (trays) a domain needs for every GPU's bandwidth: ceil(G B / (k B_port)), 0 for one GPU."""
    g = np.asarray(gpus, dtype=float)
    need = g * np.asarray(per_gpu_bandwidth_bps, dtype=float)
    cap = np.asarray(switch_radix, dtype=float) * np.asarray(switch_port_bandwidth_bps, dtype=float)
    return np.where(g > 1, np.ceil(need / cap - 1e-9), 0.0)
