"""The parts catalog: TOML tables in ``hwmodels/catalog/``, loaded and validated here.

Each file ``<kind>.toml`` holds parts of one kind (``accelerators``, ``links``,
``switches``, ...). A part is a table keyed by its id (lowercase, dashes) with
numeric fields in SI units (the unit in the field name) and a ``source`` table
giving, for every numeric field, where the number comes from (paper + table,
datasheet, or ``"estimate: how derived"``). A part may instead carry a single
``source`` string when all its numbers come from one place.
"""
from __future__ import annotations

import contextvars
import difflib
import functools
import re
import tomllib
from pathlib import Path

import numpy as np

from hwmodels.codes import codes

CATALOG_DIR = Path(__file__).parent / "catalog"
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")


class CatalogError(ValueError):
    """A catalog file is malformed, or an id is unknown."""


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _validate_part(kind: str, pid: str, entry: dict, path: Path) -> None:
    if not _ID_RE.match(pid):
        raise CatalogError(f"{path.name}: part id {pid!r} must be lowercase letters, digits, '.' and '-'")
    src = entry.get("source")
    if src is None:
        raise CatalogError(f"{path.name}: part {pid!r} has no 'source'")
    for field, value in entry.items():
        if field == "source":
            continue
        numbers = [value] if _is_number(value) else (
            value if isinstance(value, list) and value and all(_is_number(x) for x in value) else [])
        if not numbers:
            continue
        if isinstance(src, str):
            ok = bool(src.strip())
        else:
            ok = isinstance(src.get(field), str) and bool(src[field].strip())
        if not ok:
            raise CatalogError(f"{path.name}: part {pid!r} field {field!r} has no source")
    if kind == "links" and entry.get("fabric") == "scale-up":
        # the measured fraction of the per-direction bandwidth a ring all-reduce reaches (bus bandwidth)
        eff = entry.get("bus_efficiency")
        if not (_is_number(eff) and 0 < eff <= 1):
            raise CatalogError(f"{path.name}: scale-up link {pid!r} field 'bus_efficiency' is {eff!r}; "
                               f"allowed: a number in (0, 1] (measured all-reduce bus bandwidth / bandwidth)")


@functools.cache
def load_catalog() -> dict[str, dict[str, dict]]:
    """Return ``{kind: {part_id: entry}}`` for every catalog file, validated."""
    out: dict[str, dict[str, dict]] = {}
    for path in sorted(CATALOG_DIR.glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as e:
            raise CatalogError(f"{path.name}: {e}") from None
        for pid, entry in data.items():
            if not isinstance(entry, dict):
                raise CatalogError(f"{path.name}: top-level key {pid!r} must be a part table")
            _validate_part(path.stem, pid, entry, path)
        out[path.stem] = data
    return out


def part_ids(kind: str) -> list[str]:
    cat = load_catalog()
    if kind not in cat:
        raise CatalogError(f"unknown catalog kind {kind!r}; known: {', '.join(sorted(cat))}")
    return sorted(cat[kind])


def unknown_id_message(kind: str, pid: str) -> str:
    ids = part_ids(kind)
    near = difflib.get_close_matches(str(pid), ids, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"unknown {kind} id {pid!r}{hint}; known: {', '.join(ids)}"


def get_part(kind: str, pid: str) -> dict:
    """The catalog entry ``pid`` of ``kind``; unknown ids raise with the nearest match."""
    cat = load_catalog()
    if kind not in cat:
        raise CatalogError(f"unknown catalog kind {kind!r}; known: {', '.join(sorted(cat))}")
    if pid not in cat[kind]:
        raise CatalogError(unknown_id_message(kind, pid))
    return cat[kind][pid]


# Hook for explore.uncertainty: a callable (kind, unique ids, codes, field, values) -> values that
# perturbs looked-up figures per array element (joint samples are more array elements). None = off.
PERTURBATION: contextvars.ContextVar = contextvars.ContextVar("catalog_perturbation", default=None)


def _perturb(kind: str, uniq, code, field: str, vals: np.ndarray) -> np.ndarray:
    hook = PERTURBATION.get()
    return vals if hook is None else hook(kind, uniq, code, field, vals)


def perturb_rows(kind: str, ids, field: str, vals: np.ndarray, used=None) -> np.ndarray:
    """A small table of parts (one row per id in ``ids``, gathered later by code): unchanged
    when no perturbation is active, else (len(ids), elements) per-element values. ``used``:
    the row indices the caller will gather (only those are sampled)."""
    hook = PERTURBATION.get()
    rows = getattr(hook, "rows", None)
    return vals if rows is None else rows(kind, ids, field, vals, used)


_CODES_CACHE: list = [None, None, None]  # (ids array, unique ids, inverse) of the last call


def _codes(kind: str, arr: np.ndarray):
    """Ids present and a code per design (``hwmodels.codes``: one comparison per catalog id,
    no string sort); the last array's codes are cached, as many fields share one id array."""
    if _CODES_CACHE[0] is arr:
        return _CODES_CACHE[1], _CODES_CACHE[2]
    uniq, inv = codes(arr, part_ids(kind))
    _CODES_CACHE[:] = [arr, uniq, inv]
    return uniq, inv


def lookup(kind: str, ids, field: str) -> np.ndarray:
    """Vectorised field lookup: ``ids`` is an array of part ids, returns the field per id.

    Unique ids are resolved once, then broadcast by indexing (no per-design loop).
    """
    arr = np.asarray(ids)
    uniq, inv = _codes(kind, arr)
    vals = np.array([float(get_part(kind, str(u))[field]) for u in uniq])
    return _perturb(kind, uniq, inv, field, vals[inv])


def catalog_dataclass(cls, kind: str, ids):
    """An instance of the frozen dataclass ``cls`` whose every field is looked up per id."""
    from dataclasses import fields
    ids = np.asarray(ids)
    return cls(**{f.name: lookup(kind, ids, f.name) for f in fields(cls)})


def table(kind: str, ids, fields) -> dict[str, np.ndarray]:
    """``{field: array}`` of the catalog ``kind`` entries named by ``ids``: the unique ids
    are found once and each numeric field gathered with one indexing."""
    uniq, code = codes(ids, part_ids(kind))
    parts = [get_part(kind, str(u)) for u in uniq]
    out = {}
    for f in fields:
        vals = np.array([float(p[f]) for p in parts])
        out[f] = _perturb(kind, uniq, code, f,
                          vals[code] if len(vals) > 1 else np.broadcast_to(vals[0], code.shape))
    return out


def strings(kind: str, ids, field: str) -> np.ndarray:
    """A string field (another catalog id) of the entries named by ``ids``."""
    uniq, code = codes(ids, part_ids(kind))
    vals = np.array([str(get_part(kind, str(u))[field]) for u in uniq])
    return vals[code] if len(vals) > 1 else np.broadcast_to(vals[0], code.shape)
