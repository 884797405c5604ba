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

from typing import NamedTuple

import numpy as np
from hwmodels.select import where

from topologies.nvls_tree import (NvlsGroup, NvlsTree, _beta, nvls_tree_beta_s,  # noqa: F401  (re-exported)
                                  nvls_tree_chunk_bytes, nvls_tree_fill_s, nvls_tree_group,
                                  nvls_tree_latency_s)


def ring_reduce_scatter_s(size_bytes, n, bandwidth_bps, latency_s):
    """Ring reduce-scatter: (n-1)/n * S/B + (n-1) alpha."""
    n = np.asarray(n, dtype=float)
    t = (n - 1) / n * _beta(size_bytes, bandwidth_bps) + (n - 1) * latency_s
    return where(n > 1, t, 0.0)


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
    return where(n > 1, t, 0.0)


def tree_all_reduce_s(size_bytes, n, bandwidth_bps, latency_s):
    """Double binary tree (pipelined): ~2 S/B + 2 log2(n) alpha (Sanders et al. 2009)."""
    n = np.asarray(n, dtype=float)
    t = 2 * _beta(size_bytes, bandwidth_bps) + 2 * np.log2(np.maximum(n, 1)) * latency_s
    return where(n > 1, t, 0.0)


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
    dimension, B_i the bandwidth a rank has along dimension i (both ring directions).
    The dimensions run fastest first: swapping two adjacent dimensions a, b changes the time by
    (1 - 1/n_a)(1 - 1/n_b) S_a (1/B_a - 1/B_b), so the order of decreasing B_i is the fastest
    (the rings of one dimension can go in any order, the algorithm is the same)."""
    shape = np.broadcast_shapes(*(np.shape(x) for x in (size_bytes, latency_s, *ns, *bandwidths_bps)))
    ns = np.stack([np.broadcast_to(np.asarray(n, dtype=float), shape) for n in ns])
    bws = np.stack([np.broadcast_to(np.asarray(b, dtype=float), shape) for b in bandwidths_bps])
    order = np.argsort(-bws, axis=0, kind="stable")
    ns, bws = np.take_along_axis(ns, order, axis=0), np.take_along_axis(bws, order, axis=0)
    t = 0.0
    shard = np.asarray(size_bytes, dtype=float)
    for n, b in zip(ns, bws):
        t = t + ring_reduce_scatter_s(shard, n, b, latency_s)
        shard = shard / n
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
    return where(n > 1, t, 0.0)


# ---------------------------------------------------------------------------------------------
# Per-call model of a collective library (NCCL): algorithm, latency per step and per hop.
# NVIDIA/nccl src/graph/tuning.cc: a ring collective over nRanks ranks on nNodes nodes takes
# nsteps = (n-1) steps (reduce-scatter, all-gather) or 2(n-1) (all-reduce), of which
# (nNodes-1) resp. 2(nNodes-1) cross the network; latency = base + intra-node steps x intra
# latency + network steps x network latency (x a plateau factor for large multi-node
# all-reduces). The double binary tree (all-reduce only) pays base + 2((n/nNodes - 1) intra +
# log2(nNodes) net) at half the tree's bus bandwidth, times NCCL's size-dependent tree
# correction factor. Bandwidth: ring time = steps/n x S / busbw.

def ring_steps(n, all_reduce):
    """Ring steps of a collective over n ranks: n-1, or 2(n-1) for an all-reduce."""
    n = np.asarray(n, dtype=float)
    return where(all_reduce, 2.0, 1.0) * (n - 1.0)


def ring_latency_s(n, nodes, lat_intra_s, lat_net_s, base_s, all_reduce=False):
    """base + (steps - net steps) x intra latency + net steps x network latency."""
    steps = ring_steps(n, all_reduce)
    net = ring_steps(nodes, all_reduce)
    return base_s + (steps - net) * lat_intra_s + net * lat_net_s


def tree_latency_s(n, nodes, lat_intra_s, lat_net_s, base_s):
    """Double binary tree all-reduce: base + 2 ((n/nodes - 1) intra + log2(nodes) net)."""
    n = np.asarray(n, dtype=float)
    nodes = np.maximum(np.asarray(nodes, dtype=float), 1.0)
    return base_s + 2.0 * ((n / nodes - 1.0) * lat_intra_s + np.log2(nodes) * lat_net_s)


def nccl_ring_s(size_bytes, n, nodes, bus_bw_bps, lat_intra_s, lat_net_s, base_s, all_reduce=False,
                plateau=1.0):
    """Ring reduce-scatter / all-gather (all_reduce=False) or all-reduce of an S-byte buffer:
    latency + steps/n x S / busbw; the all-reduce latency across nodes is scaled by ``plateau``."""
    n = np.asarray(n, dtype=float)
    lat = ring_latency_s(n, nodes, lat_intra_s, lat_net_s, base_s, all_reduce)
    lat = where(all_reduce & (np.asarray(nodes) > 1), lat * plateau, lat)
    t = lat + ring_steps(n, all_reduce) / n * _beta(size_bytes, bus_bw_bps)
    return where(n > 1, t, 0.0)


def tree_correction(size_bytes, table):
    """NCCL's tree all-reduce bandwidth multiplier by message size: ``table[log2(S / 64)]``
    inside the table, 1 beyond it (NVIDIA/nccl:src/graph/tuning.cc, treeCorrectionFactor;
    ``table`` is the catalog's ``tree_correction``)."""
    return _table(_size_index(size_bytes), table)


def nccl_tree_all_reduce_s(size_bytes, n, nodes, bus_bw_bps, lat_intra_s, lat_net_s, base_s, tree_factor,
                           correction=None, latency_s=None):
    """Double binary tree all-reduce: latency + S / (tree_factor x busbw x correction(S) / 2);
    ``correction``: NCCL's size-dependent table (``tree_correction``), None = 1; ``latency_s``
    replaces the chain-and-tree latency (``tree_latency_s``) when given (the NVLS tree's)."""
    n = np.asarray(n, dtype=float)
    bw = tree_factor * np.asarray(bus_bw_bps, dtype=float)
    if correction is not None:
        bw = bw * tree_correction(size_bytes, correction)
    lat = tree_latency_s(n, nodes, lat_intra_s, lat_net_s, base_s) if latency_s is None else latency_s
    t = lat + 2.0 * _beta(size_bytes, bw)
    return where(n > 1, t, 0.0)


def nccl_protocol_s(simple_s, low_latency_s, pipeline_s):
    """NCCL's protocol choice per call: min(Simple + its per-call pipeline time, low-latency
    protocol). The nccl-tests curves of tests/validation/collective_bench.csv lie 50-150 us
    above latency + size / bus bandwidth from 4 MiB up while the 1 MiB points sit on it:
    small buffers run a low-latency protocol (LL/LL128: flag per 8 or 128 bytes, a fraction of
    the bandwidth), larger ones Simple, whose pipeline pays ``pipeline_s`` per call
    (hwmodels/catalog/collectives.toml, fitted there)."""
    return np.minimum(np.asarray(simple_s, dtype=float) + pipeline_s, low_latency_s)


class NcclTuning(NamedTuple):
    """NCCL's own tuning constants (hwmodels/catalog/collectives.toml ``tuning_*``, from
    NVIDIA/nccl:src/graph/tuning.cc): rows [tree, ring], columns [LL, LL128, Simple], seconds."""
    base_s: tuple
    nvlink_s: tuple
    net_s: tuple
    net_overhead_s: float
    nvls_tree_s: tuple             # (NVLink, per network tree level)
    ll_max_bps: tuple              # LL bus-bandwidth cap on 1 node, 2 nodes, >= 3 nodes (bits/s)
    tree_correction_ll: np.ndarray
    tree_correction_ll128: np.ndarray


def _size_index(size_bytes):
    """Index of NCCL's per-size tables: floor(log2(S / 64)) (tuning.cc ``log2i(nBytes >> 6)``)."""
    return np.floor(np.log2(np.maximum(np.asarray(size_bytes, dtype=float) / 64.0, 1.0))).astype(np.intp)


def _table(idx, table):
    table = np.asarray(table, dtype=float)
    return np.where(idx < table.size, table[np.minimum(idx, table.size - 1)], 1.0)


def nccl_choice_terms(n, nodes, bus_bw_bps, tree_bus_bps, all_reduce, tuning, plateau, correction, nvls=None):
    """The size-independent part of NCCL's own time estimates (NVIDIA/nccl:src/graph/tuning.cc
    ncclTopoTuneModel), per group, for ``nccl_low_latency_excess_s``: latency estimates of Simple
    and of the low-latency protocols (LL; LL128 inside one domain only, as the model runs it) by
    ring and (for an all-reduce) tree and NVLS tree, and the low-latency bandwidth factors.
    Per algorithm and protocol p: latency = base[p] + steps x per-step latency[p] (ring: the
    intra-node steps of a multi-node ring at max(NVLink latency, net overhead, x 3 for Simple),
    the network steps at the net latency, the tree's with one rank per node; a multi-node
    Simple ring all-reduce x ``plateau``; tree: 2((ppn - 1) intra + log2(nodes) net); NVLS
    tree: NVLink + 2 log2(nodes) net; ``tree_s`` the faster of tree and NVLS tree where
    ``nvls``); bandwidth relative to Simple's (``*_g``, inverse): ring
    LL min(llMaxBw / busBw, 1/2), LL128 0.92; tree LL min(1/3.8, llMaxBw / tree busBw), LL128
    7/9 on one node, each with its protocol's tree correction in place of Simple's
    (``ratio_*``, by size index)."""
    n = np.asarray(n, dtype=float)
    nodes = np.maximum(np.asarray(nodes, dtype=float), 1.0)
    multi = nodes > 1
    m = multi.astype(float)
    (bt_ll, bt_128, bt_s), (br_ll, br_128, br_s) = tuning.base_s
    (vt_ll, vt_128, vt_s), (vr_ll, vr_128, vr_s) = tuning.nvlink_s
    (nt_ll, _, nt_s), (nr_ll, _, nr_s) = tuning.net_s
    over = tuning.net_overhead_s
    steps = ring_steps(n, all_reduce)
    net = ring_steps(nodes, all_reduce)
    intra = steps - net
    one = n <= nodes               # one rank per node: the ring's network steps at the tree's latency
    net_s = nr_s if nt_s == nr_s else where(one, nt_s, nr_s)
    net_ll = nr_ll if nt_ll == nr_ll else where(one, nt_ll, nr_ll)
    vs, vl = max(vr_s, 3.0 * over), max(vr_ll, over)
    ring_s = br_s + intra * (vr_s if vs == vr_s else vr_s + (vs - vr_s) * m) + net * net_s
    if all_reduce:
        ring_s = ring_s * (1.0 + (plateau - 1.0) * m)
    ll_max = np.where(nodes > 2, tuning.ll_max_bps[2], np.where(multi, tuning.ll_max_bps[1], tuning.ll_max_bps[0]))
    # inverse bandwidth factors: 1 / min(llMaxBw / busBw, 1/2) = max(busBw / llMaxBw, 2)
    terms = {"ring_s": ring_s,
             "ring_ll": br_ll + intra * (vr_ll if vl == vr_ll else vr_ll + (vl - vr_ll) * m) + net * net_ll,
             "ring_ll_g": np.maximum(np.asarray(bus_bw_bps, dtype=float) / ll_max, 2.0),
             "ring_128": None if multi.all() else where(multi, np.inf, br_128 + steps * vr_128)}
    if all_reduce:
        ppn1 = n / nodes - 1.0
        lvl = np.log2(nodes)
        tree_s = bt_s + 2.0 * (ppn1 * vt_s + lvl * nt_s)
        terms["tree_ll"] = bt_ll + 2.0 * (ppn1 * vt_ll + lvl * nt_ll)
        terms["tree_ll_g"] = np.maximum(np.asarray(tree_bus_bps, dtype=float) / ll_max, 3.8)
        terms["tree_128"] = None if multi.all() else where(multi, np.inf, bt_128 + 2.0 * ppn1 * vt_128)
        terms["tree_s"] = tree_s
        # NVLS tree (Simple only): intraLat + 2 log2(nNodes) interLat, base 0 (tuning.cc)
        terms["nvls_s"] = None if nvls is None else where(
            nvls, tuning.nvls_tree_s[0] + 2.0 * lvl * tuning.nvls_tree_s[1], np.inf)
        # each Simple latency estimate above the smallest one (nccl_simple_margins_s)
        lat_min = np.minimum(terms["ring_s"], tree_s)
        if nvls is not None:
            lat_min = np.minimum(lat_min, terms["nvls_s"])
            terms["nvls_dl"] = terms["nvls_s"] - lat_min
        terms["ring_dl"], terms["tree_dl"] = terms["ring_s"] - lat_min, tree_s - lat_min
        c = _padded(correction)
        terms["ratio_ll"] = c / _padded(tuning.tree_correction_ll)
        terms["ratio_128"] = c / _padded(tuning.tree_correction_ll128) * (9.0 / 7.0)
    return terms


_RATIO_COLS = 64


def _padded(table):
    """A per-size-index table (``_size_index``) padded with 1 (NCCL's value beyond it) to 64 entries."""
    t = np.ones(_RATIO_COLS)
    table = np.asarray(table, dtype=float)
    t[:table.size] = table
    return t


def nccl_simple_margins_s(terms, ring_beta_s, tree_beta_s, nvls_beta_s=None):
    """NCCL's algorithm choice for a Simple all-reduce (NVIDIA/nccl src/enqueue.cc
    topoGetAlgoInfo: the smallest of its own estimates, tuning.cc ncclTopoGetAlgoTime), as a
    margin per algorithm: how much slower NCCL's estimate of ring / tree / NVLS tree is than its
    best one (0 for the one it runs). ``*_beta_s``: the byte times of the estimates (the model's
    bus bandwidths taken as NCCL's graph bandwidth, as in ``nccl_low_latency_excess_s``; the
    model's byte time of each algorithm is the same figure). The model charges each algorithm its
    own time plus its margin, and runs the cheapest: NCCL's choice where its preference is clear,
    continuous where its estimates cross. For the margin of algorithm a, the others' byte times
    are taken at most twice a's (its model plus its estimate byte time), so that the charged time
    never rises as a bus bandwidth rises. Returns (ring, tree, nvls) margins (nvls None without
    an NVLS estimate)."""
    # margin_a = max(0, est_a - min over b of (latency_b + min(beta_b, 2 beta_a)))
    #          = max(est_a - best, latency_a - min latency - beta_a), as est_a >= best
    est = [terms["ring_s"] + ring_beta_s, terms["tree_s"] + tree_beta_s]
    dlat, betas = [terms["ring_dl"], terms["tree_dl"]], [ring_beta_s, tree_beta_s]
    nv = terms.get("nvls_s") is not None and nvls_beta_s is not None
    if nv:
        est.append(terms["nvls_s"] + nvls_beta_s)
        dlat.append(terms["nvls_dl"])
        betas.append(nvls_beta_s)
    best = np.minimum(est[0], est[1])
    if nv:
        best = np.minimum(best, est[2])
    out = [np.maximum(e - best, d - b) for e, d, b in zip(est, dlat, betas)]
    return out[0], out[1], (out[2] if nv else None)


def nccl_low_latency_excess_s(terms, ring_beta_s, tree_beta_s=None, idx=None, ll_fraction=1.0, nvls_beta_s=None):
    """NCCL's own estimate of the low-latency protocol's time minus that of Simple (tuning.cc
    ncclTopoGetAlgoTime: latency + bytes / bandwidth, the tree with its per-size correction):
    low-latency = min over LL (and LL128 inside one domain) of ring and tree, Simple = min(ring,
    tree, NVLS tree at ``nvls_beta_s``); NCCL runs the low-latency protocol where this is negative. ``terms``:
    ``nccl_choice_terms`` of the group; ``ring_beta_s`` / ``tree_beta_s``: the call's Simple byte
    times on ring / tree (the model's bus bandwidths, taken as NCCL's graph bandwidth); ``idx``:
    ``_size_index`` of the size (all-reduce). Returns the excess against the ring, and for an
    all-reduce also against the tree: Simple's byte time on the other algorithm taken at most
    the low-latency byte time of this one (the model's, at ``ll_fraction``), so that the model's
    low-latency time of an algorithm plus its excess never falls as a bandwidth falls."""
    low = terms["ring_ll"] + ring_beta_s * terms["ring_ll_g"]
    if terms["ring_128"] is not None:
        low = np.minimum(low, terms["ring_128"] + ring_beta_s * (1.0 / 0.92))
    if tree_beta_s is None:
        return low - (terms["ring_s"] + ring_beta_s)
    i = np.minimum(idx, _RATIO_COLS - 1)
    low = np.minimum(low, terms["tree_ll"] + tree_beta_s * np.take(terms["ratio_ll"], i) * terms["tree_ll_g"])
    if terms["tree_128"] is not None:
        low = np.minimum(low, terms["tree_128"] + tree_beta_s * np.take(terms["ratio_128"], i))
    tree_lat = terms["tree_s"]
    ring_low_beta = ring_beta_s / ll_fraction
    tree_low_beta = tree_beta_s / ll_fraction
    on_ring = low - np.minimum(terms["ring_s"] + ring_beta_s, tree_lat + np.minimum(tree_beta_s, ring_low_beta))
    on_tree = low - np.minimum(terms["ring_s"] + np.minimum(ring_beta_s, tree_low_beta), tree_lat + tree_beta_s)
    if terms.get("nvls_s") is not None and nvls_beta_s is not None:
        nv = terms["nvls_s"]
        on_ring = np.maximum(on_ring, low - (nv + np.minimum(nvls_beta_s, ring_low_beta)))
        on_tree = np.maximum(on_tree, low - (nv + np.minimum(nvls_beta_s, tree_low_beta)))
    return on_ring, on_tree


def _nvls_tree_s(size_bytes, nodes, tree_bus_bps, lat_nvls_s, lat_net_s, base_s, spec):
    """The NVLS tree's Simple time (without the per-call pipeline time) and its byte time:
    ``nvls_tree_latency_s`` + ``nvls_tree_beta_s`` + ``nvls_tree_fill_s``."""
    if spec is None:
        raise ValueError("nvls given without nvls_tree: pass the NvlsTree constants "
                         "(hwmodels/catalog/collectives.toml nvls_tree_*) with the NVLS flags")
    if not isinstance(spec, NvlsGroup):
        spec = nvls_tree_group(nodes, spec)
    nbw = nvls_tree_beta_s(size_bytes, tree_bus_bps, spec)
    return (nvls_tree_latency_s(nodes, lat_nvls_s, lat_net_s, base_s) + nbw
            + nvls_tree_fill_s(size_bytes, nodes, tree_bus_bps, spec)), nbw


def nccl_call_s(size_bytes, n, nodes, bus_bw_bps, tree_bus_bps, lat_intra_s, lat_net_s, base_s, all_reduce,
                plateau, tree_factor, correction, ll_fraction, pipeline_s, nvls=None, lat_nvls_s=0.0,
                choice=None, nvls_tree=None):
    """One NCCL call, each latency and bandwidth term computed once: Simple = min(ring, tree,
    NVLS tree where ``nvls``) + ``pipeline_s`` or low-latency = min(ring, tree) at
    ``ll_fraction`` x the bus bandwidths. Same terms as ``nccl_ring_s``,
    ``nccl_tree_all_reduce_s`` (tree for all-reduce only) and, for the NVLS tree (``nvls_tree``:
    its ``NvlsTree`` constants or the group's ``NvlsGroup``, required with ``nvls``),
    ``nvls_tree_latency_s`` +
    ``nvls_tree_beta_s`` + ``nvls_tree_fill_s``.
    Protocol: without ``choice`` the faster of the two (``nccl_protocol_s``); with ``choice``
    (the group's ``nccl_choice_terms``) NCCL's own preference as well: NCCL picks by its tuning
    estimates, not by the time the call then takes, so where they rank the low-latency protocol
    slower than Simple by e (``nccl_low_latency_excess_s`` > 0, per algorithm), the low-latency
    time is charged e more: min(ring low-latency + max(e_ring, 0), tree low-latency +
    max(e_tree, 0), Simple + ``pipeline_s``). Where NCCL's preference for Simple is clear this is
    Simple (NCCL's choice); near NCCL's switch-over it moves continuously, and it never rises with
    a bus bandwidth: e grows as a bandwidth rises by at most what Simple's byte time falls, which
    is at most what the same algorithm's low-latency byte time falls. The same for the
    algorithm of a Simple all-reduce: each of ring, tree and NVLS tree is charged the margin by
    which NCCL's estimates rank it behind the one NCCL runs (``nccl_simple_margins_s``)."""
    n = np.asarray(n, dtype=float)
    lat = ring_latency_s(n, nodes, lat_intra_s, lat_net_s, base_s, all_reduce)
    if all_reduce:
        lat = where(np.asarray(nodes) > 1, lat * plateau, lat)
    bw = ring_steps(n, all_reduce) / n * _beta(size_bytes, bus_bw_bps)
    simple = lat + bw
    low = lat + bw / ll_fraction
    idx = _size_index(size_bytes) if all_reduce else None
    if all_reduce:
        tbw = 2.0 * _beta(size_bytes, tree_factor * np.asarray(tree_bus_bps, dtype=float) * _table(idx, correction))
        tlat = tree_latency_s(n, nodes, lat_intra_s, lat_net_s, base_s)
        tree = tlat + tbw
        low_tree = tlat + tbw / ll_fraction
        nvt = nbw = None
        if nvls is not None:       # NVLS algorithms run the Simple protocol only (tuning.cc)
            nvt, nbw = _nvls_tree_s(size_bytes, nodes, tree_bus_bps, lat_nvls_s, lat_net_s, base_s, nvls_tree)
            nvt = where(nvls, nvt, np.inf)
        if choice is not None:     # NCCL's algorithm choice: each charged its margin
            m_ring, m_tree, m_nvls = nccl_simple_margins_s(choice, bw, tbw, nbw)
            simple, tree = simple + m_ring, tree + m_tree
            if nvt is not None:
                nvt = nvt + m_nvls
        simple = np.minimum(simple, tree)
        if nvt is not None:
            simple = np.minimum(simple, nvt)
    if choice is None:
        t = nccl_protocol_s(simple, np.minimum(low, low_tree) if all_reduce else low, pipeline_s)
    elif all_reduce:
        on_ring, on_tree = nccl_low_latency_excess_s(choice, bw, tbw, idx, ll_fraction, nbw)
        t = np.minimum(np.minimum(low + np.maximum(on_ring, 0.0), low_tree + np.maximum(on_tree, 0.0)),
                       simple + pipeline_s)
    else:
        t = np.minimum(low + np.maximum(nccl_low_latency_excess_s(choice, bw), 0.0), simple + pipeline_s)
    return where(n > 1, t, 0.0)


def nccl_tree_s(size_bytes, n, nodes, tree_bus_bps, lat_intra_s, lat_net_s, base_s, tree_factor, correction,
                ll_fraction, pipeline_s, nvls=None, lat_nvls_s=0.0, nvls_tree=None):
    """An all-reduce by NCCL's double binary tree alone (and its NVLS tree where ``nvls`` and
    nodes > 1, ``nvls_tree`` its constants), with the faster protocol (``nccl_protocol_s``): the
    tree terms of ``nccl_call_s``."""
    n = np.asarray(n, dtype=float)
    tbw = 2.0 * _beta(size_bytes, tree_factor * np.asarray(tree_bus_bps, dtype=float)
                      * tree_correction(size_bytes, correction))
    tlat = tree_latency_s(n, nodes, lat_intra_s, lat_net_s, base_s)
    simple, low = tlat + tbw, tlat + tbw / ll_fraction
    if nvls is not None:
        nvt, _ = _nvls_tree_s(size_bytes, nodes, tree_bus_bps, lat_nvls_s, lat_net_s, base_s, nvls_tree)
        simple = where(nvls & (np.asarray(nodes) > 1), np.minimum(simple, nvt), simple)
    return where(n > 1, nccl_protocol_s(simple, low, pipeline_s), 0.0)


def bus_bandwidth_gbs(kind, size_bytes, n, time_s):
    """nccl-tests bus bandwidth (GB/s) of a measured or modelled time: algbw x steps/n."""
    n = np.asarray(n, dtype=float)
    alg = np.asarray(size_bytes, dtype=float) / np.asarray(time_s, dtype=float)
    factor = where(np.asarray(kind) == "all_reduce", 2.0 * (n - 1) / n, (n - 1) / n)
    return alg * factor / 1e9
