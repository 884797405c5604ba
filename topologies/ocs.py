"""OCS-joined torus slices (TPU v4 style, Jouppi et al. ISCA 2023).

Chips (or scale-up nodes) sit in cubes of c x c x c joined internally by
copper; each cube face exposes c^2 optical ports, so a cube has 6 c^2. Every
(dimension, face position) pair has its own OCS, which joins the + and - face
ports of all cubes, so any slice of cubes can be wired into a torus (or a
twisted torus) by setting circuits:

    optical ports (transceivers) = 6 c^2 * cubes        (TPU v4: 6 * 16 * 64 = 6,144)
    OCS count   = 3 c^2 * ceil(2 * cubes / radix)       (TPU v4: 48 Palomar 136-port OCS)
    OCS ports used per OCS = 2 * cubes                  (128 of 136)
    copper links inside cubes = 3 c^2 (c - 1) * cubes
    optical circuits = 3 c^2 * cubes                    (each through one OCS: 1 hop of insertion loss)

A wrap-around or cube-to-cube link crosses exactly one OCS; in a slice of k
cubes along a dimension, 1/c of that dimension's links are optical.
"""
from __future__ import annotations

import numpy as np


def counts(nodes, cube_dim=4, ocs_radix=136):
    c = np.asarray(cube_dim, dtype=float)
    cubes = np.ceil(np.asarray(nodes, dtype=float) / c ** 3)
    per_ocs = 2.0 * cubes
    groups = np.ceil(per_ocs / np.asarray(ocs_radix, dtype=float))
    return {"cubes": cubes, "optical_ports": 6 * c ** 2 * cubes, "ocs": 3 * c ** 2 * groups,
            "ocs_ports": 6 * c ** 2 * cubes, "copper_links": 3 * c ** 2 * (c - 1) * cubes,
            "optical_circuits": 3 * c ** 2 * cubes}


def ocs_torus_graph(slice_cubes=(1, 1, 1), cube_dim: int = 4, copper_bandwidth_bps: float = 400e9,
                    optical_bandwidth_bps: float = 400e9, latency_s: float = 1e-6):
    """Chip-level torus of a slice of cubes; edges crossing a cube boundary (incl. the
    wrap-around) carry ``medium='optical'``, ``ocs_hops=1`` and the ``ocs`` they pass
    through, identified by (dimension, the other two coordinates modulo c)."""
    from topologies.torus import torus_graph
    dims = [int(k) * cube_dim for k in slice_cubes]
    g = torus_graph(dims, copper_bandwidth_bps, latency_s)
    for u, v, d in g.edges(data=True):
        i = d["dim"]
        cu, cv = g.nodes[u]["coord"], g.nodes[v]["coord"]
        crosses = cu[i] // cube_dim != cv[i] // cube_dim or dims[i] == cube_dim
        crosses = crosses and {cu[i] % cube_dim, cv[i] % cube_dim} == {0, cube_dim - 1}
        if crosses:
            others = tuple(c % cube_dim for j, c in enumerate(cu) if j != i)
            d.update(medium="optical", ocs_hops=1, ocs=(i,) + others, bandwidth_bps=float(optical_bandwidth_bps))
        else:
            d.update(medium="copper", ocs_hops=0)
    return g
