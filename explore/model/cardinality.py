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

from hwmodels.parts import PERTURBATION
from hwmodels.select import FAST_MIN


def is_constant(a) -> bool:
    """True for a scalar, a length-1 array or a stride-0 broadcast view (one value repeated)."""
    a = np.asarray(a)
    return a.size <= 1 or (a.ndim == 1 and a.strides[0] == 0)


def fit(a, n: int, dtype=None) -> np.ndarray:
    """``a`` as a 1-D array of length 1 (constant) or ``n``; never a full-length copy of a constant.

    While catalog figures are perturbed per element (uncertainty samples, ``sharing_allowed``)
    a broadcast constant keeps its length ``n``: each element may then draw its own figure."""
    a = np.asarray(a) if dtype is None else np.asarray(a, dtype=dtype)
    if a.ndim == 0:
        return a.reshape(1) if PERTURBATION.get() is None else np.broadcast_to(a, (n,))
    if a.ndim == 1 and a.shape[0] > 1 and a.strides[0] == 0:
        return a[:1] if PERTURBATION.get() is None else a
    if a.shape == (1,) or a.shape == (n,):
        return a
    return np.broadcast_to(a, (n,))


def full(a, n: int) -> np.ndarray:
    """``a`` broadcast to length ``n`` (a read-only view when ``a`` is constant)."""
    return np.broadcast_to(a, (n,))


def codes(col) -> tuple[np.ndarray, int]:
    """(integer code per element, number of codes) of one column (any dtype).

    Small non-negative integers (or integral floats) are their own codes; a column with
    few distinct values is coded by one compiled scan when long (``_few_values``), else by one
    comparison per value; anything else by np.unique."""
    a = np.asarray(col)
    if is_constant(a):
        return np.zeros(1, dtype=np.int64), 1
    n = a.size
    if a.dtype.kind == "b":
        return a.astype(np.int64), 2
    head = a[:64]
    if a.dtype.kind in "iu" or (a.dtype.kind == "f" and np.array_equal(head, np.round(head))):
        lo, hi = a.min(), a.max()
        if np.isfinite(lo) and np.isfinite(hi) and hi - lo < 4 * n:
            c = a - lo
            ci = c.astype(np.int64)
            if a.dtype.kind in "iu" or np.array_equal(ci, c):
                return ci, int(hi - lo) + 1
    if n >= FAST_MIN and a.dtype.kind in "fiu" and a.dtype.itemsize in (4, 8):
        # a long numeric column: labelled by hashing its bits (pandas.factorize, linear time);
        # equal bits are equal values (a -0.0 apart from 0.0 only costs sharing)
        import pandas as pd
        code, uniq = pd.factorize(np.ascontiguousarray(a).view(np.int64 if a.dtype.itemsize == 8 else np.int32))
        return code.astype(np.int64, copy=False), len(uniq)
    if n >= FAST_MIN and a.dtype.kind in "fiubUS":
        code, m = _few_values(a, FEW)
        if m > 0:
            return code, m
    elif len(np.unique(head)) <= 8:            # few values: one comparison each
        code = np.full(n, -1, dtype=np.int64)
        for m in range(16):
            left = np.flatnonzero(code < 0)
            if not left.size:
                return code, m
            code[a == a[left[0]]] = m
    _, inv = np.unique(a, return_inverse=True)
    inv = inv.reshape(-1).astype(np.int64, copy=False)
    return inv, int(inv.max()) + 1


FEW = 32
"""Most distinct values a long column is labelled by the compiled scan (``_few_values``)."""
_scan = None


def _few_values(a: np.ndarray, limit: int) -> tuple[np.ndarray, int]:
    """(label per element, number of labels) of a long fixed-width column with at most ``limit``
    distinct values, by one compiled pass that compares each element's bytes with the values
    seen so far (labels in order of first appearance); (None, 0) when there are more values.
    Equal bytes is equal value here: strings, integers, booleans and floats (a -0.0 apart from
    0.0 only costs sharing). numba is loaded on the first long column, as in hwmodels.select."""
    global _scan
    if _scan is None:
        import numba

        @numba.njit(cache=True, nogil=True)
        def scan(b, limit):
            n, w = b.shape
            seen = np.empty((limit, w), dtype=b.dtype)
            code = np.empty(n, dtype=np.int64)
            m = 0
            prev = -1
            for i in range(n):
                found = -1
                for t in range(-1, m):              # the previous element's value first
                    j = prev if t < 0 else t
                    if j < 0:
                        continue
                    same = True
                    for q in range(w):
                        if b[i, q] != seen[j, q]:
                            same = False
                            break
                    if same:
                        found = j
                        break
                if found < 0:
                    if m == limit:
                        return code, 0
                    for q in range(w):
                        seen[m, q] = b[i, q]
                    found = m
                    m += 1
                code[i] = found
                prev = found
            return code, m
        _scan = scan
    a = np.ascontiguousarray(a)
    size = a.dtype.itemsize
    word = np.uint64 if size % 8 == 0 else np.uint32 if size % 4 == 0 else np.uint8
    code, m = _scan(a.view(np.uint8).reshape(a.size, size).view(word), limit)
    return (code, m) if m > 0 else (None, 0)


def take(spec, index):
    """A frozen dataclass (``SystemSpec``, ``NetworkSpec``, ...) at the rows ``index``:
    full-length array fields are indexed, constants (length 1) and scalars kept."""
    import dataclasses

    def one(a):
        if isinstance(a, np.ndarray):
            return a if a.ndim == 0 or a.shape[0] == 1 else np.take(a, index, axis=0)
        if isinstance(a, tuple):
            return tuple(one(x) for x in a)
        if isinstance(a, dict):
            return {k: one(x) for k, x in a.items()}
        if dataclasses.is_dataclass(a) and not isinstance(a, type):
            return take(a, index)
        return a
    return dataclasses.replace(spec, **{f.name: one(getattr(spec, f.name))
                                        for f in dataclasses.fields(spec)})


def varying(n: int, *specs) -> list[np.ndarray]:
    """The columns of frozen dataclasses (``SystemSpec``, ``ModelSpec``, ...) that vary over a
    batch of ``n``: every non-constant array field of length ``n`` (a 2-D field by its columns,
    nested dataclasses, tuples and dicts walked as ``take`` does), for ``UniqueRows``."""
    import dataclasses
    out = []

    def one(a):
        if isinstance(a, np.ndarray):
            if a.ndim >= 1 and a.shape[0] == n and n > 1 and not is_constant(a):
                out.extend(a.reshape(n, -1).T if a.ndim > 1 else [a])
        elif isinstance(a, tuple):
            for x in a:
                one(x)
        elif isinstance(a, dict):
            for x in a.values():
                one(x)
        elif dataclasses.is_dataclass(a) and not isinstance(a, type):
            for f in dataclasses.fields(a):
                one(getattr(a, f.name))
    for spec in specs:
        one(spec)
    return out


DENSE = 4
"""Largest key space, in multiples of the batch size, that is labelled through a dense table
(see UniqueRows); a larger one is relabelled by hashing first."""


def _dense_labels(key: np.ndarray, radix: int) -> tuple[np.ndarray, int]:
    """``key`` (integers below ``radix``) relabelled to 0 .. (distinct keys - 1), in key order."""
    present = np.zeros(radix, dtype=bool)
    present[key] = True
    label = np.cumsum(present) - 1
    return label[key], int(label[-1]) + 1


def _determined(key: np.ndarray, radix: int, code: np.ndarray) -> bool:
    """Whether ``code`` takes one value per value of ``key`` (integers below ``radix``)."""
    rep = np.empty(radix, dtype=code.dtype)
    rep[key] = code
    return bool(np.array_equal(rep[key], code))


SMALL = 16
"""Codes of a column with at most this many values are used as they are (values absent from the
column only widen the key a little); a wider column is first relabelled to the values present."""


class UniqueRows:
    """Distinct rows of columns of a flat batch of ``n``: ``index`` (one row of each distinct
    combination, ``k`` of them) and ``inverse`` (row -> distinct combination).

    Keys are mixed-radix integers of the per-column codes, labelled through a dense table
    (no sort); constant columns cost nothing. When the key space would exceed ``DENSE * n``
    (many columns, or columns that depend on each other such as ``devices = tp pp dp``), the
    key so far is relabelled to its distinct values by hashing (``pandas.factorize``, linear
    time), so the key space stays at most the distinct rows so far times the next column's
    values; before a column would widen it so, the key so far is relabelled to the keys present
    (through the dense table). Each distinct combination is represented by its first row, and
    numbered in the order of first rows (``index`` ascends). When every row is distinct,
    ``inverse`` is None and ``k == n``; with every column constant, ``k == 1`` and ``inverse``
    is None as well. ``most``: once more than ``most`` rows are found distinct (a key so far
    already has that many values, and further columns only split them), the rows are left
    unshared as if every row were distinct, the remaining columns unread. A column that would widen
    a relabelled key beyond the dense table is first checked for being a function of the key (one
    value per key value, as ``devices = tp pp dp``): then it adds no rows and is skipped."""

    def __init__(self, columns, n: int, most: float | None = None):
        key = np.zeros(1, dtype=np.int64)
        radix = 1
        self.n = n
        most = n if most is None else most
        unshared = False         # every row distinct already, or more than ``most`` distinct
        columns = [np.asarray(c) for c in columns]
        columns = [c for c in columns if not is_constant(c)]
        columns.sort(key=lambda c: c.dtype.kind not in "biuf")    # cheap numeric codes first
        for c in columns:
            code, m = codes(c)
            if m == 1:
                continue
            if m > SMALL:
                used = np.bincount(code, minlength=m) > 0      # relabel to the values present
                if not used.all():
                    code = (np.cumsum(used) - 1)[code]
                    m = int(used.sum())
            if radix > 1 and radix * m > DENSE * n:           # relabel the key so far to the keys present
                key, radix = _dense_labels(key, radix)
                unshared = radix == n or radix > most
                if unshared:
                    break
                if radix * m > DENSE * n and _determined(key, radix, code):
                    continue       # a function of the columns so far (devices = tp pp dp ...): no new rows
            key = key * m + code
            radix *= m
            if radix > DENSE * n:                              # still too wide: relabel by hashing
                import pandas as pd
                key, uniq = pd.factorize(key)
                key = key.astype(np.int64, copy=False)
                radix = len(uniq)
                unshared = radix == n or radix > most
                if unshared:
                    break
        if unshared:
            self.index, self.inverse = np.arange(n), None
            return
        if key.size == 1:
            self.index = np.zeros(1, dtype=np.intp)
            self.inverse = None
            return
        # the first row of each key is its representative, and the distinct rows are numbered in
        # the order of those first rows: ``index`` ascends and ``inverse`` mostly ascends (each
        # new row takes the next label), so the takes and gathers read their sources nearly in
        # order (100 gathers of 100,000 random repeats of 57,231 rows, measured: 29 ms in key order,
        # 12 ms in this one)
        first = np.full(radix, n, dtype=np.intp)
        first[key[::-1]] = np.arange(n - 1, -1, -1, dtype=np.intp)   # the last write wins: the first row
        is_first = np.zeros(n, dtype=bool)
        is_first[first[first < n]] = True
        self.index = np.flatnonzero(is_first)
        label = first                                 # reused: key -> label of its distinct row
        label[key[self.index]] = np.arange(self.index.size, dtype=np.intp)
        self.inverse = label[key]

    @property
    def k(self) -> int:
        return len(self.index)

    def take(self, a):
        """The distinct rows of a column (a constant stays a constant)."""
        a = np.asarray(a)
        return a if is_constant(a) or self.inverse is None else np.take(a, self.index, axis=0)

    def at(self, idx) -> "UniqueRows | None":
        """The distinct rows among the rows ``idx`` of the batch (the same partition, restricted);
        None when there is nothing to share."""
        if self.inverse is None:
            return None
        return UniqueRows([np.take(self.inverse, idx)], len(idx))

    def gather(self, a):
        """A term evaluated on the distinct rows, back at the batch's rows (constants stay)."""
        a = np.asarray(a)
        if self.inverse is None or is_constant(a):
            return a
        return np.take(a, self.inverse, axis=0)      # as a[inverse], faster than fancy indexing


WORTH_GATHERING = 0.7
"""Gather only when the distinct rows are at most this fraction of the batch (measured: the
take and the gathers cost about a third of evaluating the rows again)."""


def per_rows(fn, rows: "UniqueRows | None", *args):
    """``fn(*args)`` (a dict of arrays) evaluated on the distinct rows only, gathered back.

    ``args`` are frozen dataclasses or arrays over the batch; ``rows`` must distinguish
    every input that ``fn`` reads (else rows that differ would share one result)."""
    if rows is None or rows.inverse is None or rows.k > WORTH_GATHERING * rows.n:
        return fn(*args)
    import dataclasses
    small = [take(a, rows.index) if dataclasses.is_dataclass(a) and not isinstance(a, type)
             else rows.take(a) if isinstance(a, np.ndarray) else a for a in args]
    return {k: rows.gather(v) for k, v in fn(*small).items()}


def sharing_allowed(calibration=None) -> bool:
    """False while catalog figures are perturbed per array element (``hwmodels.parts.PERTURBATION``,
    uncertainty samples) or calibration constants are arrays: equal inputs then need not give
    equal results, so nothing is shared between rows."""
    import dataclasses
    if PERTURBATION.get() is not None:
        return False
    if calibration is not None and dataclasses.is_dataclass(calibration):
        return all(np.size(getattr(calibration, f.name)) <= 1 for f in dataclasses.fields(calibration))
    return True
