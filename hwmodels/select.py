"""``where(cond, x, y)``: ``np.where`` with the same result, fast on long unpredictable masks.

``np.where`` branches per element: with a mask that changes at random along the batch (a
random set of plans: sequence parallelism, recompute, ZeRO stage drawn per design) the
branch predictor misses half the time and a 100,000-element select costs ~0.5-0.7 ms, 10-15x
an arithmetic operation (measured, benchmarks/bench_evaluate.py). For a 1-D boolean ``cond``
of at least ``FAST_MIN`` elements and float64 (or Python number) ``x`` and ``y`` of length 1
or ``len(cond)``, a compiled loop (numba, ``cache=True``: compiled once per machine, loaded
from disk afterwards) picks each element without a branch. The result is the same element
chosen bit for bit, so results do not depend on which path ran; every other call (short
arrays, other dtypes, 2-D, broadcasting conditions) goes to ``np.where``.
numba is imported on the first long select only, so a single-design evaluation never loads it.
"""
from __future__ import annotations

import numpy as np

FAST_MIN = 4096
_kernel = None


def _compile():
    global _kernel
    import numba

    @numba.njit(cache=True, nogil=True)
    def select(c, x, y):
        n = c.shape[0]
        out = np.empty(n, dtype=np.float64)
        sx, sy = x.shape[0] > 1, y.shape[0] > 1
        for i in range(n):
            a = x[i] if sx else x[0]
            b = y[i] if sy else y[0]
            out[i] = a if c[i] else b
        return out

    _kernel = select
    return select


def _operand(v, n):
    """v as a contiguous float64 array of length 1 or n, or None (then np.where is used)."""
    if isinstance(v, (float, int)) and not isinstance(v, bool):
        return np.array([float(v)])
    if isinstance(v, np.ndarray) and v.dtype == np.float64 and v.ndim <= 1 and v.size in (1, n):
        v = v.reshape(-1)
        if v.size == n and v.strides[0] == 0:
            v = v[:1]
        return np.ascontiguousarray(v)
    if isinstance(v, np.floating) and v.dtype == np.float64:
        return np.array([v])
    return None


def where(cond, x, y):
    """``np.where(cond, x, y)`` (see the module docstring for when a compiled loop runs it)."""
    if (isinstance(cond, np.ndarray) and cond.dtype == np.bool_ and cond.ndim == 1
            and cond.size >= FAST_MIN and cond.strides[0] == 1):
        n = cond.size
        xa, ya = _operand(x, n), _operand(y, n)
        if xa is not None and ya is not None and not (isinstance(x, int) and isinstance(y, int)):
            return (_kernel or _compile())(cond, xa, ya)
    return np.where(cond, x, y)
