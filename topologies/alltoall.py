"""All-to-all (MoE token dispatch / combine) on the fabric a group crosses, with bisection limits.

A group of ``n`` ranks ``stride`` apart, each holding an S-byte buffer split evenly
over the n destinations (pairwise exchange). The ``inner`` ranks of a scale-up
domain exchange S (inner - 1) / n bytes over the scale-up links; the rest,
S_o = S (n - inner) / n, leaves the domain. Both parts run at once, so
T = max(T_scale_up, T_scale_out) with

    T_scale_out = S_o / B_eff + (outer - 1) alpha,   B_eff = B / max(1, F)

where B is the rank's scale-out injection bandwidth and F the bisection factor of
the network family (the ratio of the bisection time to the injection time):

* fat-tree / rail-optimized / dragonfly: the per-rank rate the group gets in
  ``Placement.switched_bw`` (the worst leaf's off-leaf share of the bytes leaving the domain at 1/o
  when oversubscribed; on the dragonfly the worst group's share over its global ports). Rail-optimized networks reach
  other rails through the scale-up domain (PXN): a group whose nodes fit under one
  rail leaf runs at full rate, whatever its stride; a larger one as on a fat-tree.
* torus / ocs-torus: on a ring of k nodes every node sends S/k to each node over
  shortest paths (ties split over both directions); the busiest link direction
  carries S k / 8, which at B / (2 D) per direction (D active dimensions share the
  node's bandwidth) takes S k D / (4 B). So F = k D s / 4 x outer / (outer - 1)
  relative to the scale-out share S_o, with s groups interleaved on the ring and
  the widest dimension the group spans setting the pace (the bisection of a k-ary
  torus, 2 N / k links, Dally & Towles 2004, Sec. 3.3). Exact for even k with
  ranks one per node (tests/explore/test_frontier.py checks it on networkx tori).
* ocs-reconfigurable: direct circuits. If the node has at least outer - 1 ports
  for this traffic the group is a full mesh (unused ports idle: utilisation
  floor(P / (outer - 1)) (outer - 1) / P); otherwise traffic is relayed over
  ceil(log_P(outer)) circuit hops. Per-phase reconfiguration gives the phase every
  port; per-job / per-step circuits give it the gradient-ring share of the ports.
"""
from __future__ import annotations

import numpy as np
from hwmodels.select import where

from topologies import torus
from topologies.network import OCS_RECONF
from topologies.placement import Placement, group_span


def torus_bisection_factor(place: Placement, stride, outer):
    """max over the torus dimensions the group spans of k_i D s_i / 4 (>= 1)."""
    node_stride = np.maximum(np.asarray(stride, dtype=float) / place.domain, 1.0)
    ns, ss = torus.group_dims(node_stride, outer, place.dims)
    d = np.maximum(place.active_dims, 1.0)
    f = np.ones_like(np.asarray(outer, dtype=float))
    for k, s in zip(ns, ss):
        f = np.maximum(f, where(k > 1, k * d * s / 4.0, 1.0))
    return f


def ocs_mesh_bandwidth(place: Placement, outer):
    """Per-rank bandwidth of an all-to-all over direct circuits among ``outer`` nodes."""
    ports = np.maximum(np.round(place.domain * place.nics), 1.0)
    peers = np.maximum(np.asarray(outer, dtype=float) - 1.0, 1.0)
    per_phase = place.net.reconfig_policy == 2
    bw = where(per_phase, place.bw, place.reconf_dp_bw)
    mesh = peers <= ports
    util = where(mesh, np.floor(ports / peers) * peers / ports, 1.0)
    hops = where(mesh, 1.0, np.ceil(np.log(np.maximum(outer, 2.0)) / np.log(np.maximum(ports, 2.0))))
    return bw * util / np.maximum(hops, 1.0)


def scale_out_bandwidth(place: Placement, stride, n, outer):
    """Effective per-rank scale-out bandwidth (b/s) of an all-to-all, per family."""
    bw = place.switched_bw(stride, n, all_to_all=True)
    if place.any_torus:
        outer = np.asarray(outer, dtype=float)
        f = torus_bisection_factor(place, stride, outer) * outer / np.maximum(outer - 1.0, 1.0)
        bw = where(place.is_torus(), place.bw / np.maximum(f, 1.0), bw)
    if np.any(place.f == OCS_RECONF):
        bw = where(place.f == OCS_RECONF, ocs_mesh_bandwidth(place, outer), bw)
    return bw


def all_to_all_s(place: Placement, su_bw_bps, su_lat_s, size_bytes, stride, n, out_fraction=None,
                 messages=1.0):
    """Time (s) of all-to-all exchange of an S-byte per-rank buffer over n ranks ``stride`` apart.
    ``out_fraction`` (default (n - inner) / n) is the share of the buffer that leaves the domain
    (a dispatcher that de-duplicates per domain sends less, ``explore.model.moe``); ``messages``
    back-to-back all-to-alls share the buffer (latency counted per message)."""
    n = np.asarray(n, dtype=float)
    s = np.asarray(size_bytes, dtype=float)
    inner, outer = group_span(stride, n, place.domain)
    t_su = where(inner > 1, s * (inner - 1) / n * 8.0 / su_bw_bps + messages * (inner - 1) * su_lat_s, 0.0)
    s_out = s * ((n - inner) / n if out_fraction is None else out_fraction)
    t_so = where(outer > 1, s_out * 8.0 / scale_out_bandwidth(place, stride, n, outer)
                    + messages * (outer - 1) * place.lat, 0.0)
    return where(n > 1, np.maximum(t_su, t_so), 0.0)
