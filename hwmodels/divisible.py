"""``indivisible(a, b)``: ``np.mod(a, b) != 0`` by a lookup per distinct value when one side is
a long column of few values (parallel degrees, strides), the same booleans as np.mod."""
from __future__ import annotations

import numpy as np

LOOKUP_MIN = 4096
"""Shortest column whose divisibility is looked up per distinct value (``indivisible``)."""


def indivisible(a, b) -> np.ndarray:
    """``np.mod(a, b) != 0`` element by element (the same booleans).

    When one side is one value and the other a long column of values a whole number apart
    within a short range (a parallel degree, a model dimension), np.mod runs once per value
    of that range and the column looks its answer up: np.mod on floats costs several times a
    lookup (measured in benchmarks/bench_evaluate.py: the plan rules, the rail test of
    topologies.placement). Anything else goes to np.mod."""
    a, b = np.asarray(a), np.asarray(b)
    col = b if a.size == 1 else a if b.size == 1 else None
    if col is not None and col.ndim == 1 and col.size >= LOOKUP_MIN and col.dtype.kind == "f":
        lo, hi = col.min(), col.max()
        if np.isfinite(lo) and np.isfinite(hi) and hi - lo <= LOOKUP_MIN:
            i = (col - lo).astype(np.intp)
            vals = lo + np.arange(int(hi - lo) + 1, dtype=float)
            if np.array_equal(vals[i], col):          # each element is one of ``vals``, exactly
                table = np.mod(a, vals) != 0 if col is b else np.mod(vals, b) != 0
                return table[i]
    return np.mod(a, b) != 0
