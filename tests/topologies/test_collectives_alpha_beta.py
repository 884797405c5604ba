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


def test_tree_correction_reads_nccls_table_by_log2_of_size_over_64_bytes():
    """NVIDIA/nccl:src/graph/tuning.cc treeCorrectionFactor[Simple]: 1 MiB = 64 B x 2^14 -> index 14
    (0.5), 4 MiB -> 16 (0.7), 256 MiB -> 22 (0.9); 512 MiB (index 23) and up: no correction;
    3 MiB takes the lower index (15: 0.6, as NCCL's integer log2i); below 64 B index 0."""
    from hwmodels import get_part
    from topologies.collectives import tree_correction
    table = get_part("collectives", "nccl")["tree_correction"]
    sizes = np.array([2.0 ** 20, 3 * 2.0 ** 20, 2.0 ** 22, 2.0 ** 28, 2.0 ** 29, 2.0 ** 33, 8.0])
    assert tree_correction(sizes, table) == pytest.approx([0.5, 0.6, 0.7, 0.9, 1.0, 1.0, 0.9])


def test_tree_all_reduce_bandwidth_term_divides_by_the_correction():
    from topologies.collectives import nccl_tree_all_reduce_s
    args = (2.0 ** 22, 32.0, 4.0, 1e12, 0.0, 0.0, 0.0, 1.0)
    plain = nccl_tree_all_reduce_s(*args)
    corrected = nccl_tree_all_reduce_s(*args, correction=[0.7] * 23)
    assert corrected == pytest.approx(plain / 0.7)
    assert plain == pytest.approx(2 * 2.0 ** 22 * 8 / 1e12)
