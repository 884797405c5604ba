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


def _catalog_tuning():
    """The collective library (catalog), NCCL's tuning constants, the tree correction and the NVLS-tree spec."""
    import numpy as np
    from topologies import collectives as coll
    from explore.model.fabric import library
    lib = library()
    tun = coll.NcclTuning(tuple(map(tuple, lib["tuning_base_latency_s"])),
                          tuple(map(tuple, lib["tuning_nvlink_latency_s"])),
                          tuple(map(tuple, lib["tuning_net_latency_s"])), float(lib["tuning_net_overhead_s"]),
                          tuple(lib["tuning_nvls_tree_latency_s"]),
                          tuple(8e9 * b for b in lib["tuning_ll_max_bandwidth_gbs"]),
                          np.asarray(lib["tuning_tree_correction_ll"]), np.asarray(lib["tuning_tree_correction_ll128"]))
    spec = coll.NvlsTree(lib["nvls_tree_bandwidth_factor"], lib["nvls_tree_channels"], lib["nvls_chunk_bytes"],
                         lib["nvls_tree_max_chunk_bytes"], 8.0)
    return lib, tun, np.asarray(lib["tree_correction"]), spec


def test_nccl_protocol_preference_never_slows_a_call_as_bandwidth_rises():
    """NCCL picks its protocol by its own estimates (tuning.cc), which can leave LL for Simple as
    the bus bandwidth rises (LL's estimate is capped at llMaxBw). Charged as a hard switch that
    made a call slower with more bandwidth; charged as the margin of NCCL's estimates
    (topologies.collectives.nccl_call_s with ``choice``) a call's time never rises with bandwidth.
    Checked on a dense bandwidth sweep against the plain monotone property (no formula restated)."""
    import numpy as np
    from topologies import collectives as coll
    lib, tun, corr, spec = _catalog_tuning()
    bus = np.geomspace(1e9, 1e14, 3000)
    hard_rises = 0
    for ar in (False, True):
        for n, nodes in ((8, 1), (32, 4), (16, 16), (256, 32), (24, 3)):
            for size in 2.0 ** np.arange(12, 34, 3):
                nd = np.array(float(nodes))
                frac = 0.5 if nodes > 1 else 0.92
                nvls = np.array(True) if (ar and nodes > 1) else None
                terms = coll.nccl_choice_terms(np.array(float(n)), nd, bus, 0.92 * bus, ar, tun,
                                               lib["ring_latency_plateau"], corr, nvls)
                t = coll.nccl_call_s(size, np.array(float(n)), nd, bus, bus, 3e-6, 5e-6, lib["base_latency_s"], ar,
                                     lib["ring_latency_plateau"], 0.92, corr, frac, lib["simple_pipeline_s"], nvls,
                                     lib["nvls_latency_s"], terms, nvls_tree=spec)
                assert np.all(np.diff(t) <= 1e-12 * t[:-1]), (ar, n, nodes, size)
                plain = coll.nccl_call_s(size, np.array(float(n)), nd, bus, bus, 3e-6, 5e-6, lib["base_latency_s"],
                                         ar, lib["ring_latency_plateau"], 0.92, corr, frac, lib["simple_pipeline_s"],
                                         nvls, lib["nvls_latency_s"], nvls_tree=spec)
                assert np.all(t >= plain * (1 - 1e-12))     # NCCL's preference never makes a call faster
                ex = coll.nccl_low_latency_excess_s(terms, 1.0 / bus * size * 8)
                hard_rises += int(np.any(np.diff(np.where(np.ravel(ex) < 0, 0.0, 1.0)) > 0))
    assert hard_rises > 0       # NCCL's estimate does switch to Simple as bandwidth rises somewhere


def test_nccl_algorithm_margin_never_slows_a_call_as_bandwidth_rises():
    """NCCL's algorithm choice (ring, tree, NVLS tree) charged as the margin of its estimates
    (``nccl_simple_margins_s``): as the network bandwidth rises, with the scale-up bandwidth
    capping the bus (and the NVLS tree's bus twice the NIC share on two nodes, ``Fabric._bus``),
    no all-reduce gets slower, from 4 KiB to 8 GiB on 2-8 nodes."""
    import numpy as np
    from topologies import collectives as coll
    lib, tun, corr, spec = _catalog_tuning()
    net = np.geomspace(1e9, 1e14, 3000)
    picks = set()
    for cap in (2.9e12, 3.6e12, 7.2e12):                    # scale-up bus bandwidths (bits/s)
        for n, nodes in ((16, 2), (8, 2), (24, 3), (32, 4), (64, 8)):
            bus = np.minimum(cap, net)
            tree_bus = np.minimum(cap, 2 * net) if nodes == 2 else bus
            nd, nv = np.array(float(nodes)), np.array(True)
            terms = coll.nccl_choice_terms(np.array(float(n)), nd, bus, 0.92 * tree_bus, True, tun,
                                           lib["ring_latency_plateau"], corr, nv)
            for size in 2.0 ** np.arange(12, 34):
                t = coll.nccl_call_s(size, np.array(float(n)), nd, bus, tree_bus, 3e-6, 5e-6, lib["base_latency_s"],
                                     True, lib["ring_latency_plateau"], 0.92, corr, 0.5, lib["simple_pipeline_s"],
                                     nv, lib["nvls_latency_s"], terms, nvls_tree=spec)
                assert np.all(np.diff(t) <= 1e-12 * t[:-1]), (cap, n, nodes, size)
                ring_beta = 2 * (n - 1) / n * size * 8 / bus
                tree_beta = 2 * size * 8 / (0.92 * tree_bus * coll.tree_correction(size, corr))
                margins = coll.nccl_simple_margins_s(terms, ring_beta, tree_beta,
                                                     coll.nvls_tree_beta_s(size, tree_bus, spec))
                picks |= {k for k, m in zip(("ring", "tree", "nvls"), margins) if np.any(m == 0.0)}
    assert picks == {"ring", "tree", "nvls"}      # each is NCCL's pick somewhere in the sweep
