"""hwmodels.select.where picks the same elements as np.where, bit for bit, on every path."""
import numpy as np
import pytest

from hwmodels import select


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8))   # bit for bit (NaN payloads, -0.0)


@pytest.mark.parametrize("n", [3, select.FAST_MIN - 1, select.FAST_MIN, 50_000])
def test_where_equals_numpy_on_random_masks(n):
    rng = np.random.default_rng(n)
    cond = rng.random(n) < 0.5
    x = rng.normal(size=n)
    x[rng.random(n) < 0.1] = np.nan
    x[rng.random(n) < 0.05] = -0.0
    y = rng.normal(size=n)
    y[rng.random(n) < 0.05] = np.inf
    cases = [(x, y), (x, 0.0), (np.nan, y), (x[:1], y), (x, np.array(2.5)), (x, 3), (0, y),
             (np.float64(1.5), y), (x, np.broadcast_to(np.float64(7.0), (n,)))]
    for a, b in cases:
        _same(select.where(cond, a, b), np.where(cond, a, b))


def test_where_long_path_is_taken_and_other_dtypes_fall_back():
    n = select.FAST_MIN * 2
    cond = np.arange(n) % 3 == 0
    select.where(cond, np.ones(n), 0.0)
    assert select._kernel is not None                       # the compiled loop ran
    for a, b in [(np.arange(n), 0), (1, 0), (np.ones(n, np.float32), 0.0), (np.ones(n), True)]:
        _same(select.where(cond, a, b), np.where(cond, a, b))  # ints, float32, bool: numpy's dtype
    c2 = np.tile(cond, (2, 1))
    _same(select.where(c2, np.ones((2, n)), 0.0), np.where(c2, np.ones((2, n)), 0.0))
