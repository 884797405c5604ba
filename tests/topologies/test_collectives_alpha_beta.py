"""Exact facts of the alpha-beta collective costs (Thakur et al. 2005)."""
import numpy as np
import pytest

from topologies import collectives as c


@pytest.mark.parametrize("p", [2, 3, 8, 64])
def test_ring_all_reduce_moves_2_p_minus_1_over_p(p):
    size, bw = 1e9, 8e9  # 1 GB at 1 GB/s
    assert c.ring_all_reduce_s(size, p, bw, 0.0) == pytest.approx(2 * (p - 1) / p)
    assert c.ring_reduce_scatter_s(size, p, bw, 0.0) == pytest.approx((p - 1) / p)


def test_latency_terms():
    assert c.ring_all_reduce_s(0.0, 8, 1e9, 1e-6) == pytest.approx(14e-6)
    assert c.rhd_all_reduce_s(0.0, 8, 1e9, 1e-6) == pytest.approx(6e-6)
    assert c.tree_all_reduce_s(0.0, 8, 1e9, 1e-6) == pytest.approx(6e-6)


def test_single_rank_is_free():
    assert c.all_reduce_s(1e9, 1, 1e9, 1e-6) == 0.0
    assert c.ring_all_gather_s(1e9, 1, 1e9, 1e-6) == 0.0


def test_hierarchical_reduces_to_flat_cases():
    size = 1e8
    flat_inner = c.ring_all_reduce_s(size, 8, 1e12, 1e-6)
    assert c.hierarchical_all_reduce_s(size, 8, 1e12, 1e-6, 1, 1e11, 5e-6) == pytest.approx(flat_inner)
    flat_outer = c.all_reduce_s(size, 16, 1e11, 5e-6)
    assert c.hierarchical_all_reduce_s(size, 1, 1e12, 1e-6, 16, 1e11, 5e-6) == pytest.approx(flat_outer)


def test_broadcasts_over_arrays():
    p = np.array([1, 2, 4, 8])
    out = c.all_reduce_s(1e9, p, 8e9, 0.0)
    assert out.shape == (4,) and out[0] == 0 and np.all(np.diff(out) > 0)
