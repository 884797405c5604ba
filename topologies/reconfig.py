"""Demand-aware circuit topologies (TopoOpt-like) and the cost of reconfiguring them.

Nodes (scale-up domains) have ``d`` optical ports into OCSes and no packet
switch. Given the plan's traffic per node pair, circuits are assigned in ``d``
rounds; each round is a permutation (every port sends to one node and receives
from one), the maximum-weight assignment of the *marginal* value of one more
circuit, demand / (circuits + 1) (``scipy.optimize.linear_sum_assignment``), after first giving
every pair with demand one circuit (connectivity before bandwidth).
For the regular traffic of a training plan (a ring per data-parallel group, a
forward and a backward chain per pipeline) every node has the same classes of
demand, so the same rule applied to the classes is the closed form used in
the hot path (``class_ports``): one port to each class with demand, then port
after port to the class with the largest demand / (ports + 1).

Reconfiguration (policy codes): 0 ``per-job`` sets circuits once (cost
reconfig_s / steps per step); 1 ``per-step`` once per step; 2 ``per-phase``
gives each phase (pipeline, gradient reduction) all ports but pays 2
reconfigurations per step.
"""
from __future__ import annotations

import numpy as np

POLICIES = ("per-job", "per-step", "per-phase")


def _gain(dem, c):
    """Marginal value of one more circuit: an unserved demand first (connectivity), then demand / (c + 1)."""
    big = 1.0 + 2.0 * np.max(dem, initial=0.0)
    return np.where((c == 0) & (dem > 0), big + dem, dem / (c + 1.0))


def assign_circuits(demand, ports: int):
    """Circuits ``c[i, j]`` (count, i sends to j) for a demand matrix (bytes), ``ports`` rounds."""
    from scipy.optimize import linear_sum_assignment
    dem = np.asarray(demand, dtype=float)
    n = dem.shape[0]
    c = np.zeros((n, n))
    for _ in range(int(ports)):
        gain = _gain(dem, c)
        np.fill_diagonal(gain, -1.0)
        rows, cols = linear_sum_assignment(gain, maximize=True)
        keep = dem[rows, cols] > 0
        c[rows[keep], cols[keep]] += 1
    return c


def class_ports(demands, ports):
    """Closed form of ``assign_circuits`` for per-node demand classes (list of arrays, bytes):
    ports per class after the greedy marginal rule; vectorised over designs, loop over ports."""
    dem = np.stack(np.broadcast_arrays(*[np.asarray(x, dtype=float) for x in demands]))
    ports = np.asarray(ports, dtype=float)
    c = np.zeros_like(dem)
    for k in range(int(np.max(ports))):
        active = k < ports
        gain = np.where(dem > 0, _gain(dem, c), -1.0)
        best = np.argmax(gain, axis=0)
        has = np.take_along_axis(gain, best[None], 0)[0] > 0
        add = (np.arange(dem.shape[0])[:, None] == best[None]) & (active & has)[None]
        c = c + add.reshape(c.shape)
    return list(c)


def plan_demand_matrix(pp: int, dp: int, dp_bytes: float, pp_bytes: float):
    """Node-level demand of a plan laid out stage-major on pp x dp nodes: a ring per stage over
    the dp replicas (dp_bytes to the next replica) and, per replica, forward and backward
    chains over the stages (pp_bytes each way)."""
    n = pp * dp
    dem = np.zeros((n, n))
    node = lambda s, r: s * dp + r  # noqa: E731
    for s in range(pp):
        for r in range(dp):
            if dp > 1:
                dem[node(s, r), node(s, (r + 1) % dp)] += dp_bytes
            if s + 1 < pp:
                dem[node(s, r), node(s + 1, r)] += pp_bytes
                dem[node(s + 1, r), node(s, r)] += pp_bytes
    return dem


def reconfigurations_per_step(policy_code, steps_per_job):
    """Reconfigurations charged per step: 1/steps (per-job), 1 (per-step), 2 (per-phase)."""
    p = np.asarray(policy_code)
    return np.where(p == 0, 1.0 / np.maximum(steps_per_job, 1.0), np.where(p == 1, 1.0, 2.0))


def plan_traffic_bytes(layers, hidden, seq_len, microbatch, microbatches, tp, pp, virtual_stages,
                       grad_bytes, layer_params=None):
    """Scale-out bytes per device per step that circuits are planned for (P = layer_params per
    layer; default 12 h^2, a dense 4h-MLP layer):

    gradient ring:  2 * grad_bytes * L P / (tp pp)   (reduce-scatter + all-gather, ~2x the shard data)
    pipeline, each way: 2 * b s h / tp per microbatch and model chunk (16-bit activations / gradients)."""
    hidden = np.asarray(hidden, float)
    per_layer = 12.0 * hidden ** 2 if layer_params is None else np.asarray(layer_params, float)
    params_dev = np.asarray(layers, float) * per_layer / (tp * pp)
    dp_bytes = 2.0 * grad_bytes * params_dev
    pp_bytes = np.where(pp > 1, 2.0 * microbatch * seq_len * hidden / tp * microbatches * virtual_stages, 0.0)
    return dp_bytes, pp_bytes
