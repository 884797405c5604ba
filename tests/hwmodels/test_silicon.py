"""Silicon: textbook yield and dies-per-wafer values, monotonic properties."""
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hwmodels import silicon

areas = st.floats(1.0, 900.0)
d0s = st.floats(0.0, 0.5)
alphas = st.floats(0.3, 50.0)


def test_yield_formulas_at_one_defect_per_die():
    # D A = 1 defect per die: A = 100 mm2 at D0 = 1 /cm2
    assert math.isclose(silicon.poisson_yield(100.0, 1.0), math.exp(-1))
    assert math.isclose(silicon.murphy_yield(100.0, 1.0), (1 - math.exp(-1)) ** 2)
    assert math.isclose(silicon.seeds_yield(100.0, 1.0), 0.5)
    assert math.isclose(silicon.negative_binomial_yield(100.0, 1.0, 2.0), 1.5 ** -2)
    # alpha = 1 is Seeds; alpha -> inf tends to Poisson
    assert math.isclose(silicon.negative_binomial_yield(100.0, 1.0, 1.0), 0.5)
    assert math.isclose(silicon.negative_binomial_yield(100.0, 1.0, 1e7), math.exp(-1), rel_tol=1e-6)
    assert silicon.murphy_yield(0.0, 0.1) == 1.0


def test_dies_per_wafer_by_hand():
    # 100 mm2 die: A' = (10 + 0.2)^2 = 104.04; pi 145^2 / A' - pi 290 / sqrt(2 A') = 634.87 - 63.16
    assert silicon.dies_per_wafer(100.0) == 571
    # 10 x 10 mm without scribe and edge loss: pi 150^2/100 - pi 300/sqrt(200) = 706.86 - 66.64
    assert silicon.dies_per_wafer(100.0, edge_mm=0.0, scribe_mm=0.0) == 640
    # an H100-sized die: (sqrt(814) + 0.2)^2 = 825.43 -> 79.99 - 22.42 = 57.57
    assert silicon.dies_per_wafer(814.0) == 57
    assert silicon.dies_per_wafer(80000.0) == 0


def test_kgd_cost_is_wafer_over_good_dies():
    n = silicon.dies_per_wafer(100.0)
    y = silicon.negative_binomial_yield(100.0, 0.1, 10.0)
    assert math.isclose(silicon.kgd_cost_usd(100.0, 10000.0, 0.1, 10.0), 10000.0 / (n * y))


def test_reticle_limit():
    assert not silicon.over_reticle(858.0)
    assert silicon.over_reticle(859.0)
    assert not silicon.over_reticle(826.0)
    np.testing.assert_array_equal(silicon.over_reticle(np.array([100.0, 900.0])), [False, True])


@settings(max_examples=60, deadline=None)
@given(areas, areas, d0s, alphas)
def test_yield_falls_with_area(a1, a2, d0, alpha):
    lo, hi = sorted((a1, a2))
    for f in (silicon.poisson_yield, silicon.murphy_yield, silicon.seeds_yield):
        assert f(hi, d0) <= f(lo, d0) + 1e-12
    assert silicon.negative_binomial_yield(hi, d0, alpha) <= silicon.negative_binomial_yield(lo, d0, alpha) + 1e-12


@settings(max_examples=60, deadline=None)
@given(areas, d0s, d0s, alphas)
def test_yield_falls_with_defect_density(a, d1, d2, alpha):
    lo, hi = sorted((d1, d2))
    assert silicon.negative_binomial_yield(a, hi, alpha) <= silicon.negative_binomial_yield(a, lo, alpha) + 1e-12
    assert silicon.murphy_yield(a, hi) <= silicon.murphy_yield(a, lo) + 1e-12


@settings(max_examples=60, deadline=None)
@given(st.floats(10.0, 850.0), st.floats(10.0, 850.0), st.floats(0.01, 0.3))
def test_kgd_cost_rises_with_area(a1, a2, d0):
    lo, hi = sorted((a1, a2))
    assert silicon.kgd_cost_usd(hi, 17000.0, d0, 10.0) >= silicon.kgd_cost_usd(lo, 17000.0, d0, 10.0)
    assert silicon.dies_per_wafer(hi) <= silicon.dies_per_wafer(lo)


def test_broadcasts():
    a = np.array([50.0, 100.0, 400.0])
    out = silicon.kgd_cost_usd(a, np.array([9346.0]), 0.09, 10.0)
    assert out.shape == (3,)
    assert np.allclose(out, [silicon.kgd_cost_usd(x, 9346.0, 0.09, 10.0) for x in a])
