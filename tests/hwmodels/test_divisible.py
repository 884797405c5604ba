"""hwmodels.divisible.indivisible: the table lookup gives np.mod's booleans, element by element."""
import numpy as np
import pytest

from hwmodels.divisible import LOOKUP_MIN, indivisible


@pytest.mark.parametrize("column", [
    lambda rng, n: rng.choice([1.0, 2.0, 4.0, 8.0], n),                 # parallel degrees
    lambda rng, n: rng.choice([0.0, 1.0, 3.0, 7.0, 96.0], n),            # a zero divisor: NaN -> True
    lambda rng, n: rng.choice([-6.0, -1.0, 2.0, 5.0], n),                # negative values
    lambda rng, n: rng.choice([1.5, 2.5, 4.5], n),                       # not whole numbers, a whole apart
    lambda rng, n: rng.choice([1.0, 2.0, 2.5], n),                       # not a whole number apart: np.mod
    lambda rng, n: rng.choice([1.0, 1e6], n),                            # range too wide: np.mod
])
@pytest.mark.parametrize("value", [96.0, 7.0, 0.0, -12.0, 2.5])
def test_indivisible_equals_np_mod(column, value):
    rng = np.random.default_rng(0)
    col = column(rng, LOOKUP_MIN + 17)
    one = np.array([value])
    with np.errstate(divide="ignore", invalid="ignore"):
        for a, b in ((one, col), (col, one), (value, col), (col, np.float64(value))):
            want = np.mod(a, b) != 0
            got = indivisible(a, b)
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
