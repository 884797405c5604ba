"""Evaluate each term at the cardinality it has, not at the batch size.

A batch of ``n`` designs rarely has ``n`` distinct values of every input: one
hardware under 100,000 plans, or a grid chunk with a few dozen hardware
combinations. Two mechanisms, both invisible to the model code (numpy
broadcasting does the work, so one design, a batch and a grid chunk take the
same path):

* constants: an input equal for the whole batch is held as a length-1 array
  (``fit``), so every term computed only from constants is computed once and
  broadcasts against the varying ones;
* unique-and-gather: ``UniqueRows`` finds the distinct rows of a few columns of a
  flat batch (mixed-radix integer keys, no string sort), a term is evaluated on
  those rows only and gathered back (``UniqueRows.gather``).
"""
from __future__ import annotations

import numpy as np


def is_constant(a) -> bool:
    """True for a scalar, a length-1 array or a stride-0 broadcast view (one value repeated)."""
    a = np.asarray(a)
    return a.size <= 1 or (a.ndim == 1 and a.strides[0] == 0)


def fit(a, n: int, dtype=None) -> np.ndarray:
    """``a`` as a 1-D array of length 1 (constant) or ``n``; never a full-length copy of a constant."""
    a = np.asarray(a) if dtype is None else np.asarray(a, dtype=dtype)
    if a.ndim == 0:
        return a.reshape(1)
    if a.ndim == 1 and a.shape[0] > 1 and a.strides[0] == 0:
        return a[:1]
    if a.shape == (1,) or a.shape == (n,):
        return a
    return np.broadcast_to(a, (n,))


def full(a, n: int) -> np.ndarray:
    """``a`` broadcast to length ``n`` (a read-only view when ``a`` is constant)."""
    return np.broadcast_to(a, (n,))


def codes(col) -> tuple[np.ndarray, int]:
    """(integer code per element, number of codes) of one column (any dtype)."""
    a = np.asarray(col)
    if is_constant(a):
        return np.zeros(1, dtype=np.int64), 1
    if a.dtype.kind in "biu" and a.size and a.min() >= 0 and a.max() < 4 * a.size:
        return a.astype(np.int64, copy=False), int(a.max()) + 1
    _, inv = np.unique(a, return_inverse=True)
    inv = inv.reshape(-1).astype(np.int64, copy=False)
    return inv, int(inv.max()) + 1


class UniqueRows:
    """Distinct rows of columns of a flat batch of ``n``: ``index`` (first row of each distinct
    combination, ``k`` of them) and ``inverse`` (row -> distinct combination).

    Keys are mixed-radix integers of the per-column codes; constant columns cost nothing.
    With every column constant, ``k == 1`` and nothing needs gathering."""

    def __init__(self, columns, n: int):
        key = np.zeros(1, dtype=np.int64)
        radix = 1
        for c in columns:
            code, m = codes(c)
            if m == 1:
                continue
            if radix * m > 1 << 62:        # key overflow: compress what we have so far
                _, key = np.unique(key, return_inverse=True)
                radix = int(key.max()) + 1
                key = key.astype(np.int64)
            key = key * m + code
            radix *= m
        self.n = n
        if key.size == 1:
            self.index = np.zeros(1, dtype=np.intp)
            self.inverse = None
        elif radix <= 4 * n:               # dense key space: no sort
            seen = np.full(radix, -1, dtype=np.intp)
            seen[key[::-1]] = np.arange(n - 1, -1, -1, dtype=np.intp)   # first occurrence wins
            present = seen >= 0
            self.index = seen[present]
            label = np.cumsum(present) - 1
            self.inverse = label[key]
        else:
            _, self.index, inv = np.unique(key, return_index=True, return_inverse=True)
            self.inverse = inv.reshape(-1)

    @property
    def k(self) -> int:
        return len(self.index)

    def take(self, a):
        """The distinct rows of a column (a constant stays a constant)."""
        a = np.asarray(a)
        return a if is_constant(a) or self.inverse is None else a[self.index]

    def gather(self, a):
        """A term evaluated on the distinct rows, back at the batch's rows (constants stay)."""
        a = np.asarray(a)
        if self.inverse is None or is_constant(a):
            return a
        return a[self.inverse]
