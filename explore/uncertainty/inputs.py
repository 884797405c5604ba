"""Uncertain inputs: one distribution per catalog figure, calibration constant or scenario field.

An input maps a standard uniform ``u`` in (0, 1) to a value by its inverse CDF
(``Input.ppf``), so Monte Carlo sampling (``u`` from a seeded generator) and
Sobol sampling (``u`` from SALib's Saltelli design) share one code path.
Distributions (``hwmodels/uncertainty.toml``): normal ``x0 (1 + rel z)``,
lognormal ``x0 exp(rel z)``, uniform on ``[low, high]`` (or ``x0 (1 +- rel)``),
triangular ``(low, x0, high)``, exact; ``additive`` adds ``abs z`` instead.
Defaults come from the source kind of the figure (datasheet, estimate, exact,
fitted); per-entry overrides carry a cited range.
"""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
from scipy.special import ndtri

from hwmodels.parts import load_catalog

UNCERTAINTY_PATH = Path(__file__).resolve().parents[2] / "hwmodels" / "uncertainty.toml"
DISTS = ("normal", "lognormal", "uniform", "triangular", "exact")
SPEC_KEYS = ("dist", "rel", "abs", "low", "high", "min", "max", "additive", "source")


class UncertaintyError(ValueError):
    """An [uncertainty] entry is malformed: names the key, the value and what is allowed."""


@dataclass(frozen=True)
class Input:
    """One uncertain input. ``name`` is ``kind.part.field`` (catalog), ``calibration.NAME``
    or ``scenario.table.field``; ``nominal`` is the deterministic value."""
    name: str
    nominal: float
    dist: str = "exact"
    rel: float = 0.0
    abs: float = 0.0
    low: float | None = None
    high: float | None = None
    min: float | None = None
    max: float | None = None
    additive: bool = False
    kind: str = ""          # source kind the default came from, or "override"
    source: str = ""

    @property
    def zero_width(self) -> bool:
        if self.dist == "exact":
            return True
        if self.dist in ("uniform", "triangular") and self.low is not None:
            return self.low == self.high
        return (self.abs if self.additive else self.rel) == 0.0

    def ppf(self, u) -> np.ndarray:
        """Value at the quantile(s) ``u`` in (0, 1)."""
        u = np.clip(np.asarray(u, dtype=float), 1e-12, 1.0 - 1e-12)
        x0 = self.nominal
        d = self.dist
        if d == "exact" or self.zero_width:
            return np.full(u.shape, x0)
        if d in ("uniform", "triangular"):
            lo, hi = self._bounds()
            if d == "uniform":
                x = lo + (hi - lo) * u
            else:   # triangular with mode at the nominal (scipy.stats.triang ppf, in closed form)
                c = (x0 - lo) / (hi - lo)
                x = np.where(u < c, lo + np.sqrt(u * (hi - lo) * (x0 - lo)),
                             hi - np.sqrt((1 - u) * (hi - lo) * (hi - x0)))
        else:
            z = ndtri(u)
            if self.additive:
                x = x0 + self.abs * z if d == "normal" else x0 + self.abs * np.expm1(z)
            elif d == "normal":
                x = x0 * np.maximum(1.0 + self.rel * z, 0.0)
            else:
                x = x0 * np.exp(self.rel * z)
        if self.min is not None or self.max is not None:
            x = np.clip(x, -np.inf if self.min is None else self.min, np.inf if self.max is None else self.max)
        return x

    def _bounds(self) -> tuple[float, float]:
        if self.low is not None:
            return float(self.low), float(self.high)
        w = (self.abs if self.additive else self.rel * abs(self.nominal))
        return self.nominal - w, self.nominal + w

    def describe(self) -> str:
        if self.zero_width:
            return "exact"
        lo, mid, hi = self.ppf(np.array([0.05, 0.5, 0.95]))
        return f"{self.dist} 5-95 % [{lo:.4g}, {hi:.4g}] (nominal {self.nominal:.4g})"


def _check_spec(where: str, spec) -> dict:
    if not isinstance(spec, dict):
        raise UncertaintyError(f"{where}: value {spec!r} is not allowed; allowed: a table with dist "
                               f"and rel, abs or low/high")
    for k in spec:
        if k not in SPEC_KEYS:
            raise UncertaintyError(f"{where}.{k}: unknown key; allowed: {', '.join(SPEC_KEYS)}")
    d = spec.get("dist")
    if d is not None and d not in DISTS:
        raise UncertaintyError(f"{where}.dist: value {d!r} is not allowed; allowed: {', '.join(DISTS)}")
    for k in ("rel", "abs"):
        if k in spec and not (isinstance(spec[k], (int, float)) and spec[k] >= 0):
            raise UncertaintyError(f"{where}.{k}: value {spec[k]!r} is not allowed; allowed: a number >= 0")
    if ("low" in spec) != ("high" in spec):
        raise UncertaintyError(f"{where}: give both low and high, or neither")
    if "low" in spec and not spec["low"] <= spec["high"]:
        raise UncertaintyError(f"{where}: low = {spec['low']} > high = {spec['high']}; allowed: low <= high")
    return spec


@functools.cache
def _data() -> dict:
    return tomllib.loads(UNCERTAINTY_PATH.read_text())


def source_kind(kind: str, pid: str, field: str) -> str:
    """'exact', 'estimate' or 'datasheet' (with '_db' for decibel fields) of a catalog figure."""
    rules = _data()["rules"]
    if field in rules["exact_fields"]:
        return "exact"
    entry = load_catalog()[kind][pid]
    value = entry.get(field)
    if isinstance(value, int) and not isinstance(value, bool):
        return "exact"          # integers in the catalog are counts and flags
    src = entry["source"] if isinstance(entry["source"], str) else entry["source"].get(field, "")
    k = "estimate" if src.strip().lower().startswith("estimate") else "datasheet"
    if any(field.endswith(s) for s in rules["db_suffixes"]):
        k += "_db"
    return k


def _bounds_for(field: str) -> dict:
    if any(s in field for s in _data()["rules"]["unit_interval_substrings"]):
        return {"min": 0.0, "max": 1.0}
    if any(field.endswith(s) for s in _data()["rules"]["db_suffixes"]):
        return {"min": 0.0} if "loss" in field else {}     # a loss is never a gain
    return {"min": 0.0}


def _make(name: str, nominal: float, spec: dict, kind: str, bounds: dict) -> Input:
    kw = {k: spec[k] for k in ("dist", "rel", "abs", "low", "high", "min", "max", "additive") if k in spec}
    kw = {**bounds, **kw}
    kw.setdefault("dist", "normal")
    return Input(name=name, nominal=float(nominal), kind=kind, source=spec.get("source", ""), **kw)


@dataclass(frozen=True)
class UncertaintyModel:
    """Kind defaults, per-entry overrides (data file, then scenario/space ``[uncertainty]``)
    and a ``spread`` factor scaling every width (0: all inputs exact)."""
    kinds: dict
    overrides: dict
    calibration: dict
    spread: float = 1.0

    @classmethod
    def load(cls, extra: dict | None = None, spread: float = 1.0) -> "UncertaintyModel":
        d = _data()
        over = dict(d.get("override", {}))
        kinds = dict(d["kinds"])
        calib = dict(d.get("calibration", {}))
        for key, spec in (extra or {}).items():
            where = f"uncertainty.{key}"
            if key.startswith("kinds."):
                k = key[len("kinds."):]
                if k not in kinds:
                    raise UncertaintyError(f"{where}: unknown source kind; allowed: {', '.join(kinds)}")
                kinds[k] = {**kinds[k], **_check_spec(where, spec)}
            elif key.startswith("calibration."):
                calib[key[len("calibration."):]] = _check_spec(where, spec)
            else:
                over[key] = _check_spec(where, spec)
        if not (isinstance(spread, (int, float)) and spread >= 0):
            raise UncertaintyError(f"spread: value {spread!r} is not allowed; allowed: a number >= 0")
        return cls(kinds=kinds, overrides=over, calibration=calib, spread=float(spread))

    def _scaled(self, spec: dict, nominal: float) -> dict:
        if self.spread == 1.0:
            return spec
        s = dict(spec)
        for k in ("rel", "abs"):
            if k in s:
                s[k] = s[k] * self.spread
        if "low" in s:      # shrink the interval about the nominal
            s["low"] = nominal - (nominal - s["low"]) * self.spread
            s["high"] = nominal + (s["high"] - nominal) * self.spread
        return s

    def catalog_input(self, kind: str, pid: str, field: str, nominal: float) -> Input:
        name = f"{kind}.{pid}.{field}"
        if name in self.overrides:
            spec, k = self.overrides[name], "override"
        else:
            k = source_kind(kind, pid, field)
            spec = self.kinds[k]
        return _make(name, nominal, self._scaled(spec, nominal), k, _bounds_for(field))

    def calibration_inputs(self, calibration) -> list[Input]:
        """One input per field of the Calibration dataclass (read by name at run time)."""
        out = []
        for f in fields(calibration):
            x0 = float(getattr(calibration, f.name))
            spec = self.calibration.get(f.name, self.kinds["fitted"])
            out.append(_make(f"calibration.{f.name}", x0, self._scaled(spec, x0), "fitted",
                             {"min": 0.0}))
        return out

    def scenario_inputs(self, values: dict) -> list[Input]:
        """Scenario fields named in overrides (``datacenter.pue`` etc.) with a scalar value."""
        out = []
        for key, spec in self.overrides.items():
            if key in values:
                v = np.asarray(values[key])
                if v.dtype.kind not in "if" or np.ptp(v) != 0:
                    raise UncertaintyError(f"uncertainty.{key}: the field must be one number (not an "
                                           f"array of designs) to carry a distribution")
                x0 = float(v.flat[0])
                out.append(_make(f"scenario.{key}", x0, self._scaled(spec, x0), "override",
                                 _bounds_for(key.rsplit(".", 1)[-1])))
        return out
