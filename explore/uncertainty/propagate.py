"""Propagation: N joint samples of the uncertain inputs, evaluated as N x n more array elements.

``evaluate_samples(scenario, samples=N, seed=S)`` resolves the scenario once
(``n`` designs), finds the uncertain inputs it touches (the catalog figures
looked up while evaluating it, every calibration constant, and scenario fields
given a distribution in ``[uncertainty]``), draws ``u ~ U(0, 1)^(N x k)`` and
evaluates all ``N x n`` elements in one ``explore.evaluate`` call: the
scenario's arrays are tiled, the catalog lookups return each element's sampled
figure (``hwmodels.parts.PERTURBATION``) and the calibration constants become
arrays. The result has dimensions ``(sample, design)``. One sample shares its
draws across all designs (so designs are compared on the same world).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import numpy as np
import xarray as xr

from explore.model import calibration as cal
from explore.scenario import Resolved, ScenarioError, field_paths, resolve
from explore.uncertainty.inputs import Input, UncertaintyError, UncertaintyModel
from hwmodels.parts import PERTURBATION, load_catalog


def _model_of(scenario: dict, uncertainty=None, spread: float = 1.0) -> UncertaintyModel:
    if isinstance(uncertainty, UncertaintyModel):
        return uncertainty
    extra = dict(scenario.get("uncertainty", {}) if isinstance(scenario, dict) else {})
    extra.update(uncertainty or {})
    _check_names(extra)
    return UncertaintyModel.load(extra, spread)


def _check_names(extra: dict) -> None:
    cat = load_catalog()
    paths = set(field_paths())
    for key in extra:
        if key.startswith(("kinds.", "calibration.")):
            if key.startswith("calibration.") and key.split(".", 1)[1] not in cal.Calibration.__dataclass_fields__:
                raise UncertaintyError(f"uncertainty.{key}: unknown calibration constant; allowed: "
                                       + ", ".join(cal.Calibration.__dataclass_fields__))
            continue
        if key in paths:
            continue
        parts = key.split(".")
        if len(parts) == 3 and parts[0] in cat and parts[1] in cat[parts[0]] and parts[2] in cat[parts[0]][parts[1]]:
            continue
        raise UncertaintyError(f"uncertainty.{key}: unknown input; allowed: KIND.PART.FIELD of the catalog "
                               f"(e.g. switches.quantum-2-qm9700.cost_usd), calibration.NAME, kinds.KIND or a "
                               f"scenario field (e.g. datacenter.pue)")


def _strip(scenario: dict) -> dict:
    return {k: v for k, v in scenario.items() if k != "uncertainty"}


# ----------------------------------------------------------------------------- catalog hook

class _Trace:
    """Records the (kind, part, field) figures looked up per design element."""

    def __init__(self, n: int):
        self.n = n
        self.seen: dict[tuple, float] = {}

    def __call__(self, kind, uniq, code, field, vals):
        if np.shape(vals) == (self.n,):
            present = np.unique(np.asarray(code).ravel())
            for c in present:
                if c < len(uniq):
                    key = (kind, str(uniq[c]), field)
                    if key not in self.seen:
                        self.seen[key] = float(np.asarray(vals)[np.argmax(np.asarray(code) == c)])
        return vals

    def rows(self, kind, ids, field, vals, used):
        for r in (range(len(ids)) if used is None else used):
            self.seen.setdefault((kind, str(ids[r]), field), float(vals[r]))
        return vals


class _Sampled:
    """Returns each element's sampled figure: element i takes draw ``sample[i]``."""

    def __init__(self, sample: np.ndarray, values: dict[tuple, np.ndarray]):
        self.sample = sample
        self.total = len(sample)
        self.values = values   # (kind, part, field) -> values per draw

    def __call__(self, kind, uniq, code, field, vals):
        if np.shape(vals) != (self.total,):
            return vals
        out = None
        for c, u in enumerate(uniq):
            s = self.values.get((kind, str(u), field))
            if s is None:
                continue
            if out is None:
                out = np.array(vals, dtype=float)
            m = np.asarray(code) == c
            out[m] = s[self.sample[m]]
        return vals if out is None else out

    def rows(self, kind, ids, field, vals, used):
        out = None
        for r, pid in enumerate(ids):
            s = self.values.get((kind, str(pid), field))
            if s is None:
                continue
            if out is None:
                out = np.repeat(np.asarray(vals, dtype=float)[:, None], self.total, axis=1)
            out[r] = s[self.sample]
        return vals if out is None else out


def traced_inputs(r: Resolved, model: UncertaintyModel, calibration=cal.DEFAULT) -> list[Input]:
    """The uncertain inputs of a resolved scenario (catalog figures found by one traced
    evaluation, calibration constants, scenario overrides), zero-width ones included."""
    from explore.evaluate import evaluate_resolved
    if r.n == 1:   # two elements, so that per-part look-ups (shape 1) are not mistaken for per-design ones
        r = Resolved(n=2, values={k: np.broadcast_to(v, (2,)) for k, v in r.values.items()}, name=r.name)
    tr = _Trace(r.n)
    tok = PERTURBATION.set(tr)
    try:
        evaluate_resolved(r, calibration)
    finally:
        PERTURBATION.reset(tok)
    out = [model.catalog_input(k, p, f, x0) for (k, p, f), x0 in sorted(tr.seen.items())]
    out += model.calibration_inputs(calibration)
    out += model.scenario_inputs(r.values)
    return out


# ----------------------------------------------------------------------------- evaluation

@dataclass(frozen=True)
class Problem:
    """A resolved scenario and its uncertain inputs, ready to evaluate at quantiles ``U``."""
    resolved: Resolved
    inputs: tuple
    calibration: cal.Calibration = cal.DEFAULT

    @classmethod
    def of(cls, scenario: dict, uncertainty=None, spread: float = 1.0, calibration=cal.DEFAULT,
           only_uncertain: bool = True, only=None) -> "Problem":
        model = _model_of(scenario, uncertainty, spread)
        r = resolve(_strip(scenario))
        inputs = traced_inputs(r, model, calibration)
        if only is not None:
            names = {i.name for i in inputs}
            for o in only:
                if o not in names:
                    raise UncertaintyError(f"only: input {o!r} is not used by this scenario; allowed: "
                                           + ", ".join(sorted(names)))
            inputs = [i for i in inputs if i.name in set(only)]
        if only_uncertain:
            inputs = [i for i in inputs if not i.zero_width]
        return cls(r, tuple(inputs), calibration)

    @property
    def names(self) -> list[str]:
        return [i.name for i in self.inputs]

    def values(self, U: np.ndarray) -> dict[str, np.ndarray]:
        """Input name -> sampled values (one per row of U)."""
        U = np.atleast_2d(U)
        if U.shape[1] != len(self.inputs):
            raise ValueError(f"U has {U.shape[1]} columns, expected {len(self.inputs)} (one per input)")
        return {i.name: i.ppf(U[:, j]) for j, i in enumerate(self.inputs)}

    def evaluate(self, U: np.ndarray) -> xr.Dataset:
        """Metrics with dimensions (sample, design) at the quantile matrix ``U`` (samples x inputs)."""
        return evaluate_values(self.resolved, self.values(U), len(np.atleast_2d(U)), self.calibration)


def evaluate_values(r: Resolved, values: dict[str, np.ndarray], n_samples: int,
                    calibration=cal.DEFAULT) -> xr.Dataset:
    """Evaluate ``n_samples`` joint samples (``values``: input name -> (n_samples,) array) of
    the resolved scenario ``r`` in one vectorised call; dimensions (sample, design)."""
    n, N = r.n, n_samples
    sample = np.repeat(np.arange(N), n)
    tiled = {k: np.tile(np.broadcast_to(v, (n,)), N) for k, v in r.values.items()}
    flat = evaluate_elementwise(Resolved(n=n * N, values=tiled, name=r.name), values, sample, calibration)
    data = {}
    for k, var in flat.data_vars.items():
        data[k] = xr.Variable(("sample", "design"), var.values.reshape(N, n), var.attrs)
    for name, s in values.items():    # the draws, built with the rest (one Dataset construction)
        data[f"input:{name}"] = xr.Variable(("sample",), np.asarray(s, float))
    ds = xr.Dataset(data, coords={"sample": np.arange(N), "design": np.arange(n)})
    ds.attrs.update(flat.attrs)
    return ds


def evaluate_elementwise(r: Resolved, values: dict[str, np.ndarray], sample=None,
                         calibration=cal.DEFAULT) -> xr.Dataset:
    """Evaluate ``r`` (n elements) where element i takes the draw ``sample[i]`` (default i) of
    every input in ``values``; one ``explore.evaluate`` call, dimension ``design``."""
    from explore.evaluate import evaluate_resolved
    sample = np.arange(r.n) if sample is None else sample
    tiled = dict(r.values)
    cat, calib = {}, {}
    for name, s in values.items():
        head, rest = name.split(".", 1)
        if head == "calibration":
            calib[rest] = s[sample]
        elif head == "scenario":
            tiled[rest] = s[sample].astype(tiled[rest].dtype)
        else:
            cat[_split_catalog(name)] = s
    c = replace(calibration, **calib) if calib else calibration
    tok = PERTURBATION.set(_Sampled(sample, cat))
    try:
        return evaluate_resolved(Resolved(n=r.n, values=tiled, name=r.name), c)
    finally:
        PERTURBATION.reset(tok)


def _split_catalog(name: str) -> tuple[str, str, str]:
    """(kind, part, field) of ``kind.part.field``; part ids may contain dots, field names do not."""
    kind, rest = name.split(".", 1)
    pid, field = rest.rsplit(".", 1)
    return kind, pid, field


def evaluate_samples(scenario: dict, samples: int = 64, seed: int = 0, uncertainty=None,
                     spread: float = 1.0, calibration: cal.Calibration = cal.DEFAULT,
                     only=None) -> xr.Dataset:
    """Metrics of ``samples`` joint draws of every uncertain input, dims (sample, design).

    ``uncertainty``: extra ``[uncertainty]`` entries (same keys as the data file) or an
    ``UncertaintyModel``; ``spread`` scales every width (0 reproduces ``explore.evaluate``);
    ``only``: names of the inputs to vary (the others stay at their nominal value).
    Input draws are kept as ``input:NAME`` variables; ``bands(ds)`` summarises.
    """
    if not (isinstance(samples, (int, np.integer)) and samples >= 1):
        raise ScenarioError(f"samples: value {samples!r} is not allowed; allowed: an integer >= 1")
    p = Problem.of(copy.copy(scenario), uncertainty, spread, calibration, only=only)
    rng = np.random.default_rng(seed)
    U = rng.random((int(samples), len(p.inputs)))
    ds = p.evaluate(U)
    ds.attrs.update(samples=int(samples), seed=int(seed), uncertain_inputs=len(p.inputs))
    return ds


def bands(ds: xr.Dataset, metrics=None, q=(0.05, 0.5, 0.95)) -> xr.Dataset:
    """Per-design quantiles over ``sample`` (default 5th, 50th, 95th percentile) of the
    float metrics (all, or ``metrics``); dimension ``quantile``. NaN samples (invalid
    designs) are skipped. This is the function a figure calls for its error bars."""
    import warnings
    names = metrics or [k for k, v in ds.data_vars.items()
                        if v.dtype.kind == "f" and "sample" in v.dims and "design" in v.dims]
    with warnings.catch_warnings():   # a design invalid in every sample gives NaN quietly
        warnings.simplefilter("ignore", RuntimeWarning)
        return ds[list(names)].quantile(list(q), dim="sample", skipna=True)


def error_bars(ds: xr.Dataset, metric: str, lo: float = 0.05, hi: float = 0.95):
    """(median, minus, plus) arrays per design for an asymmetric error bar of ``metric``
    (``ds`` from ``evaluate_samples``): matplotlib ``errorbar(x, med, yerr=[minus, plus])``
    or plotly ``error_y=dict(array=plus, arrayminus=minus)``."""
    b = bands(ds, [metric], (lo, 0.5, hi))[metric]
    med = b.sel(quantile=0.5).values
    return med, med - b.sel(quantile=lo).values, b.sel(quantile=hi).values - med
