"""Categorical catalog ids -> per-design field arrays, without a per-design loop.

``table(kind, ids, fields)`` finds the unique ids once (``np.unique`` with
``return_inverse``) and gathers each numeric field with one ``np.take``. A
scalar broadcast to ``n`` designs (stride 0, as ``explore.scenario.resolve``
produces) is recognised and looked up once.
"""
from __future__ import annotations

import numpy as np

from hwmodels.parts import get_part, part_ids


def codes(ids, known=None) -> tuple[np.ndarray, np.ndarray]:
    """(ids present, integer code per design) for an array of ids (any shape).

    With ``known`` (the catalog's ids) the codes come from one vectorised
    comparison per known id, much faster than sorting a million strings;
    otherwise from ``np.unique``. An id outside ``known`` raises the catalog's
    unknown-id error."""
    arr = np.asarray(ids)
    if arr.ndim == 1 and arr.size > 1 and arr.strides[0] == 0:
        return arr[:1].astype(str), np.zeros(arr.shape, dtype=np.intp)
    if known is None or arr.size < 64:
        uniq, inv = np.unique(arr.astype(str), return_inverse=True)
        return uniq, inv.reshape(arr.shape)
    arr = arr.astype(str, copy=False)
    code = np.full(arr.shape, -1, dtype=np.intp)
    present: list[str] = []
    for k in known:
        m = arr == k
        if m.any():
            code[m] = len(present)
            present.append(k)
    if (code < 0).any():
        present.append(str(arr[code < 0].flat[0]))  # unknown: get_part raises on it
    return np.array(present), code


def table(kind: str, ids, fields) -> dict[str, np.ndarray]:
    """``{field: array}`` of the catalog ``kind`` entries named by ``ids``."""
    uniq, code = codes(ids, part_ids(kind))
    parts = [get_part(kind, str(u)) for u in uniq]
    out = {}
    for f in fields:
        vals = np.array([float(p[f]) for p in parts])
        out[f] = vals[code] if len(vals) > 1 else np.broadcast_to(vals[0], code.shape)
    return out


def strings(kind: str, ids, field: str) -> np.ndarray:
    """A string field (another catalog id) of the entries named by ``ids``."""
    uniq, code = codes(ids, part_ids(kind))
    vals = np.array([str(get_part(kind, str(u))[field]) for u in uniq])
    return vals[code] if len(vals) > 1 else np.broadcast_to(vals[0], code.shape)
