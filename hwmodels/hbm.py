"""HBM stacks: capacity, bandwidth, power, cost, and the shoreline limit.

    capacity [B] = stacks * capacity_per_stack
    bandwidth [B/s] = stacks * bandwidth_per_stack
    power at full bandwidth [W] = bandwidth * 8 * energy_per_bit_j + stacks * background_power_w
    cost [USD] = capacity * cost_usd_per_byte   (stacks bought known-good)
    max stacks = floor(HBM-capable die edge / shoreline_mm per stack)

Generations (hbm2e, hbm3, hbm3e, hbm4) and their sources are in
``catalog/hbm.toml`` (docs/reference/hardware.md sec. 2).
"""
from __future__ import annotations

import numpy as np

from hwmodels.parts import table

HBM_FIELDS = ("bandwidth_bytes_per_s", "capacity_bytes", "energy_per_bit_j", "cost_usd_per_byte",
              "shoreline_mm", "footprint_mm2", "background_power_w")


def generation(ids) -> dict[str, np.ndarray]:
    """Per-design HBM generation constants."""
    return table("hbm", ids, HBM_FIELDS)


def active_power_w(bandwidth_bytes_per_s, energy_per_bit_j):
    """Interface + array power while streaming at ``bandwidth_bytes_per_s``."""
    return bandwidth_bytes_per_s * 8.0 * energy_per_bit_j


def max_stacks(hbm_edge_mm, shoreline_mm):
    """Stacks that fit along ``hbm_edge_mm`` of die edge, ``shoreline_mm`` each."""
    return np.floor(hbm_edge_mm / shoreline_mm + 1e-9)
