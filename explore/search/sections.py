"""The tables of a design-space file, read and checked one at a time (``explore.search.space``
assembles them into a ``Space``): the file and its base scenario, string keys, the order of
derived fields (cycles refused), couplings, constraints and objectives. Every problem is a
``SpaceError`` naming the field, the value and what is allowed.
"""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

from explore.search.expression import Expression, ExpressionError
from explore.scenario import INT_MAX, ScenarioError, read_toml_text
from explore.search.variables import Constraint, SpaceError, _suggest

DEFAULT_OBJECTIVES = (("time_to_train_s", "min"), ("energy_per_token_j", "min"),
                      ("cost_per_token_usd", "min"))


def _expr(text, where: str) -> Expression:
    try:
        return Expression.parse(text, where)
    except ExpressionError as e:
        raise SpaceError(str(e)) from None


def _read(path_or_dict) -> tuple[dict, str, Path, str]:
    if isinstance(path_or_dict, dict):
        _string_keys("space", path_or_dict, "")
        return copy.deepcopy(path_or_dict), json.dumps(path_or_dict, sort_keys=True, default=str), \
            Path.cwd(), "space"
    p = Path(path_or_dict)
    data, text = read_toml_text(p, SpaceError, "a design-space TOML file")
    return data, text, p.parent, str(p)


def _base(where: str, raw, root: Path) -> dict:
    if raw is None:
        raise SpaceError(f"{where}: base: missing; allowed: a [base] scenario table or "
                         f"base = \"relative/path/to/scenario.toml\"")
    if isinstance(raw, str):
        from explore.scenario import load_scenario
        p = (root / raw) if not Path(raw).is_absolute() else Path(raw)
        try:
            return load_scenario(p)
        except ScenarioError as e:
            raise SpaceError(f"{where}: base: {e}") from None
    if not isinstance(raw, dict):
        raise SpaceError(f"{where}: base: value {raw!r} is not allowed; allowed: a table or a path")
    return copy.deepcopy(raw)


def _string_keys(where, node, path: str) -> None:
    """Every key of a space (a Python dict may have any) is a string: one error naming it."""
    if not isinstance(node, dict):
        return
    for k, v in node.items():
        if not isinstance(k, str):
            raise SpaceError(f"{where}: {path or 'space'}: key {k!r} is not a string; allowed: "
                             f"string keys (field, variable and metric names)")
        _string_keys(where, v, f"{path}.{k}" if path else k)


def _derived_order(where, derived: dict[str, Expression]) -> dict[str, Expression]:
    """Derived fields in dependency order; a self-reference or a cycle is an error naming it."""
    import graphlib
    for path, e in derived.items():
        if path in e.names:
            raise SpaceError(f"{where}: derived.{path}: value {e.text!r} refers to {path} itself; "
                             f"allowed: an expression over variables, base fields and other derived fields")
    graph = {p: {n for n in e.names if n in derived} for p, e in derived.items()}
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as err:
        cycle = err.args[1]
        raise SpaceError(f"{where}: derived.{cycle[0]}: derived fields form a cycle "
                         f"{' -> '.join(cycle)}; allowed: derived fields without cycles") from None
    return {p: derived[p] for p in order}


MAX_BUDGET_USD = 1e15   # a thousand times any cluster ever priced; keeps device counts in range


def _short_num(x) -> str:
    return f"{x:.4g}" if isinstance(x, int) and abs(x) > 1e15 else repr(x)


def _couplings(where, raw: dict, seen: dict, names_ok: set) -> dict:
    allowed = ("devices", "capex_budget_usd", "device_multiple", "platforms")
    for k in raw:
        if k not in allowed:
            raise SpaceError(f"{where}: couplings.{k}: unknown key{_suggest(k, allowed)}; "
                             f"allowed: {', '.join(allowed)}")
    out: dict[str, Any] = {}
    if "platforms" in raw:
        if raw["platforms"] not in ("shipped", "what-if"):
            raise SpaceError(f"{where}: couplings.platforms: value {raw['platforms']!r} is not "
                             f"allowed; allowed: 'shipped' (only accelerator / scale-up pairings "
                             f"vendors ship) or 'what-if' (any pairing)")
        out["platforms"] = raw["platforms"]
    if "devices" in raw and "capex_budget_usd" in raw:
        raise SpaceError(f"{where}: couplings: give devices or capex_budget_usd, not both")
    if ("devices" in raw or "capex_budget_usd" in raw) and "system.devices" in seen:
        raise SpaceError(f"{where}: couplings: system.devices is already variables."
                         f"{seen['system.devices']}; allowed: a coupling or a variable, not both")
    if "devices" in raw:
        d = raw["devices"]
        if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= INT_MAX:
            raise SpaceError(f"{where}: couplings.devices: value {_short_num(d)} is not allowed; "
                             f"allowed: an integer >= 1 and <= 2**53")
        out["devices"] = d
    if "capex_budget_usd" in raw:
        b = raw["capex_budget_usd"]
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 < b <= MAX_BUDGET_USD:
            raise SpaceError(f"{where}: couplings.capex_budget_usd: value {_short_num(b)} is not allowed; "
                             f"allowed: a number > 0 and <= {MAX_BUDGET_USD:g}")
        out["capex_budget_usd"] = float(b)
        out["device_multiple"] = _expr(raw.get("device_multiple", 1),
                                                  f"{where}: couplings.device_multiple")
    elif "device_multiple" in raw:
        raise SpaceError(f"{where}: couplings.device_multiple: only used with capex_budget_usd")
    return out


def _constraints(where, raw: dict, numeric, probe) -> list[Constraint]:
    from explore.evaluate import coord_name
    out = []
    for m, spec in raw.items():
        w = f"{where}: constraints.{m}"
        if isinstance(m, str) and m not in numeric and coord_name(m) in numeric:
            m = coord_name(m)   # a derived field by its dotted path
        if m in ("valid", "fits_memory"):
            raise SpaceError(f"{w}: is always a constraint; allowed: a numeric metric such as power_w")
        if m not in numeric:
            raise SpaceError(f"{w}: not a numeric metric or design field{_suggest(m, numeric)}; "
                             f"allowed: {', '.join(numeric)}")
        if not isinstance(spec, dict) or not spec or any(k not in ("min", "max") for k in spec):
            raise SpaceError(f"{w}: value {spec!r} is not allowed; allowed: a table with min and/or "
                             f"max, e.g. {{ max = 2e7 }}")
        for k, v in spec.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise SpaceError(f"{w}.{k}: value {v!r} is not a finite number")
        lo, hi = spec.get("min"), spec.get("max")
        if lo is not None and hi is not None and lo > hi:
            raise SpaceError(f"{w}: min = {lo} > max = {hi} can never be met; allowed: min <= max")
        if hi is not None and hi < 0:
            raise SpaceError(f"{w}.max: value {hi} can never be met ({m} is never negative); "
                             f"allowed: a number >= 0")
        if lo is not None and lo > 1 and m in ("mfu", "hfu", "goodput"):
            raise SpaceError(f"{w}.min: value {lo} can never be met ({m} is a fraction <= 1); "
                             f"allowed: a number <= 1")
        out.append(Constraint(m, None if lo is None else float(lo), None if hi is None else float(hi)))
    return out


def _objectives(where, raw, numeric) -> tuple[list[tuple[str, str]], dict]:
    """(objectives, quantile objectives {name: (metric, q)}). ``metric = {sense = "min",
    quantile = 0.9}`` makes the objective the 90th percentile over uncertainty samples,
    named ``<metric>_q90`` (issue 14)."""
    if raw is None:
        return list(DEFAULT_OBJECTIVES), {}
    if not raw:
        raise SpaceError(f"{where}: objectives: empty; allowed: metric = \"min\" | \"max\"")
    out, quantiles = [], {}
    for m, sense in raw.items():
        if m not in numeric:
            raise SpaceError(f"{where}: objectives.{m}: not a numeric metric{_suggest(m, numeric)}; "
                             f"allowed: {', '.join(numeric)}")
        if isinstance(sense, dict):
            extra = set(sense) - {"sense", "quantile"}
            q = sense.get("quantile")
            if extra or not isinstance(q, (int, float)) or isinstance(q, bool) or not 0 < q < 1:
                raise SpaceError(f"{where}: objectives.{m}: value {sense!r} is not allowed; allowed: "
                                 f"\"min\", \"max\" or {{sense = \"min\", quantile = Q}} with 0 < Q < 1")
            name = f"{m}_q{round(100 * q):02d}"
            quantiles[name] = (m, float(q))
            m, sense = name, sense.get("sense", "min")
        if sense not in ("min", "max"):
            raise SpaceError(f"{where}: objectives.{m}: value {sense!r} is not allowed; "
                             f"allowed: 'min' or 'max'")
        out.append((m, sense))
    return out, quantiles
