"""Design-space variables and constraints: one scenario field each, checked at load.

A variable is an integer range, a real range (optionally log-scaled) or a list of
choices over any scenario field (``explore.scenario.field_paths()``); its values
are checked against that field's schema. A constraint bounds a metric.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

import numpy as np

from explore.scenario import ACCEL_EXTRA_FIELDS, SCHEMA, Field, ScenarioError, _coerce

VAR_KEYS = ("field", "kind", "low", "high", "log", "values", "choices", "points")


class SpaceError(ScenarioError):
    """A design-space file is malformed (one line: field, value, what is allowed)."""


def _suggest(key: str, allowed) -> str:
    near = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.5)
    return f" (did you mean {near[0]!r}?)" if near else ""


def schema_field(path: str) -> Field:
    """The schema ``Field`` of a dotted scenario path (inline accelerator fields: numbers >= 0)."""
    if path.startswith("system.accelerator."):
        key = path[len("system.accelerator."):]
        return ACCEL_EXTRA_FIELDS.get(key, Field("float", lo=0.0))
    table, _, key = path.rpartition(".")
    return SCHEMA[table][key]


# ----------------------------------------------------------------------------- variables

@dataclass(frozen=True)
class Variable:
    """One decision variable: a scenario field over an int range, a real range or choices."""
    name: str
    field: str
    kind: str                      # "int" | "real" | "choice"
    low: float | None = None
    high: float | None = None
    log: bool = False
    values: tuple = ()             # choices (labels) or explicit allowed ints
    points: int = 5                # grid points of a real variable (sweeps)

    def grid_values(self) -> np.ndarray:
        """Every value of an int or choice variable; ``points`` values of a real one."""
        if self.values:
            return np.asarray(self.values)
        if self.kind == "int":
            return np.arange(int(self.low), int(self.high) + 1)
        if self.log:
            return np.geomspace(self.low, self.high, self.points)
        return np.linspace(self.low, self.high, self.points)

    @property
    def size(self) -> int:
        """Number of grid values."""
        if self.values:
            return len(self.values)
        if self.kind == "int":
            return int(self.high) - int(self.low) + 1
        return self.points


def _variable(space: str, name: str, spec, known: list[str]) -> Variable:
    where = f"{space}: variables.{name}"
    if not isinstance(spec, dict):
        raise SpaceError(f"{where}: must be a table with 'field' and low/high, values or choices; "
                         f"got {spec!r}")
    for k in spec:
        if k not in VAR_KEYS:
            raise SpaceError(f"{where}.{k}: unknown key{_suggest(k, VAR_KEYS)}; allowed: "
                             f"{', '.join(VAR_KEYS)}")
    path = spec.get("field", name)
    if not isinstance(path, str) or path not in known:
        raise SpaceError(f"{where}.field: unknown scenario field {path!r}{_suggest(str(path), known)}; "
                         f"allowed: a dotted field such as parallelism.tp (see docs/architecture.md)")
    f = schema_field(path)
    kind = spec.get("kind")
    if kind is not None and kind not in ("int", "real", "choice"):
        raise SpaceError(f"{where}.kind: value {kind!r} is not allowed; allowed: 'int', 'real', 'choice'")
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise SpaceError(f"{where}.log: value {log!r} is not allowed; allowed: true or false")
    points = spec.get("points", 5)
    if isinstance(points, bool) or not isinstance(points, int) or points < 1:
        raise SpaceError(f"{where}.points: value {points!r} is not allowed; allowed: an integer >= 1")
    listed = spec.get("choices", spec.get("values"))
    if "choices" in spec and "values" in spec:
        raise SpaceError(f"{where}: give either 'values' or 'choices', not both")
    if listed is not None:
        if "low" in spec or "high" in spec:
            raise SpaceError(f"{where}: give either low/high or a list of values, not both")
        if not isinstance(listed, list) or len(listed) == 0:
            key = "choices" if "choices" in spec else "values"
            raise SpaceError(f"{where}.{key}: value {listed!r} is an empty or non-list choice list; "
                             f"allowed: a non-empty list, e.g. {f.allowed()}")
        if len(set(map(repr, listed))) != len(listed):
            raise SpaceError(f"{where}: values {listed!r} repeat an entry; allowed: distinct values")
        try:
            _coerce(path, np.asarray(listed, dtype=object), f)
        except ScenarioError as e:
            raise SpaceError(f"{where}: {e}") from None
        if f.kind == "int" and kind != "choice":
            vals = tuple(sorted(int(x) for x in listed))
            return Variable(name, path, "int", float(vals[0]), float(vals[-1]), log, vals, points)
        if kind in ("int", "real"):
            raise SpaceError(f"{where}.kind: value {kind!r} does not fit field {path} "
                             f"({f.kind}); allowed: 'choice'")
        vals = tuple(float(x) if f.kind == "float" else x for x in listed)
        return Variable(name, path, "choice", None, None, False, vals, points)
    if "low" not in spec or "high" not in spec:
        raise SpaceError(f"{where}: needs low and high, a 'values' list or a 'choices' list")
    if f.kind not in ("int", "float"):
        raise SpaceError(f"{where}: field {path} is a {f.kind} field; allowed: a 'choices' list "
                         f"of {f.allowed()}")
    lo, hi = spec["low"], spec["high"]
    for k, v in (("low", lo), ("high", hi)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise SpaceError(f"{where}.{k}: value {v!r} is not a finite number; allowed: {f.allowed()}")
    if lo > hi:
        raise SpaceError(f"{where}: low = {lo} > high = {hi}; allowed: low <= high")
    if kind is None:
        kind = "int" if f.kind == "int" else "real"
    if kind == "int" and (lo != int(lo) or hi != int(hi)):
        raise SpaceError(f"{where}: low/high {lo}, {hi} must be integers for an int variable")
    if kind == "real" and f.kind == "int":
        raise SpaceError(f"{where}.kind: value 'real' does not fit integer field {path}; allowed: 'int'")
    if log and lo <= 0:
        raise SpaceError(f"{where}.low: value {lo} must be > 0 for a log-scaled variable")
    try:
        _coerce(path, np.asarray([lo, hi], dtype=float), f)
    except ScenarioError as e:
        raise SpaceError(f"{where}: {e}") from None
    return Variable(name, path, kind, float(lo), float(hi), log, (), points)


# ----------------------------------------------------------------------------- constraints

@dataclass(frozen=True)
class Constraint:
    """``low <= metric <= high`` (either bound optional); violation is relative to the bound."""
    metric: str
    low: float | None = None
    high: float | None = None

    def violation(self, x: np.ndarray) -> np.ndarray:
        """Columns: (low - x)/|low| and (x - high)/|high|, the larger one; > 0 means violated."""
        g = np.full(x.shape, -np.inf)
        if self.low is not None:
            g = np.maximum(g, (self.low - x) / max(abs(self.low), 1e-300))
        if self.high is not None:
            g = np.maximum(g, (x - self.high) / max(abs(self.high), 1e-300))
        return g
