"""Alpha-beta costs of collective operations (vectorised over numpy arrays).

Every function takes the per-rank buffer ``size_bytes``, the group size ``n``,
the per-rank, per-direction link bandwidth ``bandwidth_bps`` (bits/s) and the
per-message latency ``latency_s``, all broadcasting arrays, and returns seconds.
A group of one rank costs zero.

References
----------
Thakur, Rabenseifner, Gropp, "Optimization of Collective Communication
Operations in MPICH", IJHPCA 19(1), 2005: ring / recursive halving-doubling
costs (Table 1). Sanders, Speck, Träff, "Two-tree algorithms for full
bandwidth broadcast, reduction and scan", Parallel Computing 35(12), 2009
(double binary tree, as used by NCCL).
"""
from __future__ import annotations

import numpy as np


def _beta(size_bytes, bandwidth_bps):
    return np.asarray(size_bytes, dtype=float) * 8.0 / np.asarray(bandwidth_bps, dtype=float)


def ring_reduce_scatter_s(size_bytes, n, bandwidth_bps, latency_s):
    """Ring reduce-scatter: (n-1)/n * S/B + (n-1) alpha."""
    n = np.asarray(n, dtype=float)
    t = (n - 1) / n * _beta(size_bytes, bandwidth_bps) + (n - 1) * latency_s
    return np.where(n > 1, t, 0.0)


def ring_all_gather_s(size_bytes, n, bandwidth_bps, latency_s):
    """Ring all-gather of an S-byte result: (n-1)/n * S/B + (n-1) alpha."""
    return ring_reduce_scatter_s(size_bytes, n, bandwidth_bps, latency_s)


def ring_all_reduce_s(size_bytes, n, bandwidth_bps, latency_s):
    """Ring all-reduce = reduce-scatter + all-gather: 2(n-1)/n * S/B + 2(n-1) alpha."""
    return 2.0 * ring_reduce_scatter_s(size_bytes, n, bandwidth_bps, latency_s)


def rhd_all_reduce_s(size_bytes, n, bandwidth_bps, latency_s):
    """Recursive halving-doubling (Rabenseifner): 2(n-1)/n * S/B + 2 log2(n) alpha."""
    n = np.asarray(n, dtype=float)
    t = 2 * (n - 1) / n * _beta(size_bytes, bandwidth_bps) + 2 * np.log2(np.maximum(n, 1)) * latency_s
    return np.where(n > 1, t, 0.0)


def tree_all_reduce_s(size_bytes, n, bandwidth_bps, latency_s):
    """Double binary tree (pipelined): ~2 S/B + 2 log2(n) alpha (Sanders et al. 2009)."""
    n = np.asarray(n, dtype=float)
    t = 2 * _beta(size_bytes, bandwidth_bps) + 2 * np.log2(np.maximum(n, 1)) * latency_s
    return np.where(n > 1, t, 0.0)


def all_reduce_s(size_bytes, n, bandwidth_bps, latency_s):
    """Best of ring, recursive halving-doubling and double binary tree (as NCCL tunes)."""
    return np.minimum.reduce([
        ring_all_reduce_s(size_bytes, n, bandwidth_bps, latency_s),
        rhd_all_reduce_s(size_bytes, n, bandwidth_bps, latency_s),
        tree_all_reduce_s(size_bytes, n, bandwidth_bps, latency_s),
    ])


def hierarchical_all_reduce_s(size_bytes, n_inner, bw_inner_bps, lat_inner_s,
                              n_outer, bw_outer_bps, lat_outer_s):
    """Two-level all-reduce: reduce-scatter inside the scale-up domain (n_inner ranks),
    all-reduce of the 1/n_inner shard across n_outer domains (all inner ranks in
    parallel, each on its own NIC share), all-gather inside the domain."""
    n_inner = np.asarray(n_inner, dtype=float)
    inner = ring_reduce_scatter_s(size_bytes, n_inner, bw_inner_bps, lat_inner_s)
    outer = all_reduce_s(np.asarray(size_bytes) / n_inner, n_outer, bw_outer_bps, lat_outer_s)
    return 2 * inner + outer


def hierarchical_reduce_scatter_s(size_bytes, n_inner, bw_inner_bps, lat_inner_s,
                                  n_outer, bw_outer_bps, lat_outer_s):
    """Two-level reduce-scatter (inner first, then the shard across domains); all-gather is its mirror."""
    n_inner = np.asarray(n_inner, dtype=float)
    inner = ring_reduce_scatter_s(size_bytes, n_inner, bw_inner_bps, lat_inner_s)
    outer = ring_reduce_scatter_s(np.asarray(size_bytes) / n_inner, n_outer, bw_outer_bps, lat_outer_s)
    return inner + outer


def all_to_all_s(size_bytes, n, bandwidth_bps, latency_s):
    """Pairwise all-to-all of an S-byte buffer: (n-1)/n * S/B + (n-1) alpha."""
    return ring_reduce_scatter_s(size_bytes, n, bandwidth_bps, latency_s)


def p2p_s(size_bytes, bandwidth_bps, latency_s):
    """Point-to-point send of S bytes: alpha + S/B."""
    return latency_s + _beta(size_bytes, bandwidth_bps)


def torus_reduce_scatter_s(size_bytes, ns, bandwidths_bps, latency_s):
    """Multi-dimensional (torus) reduce-scatter, one dimension after another on a shrinking shard:
    sum_i (n_i - 1)/n_i * S_i / B_i + (n_i - 1) alpha, S_1 = S, S_{i+1} = S_i / n_i
    (bucket algorithm, Chan et al., "Collective communication: theory, practice, and
    experience", CCPE 19(13), 2007, Sec. 7); ``ns``/``bandwidths_bps`` list one entry per
    dimension, B_i the bandwidth a rank has along dimension i (both ring directions)."""
    t = 0.0
    shard = np.asarray(size_bytes, dtype=float)
    for n, b in zip(ns, bandwidths_bps):
        t = t + ring_reduce_scatter_s(shard, n, b, latency_s)
        shard = shard / np.asarray(n, dtype=float)
    return t


def torus_all_reduce_s(size_bytes, ns, bandwidths_bps, latency_s):
    """Torus all-reduce = reduce-scatter then all-gather over the dimensions: 2 x torus_reduce_scatter_s."""
    return 2.0 * torus_reduce_scatter_s(size_bytes, ns, bandwidths_bps, latency_s)


def bisection_all_to_all_s(size_bytes, n, injection_bps, bisection_bps_per_rank, latency_s):
    """All-to-all limited by injection or bisection: each rank sends (n-1)/n S, half of which
    crosses the bisection, so T = max((n-1)/n S/B_inj, S/2 / B_bis) + (n-1) alpha."""
    n = np.asarray(n, dtype=float)
    s8 = np.asarray(size_bytes, dtype=float) * 8.0
    t = np.maximum((n - 1) / n * s8 / injection_bps, 0.5 * s8 / bisection_bps_per_rank) + (n - 1) * latency_s
    return np.where(n > 1, t, 0.0)
