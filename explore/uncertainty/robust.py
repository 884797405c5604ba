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

import warnings

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


# ----------------------------------------------------------------------------- search hooks

def robust_settings(where: str, raw: dict, quantiles: dict) -> dict:
    """A space's ``[uncertainty]`` table: ``samples`` (default 32), ``seed`` (default 0) and
    input overrides (same keys as hwmodels/uncertainty.toml), plus its quantile objectives."""
    from explore.search.variables import SpaceError
    if not isinstance(raw, dict):
        raise SpaceError(f"{where}: uncertainty: must be a table, got {raw!r}")
    samples, seed = raw.get("samples", 32), raw.get("seed", 0)
    for k, v, lo in (("samples", samples, 2), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise SpaceError(f"{where}: uncertainty.{k}: value {v!r} is not allowed; allowed: an integer >= {lo}")
    inputs = {k: v for k, v in raw.items() if k not in ("samples", "seed")}
    if inputs:
        from explore.uncertainty.propagate import _check_names
        from explore.uncertainty.inputs import UncertaintyError
        try:
            _check_names(inputs)
        except UncertaintyError as e:
            raise SpaceError(f"{where}: {e}") from None
    return {"samples": samples, "seed": seed, "inputs": inputs,
            "quantiles": {k: list(v) for k, v in quantiles.items()}}


def add_quantile_objectives(ds: xr.Dataset, scenario: dict, robust: dict) -> xr.Dataset:
    """Add ``<metric>_qNN`` (quantile over ``robust['samples']`` joint draws, the same draws for
    every design and every generation: fixed seed) for each quantile objective."""
    if not robust.get("quantiles"):
        return ds
    s = evaluate_samples(scenario, robust["samples"], robust["seed"], uncertainty=robust["inputs"])
    for name, (m, q) in robust["quantiles"].items():
        with warnings.catch_warnings():     # designs invalid in every sample: NaN, no warning
            warnings.simplefilter("ignore", RuntimeWarning)
            val = s[m].where(s["valid"]).quantile(q, dim="sample", skipna=True).values
        ds[name] = ("design", val, {"units": ds[m].attrs.get("units", ""),
                                    "description": f"{100 * q:g}th percentile of {m} over {robust['samples']} samples"})
    return ds


def add_nondominance(result: xr.Dataset, space) -> xr.Dataset:
    """``p_nondominated`` of each Pareto design of a search result, on the space's objectives
    (their nominal metrics, quantile objectives by their metric), over the space's samples."""
    r = space.robust
    cols = {v.name: result[v.name].values for v in space.variables}
    sc = space.scenario_batch(cols)
    objs = {r["quantiles"][m][0] if m in r.get("quantiles", {}) else m: s for m, s in space.objectives}
    s = evaluate_samples(sc, r["samples"], r["seed"], uncertainty=r["inputs"])
    signs = np.array([1.0 if v == "min" else -1.0 for v in objs.values()])
    F = np.stack([s[m].values for m in objs], axis=-1) * signs
    F = np.where(s["valid"].values[..., None], F, np.nan)
    out = result.copy()
    out["p_nondominated"] = ("design", nondominated_mask(F).mean(axis=0),
                             {"description": f"fraction of {r['samples']} joint samples of the uncertain inputs "
                                             f"in which no other Pareto design dominates this one"})
    return out
