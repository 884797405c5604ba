"""Package assembly cost and yield, in the spirit of Chiplet Actuary (Feng and Ma, DAC 2022).

With k chiplets bonded to an interposer (or directly to an organic substrate):

    y1 = interposer yield, negative binomial over its area (1 without interposer)
    y2 = bond_yield_per_chiplet ** k  (x any 3D stacking bond yield)
    y3 = substrate_bond_yield
    interposer area = area_factor * chiplet footprint        (1.1 Si, 1.2 RDL)
    substrate cost = substrate_area_factor * interposer area * $/mm2
    bumps = C4 $/mm2 * interposer area + micro-bump $/mm2 * chiplet area
    cost of good chiplets   = KGD cost / (y2 y3)                 (dies lost to assembly)
    cost of good packaging  = (interposer + substrate + bumps) / (y1 y2 y3)

Parameters and sources: ``catalog/packaging.toml`` (docs/reference/hardware.md sec. 3 [C3]).
Optional NRE: die NRE split 0.5 module / 0.3 area-proportional / 0.2 fixed
for a 300 mm2 reference chip [C3], amortised over ``volume`` units.
"""
from __future__ import annotations

import numpy as np

from hwmodels import silicon
from hwmodels.parts import table

PACKAGE_FIELDS = ("has_interposer", "interposer_area_factor", "max_interposer_area_mm2",
                  "interposer_wafer_cost_usd", "interposer_defect_density_per_cm2",
                  "interposer_clustering_alpha", "bond_yield_per_chiplet", "substrate_bond_yield",
                  "substrate_area_factor", "substrate_cost_usd_per_mm2", "c4_bump_cost_usd_per_mm2",
                  "microbump_cost_usd_per_mm2", "nre_usd")
NRE_REFERENCE_AREA_MM2 = 300.0


def technology(ids) -> dict[str, np.ndarray]:
    """Per-design package technology constants."""
    return table("packaging", ids, PACKAGE_FIELDS)


def assemble(n_chiplets, footprint_mm2, chiplet_area_mm2, pk: dict, extra_bond_yield=1.0):
    """Interposer area, yields and cost of the packaging of one good package.

    Returns a dict: ``interposer_area_mm2``, ``interposer_yield`` (y1),
    ``assembly_yield`` (y1 y2 y3), ``chiplet_loss_factor`` (1 / (y2 y3), the
    multiplier on KGD cost for dies lost in assembly) and ``packaging_cost_usd``.
    """
    has = pk["has_interposer"] > 0
    area = footprint_mm2 * pk["interposer_area_factor"]
    y1 = np.where(has, silicon.negative_binomial_yield(area, pk["interposer_defect_density_per_cm2"],
                                                       pk["interposer_clustering_alpha"]), 1.0)
    raw_int = np.where(has, silicon.raw_die_cost_usd(area, np.where(has, pk["interposer_wafer_cost_usd"], 0.0)), 0.0)
    y2 = pk["bond_yield_per_chiplet"] ** n_chiplets * extra_bond_yield
    y3 = pk["substrate_bond_yield"]
    substrate = pk["substrate_area_factor"] * area * pk["substrate_cost_usd_per_mm2"]
    bumps = pk["c4_bump_cost_usd_per_mm2"] * area + pk["microbump_cost_usd_per_mm2"] * chiplet_area_mm2
    return {
        "interposer_area_mm2": area,
        "interposer_yield": y1,
        "assembly_yield": y1 * y2 * y3,
        "chiplet_loss_factor": 1.0 / (y2 * y3),
        "packaging_cost_usd": (raw_int + substrate + bumps) / (y1 * y2 * y3),
    }


def die_nre_usd(area_mm2, node_nre_usd):
    """NRE of one die design: node NRE x (0.5 module + 0.2 fixed + 0.3 x area / 300 mm2) [C3]."""
    return node_nre_usd * (0.7 + 0.3 * np.asarray(area_mm2) / NRE_REFERENCE_AREA_MM2)


def nre_per_unit_usd(total_nre_usd, volume):
    """NRE amortised over ``volume`` units; 0 where volume is 0 (not amortised)."""
    return np.where(volume > 0, total_nre_usd / np.where(volume > 0, volume, 1.0), 0.0)
