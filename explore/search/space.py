"""Design-space files: a base scenario plus variables, derived fields, couplings,
constraints and objectives (TOML), shared by ``lightpath search`` and ``sweep``.

```toml
name = "plan for gpt3-175b on 1024 A100"
base = "../scenarios/gpt3-175b-1024-a100.toml"    # or an inline [base] table

[variables]
tp = { field = "parallelism.tp", values = [1, 2, 4, 8] }
pp = { field = "parallelism.pp", low = 1, high = 32 }
acc = { field = "system.accelerator", choices = ["a100-sxm-80gb", "h100-sxm-80gb"] }
nics = { field = "system.scale_out.nics_per_device", low = 0.5, high = 4, log = true, points = 4 }

[derived]                      # safe arithmetic over fields and variable names
"parallelism.dp" = "system.devices / (parallelism.tp * parallelism.pp)"

[couplings]                    # devices = N, or a capex budget that sets the device count
capex_budget_usd = 3e8
device_multiple = "parallelism.tp * parallelism.pp"
platforms = "shipped"          # accelerator / scale-up pairings vendors ship only ("what-if": any)

[constraints]                  # any metric, with min and/or max; memory fit is always one
power_w = { max = 2.5e7 }

[objectives]                   # metric = "min" | "max" (default: the three below, all min)
time_to_train_s = "min"
energy_per_token_j = "min"
cost_per_token_usd = "min"

[search]                       # read by explore.search.problem (algorithm, pop, gens, seed, plan, ...)
```
Every problem raises ``SpaceError`` (a ``ScenarioError``) in one line naming
the field, the value and what is allowed.
"""
from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hwmodels.select import where
import xarray as xr

from explore.search.expression import Expression
from explore.scenario import ScenarioError, field_paths, get_field, resolve, set_field
from explore.search.variables import (Constraint, SpaceError, Variable, _suggest, _variable,
                                     schema_field)
from explore.search.sections import (DEFAULT_OBJECTIVES, _base, _constraints, _couplings,  # noqa: F401
                                     _derived_order, _expr, _objectives, _read, _string_keys)

__all__ = ["Space", "SpaceError", "Variable", "Constraint", "Expression", "load_space",
           "schema_field"]

TOP_KEYS = ("name", "description", "base", "variables", "derived", "couplings", "constraints",
            "objectives", "search", "sweep", "uncertainty")


def put_field(sc: dict, path: str, value) -> dict:
    """``set_field`` that also handles the accelerator: a field under ``system.accelerator.``
    turns a catalog id into an inline table ``{base = id, ...}``; ``system.accelerator``
    itself sets the inline table's ``base`` when the base scenario has one."""
    system = sc.setdefault("system", {})
    acc = system.get("accelerator")
    if path.startswith("system.accelerator.") and not isinstance(acc, dict):
        system["accelerator"] = {} if acc is None else {"base": acc}
    elif path == "system.accelerator" and isinstance(acc, dict):
        acc["base"] = value
        return sc
    return set_field(sc, path, value)


# ----------------------------------------------------------------------------- the space

@dataclass
class Space:
    """A parsed design space; see the module docstring for the file format."""
    name: str
    base: dict
    variables: list[Variable]
    derived: dict[str, Expression] = field(default_factory=dict)
    couplings: dict[str, Any] = field(default_factory=dict)
    constraints: list[Constraint] = field(default_factory=list)
    objectives: list[tuple[str, str]] = field(default_factory=list)
    search: dict = field(default_factory=dict)
    sweep: dict = field(default_factory=dict)
    source_text: str = ""
    fingerprint: str = ""
    metrics: tuple = ()
    path: str = ""
    robust: dict = field(default_factory=dict)   # issue 14: [uncertainty] + quantile objectives

    # -- building scenarios ------------------------------------------------------------
    def variable(self, name: str) -> Variable:
        return next(v for v in self.variables if v.name == name)

    def scenario_batch(self, columns: dict[str, np.ndarray]) -> dict:
        """The batched scenario (nested dict of arrays) for ``explore.evaluate``."""
        return self._batch(columns)[0]

    def _batch(self, columns: dict[str, np.ndarray]):
        """(scenario, bad mask, bad reason): designs whose derived fields break their schema."""
        cols = {v.name: np.asarray(columns[v.name]) for v in self.variables}
        n = max((c.size for c in cols.values()), default=1)
        sc = copy.deepcopy(self.base)
        env: dict[str, Any] = dict(self._base_env)
        for v in self.variables:
            col = cols[v.name].reshape(-1)
            if v.kind == "int":
                col = np.round(col.astype(float)).astype(np.int64)
            elif v.kind == "real":
                col = col.astype(float)
            # a column of one value stays one value (explore.evaluate broadcasts it, and computes
            # the terms that read only such constants once): a sweep chunk's leading variables
            put_field(sc, v.field, np.array(col))
            env[v.name] = env[v.field] = np.broadcast_to(col, (n,))
        if "devices" in self.couplings:
            set_field(sc, "system.devices", int(self.couplings["devices"]))
            env["system.devices"] = np.full(n, float(self.couplings["devices"]))
        bad = np.zeros(n, dtype=bool)
        reason = np.full(n, "", dtype=object)
        bad, reason = self._apply_derived(sc, env, n, bad, reason)
        if self.couplings.get("platforms") == "shipped":
            bad, reason = self._shipped_only(sc, n, bad, reason)
        if "capex_budget_usd" in self.couplings:
            bad, reason = self._budget_devices(sc, env, n, bad, reason)
        return sc, bad, reason

    @staticmethod
    def _shipped_only(sc, n, bad, reason):
        """``platforms = "shipped"``: pairings of accelerator and scale-up fabric / domain size
        that no vendor ships (explore/data/platforms.toml) are invalid designs."""
        from explore.platforms import whatif
        acc = get_field(sc, "system.accelerator")
        if isinstance(acc, dict):            # inline (parametric) accelerator: any fabric
            return bad, reason
        cols = [np.broadcast_to(np.asarray(d if get_field(sc, p) is None else get_field(sc, p)), (n,))
                for p, d in (("system.accelerator", ""), ("system.scale_up.link", "nvlink4"),
                             ("system.scale_up.size", 8))]
        w = whatif(*cols) & ~bad
        if w.any():
            reason = reason.copy()
            reason[w] = [f"what-if platform: {a} does not ship with {l} x {int(z)} "
                         f"(explore/data/platforms.toml)" for a, l, z in zip(*(c[w] for c in cols))]
        return bad | w, reason

    def _apply_derived(self, sc, env, n, bad, reason):
        bad = bad.copy()
        reason = reason.copy()
        for path, expr in self.derived.items():
            with np.errstate(all="ignore"):
                val = np.broadcast_to(np.asarray(expr(env), dtype=float), (n,))
            f = schema_field(path)
            ok = np.isfinite(val)
            with np.errstate(all="ignore"):
                if f.kind == "int":
                    ok &= np.abs(val - np.round(val)) < 1e-9
                if f.lo is not None:
                    ok &= (val > f.lo) if f.lo_open else (val >= f.lo)
                if f.hi is not None:
                    ok &= (val < f.hi) if f.hi_open else (val <= f.hi)
            new = ~ok & ~bad
            reason[new] = self.derived_reason(path)
            bad |= ~ok
            safe = np.where(ok, val, f.lo if f.lo is not None and not f.lo_open else 1.0)
            safe = np.round(safe).astype(np.int64) if f.kind == "int" else safe
            put_field(sc, path, safe)
            env[path] = safe
        return bad, reason

    def derived_reason(self, path: str) -> str:
        """The reason of a design whose derived field ``path`` breaks its schema."""
        return f"derived {path} = {self.derived[path].text} is not {schema_field(path).allowed()}"

    def _budget_devices(self, sc, env, n, bad0, reason0):
        """Devices = the largest multiple of ``device_multiple`` whose capex fits the budget.

        Capex per device is nearly constant (network BOM steps aside), so the fixed point
        d <- multiple * floor(B * d / (capex(d) * multiple)) converges in a few steps; any
        residual excess is caught by the implicit ``capex_usd <= budget`` constraint."""
        from explore.model.costs import capex_and_power
        from explore.model.system import build_system
        budget = float(self.couplings["capex_budget_usd"])
        mult = np.broadcast_to(np.asarray(self.couplings["device_multiple"](env), float), (n,))
        mult_bad = ~(np.isfinite(mult) & (mult >= 0.5) & (mult <= 2.0**40))
        if mult_bad.any():   # e.g. a division by a zero field: that design is invalid, not a crash
            new = mult_bad & ~bad0
            reason0 = reason0.copy()
            reason0[new] = (f"couplings.device_multiple = {self.couplings['device_multiple'].text} "
                            f"is not an integer in 1..2**40")
            bad0 = bad0 | mult_bad
        mult = np.where(mult_bad, 1.0, np.maximum(np.round(mult), 1.0))
        dev = np.maximum(mult, np.round(env.get("system.devices", mult) / mult) * mult)
        bad, reason = bad0, reason0
        for _ in range(5):
            env["system.devices"] = dev.astype(np.int64)
            set_field(sc, "system.devices", dev.astype(np.int64))
            bad, reason = self._apply_derived(sc, env, n, bad0, reason0)
            capex = sum(capex_and_power(build_system(resolve(sc)))[0].values())
            with np.errstate(all="ignore"):
                new = np.maximum(np.floor(budget * dev / capex / mult), 1.0) * mult
            new = np.where(np.isfinite(new), np.minimum(new, np.floor(2.0**40 / mult) * mult), dev)
            if np.array_equal(new, dev):
                break
            dev = new
        env["system.devices"] = dev.astype(np.int64)
        set_field(sc, "system.devices", dev.astype(np.int64))
        return self._apply_derived(sc, env, n, bad0, reason0)

    # -- evaluating ---------------------------------------------------------------------
    def evaluate(self, columns: dict[str, np.ndarray], reason_codes: bool = False,
                 metrics=None, variable_coords: bool = True) -> xr.Dataset:
        """Evaluate a batch; decision variables become ``design`` coordinates (unless not
        ``variable_coords``; derived fields always do).

        ``reason_codes``: ``reason`` as integer codes into ``reason.attrs["codes"]``, the
        evaluation's reasons followed by one per derived field (the same table for any batch).
        ``metrics``: only these metrics (None: all; ``explore.evaluate``'s ``metrics``)."""
        from explore.evaluate import coord_name, evaluate, input_attrs
        sc, bad, reason = self._batch(columns)
        if metrics is not None and self.robust:     # a quantile objective reads its metric's units
            metrics = list(metrics) + [m for m, _ in self.robust.get("quantiles", {}).values()]
        # evaluate NaNs its invalid designs; those invalid by a derived field are masked below
        ds = evaluate(sc, keep_invalid=False, inputs=False, reason_codes=reason_codes,
                      metrics=metrics)
        ds_model = set(ds.data_vars)
        if self.robust:   # issue 14: quantile objectives over joint samples of the uncertain inputs
            from explore.uncertainty.robust import add_quantile_objectives
            ds = add_quantile_objectives(ds, sc, self.robust)
        n = ds.sizes["design"]
        for v in self.variables:
            if v.name in ds.data_vars:
                raise SpaceError(f"{self.path}: variables.{v.name}: name clashes with the metric "
                                 f"{v.name}; allowed: a name that is not a metric")
        r_attrs = dict(ds["reason"].attrs)
        if reason_codes:
            table = list(r_attrs["codes"])
            extra = {self.derived_reason(p): len(table) + i for i, p in enumerate(self.derived)}
            code = ds["reason"].values
            if bad.any():
                code = code.copy()
                for why, c in extra.items():
                    code[bad & (reason == why)] = c
            r_attrs["codes"] = table + list(extra)
            new_reason = code
        else:
            new_reason = np.where(bad, reason.astype(str), ds["reason"].values) if bad.any() else ds["reason"].values
        valid0 = ds["valid"].values
        new = {"reason": new_reason, "valid": valid0 & ~bad}
        # designs invalid by a derived field (the model's invalid ones are NaN already), and the
        # quantile objectives of every invalid design: NaN metrics, as evaluate(); one Dataset
        # build, not a setitem per variable
        derived_bad = bad & valid0
        invalid = ~new["valid"]
        data = {}
        for k, var in ds.data_vars.items():
            a = new.get(k, var.values)
            if a.dtype.kind == "f":
                mask = derived_bad if k in ds_model else invalid
                if mask.any():
                    a = where(mask, np.nan, a)       # a new array (np.where's result, faster)
            data[k] = (("design",), a, r_attrs if k == "reason" else var.attrs)
        ds = xr.Dataset(data, coords=ds.coords, attrs=ds.attrs)
        coords = {}
        for v in self.variables if variable_coords else ():
            col = np.broadcast_to(np.asarray(columns[v.name]), (n,))
            if v.kind == "int":
                col = np.round(col.astype(float)).astype(np.int64)
            coords[v.name] = ("design", np.array(col), {**input_attrs(v.field), "kind": v.kind})
        extra = list(self.derived) + (["system.devices"] if "capex_budget_usd" in self.couplings else [])
        for path in extra:
            coords[coord_name(path)] = ("design", np.broadcast_to(get_field(sc, path), (n,)).copy(),
                                        {**input_attrs(path), "kind": "derived"})
        ds = ds.assign_coords(coords)
        return ds

    @property
    def constraint_names(self) -> list[str]:
        return ["valid"] + [f"{c.metric}" for c in self.constraints]

    def violation(self, ds: xr.Dataset) -> np.ndarray:
        """(n_designs, 1 + n_constraints); > 0 means violated. Column 0 is validity
        (1 = does not fit memory or other runtime failure, 2 = a plan/derived rule)."""
        valid = ds["valid"].values.astype(bool)
        rs = ds["reason"].values.astype(str)
        mem = np.char.startswith(rs, "does not fit") | np.char.startswith(rs, "reliability")
        cols = [np.where(valid, 0.0, np.where(mem, 1.0, 2.0))]
        for c in self.constraints:
            g = c.violation(ds[c.metric].values.astype(float))
            cols.append(np.where(np.isfinite(g), g, np.where(valid, 1.0, 0.0)))
        return np.column_stack(cols)

    def objective_values(self, ds: xr.Dataset) -> np.ndarray:
        """(n_designs, n_objectives) in the user's units and sign (NaN where invalid)."""
        return np.column_stack([ds[m].values.astype(float) for m, _ in self.objectives])

    @property
    def signs(self) -> np.ndarray:
        """+1 for min, -1 for max: ``F_minimised = signs * objective_values``."""
        return np.array([1.0 if s == "min" else -1.0 for _, s in self.objectives])

    def grid_size(self) -> int:
        return int(np.prod([v.size for v in self.variables], dtype=float))


# ----------------------------------------------------------------------------- loading

def load_space(path_or_dict) -> Space:
    """Parse and check a design space (TOML path or the same nested dict)."""
    doc, text, root, where = _read(path_or_dict)
    _string_keys(where, doc, "")
    for k in doc:
        if k not in TOP_KEYS:
            raise SpaceError(f"{where}: {k}: unknown key{_suggest(k, TOP_KEYS)}; "
                             f"allowed: {', '.join(TOP_KEYS)}")
    for k in ("variables", "derived", "couplings", "constraints", "objectives", "search", "sweep"):
        if k in doc and not isinstance(doc[k], dict):
            raise SpaceError(f"{where}: {k}: must be a table, got {doc[k]!r}")
    base = _base(where, doc.get("base"), root)
    try:
        base_r = resolve(base)
    except ScenarioError as e:
        raise SpaceError(f"{where}: base: {e}") from None
    known = field_paths()
    vars_raw = doc.get("variables", {})
    if not vars_raw:
        raise SpaceError(f"{where}: variables: empty; allowed: at least one [variables.NAME] table")
    variables = [_variable(where, k, v, known) for k, v in vars_raw.items()]
    seen: dict[str, str] = {}
    for v in variables:
        if v.field in seen:
            raise SpaceError(f"{where}: variables.{v.name}: field {v.field} is already set by "
                             f"variables.{seen[v.field]}")
        seen[v.field] = v.name
    names_ok = set(base_r.values) | {v.name for v in variables} | {v.field for v in variables}
    couplings = _couplings(where, doc.get("couplings", {}), seen, names_ok)
    if couplings:
        names_ok.add("system.devices")
    derived: dict[str, Expression] = {}
    derived_raw = doc.get("derived", {})
    names_ok |= {p for p in derived_raw if isinstance(p, str)}
    for path, text_ in derived_raw.items():
        w = f"{where}: derived.{path}"
        if path not in known:
            raise SpaceError(f"{w}: unknown scenario field{_suggest(path, known)}; allowed: a dotted "
                             f"numeric field such as parallelism.dp")
        if schema_field(path).kind not in ("int", "float"):
            raise SpaceError(f"{w}: field is not numeric; allowed: an int or float field")
        if path in seen or (path == "system.devices" and couplings):
            raise SpaceError(f"{w}: field is already set by a variable or coupling")
        expr = _expr(text_, w)
        for nm in expr.names:
            if nm not in names_ok:
                raise SpaceError(f"{w}: name {nm!r} has no value{_suggest(nm, sorted(names_ok))}; "
                                 f"allowed: variable names, fields of the base or derived fields")
        derived[path] = expr
    derived = _derived_order(where, derived)
    if "device_multiple" in couplings:
        for nm in couplings["device_multiple"].names:
            if nm not in names_ok:
                raise SpaceError(f"{where}: couplings.device_multiple: name {nm!r} has no value"
                                 f"{_suggest(nm, sorted(names_ok))}")
    space = Space(name=str(doc.get("name", Path(where).stem)), base=base, variables=variables,
                  derived=derived, couplings=couplings, search=dict(doc.get("search", {})),
                  sweep=dict(doc.get("sweep", {})), source_text=text, path=where)
    space._base_env = {k: np.asarray(a[:1] if len(a) == 1 else a) for k, a in base_r.values.items()}
    for k, a in space._base_env.items():
        if a.dtype.kind in "iuf":
            space._base_env[k] = a.astype(float)
    probe = space.evaluate({v.name: np.asarray([v.first_value()]) for v in variables})
    numeric = tuple(k for k in probe.data_vars
                    if probe[k].dtype.kind in "iuf" and probe[k].attrs.get("units") != "bool")
    space.metrics = tuple(probe.data_vars)
    # constraints may bound a metric or a numeric design coordinate (variable, derived field)
    bounded = numeric + tuple(k for k in probe.coords if k != "design" and probe[k].dtype.kind in "iuf")
    space.constraints = _constraints(where, doc.get("constraints", {}), bounded, probe)
    if "capex_budget_usd" in couplings:
        space.constraints.append(Constraint("capex_usd", None, float(couplings["capex_budget_usd"])))
    space.objectives, quantiles = _objectives(where, doc.get("objectives"), numeric)
    if quantiles or "uncertainty" in doc:
        from explore.uncertainty.robust import robust_settings
        space.robust = robust_settings(where, doc.get("uncertainty", {}), quantiles)
    space.fingerprint = _fingerprint(space)
    return space


def _fingerprint(s: Space) -> str:
    """sha256 of the normalised space (base as loaded, variables, derived, couplings, ...)."""
    norm = {"base": s.base, "variables": [v.__dict__ for v in s.variables],
            "derived": {k: e.text for k, e in s.derived.items()},
            "couplings": {k: (v.text if isinstance(v, Expression) else v) for k, v in s.couplings.items()},
            "constraints": [c.__dict__ for c in s.constraints], "objectives": s.objectives,
            "search": s.search, "sweep": s.sweep}
    if s.robust:   # only when present, so spaces without it keep their fingerprint
        norm["uncertainty"] = s.robust
    blob = json.dumps(norm, sort_keys=True, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
    return hashlib.sha256(blob.encode()).hexdigest()
