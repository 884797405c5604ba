"""Die-to-die links: shoreline and area they take, and what cross-die traffic costs.

A multi-die accelerator interleaves memory over all its stacks, so a die's
access is remote with probability (n - 1) / n and crosses on average
``hops(n)`` die-to-die links (a 2D mesh of dies: mean Manhattan distance
~ 2/3 sqrt(n), at least 1). With uniform traffic and per-die die-to-die
bandwidth b per direction, the memory bandwidth the dies can draw is capped:

    B_eff = min(B_hbm, b n^2 / ((n - 1) hops))          [bytes/s]
    energy per byte of memory traffic = (n - 1)/n * hops * 8 * e_bit   [J/B]

2D / 2.5D links (UCIe standard / advanced) use die edge,
``b / bandwidth_bps_per_mm``; 3D hybrid bonding uses bonded area and no edge
(stacked compute dies add no footprint). Classes and sources:
``catalog/d2d.toml`` (docs/reference/hardware.md sec. 3, Die-to-die).
"""
from __future__ import annotations

import numpy as np

from hwmodels.parts import table

D2D_FIELDS = ("bandwidth_bps_per_mm", "bandwidth_bps_per_mm2", "phy_area_mm2_per_bps",
              "energy_per_bit_j", "latency_s", "stacked", "bond_yield")


def link_class(ids) -> dict[str, np.ndarray]:
    """Per-design die-to-die class constants."""
    return table("d2d", ids, D2D_FIELDS)


def hops(n_dies):
    """Mean die-to-die hops of a remote access among ``n_dies`` dies in a 2D mesh."""
    return np.maximum(1.0, 2.0 / 3.0 * np.sqrt(n_dies))


def cross_fraction(n_dies):
    """Share of memory traffic that leaves its die, (n - 1) / n."""
    return (n_dies - 1.0) / n_dies


def memory_bandwidth_cap_bytes_per_s(n_dies, d2d_bandwidth_bps):
    """Memory bandwidth the dies can draw through their die-to-die links (inf for one die)."""
    denom = (n_dies - 1.0) * hops(n_dies)
    cap = d2d_bandwidth_bps / 8.0 * n_dies ** 2 / np.where(denom > 0, denom, 1.0)
    return np.where(n_dies > 1, cap, np.inf)


def energy_per_memory_byte_j(n_dies, energy_per_bit_j):
    """Die-to-die energy per byte of memory traffic."""
    return cross_fraction(n_dies) * hops(n_dies) * 8.0 * energy_per_bit_j


def shoreline_mm(d2d_bandwidth_bps, bandwidth_bps_per_mm):
    """Die edge a 2D/2.5D link of ``d2d_bandwidth_bps`` per direction needs (0 for 3D classes)."""
    return np.where(bandwidth_bps_per_mm > 0,
                    d2d_bandwidth_bps / np.where(bandwidth_bps_per_mm > 0, bandwidth_bps_per_mm, 1.0), 0.0)


def phy_area_mm2(d2d_bandwidth_bps, phy_area_mm2_per_bps):
    """Die area of the die-to-die PHY and adapter."""
    return d2d_bandwidth_bps * phy_area_mm2_per_bps
