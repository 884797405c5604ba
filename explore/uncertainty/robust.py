"""Robust comparison of designs under uncertainty: quantile objectives and the probability
that each design is non-dominated.

All designs of a set are evaluated on the same N joint samples (one draw of the
world per sample, ``evaluate_samples``). For each sample the designs' objective
vectors are compared (Pareto dominance, minimisation after the sign of each
objective); ``P(non-dominated)`` of a design is the fraction of samples in which
no other design of the set dominates it. A quantile objective (e.g. the 90th
percentile of cost per token) is the per-design quantile over samples.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from explore.uncertainty.propagate import evaluate_samples


def nondominated_mask(F: np.ndarray) -> np.ndarray:
    """(samples, designs, objectives) minimised -> (samples, designs) True where no other
    design dominates (<= in every objective, < in one). NaN rows are dominated."""
    F = np.where(np.isfinite(F), F, np.inf)
    le = (F[:, :, None, :] <= F[:, None, :, :]).all(-1)        # [s, a, b]: a <= b everywhere
    lt = (F[:, :, None, :] < F[:, None, :, :]).any(-1)
    dom = le & lt                                              # a dominates b
    finite = np.isfinite(F).all(-1)
    return ~dom.any(axis=1) & finite


def quantile_objectives(ds: xr.Dataset, objectives, q: float = 0.9) -> xr.Dataset:
    """Per-design quantile ``q`` over ``sample`` of each objective (``ds`` from evaluate_samples)."""
    return ds[list(objectives)].quantile(q, dim="sample", skipna=True)


def robust_front(scenario: dict, objectives: dict[str, str], samples: int = 64, seed: int = 0,
                 q: float = 0.9) -> xr.Dataset:
    """For a batched scenario (one design per array element, e.g. a search result's Pareto set)
    and ``{metric: "min"|"max"}``: per design the quantile ``q`` of each objective
    (``<metric>_q<100q>``; for "max" objectives the 1-q quantile) and ``p_nondominated``."""
    ds = evaluate_samples(scenario, samples, seed)
    signs = np.array([1.0 if s == "min" else -1.0 for s in objectives.values()])
    F = np.stack([ds[m].values for m in objectives], axis=-1) * signs
    F = np.where(ds["valid"].values[..., None], F, np.nan)
    p = nondominated_mask(F).mean(axis=0)
    out = xr.Dataset({"p_nondominated": ("design", p)}, coords={"design": ds["design"].values})
    for (m, s) in objectives.items():
        qq = q if s == "min" else 1.0 - q
        out[f"{m}_q{int(round(100 * qq))}"] = ("design", ds[m].quantile(qq, dim="sample", skipna=True).values)
        out[f"{m}_median"] = ("design", ds[m].median(dim="sample", skipna=True).values)
    out.attrs.update(samples=samples, seed=seed, quantile=q)
    return out


def robust_pareto(result: xr.Dataset, space, samples: int = 64, seed: int = 0, q: float = 0.9) -> xr.Dataset:
    """``robust_front`` of the Pareto set of a search result (``explore.search`` /
    ``read_result``) in its design space: the designs are rebuilt from their variable coordinates."""
    cols = {v.name: result[v.name].values for v in space.variables}
    sc = space.scenario_batch(cols)
    return robust_front(sc, dict(space.objectives), samples, seed, q)
