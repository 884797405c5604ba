"""Fit the two per-node constants of ``catalog/process_nodes.toml`` on datasheet parts.

For each calibration node, with its reconstruction in ``accelerator_designs.toml``:

    matrix_flops_per_cycle_per_mm2_bf16 = peak_bf16(datasheet) / (dies * logic area * matrix_fraction * clock)
    energy_per_flop_bf16_j = (TDP(datasheet) - every other power term) / peak_bf16(datasheet)

Both are exact solves (the model is linear in each), one part per node:
A100 -> n7, H100 -> n4, B200 -> n4p. ``python -m hwmodels.fit_nodes`` prints
the values to copy into the catalog; ``tests/hwmodels`` checks they match.
"""
from __future__ import annotations

import numpy as np

from hwmodels import package
from hwmodels.parts import get_part

CALIBRATION = {"n7": "a100-sxm-80gb", "n4": "h100-sxm-80gb", "n4p": "b200"}


def fit() -> dict[str, dict[str, float]]:
    out = {}
    for node, pid in CALIBRATION.items():
        sheet = get_part("accelerators", pid)
        node_part = get_part("process_nodes", node)
        r = package.reconstruct(pid)
        k = node_part["matrix_flops_per_cycle_per_mm2_bf16"] * sheet["peak_flops_bf16"] / r["peak_flops_bf16"]
        compute_dyn = r["dynamic_power_w_compute_dies"]
        others = r["tdp_w"] - compute_dyn
        e = (sheet["tdp_w"] - others) / sheet["peak_flops_bf16"]
        out[node] = {"matrix_flops_per_cycle_per_mm2_bf16": float(k), "energy_per_flop_bf16_j": float(e)}
    return out


if __name__ == "__main__":
    for node, vals in fit().items():
        print(node, {k: float(np.format_float_positional(v, 5, fractional=False)) for k, v in vals.items()})
