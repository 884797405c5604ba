"""Compute die: peak FLOP/s, dynamic energy per FLOP, SRAM and static power.

    peak_bf16 [FLOP/s] = die_area_mm2 * matrix_fraction
                         * matrix_flops_per_cycle_per_mm2_bf16(node) * clock_hz
    peak_fp16 = peak_bf16;  peak_fp8 = fp8_ratio(node) * peak_bf16
    dynamic power at peak [W] = peak_bf16 * energy_per_flop_bf16_j(node)
    static power [W] = die_area_mm2 * static_power_w_per_mm2(node)
    SRAM [B] = die_area_mm2 * sram_fraction * sram_bytes_per_mm2(node)

The per-node constants live in ``catalog/process_nodes.toml``; the two FLOP
and energy constants are fitted by ``hwmodels.fit_nodes`` on one datasheet
part per node (A100 for n7, H100 for n4, B200 for n4p) and fold the
architecture of that part in with the process. FP8 runs at the same energy
per operation-cycle as BF16, i.e. half the energy per FLOP (estimate).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hwmodels.parts import table

NODE_FIELDS = ("wafer_cost_usd", "defect_density_per_cm2", "clustering_alpha",
               "transistor_density_per_mm2", "clock_hz", "matrix_flops_per_cycle_per_mm2_bf16",
               "fp8_ratio", "energy_per_flop_bf16_j", "static_power_w_per_mm2",
               "sram_bytes_per_mm2", "nre_usd")
SRAM_FRACTION = 0.3
"""Share of a compute die in SRAM (estimate: A100's ~88 MB of L2, L1 and registers)."""


@dataclass(frozen=True)
class NodeArrays:
    """Per-design process-node constants (each an array)."""
    wafer_cost_usd: np.ndarray
    defect_density_per_cm2: np.ndarray
    clustering_alpha: np.ndarray
    transistor_density_per_mm2: np.ndarray
    clock_hz: np.ndarray
    matrix_flops_per_cycle_per_mm2_bf16: np.ndarray
    fp8_ratio: np.ndarray
    energy_per_flop_bf16_j: np.ndarray
    static_power_w_per_mm2: np.ndarray
    sram_bytes_per_mm2: np.ndarray
    nre_usd: np.ndarray

    @classmethod
    def of(cls, node_ids) -> "NodeArrays":
        return cls(**table("process_nodes", node_ids, NODE_FIELDS))


def peak_flops_bf16(area_mm2, matrix_fraction, clock_hz, node: NodeArrays):
    """Dense BF16 FLOP/s of one die."""
    return area_mm2 * matrix_fraction * node.matrix_flops_per_cycle_per_mm2_bf16 * clock_hz


def dynamic_power_w(flops_bf16, node: NodeArrays):
    """Power of the matrix units running at their dense BF16 peak, FLOP/s x J/FLOP."""
    return flops_bf16 * node.energy_per_flop_bf16_j


def static_power_w(area_mm2, node: NodeArrays):
    """Leakage and clock-tree power of a powered, idle die."""
    return area_mm2 * node.static_power_w_per_mm2


def sram_bytes(area_mm2, node: NodeArrays, sram_fraction=SRAM_FRACTION):
    """On-die SRAM capacity."""
    return area_mm2 * sram_fraction * node.sram_bytes_per_mm2
