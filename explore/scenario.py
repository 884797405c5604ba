"""Scenario files: the contract between users, the CLI and ``explore.evaluate``.

A scenario is a TOML file (or the same nested dict) with the tables ``model``,
``training``, ``parallelism``, ``system`` (with ``system.scale_up`` and
``system.scale_out``) and ``datacenter``. The schema (``explore/fields.py``) is the one place
that says which keys exist, their type, range and default. Validation happens
once, here, at the edge; model code downstream assumes valid inputs.

Any numeric or choice field may be a 1-D array (numpy array or TOML list):
all arrays share one length ``n`` and scalars broadcast. ``resolve`` returns
a flat ``{"table.field": array(n)}`` mapping with every default filled in.
"""
from __future__ import annotations

import difflib
import functools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hwmodels.parts import part_ids, unknown_id_message
from explore.fields import (  # noqa: F401  (re-exported: the schema's names)
    REQUIRED, INT_MAX, ScenarioError, Field, model_presets, PRECISIONS, SCALE_OUT_TOPOLOGIES,
    OPTICS, RECONFIG_POLICIES, RECOMPUTE, SCHEMA, TOP_KEYS, ACCEL_FIELDS, ACCEL_FIELD_SPECS,
    SANITY_HI, ACCEL_EXTRA_FIELDS, field_spec, bounded, _models_path)


def _suggest(key: str, allowed) -> str:
    near = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.5)
    return f" (did you mean {near[0]!r}?)" if near else ""


def read_toml_text(path, error=None, what: str = "a TOML file") -> tuple[dict, str]:
    """(parsed TOML, raw text) of ``path``; a missing file, a directory, bad syntax or
    binary content raise ``error`` (default ScenarioError) with one line naming the file."""
    error = error or ScenarioError
    p = Path(path)
    try:
        if not p.exists():
            raise error(f"{p}: file not found")
        if p.is_dir():
            raise error(f"{p}: is a directory, expected {what}")
        text = p.read_text()
        return tomllib.loads(text), text
    except OSError as e:   # name too long, permission denied, ...
        raise error(f"{_short_path(p)}: cannot read {what}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{p}: TOML syntax error: {e}") from None
    except UnicodeDecodeError:
        raise error(f"{p}: not a text file") from None


def _short_path(p: Path) -> str:
    s = str(p)
    return s if len(s) <= 100 else f"{s[:60]}...{s[-30:]} ({len(s)} characters)"


def load_scenario(path) -> dict:
    """Read a scenario TOML file into nested dicts (no validation beyond TOML syntax)."""
    return read_toml_text(path)[0]


def get_field(scenario: dict, path: str):
    node = scenario
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def set_field(scenario: dict, path: str, value) -> dict:
    """Set ``scenario[a][b][c] = value`` for ``path = "a.b.c"`` (in place; returns scenario)."""
    parts = path.split(".")
    node = scenario
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return scenario


def field_paths() -> list[str]:
    """Every valid dotted scenario field (for design-space files and error messages)."""
    out = [f"{t}.{k}" for t, fs in SCHEMA.items() for k in fs]
    out += [f"system.accelerator.{k}" for k in ACCEL_FIELDS + tuple(ACCEL_EXTRA_FIELDS)]
    return out


# ----------------------------------------------------------------------------- values

def _as_array(name: str, value, f: Field) -> np.ndarray:
    if isinstance(value, np.ma.MaskedArray):
        if np.ma.getmaskarray(value).any():
            raise ScenarioError(f"{name}: a masked array with masked entries is not allowed; "
                                f"allowed: a plain array of {f.allowed()} (fill or drop the masked entries)")
        value = np.asarray(value.data)
    elif not isinstance(value, (np.ndarray, list, tuple, str, bytes, dict)) and hasattr(value, "__array__"):
        value = np.asarray(value)   # pandas Series, xarray DataArray, ...
    if isinstance(value, dict):
        raise ScenarioError(f"{name}: value {value!r} is a table; allowed: {f.allowed()}")
    if isinstance(value, np.ndarray):
        arr = value
    elif isinstance(value, (list, tuple)):
        arr = np.asarray(value, dtype=object)
        if arr.ndim != 1:
            raise ScenarioError(f"{name}: a list value must be flat (1-D), got {value!r}; "
                                f"allowed: {f.allowed()} or a flat list of them")
    else:
        arr = np.asarray([value], dtype=object)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ScenarioError(f"{name}: arrays must be 1-D, got shape {arr.shape}; "
                            f"allowed: {f.allowed()} or a 1-D array of them")
    if arr.size == 0:
        raise ScenarioError(f"{name}: empty array; allowed: {f.allowed()}")
    return arr


def _bad(name, value, f: Field, why: str = "") -> ScenarioError:
    v = value if not isinstance(value, str) else repr(value)
    return ScenarioError(f"{name}: value {v} {why or 'is not allowed'}; allowed: {f.allowed()}")


def _coerce(name: str, value, f: Field) -> np.ndarray:
    if isinstance(value, (bool, int, float, str)) and f.kind != "id":
        # one value (a file's or a default): checked once per (field, value, type) and shared, read-only
        # (not catalog ids, whose allowed values are the catalog's current ones)
        try:
            return _coerce_scalar(name, value, f)
        except TypeError:             # a field whose spec does not hash: checked as any value
            pass
    return _coerce_any(name, value, f)


@functools.lru_cache(maxsize=4096, typed=True)
def _coerce_scalar(name: str, value, f: Field) -> np.ndarray:
    arr = _coerce_any(name, value, f)
    arr.flags.writeable = False
    return arr


def _coerce_any(name: str, value, f: Field) -> np.ndarray:
    arr = _as_array(name, value, f)
    if f.kind in ("choice", "id"):
        if arr.dtype.kind not in "UO" or (arr.dtype.kind == "O" and not all(
                isinstance(x, (str, np.str_)) for x in arr[:1000])):
            first = next((x for x in arr if not isinstance(x, (str, np.str_))), arr[0])
            raise _bad(name, first, f, "is not a string")
        arr = arr.astype(str, copy=False)
        allowed = f.choices if f.kind == "choice" else part_ids(f.catalog)
        vals = _distinct(arr)                 # in order of first appearance
        ok = np.isin(vals, np.asarray(allowed))
        if not ok.all():
            badv = str(vals[~ok][0])
            if f.kind == "id":
                raise ScenarioError(f"{name}: {unknown_id_message(f.catalog, badv)}")
            raise ScenarioError(f"{name}: value {badv!r} is not allowed{_suggest(badv, allowed)}; "
                                f"allowed: {f.allowed()}")
        return arr
    if f.kind == "bool":
        if arr.dtype == bool:
            return arr
        if arr.dtype.kind == "O" and all(isinstance(x, (bool, np.bool_)) for x in arr):
            return arr.astype(bool)
        first = next(x for x in arr if not isinstance(x, (bool, np.bool_)))
        raise _bad(name, first, f, "is not a boolean")
    # numbers
    if arr.dtype.kind == "O":
        for x in arr:
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
                raise _bad(name, x, f, "is not a number")
            if isinstance(x, int) and abs(x) > 1e300:   # would overflow the float conversion
                raise _bad(name, f"~1e{int(x.bit_length() * 0.30103)}", f, "is out of range")
    elif arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise _bad(name, arr[0], f, "is not a number")
    if arr.dtype.kind in "iu" and arr.size >= 4096:
        # a long integer column: finite and whole already, so only its range is checked, on its
        # extremes (the float conversion is monotone); out of range: the element-wise path below
        # finds and names the first offending value
        lo_v, hi_v = float(arr.min()), float(arr.max())
        hi = f.hi if f.kind != "int" else INT_MAX if f.hi is None else min(f.hi, INT_MAX)
        if (-2.0 ** 53 <= lo_v and hi_v <= 2.0 ** 53
                and (f.lo is None or (lo_v > f.lo if f.lo_open else lo_v >= f.lo))
                and (hi is None or (hi_v < hi if f.hi_open else hi_v <= hi))):
            return arr.astype(np.int64) if f.kind == "int" else arr.astype(float)
    with np.errstate(over="ignore", invalid="ignore"):
        arr = arr.astype(float)
    fin = np.isfinite(arr)
    if not fin.all():
        raise _bad(name, arr[~fin][0], f, "is not finite")
    if f.kind == "int":
        nonint = arr != np.round(arr)
        if nonint.any():
            raise _bad(name, arr[nonint][0], f, "is not an integer")
    if f.lo is not None:
        low = arr <= f.lo if f.lo_open else arr < f.lo
        if low.any():
            raise _bad(name, _fmt(arr[low][0]), f, "is out of range")
    hi = f.hi
    if f.kind == "int":
        hi = INT_MAX if hi is None else min(hi, INT_MAX)
    if hi is not None:
        high = arr >= hi if f.hi_open else arr > hi
        if high.any():
            raise _bad(name, _fmt(arr[high][0]), f, "is out of range")
    return arr.astype(np.int64) if f.kind == "int" else arr


def _distinct(arr: np.ndarray) -> np.ndarray:
    """The distinct values of a long string column (one compiled scan, explore.model.cardinality),
    the column itself when short or of many values."""
    if arr.size < 4096:
        return arr
    from explore.model.cardinality import FEW, _few_values
    code, m = _few_values(arr, FEW)
    if m == 0:
        return arr
    first = np.empty(m, dtype=np.intp)
    first[code[::-1]] = np.arange(arr.size - 1, -1, -1)      # first element of each value
    return arr[first]


def _fmt(x: float):
    return int(x) if float(x).is_integer() and abs(x) < 1e15 else x


@dataclass
class Resolved:
    """A validated scenario: ``n`` designs, ``values["table.field"]`` arrays of length n."""
    n: int
    values: dict[str, np.ndarray] = field(default_factory=dict)
    name: str = ""

    def __getitem__(self, key: str) -> np.ndarray:
        return self.values[key]


def _check_keys(name: str, table: dict, allowed) -> None:
    for k in table:
        if not isinstance(k, str):
            raise ScenarioError(f"{name}: key {k!r} is not a string; allowed: {', '.join(allowed)}")
        if k not in allowed:
            raise ScenarioError(f"{name}.{k}: unknown key{_suggest(k, allowed)}; allowed: {', '.join(allowed)}")


def resolve(scenario: dict) -> Resolved:
    """Validate ``scenario`` (nested dicts, arrays allowed) and fill defaults.

    Raises ScenarioError for anything malformed as a whole: unknown keys (with
    the nearest valid key), wrong types, out-of-range, NaN/inf values, unknown
    catalog ids, mismatched array lengths, missing required fields.
    """
    if not isinstance(scenario, dict):
        raise ScenarioError(f"scenario: expected a table, got {type(scenario).__name__}")
    _check_keys("scenario", scenario, TOP_KEYS)
    for t in ("model", "training", "parallelism", "system", "datacenter"):
        if t in scenario and not isinstance(scenario[t], dict):
            raise ScenarioError(f"{t}: must be a table, got {scenario[t]!r}")
    for t in ("model", "training", "system"):
        if t not in scenario:
            raise ScenarioError(f"{t}: missing table [{t}]")

    raw: dict[str, Any] = {}
    model = dict(scenario.get("model", {}))
    _check_keys("model", model, SCHEMA["model"])
    preset = model.get("preset")
    if preset is not None:
        presets = model_presets()
        if not isinstance(preset, str) or preset not in presets:
            raise ScenarioError(f"model.preset: value {preset!r} is not a known preset"
                                f"{_suggest(str(preset), presets)}; allowed: {', '.join(presets)}")
        base = {k: v for k, v in presets[preset].items() if k != "source"}
        model = {**base, **{k: v for k, v in model.items() if k != "preset"}}
    for k, v in model.items():
        if k != "preset":
            raw[f"model.{k}"] = v
    for t in ("training", "parallelism", "datacenter"):
        tab = scenario.get(t, {})
        _check_keys(t, tab, SCHEMA[t])
        for k, v in tab.items():
            raw[f"{t}.{k}"] = v
    system = scenario["system"]
    _check_keys("system", system, tuple(SCHEMA["system"]) + ("scale_up", "scale_out"))
    accel_inline = None
    for k, v in system.items():
        if k in ("scale_up", "scale_out"):
            if not isinstance(v, dict):
                raise ScenarioError(f"system.{k}: must be a table, got {v!r}")
            _check_keys(f"system.{k}", v, SCHEMA[f"system.{k}"])
            for kk, vv in v.items():
                raw[f"system.{k}.{kk}"] = vv
        elif k == "accelerator" and isinstance(v, dict):
            accel_inline = v
        else:
            raw[f"system.{k}"] = v

    values: dict[str, np.ndarray] = {}
    for t, fs in SCHEMA.items():
        for k, f in fs.items():
            key = f"{t}.{k}"
            if key == "model.preset" or (key == "system.accelerator" and accel_inline is not None):
                continue
            if key in raw:
                values[key] = _coerce(key, raw[key], bounded(key, f))
            elif f.default is REQUIRED:
                raise ScenarioError(f"{key}: missing required field; allowed: {f.allowed()}")
            elif f.default is not None:
                values[key] = _coerce(key, f.default, f)
    if accel_inline is not None:
        values.update(_resolve_inline_accelerator(accel_inline))

    lengths = {k: len(v) for k, v in values.items() if len(v) != 1}
    ns = set(lengths.values())
    if len(ns) > 1:
        items = sorted(lengths.items(), key=lambda kv: kv[1])
        raise ScenarioError(f"arrays must share one length: {items[0][0]} has {items[0][1]}, "
                            f"{items[-1][0]} has {items[-1][1]}")
    n = ns.pop() if ns else 1
    # cross-field rules on the columns as given (a constant compared once, not n times)
    _check_model_consistency(values)  # issue 11: MoE fields that contradict each other
    _check_model(values)
    _check_loss_kernel(values)
    for k, v in values.items():
        if len(v) == 1 and n > 1:
            values[k] = np.broadcast_to(v, (n,))
    name = scenario.get("name", "")
    if not isinstance(name, str):
        raise ScenarioError(f"name: value {name!r} must be a string")
    return Resolved(n=n, values=values, name=name)


def _check_loss_kernel(values: dict) -> None:
    """training.loss_kernel te names Megatron-Core's TE cross-entropy; llm-foundry's elementwise kernels
    bring flash-attn's own loss (calibration.FOUNDRY_LOGITS_*), so the two contradict each other."""
    lk, ek = np.broadcast_arrays(values["training.loss_kernel"], values["training.elementwise_kernels"])
    bad = (lk == "te") & (ek != "megatron")
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ScenarioError(f"training.loss_kernel: value 'te' is not allowed with training.elementwise_kernels = "
                            f"{str(ek[i])!r} (its cross-entropy is flash-attn's); allowed: 'megatron'")


# (field, other field, bad(field, other), what is allowed): model shapes that no transformer has
MODEL_RULES = (
    ("model.kv_heads", "model.heads", lambda kv, h: kv > h, "at most model.heads"),
    ("model.kv_heads", "model.heads", lambda kv, h: np.mod(h, kv) != 0, "a divisor of model.heads"),
    ("model.hidden", "model.heads", lambda d, h: np.mod(d, h) != 0, "a multiple of model.heads"),
    ("model.top_k", "model.experts", lambda k, e: k > e, "at most model.experts"),
)


def _check_model(values: dict) -> None:
    """Cross-field model rules (GQA groups, head dimension, MoE routing); one line per error."""
    for key, other, bad, allowed in MODEL_RULES:
        if key not in values or other not in values:
            continue
        a, b = np.broadcast_arrays(values[key], values[other])
        m = bad(a, b)
        if m.any():
            i = int(np.flatnonzero(m)[0])
            raise ScenarioError(f"{key}: value {int(a[i])} is not allowed with {other} = {int(b[i])}; "
                                f"allowed: {allowed}")


def _resolve_inline_accelerator(table: dict) -> dict[str, np.ndarray]:
    """An inline ``[system.accelerator]`` table: ``base`` (catalog id) plus field overrides."""
    allowed = ("base",) + ACCEL_FIELDS + tuple(ACCEL_EXTRA_FIELDS)
    _check_keys("system.accelerator", table, allowed)
    out: dict[str, np.ndarray] = {}
    base = table.get("base")
    if base is not None:
        out["system.accelerator"] = _coerce("system.accelerator.base", base,
                                            Field("id", catalog="accelerators"))
    for k in ACCEL_FIELDS:
        key = f"system.accelerator.{k}"
        if k in table:
            out[key] = _coerce(key, table[k], field_spec(key))
        elif base is None and k not in ACCEL_EXTRA_FIELDS and not _extra_given(table):
            raise ScenarioError(f"{key}: missing; an inline accelerator without 'base' must give "
                                f"{', '.join(ACCEL_FIELDS)}")
    for k, f in ACCEL_EXTRA_FIELDS.items():
        if k in table:
            out[f"system.accelerator.{k}"] = _coerce(f"system.accelerator.{k}", table[k],
                                                     bounded(f"system.accelerator.{k}", f))
    return out


def _extra_given(table: dict) -> bool:
    return any(k in table for k in ACCEL_EXTRA_FIELDS)


def _check_model_consistency(values: dict) -> None:
    """Cross-field model rules that no design can satisfy (issue 11): raise naming field, value, allowed."""
    e, k = np.broadcast_arrays(values["model.experts"], values["model.top_k"])
    moe = e > 1
    bad = moe & (k > e)
    if bad.any():
        i = int(np.argmax(bad))
        raise ScenarioError(f"model.top_k: value {int(k[i])} is out of range; allowed: "
                            f"1 ... model.experts ({int(e[i])})")
    dl, L = np.broadcast_arrays(values["model.dense_layers"], values["model.layers"])
    bad = dl >= L
    if bad.any():
        i = int(np.argmax(bad))
        raise ScenarioError(f"model.dense_layers: value {int(dl[i])} is out of range; allowed: "
                            f"0 ... model.layers - 1 ({int(L[i]) - 1})")
