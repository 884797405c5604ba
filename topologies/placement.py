"""Placement of a parallel group on the fabric it really crosses, with contention.

A group is ``n`` ranks ``stride`` apart (ranks numbered TP fastest, then CP, DP,
PP). Its members inside one scale-up domain (``inner``) use the scale-up
links; the ``outer`` domains it spans use the scale-out family:

* fat-tree: full rate over the leaves' real down:up ratio (``k o / (1 + o)``
  endpoint ports rounded down, the rest uplinks: ``fat_tree.leaf_oversubscription``),
  unless the group's endpoints fit under one leaf, where it does not apply. The streams
  leaving the worst leaf (``Placement._crossing_streams``: one per crossing ring, ``inner``
  rings per ring below the scale-up domain, up to two edges' worth on misaligned blocks) and
  the all-to-all's off-leaf share per byte leaving the domain share its uplinks; never
  faster than rank positions enumerated on networkx leaf-spines.
* rail-optimized: as fat-tree, but a group of same-rank GPUs (stride a multiple
  of the domain, or below it the rings of one rank per domain the hierarchical
  collective runs) only needs one rail leaf per ``leaf_down`` servers; an all-to-all
  reaches every rail over the scale-up links (PXN), so any group whose servers fit
  under one rail leaf does.
* dragonfly: ``dragonfly.cross_group_factor``, min(1, h_eff / p) / 2 with the
  ``global_link_fraction`` f of the balanced global ports populated (h_eff = ceil(a h f) / a),
  is the rate when every device's stream leaves its group. Pairs, chains and rings are placed as
  on the fat-tree's leaves (``Placement.dragonfly_pairs_bw``): in one group only if the whole job
  is, or (not a chain) whole blocks of stride x n fill a group; else the S streams leaving the
  worst group share its G = ceil(a h f) global ports, Valiant's busiest link carrying 2 S / G:
  S = min(stride, group) for pairs and chains and for rings whose blocks span whole groups (one
  stream out per ring crossing), at most min(2 stride, group) for rings whose blocks straddle a
  group edge (an upper bound). The all-to-all as on the fat-tree's leaves: the worst group's share
  of its bytes leaving it (per the bytes that leave the scale-up domain, at most all of them) at
  Valiant's busiest link, rate x min(1, df_factor / share).
* torus, ocs-torus: a multi-dimensional ring collective over the dimensions
  the group occupies (``torus.group_dims``); along dimension i a rank has
  2 of its node's 2D ports (D active dimensions), shared by the s_i groups
  interleaved on that ring.
* ocs-reconfigurable: circuits follow the plan (``reconfig.class_ports``):
  per-job / per-step circuits split the node's ports between the collective
  circuits (gradient rings, expert all-to-all) and the two point-to-point
  chains (pipeline, ring attention); per-phase gives each phase every port.
  Reconfiguration stalls are charged on the gradient reduction.
"""
from __future__ import annotations

import numpy as np
from hwmodels.divisible import indivisible
from hwmodels.select import where

from topologies import collectives as coll
from topologies import dragonfly, reconfig, torus
from topologies.fat_tree import leaf_down_ports, leaf_oversubscription
from topologies.network import DRAGONFLY, FAT_TREE, OCS_RECONF, OCS_TORUS, RAIL, TORUS, NetworkSpec


def group_span(stride, size, domain):
    """Ranks of a group per scale-up domain, and domains spanned (as the foundation's step model)."""
    inner = where(stride < domain, np.clip(np.floor(domain / stride), 1, size), 1.0)
    return inner, np.ceil(size / inner)


class Placement:
    """Per-group scale-out bandwidth (b/s per rank, per direction) and collective times."""

    def __init__(self, net: NetworkSpec, domain, so_bw_bps, so_lat_s, nics_per_device, nic_bw_bps,
                 link_efficiency, oversubscription, switch_radix, devices):
        self.net = net
        self.f = net.family
        self.domain = np.asarray(domain, dtype=float)
        self.bw = np.asarray(so_bw_bps, dtype=float) * link_efficiency   # per device, all NICs
        self.lat = so_lat_s
        self.o = np.asarray(oversubscription, dtype=float)
        self.nics = np.asarray(nics_per_device, dtype=float)
        self.leaf_down = leaf_down_ports(switch_radix, oversubscription)
        # the leaves' uplinks are the ports left at the radix: their real down:up ratio
        self.o_leaf = leaf_oversubscription(switch_radix, oversubscription)
        p, a, h = dragonfly.balanced(switch_radix)
        self.df_group = p * a
        # a tapered dragonfly: ceil(a h f) of a group's balanced a h global ports populated
        self.df_factor = dragonfly.cross_group_factor(
            p, dragonfly.global_links_per_router(a, h, net.global_link_fraction))
        self.dims = net.torus_dims
        self.active_dims = sum((np.asarray(d) > 1).astype(float) for d in self.dims)
        # families are integer codes: work that only one family needs runs only if a design has it
        self.any_torus = bool(np.any(self.is_torus()))
        self.families = {int(x) for x in np.unique(self.f)}
        # ocs-reconfigurable: ports of a node split over the plan's traffic classes
        if np.any(self.f == OCS_RECONF):
            ports = np.round(self.domain * self.nics)
            c_dp, c_fwd, c_bwd = reconfig.class_ports(
                [net.dp_bytes_per_node, net.pp_bytes_per_node, net.pp_bytes_per_node], ports)
            per_phase = net.reconfig_policy == 2
            # a class with demand but no port left (fewer ports than classes) still needs a
            # circuit: the node time-shares its ports over the circuits it needs
            dem = (net.dp_bytes_per_node > 0, net.pp_bytes_per_node > 0, net.pp_bytes_per_node > 0)
            needed = sum(where(d, np.maximum(c, 1.0), 0.0) for d, c in zip(dem, (c_dp, c_fwd, c_bwd)))
            per_port = self.bw / np.maximum(np.maximum(ports, needed), 1.0)   # x domain: per-device share
            # as many activations go forward as gradients come back: the transfers' summed time is
            # that of the harmonic mean of the two chains' circuits. Traffic of a class the plan
            # gives no demand (collectives other than the gradient rings, with no ring leaving
            # the node; point-to-point with no pipeline or ring-attention peer outside it) is
            # forwarded over the node's circuits
            c_fwd, c_bwd = np.maximum(c_fwd, 1.0), np.maximum(c_bwd, 1.0)
            dp_bw = where(net.dp_bytes_per_node > 0, np.maximum(c_dp, 1.0) * per_port, self.bw)
            pp_bw = where(net.pp_bytes_per_node > 0, 2.0 * c_fwd * c_bwd / (c_fwd + c_bwd) * per_port, self.bw)
            self.reconf_dp_bw = where(per_phase, self.bw, dp_bw)
            self.reconf_pp_bw = where(per_phase, self.bw / 2, pp_bw)
        else:
            self.reconf_dp_bw = self.reconf_pp_bw = self.bw
        self.stall_s = net.reconfigs_per_step * net.ocs_reconfig_s
        self.devices = np.asarray(devices, dtype=float)

    # ------------------------------------------------------------------ bandwidth per group
    def switched_bw(self, stride, n, p2p=False, all_to_all=False, chain=False, inner=None):
        """Per-rank bandwidth of a group on the packet-switched families (and OCS circuits).

        ``inner``: the group's ranks per network node for its rings (default: per scale-up domain,
        ``group_span``); a domain split into parts, each a node of its own (``Fabric._split_trees``),
        runs a part's ranks' rings across the parts.

        ``all_to_all``: every rank sends to every other, so the share of its bytes that leaves
        its leaf shares the uplinks' 1/o of the down-link rate (the bisection), per the bytes that leave
        the scale-up domain (the n - inner parts the scale-out time is of: n / (n - inner) times the
        share of the whole buffer, at most all of them); rings (the default) send one stream out of a
        leaf per ring crossing it and keep more of it (``_crossing_streams``). ``chain``: the pairs of a pipeline of
        more than two stages (rank i to i + stride for every stage boundary), which cross every leaf
        edge the pipeline spans.

        Devices sit under leaves in rank order, ``leaf_devices`` to a leaf, and a collective's
        groups tile the ranks in blocks of ``stride n`` devices. On the fat-tree a group keeps the
        full rate only where every group is under one leaf: the whole job under one leaf, or whole
        blocks to a leaf (``leaf_devices`` a multiple of the block; never for a chain). A block
        smaller than a leaf but not dividing it straddles leaf edges somewhere, and the rings cut
        there leave the leaf as any crossing ring does (below).

        The job's ``devices`` fill ``ceil(devices / leaf_devices)`` leaves, the last one partly
        (``m`` devices); every leaf has the same uplinks, the ``radix - leaf_down`` ports it
        has left (``leaf_devices / o_leaf`` in device rates, ``leaf_oversubscription``). A leaf
        of ``k`` job devices can send off-leaf at most what the ``devices - k`` devices on the
        other side of it take: crossing ring streams and chain pairs at most one per such device,
        all-to-all bytes at most ``(devices - k) / S`` of each member's (its peers off the leaf).
        The rate is set by the worst leaf, the full ones or the last: the one with the most
        crossing flows per uplink."""
        stride = np.asarray(stride, dtype=float)
        span_devices = np.minimum(stride * n, self.devices)
        # a device's NICs go to separate planes (one leaf each, as DGX SuperPOD rails), so a leaf
        # holds leaf_down devices whatever their NIC count (NICs shared by several devices: more)
        ports = span_devices * np.minimum(self.nics, 1.0)
        in_leaf = ports <= self.leaf_down
        leaf_devices = self.leaf_down / np.minimum(self.nics, 1.0)
        one_leaf = self.devices <= leaf_devices
        whole_blocks = ~indivisible(leaf_devices, np.maximum(span_devices, 1.0))
        leaf_local = in_leaf & (one_leaf | (whole_blocks & ~np.asarray(chain, dtype=bool)))
        # rail-optimized: consecutive members of a ring across the domains sit ``step`` devices apart,
        # on one rail where that is a multiple of the domain: the group's stride, or below the scale-up
        # domain (a ring's ``inner`` rings of one rank per domain) stride x inner (pairs: the stride)
        nn = np.asarray(n, dtype=float)
        pairs = np.asarray(chain, dtype=bool) | (bool(p2p) & (nn == 2.0))
        per_node = group_span(stride, nn, self.domain)[0] if inner is None else np.asarray(inner, dtype=float)
        step = where(pairs, stride, stride * per_node)
        same_rail = (step >= self.domain) & ~indivisible(step, self.domain)
        rail_local = same_rail & (np.ceil(span_devices / self.domain) <= self.leaf_down)
        # a ring that leaves a leaf uses one uplink out and one in per leaf it visits (topology-aware
        # NCCL rings): the worst leaf's S crossing streams share its leaf_devices / o_leaf uplinks
        # (_crossing_streams: min(R, D) rings on aligned spans, at most min(2 R, D) on misaligned ones,
        # R = stride x inner; a chain's min(stride, leaf) pairs at each edge). Against the rank
        # positions enumerated on networkx leaf-spines (tests/topologies/test_fat_tree_pairs.py):
        # never faster, exact on aligned spans, at least 2/3 of the enumeration on misaligned ones
        streams = self._crossing_streams(stride, n, span_devices, leaf_devices, chain, p2p, inner)
        cross = self.bw / np.maximum(1.0, streams * self.o_leaf / leaf_devices)
        if all_to_all:
            # the share is of a rank's whole buffer; the scale-out time (topologies/alltoall.py) is of
            # its n - inner parts that leave the domain: per those bytes, n / (n - inner) of the share
            # (at most all of them: a worst-layout share above that is the bound's, not the traffic's)
            nn = np.asarray(n, dtype=float)
            per_out = nn / np.maximum(nn - group_span(stride, nn, self.domain)[0], 1.0)
            off_leaf = np.minimum(self._a2a_off_share(span_devices, leaf_devices, leaf_local) * per_out, 1.0)
            # rail-optimized: PXN moves each message over the scale-up links to the local GPU on the
            # destination's rail (NCCL_PXN_DISABLE=0, NCCL >= 2.12), so any group whose nodes fit
            # under one rail leaf runs at full rate, whatever its stride
            pxn_local = np.ceil(span_devices / self.domain) <= self.leaf_down
            df = None
            if DRAGONFLY in self.families:
                # the worst dragonfly group's crossing bytes, out over its G global ports and into another
                # group's: Valiant's busiest link carries 2 off D w / G = off / df_factor device rates
                group = self.df_group / np.minimum(self.nics, 1.0)
                df_local = (self.devices <= group) | ((span_devices <= group)
                                                       & ~indivisible(group, np.maximum(span_devices, 1.0)))
                # per the bytes that leave the domain, as the leaves' share (at most all of them)
                off_group = np.minimum(self._a2a_off_share(span_devices, group, df_local) * per_out, 1.0)
                df = self.bw * np.minimum(1.0, self.df_factor / np.maximum(off_group, 1e-300))
            return self._by_family(self.bw / np.maximum(1.0, self.o_leaf * off_leaf), pxn_local, ports, p2p, df)
        df = self.dragonfly_pairs_bw(stride, n, span_devices, chain, p2p, inner) if DRAGONFLY in self.families else None
        return self._by_family(where(leaf_local, self.bw, cross), in_leaf | rail_local, ports, p2p, df)

    def dragonfly_pairs_bw(self, stride, n, span_devices, chain=False, p2p=False, inner=None):
        """Per-rank dragonfly rate of a group of ``n`` ranks ``stride`` apart: pairs and chains (``p2p``
        or ``chain``) and rings (the collectives; the all-to-all: ``switched_bw``). Devices fill dragonfly
        groups of ``D = p a / min(nics, 1)`` in rank order, as the fat-tree's leaves, and a group keeps
        the full rate only if the whole job is in one dragonfly group, or (not a chain) whole blocks of
        ``stride n`` devices fill a group. Otherwise, at the worst group (a full one or the last, partly
        filled one), S streams leave it and S enter; Valiant routing spreads each over the G = ceil(a h f)
        global ports of its source group and then over the links into its destination group, so the
        busiest global link carries 2 S / G port rates and a crossing stream gets min(1, G / (2 S)) of a
        port: min(1, df_factor D / S) of the device rate (df_factor D = G / (2 min(nics, 1))). With
        S = D this is the all-crossing ``df_factor``. S is at most the devices on the group's other side.

        Pairs (one direction) and chains: min(stride, D) pairs cross the worst group edge.
        Rings: R = stride rings per block (``stride`` below the scale-up domain: R = stride inner, the
        ``inner`` rings of one rank per domain the hierarchical collective runs across the domains). A
        ring with members on both sides of a group has its members in the group consecutive in ring
        order, so it sends exactly one stream out of the group and one in. Blocks whose span is a
        multiple of D (aligned): a group lies inside one block and meets min(R, D) rings, all crossing.
        Otherwise (a block that straddles group edges, smaller or larger than a group) the group's two
        edges cut at most R rings each, and a group of D devices meets at most D rings:
        S <= min(2 R, D), an upper bound (the worst group of a given layout may see fewer).

        tests/topologies/test_dragonfly_pairs.py checks both against an enumeration of rank positions
        and Valiant loads on networkx dragonflies: never faster; exact for chains where a third group lets
        one group's outgoing pairs and another's incoming ones meet on a link (stride <= devices - 2 D)
        and for aligned rings on three or more groups (rings of two: stride a multiple of D, else a
        group's pairs go to two groups and Valiant's load is 3/4 of the model's); low elsewhere (two
        groups, where ``df_factor`` halves a direct path too; the few long pairs of a short job; blocks
        that straddle a group edge off centre, fewer than stride crossing; misaligned rings whose worst
        group sees fewer than min(2 R, D) crossing rings: down to 1/3 of the enumeration's rate on the
        test's layouts, most often 1/2). Valiant is the routing assumed (adaptive routing takes it for
        these neighbour-group patterns): routed minimally, a ring over consecutive groups puts its
        streams on the few direct links between two groups and is slower still.

        A ring of two as a collective is a ring (both directions), a pipeline's pair (``p2p``) a pair."""
        stride = np.asarray(stride, dtype=float)
        n = np.asarray(n, dtype=float)
        chain = np.asarray(chain, dtype=bool)
        group = self.df_group / np.minimum(self.nics, 1.0)
        whole_blocks = ~indivisible(group, np.maximum(span_devices, 1.0))
        local = (self.devices <= group) | (~chain & (span_devices <= group) & whole_blocks)
        streams = self._crossing_streams(stride, n, span_devices, group, chain, p2p, inner)
        cross = self.bw * np.minimum(1.0, self.df_factor * group / np.maximum(streams, 1.0))
        return where(local, self.bw, cross)

    def _crossing_streams(self, stride, n, span_devices, unit_devices, chain=False, p2p=False, inner=None):
        """Streams leaving the worst unit (a fat-tree leaf or a dragonfly group of ``unit_devices``, a full
        one or the last, partly filled one) for a group of ``n`` ranks ``stride`` apart whose blocks of
        ``span_devices`` tile the job in rank order. Pairs (one direction) and chains: min(stride, D) cross
        the worst edge. Rings: R = stride rings per block, ``stride x inner`` below the scale-up domain
        (the hierarchical collective runs ``inner`` rings of one rank per domain across the domains, each
        rank's stream at once). A ring with members on both sides of a unit has its members in it
        consecutive in ring order: one stream out, one in. Spans a multiple of D (aligned): a unit lies
        in one block and meets min(R, D) rings. Otherwise the unit's two edges cut at most R rings each
        and a unit of D devices meets at most D: min(2 R, D), an upper bound (the worst unit of a given
        layout may see fewer). At most the devices on the unit's other side. ``inner``: a ring's ranks
        per network node (default: per scale-up domain)."""
        stride = np.asarray(stride, dtype=float)
        n = np.asarray(n, dtype=float)
        chain = np.asarray(chain, dtype=bool)
        pairs = chain | (bool(p2p) & (n == 2.0))
        aligned = pairs | ((span_devices >= unit_devices) & ~indivisible(span_devices, unit_devices))
        inner = group_span(stride, n, self.domain)[0] if inner is None else np.asarray(inner, dtype=float)
        rings = where(pairs, stride, stride * inner)
        per_edge = where(aligned, rings, 2.0 * rings)
        full, last, others_full, others_last = self._leaves(unit_devices)
        return np.maximum(where(full, np.minimum(np.minimum(per_edge, unit_devices), others_full), 0.0),
                          np.minimum(np.minimum(per_edge, last), others_last))

    def _a2a_off_share(self, span_devices, leaf_devices, leaf_local):
        """Share of the worst leaf's (or dragonfly group's) all-to-all bytes that leave it: groups of
        ``span_devices`` tiling leaves of ``leaf_devices`` in rank order, none leaving where
        ``leaf_local`` (every group under one leaf)."""
        full, last, others_full, others_last = self._leaves(leaf_devices)
        # the share of a leaf's a2a bytes that leaves it, at the worst leaf of an unaligned layout
        # (groups of S devices, leaves of D): a group cut in half at a leaf edge. S >= D: the
        # leaf holds two half-spans, 1 - D / (2 S) of its bytes leave; S < D: two cut groups at
        # its edges, S / (2 D). The uplinks carry 1/o of the leaf's rate: rate / max(1, o x share)
        r = span_devices / leaf_devices
        off_leaf = np.where(r >= 1.0, 1.0 - 0.5 / np.maximum(r, 1.0), 0.5 * r)
        # aligned layouts: whole groups under a leaf send nothing out; a group of whole leaves
        # sends 1 - D / S of its bytes out of each of them
        whole_leaves = (r >= 1.0) & ~indivisible(span_devices, leaf_devices)
        off_leaf = np.where(whole_leaves, 1.0 - 1.0 / np.maximum(r, 1.0), off_leaf)
        off_leaf = np.where(leaf_local, 0.0, off_leaf)
        off_leaf = np.where(self.devices <= leaf_devices, 0.0, off_leaf)   # one leaf: nothing leaves
        # a leaf's crossing bytes are bounded by the peers on the other side of it; the last,
        # partly filled leaf (m devices) by the same worst-layout share and the same bound
        S = np.maximum(span_devices, 1.0)
        cut_last = where(S >= last, last - last * last / (2.0 * S), 0.5 * S)
        cut_last = where(leaf_local | whole_leaves, 0.0, cut_last)   # aligned layouts: m = D or whole blocks
        crossing = np.maximum(where(full, np.minimum(leaf_devices * off_leaf, leaf_devices * others_full / S), 0.0),
                              np.minimum(cut_last, last * others_last / S))
        return crossing / leaf_devices

    def _leaves(self, leaf_devices):
        """Whether the job fills a leaf (more than one leaf), the last leaf's devices ``m`` (all of a
        leaf's if the job fills whole leaves), and the job's devices outside a full leaf and outside
        the last one."""
        leaves = np.ceil(self.devices / leaf_devices - 1e-9)
        last = self.devices - (np.maximum(leaves, 1.0) - 1.0) * leaf_devices
        full = leaves > 1.0
        return full, last, np.maximum(self.devices - leaf_devices, 0.0), self.devices - last

    def _by_family(self, ft, rail_ok, ports, p2p, df=None):
        """Per-family rate from the fat-tree's ``ft``: rail-optimized at full rate where ``rail_ok``,
        dragonfly by its group (``df``: the rate ``dragonfly_pairs_bw`` or the all-to-all's worst group gave), OCS circuits by the
        plan's ports, tori (handled elsewhere) at 1/o."""
        f = self.f
        fams = self.families
        if fams == {FAT_TREE}:                     # the common case: one family, one expression
            return ft
        rail = where(rail_ok, self.bw, ft) if RAIL in fams else ft
        if DRAGONFLY not in fams:
            df = ft
        elif df is None:
            df = where(ports <= self.df_group, self.bw, self.bw * self.df_factor)
        ocs = self.reconf_pp_bw if p2p else self.reconf_dp_bw
        return np.select([f == FAT_TREE, f == RAIL, f == DRAGONFLY, f == OCS_RECONF], [ft, rail, df, ocs],
                         self.bw / self.o)

    def torus_rings(self, stride, n):
        """Ring sizes and per-rank bandwidths along each torus dimension for a group of
        ``n`` scale-up nodes ``stride`` nodes apart."""
        ns, ss = torus.group_dims(stride, n, self.dims)
        per_dim = self.bw / np.maximum(self.active_dims, 1.0)              # both directions of one dim
        return ns, [per_dim / s for s in ss]

    def is_torus(self):
        return (self.f == TORUS) | (self.f == OCS_TORUS)

    # ------------------------------------------------------------------ collectives (outer part)
    def outer_reduce_scatter(self, shard_bytes, stride, outer, bandwidth_fraction=1.0):
        """``bandwidth_fraction``: of every link's rate (a low-latency protocol's)."""
        beta, alpha = self.outer_reduce_scatter_parts(shard_bytes, stride, outer)
        return beta / bandwidth_fraction + alpha

    def outer_reduce_scatter_parts(self, shard_bytes, stride, outer):
        """(bandwidth term, latency term) of ``outer_reduce_scatter`` at the links' full rate: a
        fraction f of every link's rate takes bandwidth / f + latency (the torus dimensions keep
        their order, all slowed alike)."""
        outer = np.asarray(outer, dtype=float)
        alpha = where(outer > 1, (outer - 1.0) * self.lat, 0.0)
        torus = self.is_torus()
        if not torus.all():
            beta = coll.ring_reduce_scatter_s(shard_bytes, outer, self.switched_bw(stride, outer), 0.0)
            if not self.any_torus:
                return beta, alpha
        node_stride = np.maximum(np.asarray(stride, dtype=float) / self.domain, 1.0)
        ns, bws = self.torus_rings(node_stride, outer)
        t_beta = coll.torus_reduce_scatter_s(shard_bytes, ns, bws, 0.0)
        t_alpha = sum(np.maximum(n - 1.0, 0.0) for n in ns) * self.lat
        if torus.all():                          # every design a torus: no switched ring to compute
            return t_beta, t_alpha
        return where(torus, t_beta, beta), where(torus, t_alpha, alpha)

    def outer_all_reduce(self, shard_bytes, stride, outer):
        t_sw = coll.all_reduce_s(shard_bytes, outer, self.switched_bw(stride, outer), self.lat)
        if not self.any_torus:
            return t_sw
        node_stride = np.maximum(np.asarray(stride, dtype=float) / self.domain, 1.0)
        ns, bws = self.torus_rings(node_stride, outer)
        t_torus = coll.torus_all_reduce_s(shard_bytes, ns, bws, self.lat)
        return where(self.is_torus(), t_torus, t_sw)

    def reconfiguration_stall(self, outer):
        """Circuit reconfiguration time charged on a gradient reduction that leaves the domain."""
        return where((self.f == OCS_RECONF) & (outer > 1), self.stall_s, 0.0)

    def p2p(self, size_bytes, stride, chain=False):
        """Point-to-point to the rank ``stride`` away (scale-out part); ``chain``: see ``switched_bw``."""
        if not self.any_torus:
            return coll.p2p_s(size_bytes, self.switched_bw(stride, 2.0, p2p=True, chain=chain), self.lat)
        node_stride = np.maximum(np.asarray(stride, dtype=float) / self.domain, 1.0)
        ns, ss = torus.group_dims(node_stride, 2.0, self.dims)
        hops = sum(where(n > 1, s, 0.0) for n, s in zip(ns, ss))
        link_dir = self.bw / np.maximum(2 * self.active_dims, 1.0)
        bw_t = link_dir / np.maximum(hops, 1.0)
        bw = where(self.is_torus(), bw_t, self.switched_bw(stride, 2.0, p2p=True, chain=chain))
        return coll.p2p_s(size_bytes, bw, self.lat)
