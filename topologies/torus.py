"""k-ary n-dimensional torus (direct network): graph builder and closed forms.

For dimensions d_1..d_n (N = prod d_i nodes, each with a link to both
neighbours in every dimension with d_i > 2):

    links      = sum_i N * [d_i > 2] + N/2 * [d_i == 2]
    diameter   = sum_i floor(d_i / 2)                        (hops)
    mean dist  = sum_i r(d_i), r(d) = d/4 (d even), (d^2 - 1)/(4 d) (d odd)  (over all N^2 pairs)
    bisection  = 2 N / d_max links (cut across the longest, even dimension; 2 for the wrap-around)

(Dally & Towles, "Principles and Practices of Interconnection Networks", 2004,
ch. 5). The builder is a product of cycles in networkx.
"""
from __future__ import annotations

import numpy as np


def _dims(dims):
    return [np.asarray(d, dtype=float) for d in dims]


def nodes(dims):
    return np.prod(np.stack(np.broadcast_arrays(*_dims(dims))), axis=0)


def links(dims):
    """Undirected links of the torus."""
    n = nodes(dims)
    return sum(np.where(d > 2, n, np.where(d == 2, n / 2, 0.0)) for d in _dims(dims))


def diameter_hops(dims):
    return sum(np.floor(d / 2) for d in _dims(dims))


def mean_distance_hops(dims):
    """Mean ring distance summed over dimensions, averaged over all N^2 ordered pairs (incl. self)."""
    return sum(np.where(d % 2 == 0, d / 4, (d * d - 1) / (4 * np.maximum(d, 1))) for d in _dims(dims))


def bisection_links(dims):
    """Links cut by the minimum bisection: 2 N / d_max (d_max even and > 2)."""
    ds = np.stack(np.broadcast_arrays(*_dims(dims)))
    dmax = ds.max(axis=0)
    return np.where(dmax > 2, 2.0 * nodes(dims) / dmax, np.where(dmax == 2, nodes(dims) / 2, 0.0))


def bisection_bandwidth_bps(dims, link_bandwidth_bps):
    return bisection_links(dims) * link_bandwidth_bps


def torus_graph(dims, bandwidth_bps: float = 400e9, latency_s: float = 1e-6):
    """networkx torus, a product of cycles: node = rank (dimension 0 fastest) with ``coord``,
    ``kind='host'``; unit-named edges. Dimensions of size 2 get one link, of size 1 none."""
    import networkx as nx
    dims = [int(d) for d in dims]
    g = nx.Graph()
    n = int(np.prod(dims))
    attrs = dict(bandwidth_bps=float(bandwidth_bps), latency_s=float(latency_s))
    for r in range(n):
        c = np.unravel_index(r, dims, order="F")
        g.add_node(r, kind="host", coord=tuple(int(x) for x in c))
        for i, d in enumerate(dims):
            if d > 1:
                nb = list(c)
                nb[i] = (nb[i] + 1) % d
                g.add_edge(r, int(np.ravel_multi_index(nb, dims, order="F")), dim=i, **attrs)
    return g


def group_dims(stride, size, dims):
    """Members and spacing per dimension of a group of ``size`` ranks ``stride`` apart.

    Ranks are laid out dimension 0 fastest. Along dimension i (place value
    P_i = prod_{j<i} d_j) the group occupies n_i positions spaced s_i apart:
    s_i = max(stride / P_i, 1) when stride < P_i * d_i, and n_i = the extent the
    group's range covers, clip(stride * size / (P_i s_i), 1, d_i / s_i).
    Returns lists ``n``, ``s``: the group's ring sizes and its spacing (the
    number of concurrent groups sharing each ring link, i.e. contention).
    Exact when strides and dimensions are powers of two (the usual layouts);
    otherwise an approximation.
    """
    stride = np.asarray(stride, dtype=float)
    size = np.asarray(size, dtype=float)
    place = np.ones_like(stride * size)
    ns, ss = [], []
    for d in _dims(dims):
        s = np.maximum(stride / place, 1.0)
        inside = stride < place * d
        n = np.where(inside, np.clip(np.ceil(stride * size / (place * s)), 1.0,
                                     np.maximum(np.floor(d / s), 1.0)), 1.0)
        ns.append(n)
        ss.append(np.where(inside, s, 1.0))
        place = place * d
    return ns, ss
