"""Integer codes of categorical ids, without a per-design loop and without a string sort.

A scalar broadcast to ``n`` designs (stride 0, as ``explore.scenario.resolve``
produces) is recognised and coded once. This module depends on numpy only;
``hwmodels.parts.table`` uses it to gather catalog fields per design.
"""
from __future__ import annotations

import numpy as np


def codes(ids, known=None) -> tuple[np.ndarray, np.ndarray]:
    """(ids present, integer code per design) for an array of ids (any shape).

    With ``known`` (the catalog's ids) the codes come from one vectorised
    comparison per known id, much faster than sorting a million strings;
    otherwise from ``np.unique``. An id outside ``known`` raises the catalog's
    unknown-id error."""
    arr = np.asarray(ids)
    if arr.ndim == 1 and arr.size > 1 and arr.strides[0] == 0:
        return arr[:1].astype(str), np.zeros(arr.shape, dtype=np.intp)
    if arr.size == 1:                     # one id (a constant held at length 1): nothing to sort
        return arr.reshape(1).astype(str), np.zeros(arr.shape, dtype=np.intp)
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
