"""The fabric a parallel group's collectives run on, per call (algorithm, latency, bandwidth).

A group of ``n`` ranks ``stride`` apart has ``inner`` ranks per scale-up domain and spans
``outer`` domains (``topologies.placement.group_span``). On the packet-switched families
(and OCS circuits) a collective is one flat NCCL ring over all n ranks, or for an
all-reduce the double binary tree when that is faster (``topologies.collectives``,
constants in ``hwmodels/catalog/collectives.toml``):

* bus bandwidth: the scale-up bandwidth inside one domain; across domains the
  slowest hop, min(scale-up, inner x the per-rank network share that
  ``topologies.placement.Placement`` gives the group under contention);
* latency: a base per call plus one scale-up latency per intra-domain step and one
  network latency per network step (ring), or per tree level (tree); the tree's bandwidth
  carries NCCL's size-dependent correction factor;
* protocol: NCCL's Simple protocol (the ring/tree above plus a per-call pipeline time,
  ``simple_pipeline_s``) or its low-latency protocol (the ring with the same latencies at a
  fraction of the bus bandwidth: LL128 inside a domain, LL across domains), as NCCL picks them
  by its own tuning estimates (tuning.cc constants ``tuning_*``): the faster of the two, the
  low-latency one charged the margin by which NCCL's estimates rank it slower than Simple
  (``topologies.collectives.nccl_choice_terms`` once per group,
  ``nccl_low_latency_excess_s`` per call, ``nccl_call_s``);
* algorithm: ring, tree or NVLS tree as NCCL picks them by its own estimates: each charged
  the margin by which NCCL's estimates rank it behind NCCL's pick
  (``topologies.collectives.nccl_simple_margins_s``), the cheapest runs;
* an all-reduce across domains of a scale-up with in-switch reduction may also run NCCL's
  NVLS tree: one switch reduction per domain (``nvls_latency_s``) instead of the tree's chain
  through the domain's ranks, then the tree across domains, at NCCL's NVLS-tree bandwidth (5/6 of
  half the tree bus, no size correction) plus the fill of its chunk pipeline
  (``coll.nvls_tree_fill_s``: NCCL's chunk rules, its heads = the group's NICs per domain);
* an all-reduce over exactly two domains of a scale-up with in-switch reduction (NVLink
  SHARP) runs NCCL's NVLS tree, which crosses the network once per byte: its tree's network
  bound is twice the NIC share (NVIDIA/nccl:src/graph/tuning.cc, NVLSTree interBw x 2 at
  <= 2 nodes).

On torus families the scale-out part runs dimension by dimension (fastest first) on the torus rings
(``Placement.outer_reduce_scatter``) after a reduce-scatter inside the domain, on the faster of
Simple (with its per-call pipeline time) and low-latency (``nccl_protocol_s``; NCCL's own
estimate is not applied to the torus path).
A domain twice as large keeps what the smaller one had (issue 10, the scale-up property tests):
an all-reduce also has the trees of the domain split into 2, 4, ... parts, each part a node of
its own on the network (``_split_trees``); on torus, ocs-torus and ocs-reconfigurable designs
every call takes the fastest of the domain and its splits, each with its own torus shape or
circuit plan (``explore.model.system.sub_domain_networks``, evaluated on those designs only).
A split is what a job gets by setting NCCL_HOSTID per part; ``Fabric(..., split_domains=False)``
runs NCCL's own node count instead (one node per host, or per NVLink clique under multi-node
NVLink), as a job that does not set it (the published collective benchmarks).

``calls`` splits a buffer into that many collectives (buckets, layers), each paying
its latency.
"""
from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
from hwmodels.select import where

from explore.model import calibration as cal
from explore.model.cardinality import take
from explore.model.system import SystemSpec
from hwmodels.parts import get_part
from topologies import alltoall as a2a
from topologies import collectives as coll
from topologies.placement import Placement, group_span


def library(name: str = "nccl") -> dict:
    """Collective-library constants from the catalog (hwmodels/catalog/collectives.toml)."""
    return get_part("collectives", name)


class Fabric:
    """Per-call collective times of a design's groups (all arguments broadcasting arrays)."""

    def __init__(self, s: SystemSpec, c: cal.Calibration, split_domains: bool = True):
        if s.network is None:
            raise ValueError("SystemSpec.network is None: every system has a scale-out network "
                             "(explore.model.system.build_system sets it)")
        lib = library()
        self.base = float(lib["base_latency_s"])
        self.tree_factor = float(lib["tree_bandwidth_factor"])
        self.plateau = float(lib["ring_latency_plateau"])
        self.tree_correction = np.asarray(lib["tree_correction"], dtype=float)
        self.pipeline = float(lib["simple_pipeline_s"])
        self.ll_intra = float(lib["low_latency_bandwidth_fraction_intra"])
        self.ll_net = float(lib["low_latency_bandwidth_fraction_net"])
        self.nvls_lat = float(lib["nvls_latency_s"])
        # NVLS tree: NCCL's bandwidth (5/6, no tree correction), channels and chunk rules (the
        # pipeline fill, coll.nvls_tree_fill_s); its heads per node: one per NIC-attached GPU
        self.nvls_spec = (float(lib["nvls_tree_bandwidth_factor"]), float(lib["nvls_tree_channels"]),
                          float(lib["nvls_chunk_bytes"]), float(lib["nvls_tree_max_chunk_bytes"]))
        self.nvls_max_heads = float(lib["nvls_max_heads"])
        self.nics_per_device = np.asarray(s.nics_per_device, dtype=float)
        # host work per rank of a list-form collective (catalog, each figure cited there): the
        # copy ProcessGroupNCCL issues per rank from C++ (its ATen call and its launch), and one
        # Python tensor call for each the caller makes per rank
        self.launch_s = float(lib["copy_launch_s"])
        self.list_rank_s = self.launch_s + float(lib["aten_call_s"])
        self.py_call_s = float(lib["python_tensor_call_s"])
        self.tuning = coll.NcclTuning(
            tuple(map(tuple, lib["tuning_base_latency_s"])), tuple(map(tuple, lib["tuning_nvlink_latency_s"])),
            tuple(map(tuple, lib["tuning_net_latency_s"])), float(lib["tuning_net_overhead_s"]),
            tuple(lib["tuning_nvls_tree_latency_s"]), tuple(8e9 * b for b in lib["tuning_ll_max_bandwidth_gbs"]),
            np.asarray(lib["tuning_tree_correction_ll"], dtype=float),
            np.asarray(lib["tuning_tree_correction_ll128"], dtype=float))
        self.su_bw = s.su_bandwidth_bps * s.su_bus_efficiency   # per link generation (catalog bus_efficiency)
        self.su_lat = s.su_latency_s
        self.nvls = np.asarray(s.su_in_switch_reduction, dtype=float) > 0
        self.so_lat = s.so_latency_s
        self.domain = s.su_size
        # the splits of the domain (``_split_trees``, ``self.subs``) are NCCL_HOSTID per part, a
        # setting of the job; False: NCCL's own node count, one node per host or, under
        # multi-node NVLink, per NVLink clique (NVIDIA/nccl v2.26.2-1 src/init.cc, src/graph/topo.cc)
        self.split_domains = bool(split_domains)
        self._cache = {}
        self.place = Placement(s.network, s.su_size, s.so_bandwidth_bps, s.so_latency_s,
                               s.nics_per_device, s.nic_bandwidth_bps, c.scale_out_link_efficiency,
                               s.oversubscription, s.switch_radix, s.devices)
        # torus / OCS designs: the same calls on the domain split into 2, 4, ... parts (each with its
        # own torus shape or circuit plan, explore.model.system.sub_domain_networks); every call
        # takes the fastest, so a larger domain keeps what a smaller one had
        # (a torus and a circuit design apart: each sub-fabric computes one family's paths)
        self.subs = []
        torus = np.asarray(self.place.is_torus())
        for size, net in (s.sub_domains if split_domains else ()):
            split = np.asarray(size) != np.asarray(s.su_size)
            sub = replace(s, su_size=size, network=net, sub_domains=())
            if split.size == 1 and torus.size == 1:          # one design, or all alike
                if split.any():
                    self.subs.append((None, None, Fabric(sub, c)))
                continue
            n = max(split.size, torus.size)
            split = np.broadcast_to(split, (n,))
            for rows in (split & np.broadcast_to(torus, (n,)), split & ~np.broadcast_to(torus, (n,))):
                idx = np.flatnonzero(rows)               # only the designs that split: their rows
                if idx.size:
                    self.subs.append((idx, n, Fabric(take(sub, idx), take(c, idx) if _per_design(c) else c)))

    # ------------------------------------------------------------------ one call
    def _bus(self, stride, n):
        # the same group (the same stride and size arrays) is asked for several collectives
        key = (id(stride), id(n))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is stride and hit[1] is n:
            return hit[2]
        inner, outer = group_span(stride, n, self.domain)
        net = self.place.switched_bw(stride, n)
        bus = where(outer > 1, np.minimum(self.su_bw, inner * net), self.su_bw)
        # NVLS tree on two domains: each byte crosses the network once (twice on a tree/ring)
        tree_bus = where(self.nvls & (outer == 2), np.minimum(self.su_bw, 2.0 * inner * net), bus)
        self._cache[key] = (stride, n, (inner, outer, bus, tree_bus, net))
        return inner, outer, bus, tree_bus, net

    def _nvls_tree(self, inner, nodes, nics_per_device=None):
        """NCCL's NVLS tree of groups of ``inner`` ranks per node on ``nodes`` nodes
        (``coll.NvlsGroup``): heads = the NICs of those ranks, at most one per rank and 32 per
        node (NVIDIA/nccl src/graph/search.cc, NVLS pattern; catalog ``nvls_max_heads``);
        ``nics_per_device`` of the designs ``inner`` is for (default: the fabric's)."""
        nics = self.nics_per_device if nics_per_device is None else nics_per_device
        heads = np.clip(np.asarray(inner, dtype=float) * nics, 1.0,
                        np.clip(inner, 1.0, self.nvls_max_heads))
        return coll.nvls_tree_group(nodes, coll.NvlsTree(*self.nvls_spec, heads))

    def _nvls_group(self, stride, n, inner, outer):
        # the group's NVLS tree (its size-independent part), computed once per group
        key = ("nvls", id(stride), id(n))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is stride and hit[1] is n:
            return hit[2]
        group = self._nvls_tree(inner, outer)
        self._cache[key] = (stride, n, group)
        return group

    def _split_trees(self, t, size_bytes, stride, n, inner, outer):
        """``t`` (one all-reduce per design), or faster where the tree of a smaller scale-up domain
        is: each domain split into 2, 4, ... parts of whole ranks, every part a node of its own on
        the network (as NCCL_HOSTID per part gives), its chain shorter, its network levels more and
        its tree bandwidth min(scale-up, part x network share). A domain twice as large thereby
        keeps every tree (and NVLS tree) the smaller one had. Computed only for the designs where
        a split could be faster than ``t``: at least one more network level and at most the
        bandwidth of a domain halved. A part's network share is its own: the streams leaving a
        leaf or dragonfly group count a part's ranks per node (``Placement.switched_bw``'s
        ``inner``), at most twice the domain's share per halving, so part x share falls with
        every halving and the first bounds the rest."""
        top = float(np.max(inner, initial=1.0))
        if top < 2.0:
            return t
        nv = self.nvls & (outer == 1)            # two halves of one domain: the NVLS tree's x2
        net = self.place.switched_bw(stride, n, inner=np.maximum(inner / 2.0, 1.0))
        bus1 = np.minimum(self.su_bw, where(nv, 2.0, 1.0) * inner / 2.0 * net)
        best = (self.base + 2.0 * (np.log2(outer) + 1.0) * self.so_lat
                + 2.0 * coll._beta(size_bytes, self.tree_factor * bus1))
        idx = np.flatnonzero((inner >= 2.0) & (best < t))
        if idx.size == 0:
            return t
        shape = np.shape(t)
        pick = lambda a: np.broadcast_to(np.asarray(a, dtype=float), shape).reshape(-1)[idx]  # noqa: E731
        size, n_i, inner_i, outer_i, su_bw = (pick(a) for a in (size_bytes, n, inner, outer, self.su_bw))
        nvls = np.broadcast_to(self.nvls, shape).reshape(-1)[idx] if self.nvls.any() else None
        lat = dict(lat_intra_s=pick(self.su_lat), lat_net_s=pick(self.so_lat), base_s=self.base)
        frac = pick(self.ll_net)
        sub = np.full(idx.size, np.inf)
        j = 1
        while 2.0 ** j <= float(np.max(inner_i)):
            part = inner_i / 2.0 ** j
            net_i = pick(net) if j == 1 else pick(
                self.place.switched_bw(stride, n, inner=np.maximum(inner / 2.0 ** j, 1.0)))
            ok = (part >= 1.0) & (np.mod(part, 1.0) == 0.0)
            nodes = where(ok, outer_i * 2.0 ** j, outer_i)
            x2 = (nvls & (nodes == 2)) if nvls is not None else False
            bus = np.minimum(su_bw, where(x2, 2.0, 1.0) * part * net_i)
            spec = self._nvls_tree(part, nodes, pick(self.nics_per_device)) if nvls is not None else None
            tj = coll.nccl_tree_s(size, n_i, nodes, bus, tree_factor=self.tree_factor, correction=self.tree_correction,
                                  ll_fraction=frac, pipeline_s=self.pipeline, nvls=nvls, lat_nvls_s=self.nvls_lat,
                                  nvls_tree=spec, **lat)
            sub = np.minimum(sub, where(ok, tj, np.inf))
            j += 1
        out = np.array(np.broadcast_to(t, shape), dtype=float)
        flat = out.reshape(-1)
        flat[idx] = np.minimum(flat[idx], sub)
        return out

    def _choice(self, stride, n, outer, bus, tree_bus, all_reduce, nvls):
        # NCCL's protocol-choice terms of a group (topologies.collectives.nccl_choice_terms),
        # computed once per group and collective kind (a group is asked for several sizes)
        key = ("choice", id(stride), id(n), bool(all_reduce))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is stride and hit[1] is n:
            return hit[2]
        terms = coll.nccl_choice_terms(n, outer, bus, self.tree_factor * tree_bus, all_reduce, self.tuning,
                                       self.plateau, self.tree_correction, nvls)
        self._cache[key] = (stride, n, terms)
        return terms

    def _torus(self, size_bytes, stride, n, all_reduce):
        inner, outer = group_span(stride, n, self.domain)
        k = 2.0 if all_reduce else 1.0
        shard = np.asarray(size_bytes, dtype=float) / inner

        b_in = coll.ring_reduce_scatter_s(size_bytes, inner, self.su_bw, 0.0)
        a_in = where(inner > 1, (inner - 1.0) * self.su_lat, 0.0)
        b_out, a_out = self.place.outer_reduce_scatter_parts(shard, stride, outer)

        def t(f_in, f_out):      # at a fraction of each link's rate
            return k * (b_in / f_in + a_in + b_out / f_out + a_out)
        # the same protocol choice as a flat call (nccl_protocol_s): Simple pays its per-call
        # pipeline time, the low-latency protocol a fraction of each link's rate
        return self.base + coll.nccl_protocol_s(t(1.0, 1.0), t(self.ll_intra, self.ll_net), self.pipeline)

    def _best(self, t, method, *args):
        """``t`` or, for the designs a split of the domain applies to, the faster of it and the
        split's (``self.subs``: only those designs' rows are evaluated)."""
        for idx, n, sub in self.subs:   # empty without split_domains
            if idx is None:
                t = np.minimum(t, getattr(sub, method)(*args))
                continue
            t = np.array(np.broadcast_to(t, (n,)), dtype=float)
            rows = [_rows(a, idx, n) for a in args]
            t[idx] = np.minimum(t[idx], np.broadcast_to(getattr(sub, method)(*rows), idx.shape))
        return t

    def _call(self, size_bytes, stride, n, all_reduce):
        return self._best(self._own_call(size_bytes, stride, n, all_reduce), "_own_call",
                          size_bytes, stride, n, all_reduce)

    def _own_call(self, size_bytes, stride, n, all_reduce):
        inner, outer, bus, tree_bus, net = self._bus(stride, n)
        n = np.asarray(n, dtype=float)
        # protocol: Simple (ring / tree / NVLS tree + its per-call pipeline time) or the
        # low-latency one (same latencies at a fraction of the bus bandwidth: LL128 inside a
        # domain, LL across)
        frac = where(outer > 1, self.ll_net, self.ll_intra)
        nvls = (self.nvls & (outer > 1)) if (all_reduce and self.nvls.any()) else None
        t = coll.nccl_call_s(size_bytes, n, outer, bus, tree_bus, self.su_lat, self.so_lat, self.base, all_reduce,
                             self.plateau, self.tree_factor, self.tree_correction, frac, self.pipeline,
                             nvls, self.nvls_lat, self._choice(stride, n, outer, bus, tree_bus, all_reduce, nvls),
                             nvls_tree=self._nvls_group(stride, n, inner, outer) if nvls is not None else None)
        if all_reduce and self.split_domains:
            t = self._split_trees(t, size_bytes, stride, n, inner, outer)
        if self.place.any_torus:
            t = where(self.place.is_torus() & (outer > 1), self._torus(size_bytes, stride, n, all_reduce), t)
        return where(n > 1, t, 0.0)

    # ------------------------------------------------------------------ public: total over calls
    def all_reduce(self, size_bytes, stride, n, calls=1.0):
        calls = np.maximum(np.asarray(calls, dtype=float), 1.0)
        return calls * self._call(np.asarray(size_bytes, dtype=float) / calls, stride, n, True)

    def reduce_scatter(self, size_bytes, stride, n, calls=1.0):
        # an all-gather of the same buffer on the same group (sequence parallelism asks for both)
        # costs the same: the last call's result is reused when its arguments are the same objects
        key = tuple(a if isinstance(a, float) else id(a) for a in (size_bytes, stride, n, calls))
        last = self._cache.get("rs")
        if last is not None and last[0] == key:
            return last[2]
        args = (size_bytes, stride, n, calls)
        calls = np.maximum(np.asarray(calls, dtype=float), 1.0)
        t = calls * self._call(np.asarray(size_bytes, dtype=float) / calls, stride, n, False)
        self._cache["rs"] = (key, args, t)     # args held so that their ids stay theirs
        return t

    def all_gather(self, size_bytes, stride, n, calls=1.0):
        return self.reduce_scatter(size_bytes, stride, n, calls)

    def list_overhead(self, n, calls=1.0, host_calls=0.0, copy_bytes=0.0, hbm_bps=np.inf):
        """Time of the per-rank work of ``calls`` list-form all-gathers or reduce-scatters over n ranks:
        calls * (n * host_calls * python_tensor_call_s + max(n * (copy_launch_s + aten_call_s),
        2 copy_bytes / hbm_bps)): the caller's ``host_calls`` Python tensor calls per rank to build
        the list, then the copy between the flat NCCL buffer and each rank's tensor (PyTorch's
        ProcessGroupNCCL), issued rank by rank from the host while the device copies what was issued
        (reads and writes the call's ``copy_bytes`` once: the slower of the two sets the time);
        0 for one rank."""
        n = np.asarray(n, dtype=float)
        py = self._per_rank(n, calls, 0.0, host_calls)
        host = self._per_rank(n, calls, self.list_rank_s, 0.0)
        device = np.asarray(calls, dtype=float) * where(n > 1, 2.0 * np.asarray(copy_bytes, dtype=float)
                                                        / np.asarray(hbm_bps, dtype=float), 0.0)
        return py + np.maximum(host, device)

    def rank_copies(self, n, copies=1.0, host_calls=0.0):
        """Host work of ``copies`` copies per rank issued from Python, rank by rank:
        copies * n * (copy_launch_s + host_calls * python_tensor_call_s); 0 for one rank."""
        return self._per_rank(n, copies, self.launch_s, host_calls)

    def _per_rank(self, n, items, base_s, host_calls):
        # items x n x (base_s + host_calls x python_tensor_call_s): host work rank by rank
        n = np.asarray(n, dtype=float)
        per_rank = base_s + np.asarray(host_calls, dtype=float) * self.py_call_s
        return np.asarray(items, dtype=float) * where(n > 1, n * per_rank, 0.0)

    def reconfiguration_stall(self, stride, n):
        """Circuit reconfiguration charged once per step on a group that leaves its domain."""
        _, outer = group_span(stride, n, self.domain)
        return self.place.reconfiguration_stall(outer)

    def all_to_all(self, size_bytes, stride, n, out_fraction=None, messages=1.0):
        """Issue 11: MoE dispatch/combine on the fabric it crosses (topologies/alltoall.py)."""
        return self._best(self._own_all_to_all(size_bytes, stride, n, out_fraction, messages), "_own_all_to_all",
                          size_bytes, stride, n, out_fraction, messages)

    def _own_all_to_all(self, size_bytes, stride, n, out_fraction, messages):
        return a2a.all_to_all_s(self.place, self.su_bw, self.su_lat, size_bytes, stride, n, out_fraction, messages)

    def p2p(self, size_bytes, stride, chain=False):
        """``chain``: a pipeline's stage-to-stage pairs (``Placement.switched_bw``)."""
        return self._best(self._own_p2p(size_bytes, stride, chain), "_own_p2p", size_bytes, stride, chain)

    def _own_p2p(self, size_bytes, stride, chain=False):
        cross = stride >= self.domain
        return where(cross, self.place.p2p(size_bytes, stride, chain),
                        coll.p2p_s(size_bytes, self.su_bw, self.su_lat))


def _rows(a, idx, designs):
    """Argument ``a`` of a per-design call for the designs ``idx`` only (scalars, flags and
    arrays of one value as they are)."""
    if a is None or isinstance(a, (bool, str)) or np.ndim(a) == 0 or np.size(a) == 1:
        return a
    return np.broadcast_to(np.asarray(a), (designs,))[idx]


def _per_design(c) -> bool:
    """Whether a calibration holds per-design arrays (uncertainty samples) to index with the designs."""
    return any(np.size(getattr(c, f.name)) > 1 for f in fields(c))
