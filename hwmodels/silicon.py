"""Silicon: dies per wafer, die yield, known-good-die cost, the reticle limit.

Formulas as implemented in Chiplet Actuary (Feng and Ma, DAC 2022; code
parameters in docs/reference/hardware.md sec. 3 [C3]) and the classic
yield models (Poisson, Murphy, Seeds, negative binomial; docs/reference/hardware.md sec. 3
[C4]). Areas in mm2, defect densities per cm2, costs in USD. Every function
broadcasts over numpy arrays.
"""
from __future__ import annotations

import numpy as np

WAFER_DIAMETER_MM = 300.0
EDGE_EXCLUSION_MM = 5.0      # Chiplet Actuary edge loss e (docs/reference/hardware.md sec.3 [C3])
SCRIBE_MM = 0.2              # Chiplet Actuary scribe lane s (docs/reference/hardware.md sec.3 [C3])
RETICLE_W_MM = 26.0          # reticle field 26 x 33 mm (docs/reference/hardware.md sec.3 [C5])
RETICLE_H_MM = 33.0
RETICLE_AREA_MM2 = RETICLE_W_MM * RETICLE_H_MM
RETICLE_ASPECT = RETICLE_H_MM / RETICLE_W_MM


def dies_per_wafer(area_mm2, diameter_mm=WAFER_DIAMETER_MM, edge_mm=EDGE_EXCLUSION_MM,
                   scribe_mm=SCRIBE_MM):
    """Gross dies per wafer, N = floor(pi (d/2 - e)^2 / A' - pi (d - 2e) / sqrt(2 A')).

    A' = (sqrt(A) + s)^2 is the die area with its scribe lane; the second term
    is the partial dies lost along the usable edge (Chiplet Actuary [C3]).
    """
    a = (np.sqrt(area_mm2) + scribe_mm) ** 2
    n = np.pi * (diameter_mm / 2 - edge_mm) ** 2 / a - np.pi * (diameter_mm - 2 * edge_mm) / np.sqrt(2 * a)
    return np.maximum(np.floor(n), 0.0)


def _da(area_mm2, d0_per_cm2):
    return np.asarray(d0_per_cm2) * np.asarray(area_mm2) / 100.0  # defects per die


def poisson_yield(area_mm2, d0_per_cm2):
    """Y = exp(-D A)."""
    return np.exp(-_da(area_mm2, d0_per_cm2))


def murphy_yield(area_mm2, d0_per_cm2):
    """Y = ((1 - exp(-D A)) / (D A))^2, and 1 at D A = 0."""
    da = _da(area_mm2, d0_per_cm2)
    safe = np.where(da > 0, da, 1.0)
    return np.where(da > 0, (-np.expm1(-safe) / safe) ** 2, 1.0)


def seeds_yield(area_mm2, d0_per_cm2):
    """Y = 1 / (1 + D A) (negative binomial with alpha = 1)."""
    return 1.0 / (1.0 + _da(area_mm2, d0_per_cm2))


def negative_binomial_yield(area_mm2, d0_per_cm2, alpha):
    """Y = (1 + D A / alpha)^-alpha; alpha -> inf is Poisson, alpha = 1 is Seeds.

    alpha is the clustering parameter (Chiplet Actuary "critical level": 10 for
    logic, 6 for Si interposers, 3 for RDL; docs/reference/hardware.md sec. 3 [C3])."""
    return np.exp(-alpha * np.log1p(_da(area_mm2, d0_per_cm2) / alpha))


def raw_die_cost_usd(area_mm2, wafer_cost_usd):
    """Cost of one (untested) die: wafer cost / gross dies per wafer; inf if none fit."""
    n = dies_per_wafer(area_mm2)
    return np.where(n > 0, wafer_cost_usd / np.where(n > 0, n, 1.0), np.inf)


def kgd_cost_usd(area_mm2, wafer_cost_usd, d0_per_cm2, alpha):
    """Known-good-die cost, C_wafer / (N Y) (Chiplet Actuary [C3])."""
    return raw_die_cost_usd(area_mm2, wafer_cost_usd) / negative_binomial_yield(area_mm2, d0_per_cm2, alpha)


def over_reticle(area_mm2, aspect=RETICLE_ASPECT):
    """True where a die of this area and aspect ratio (long/short) does not fit the 26 x 33 mm field."""
    long_mm, short_mm = die_edges_mm(area_mm2, aspect)
    return (long_mm > RETICLE_H_MM * (1 + 1e-9)) | (short_mm > RETICLE_W_MM * (1 + 1e-9))


def die_edges_mm(area_mm2, aspect=RETICLE_ASPECT):
    """(long, short) edge of a rectangular die of the given area and aspect ratio."""
    long_mm = np.sqrt(np.asarray(area_mm2) * aspect)
    return long_mm, np.asarray(area_mm2) / np.where(long_mm > 0, long_mm, 1.0)
