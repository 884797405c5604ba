"""Demand-aware circuit topologies (TopoOpt-like) and the cost of reconfiguring them.

Nodes (scale-up domains) have ``d`` optical ports into OCSes and no packet
switch. Given the plan's traffic per node pair, circuits are assigned in ``d``
rounds; each round is a permutation (every port sends to one node and receives
from one), the maximum-weight assignment of the *marginal* value of one more
circuit (``scipy.optimize.linear_sum_assignment``), after first giving every
pair with demand one circuit (connectivity before bandwidth). The value is the
transfer time it saves: a demand of D bytes on c circuits takes D / (c B), so
one more circuit saves D / (c B) - D / ((c + 1) B) = D / (c (c + 1) B). The
step sums its phases' times (pipeline transfers, then the gradient reduction),
so the rule minimises sum_i D_i / c_i over the node's ports: greedy on this
convex separable objective is exact for integers (marginal allocation: every
D_i / c_i is convex in c_i; tests/topologies checks it against exhaustive
search), and its continuous optimum is c_i proportional to sqrt(D_i).
For the regular traffic of a training plan (a ring per data-parallel group, a
forward and a backward chain per pipeline) every node has the same classes of
demand, so the same rule applied to the classes is the closed form used in
the hot path (``class_ports``): one port to each class with demand, then port
after port to the class whose transfer time it shortens most.

A node twice as large never has a longer planned time per device: it has
twice the ports (when d = devices x NICs is whole at both sizes), twice the
bandwidth and at most twice each class's demand, so twice the smaller node's
split is a candidate no slower per device, and the optimum is no worse. One
class's own time can still rise by a port's rounding (a class rounded up to
one port of 8 may get 1 of 16): whole ports that follow the demand at every
size cannot always avoid it.

Reconfiguration (policy codes): 0 ``per-job`` sets circuits once (cost
reconfig_s / steps per step); 1 ``per-step`` once per step; 2 ``per-phase``
gives each phase (pipeline, gradient reduction) all ports but pays 2
reconfigurations per step.
"""
from __future__ import annotations

import numpy as np

POLICIES = ("per-job", "per-step", "per-phase")


def _gain(dem, c):
    """Marginal value of one more circuit: an unserved demand first (connectivity), then the
    transfer time it saves in units of 1 / (circuit bandwidth), demand / (c (c + 1))."""
    big = 1.0 + 2.0 * np.max(dem, initial=0.0)
    return np.where((c == 0) & (dem > 0), big + dem, dem / np.maximum(c * (c + 1.0), 1.0))


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
    ports per class after the greedy marginal rule (the integer split minimising sum_i D_i / c_i,
    one port per class with demand first); vectorised over designs, loop over ports."""
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


def sync_bytes_per_param(zero, microbatches, grad_bytes, gather_bytes=2.0):
    """Bytes per parameter a device sends around its data-parallel ring per step, as the step
    model schedules them: ZeRO-0 all-reduces the gradients (2 g: reduce-scatter + all-gather);
    ZeRO-1 reduce-scatters them once and gathers the weights in ``gather_bytes`` a = 2 (16-bit;
    1 with FP8 parameter gathers) (g + a); ZeRO-2 reduce-scatters every microbatch (m g + a);
    ZeRO-3 also gathers the weights for every microbatch's forward and backward (m g + 2 a m)."""
    z, m, a = np.asarray(zero, float), np.asarray(microbatches, float), np.asarray(gather_bytes, float)
    return np.where(z == 0, 2.0 * grad_bytes,
                    np.where(z == 1, grad_bytes + a,
                             np.where(z == 2, m * grad_bytes + a, m * (grad_bytes + 2.0 * a))))


def plan_traffic_bytes(layers, hidden, seq_len, microbatch, microbatches, tp, pp, virtual_stages,
                       grad_bytes, layer_params=None, cp=1.0, zero=0.0, expert_params=0.0,
                       expert_ranks=None, gather_bytes=2.0):
    """Scale-out traffic per device per step that circuits are planned for, weighted as the time
    it takes on the step's critical path (P = layer_params per layer, default 12 h^2, a dense
    4h-MLP layer; E = expert_params of it that expert parallelism splits over ``expert_ranks``
    = etp ep instead of tp; s = sync_bytes_per_param):

    dense gradient ring:  s L (P - E) / (tp pp)
    expert gradient ring: s L E / (etp ep pp)       (E counts in the dense ring if etp ep = tp)
    pipeline, each way:   2 b (S / cp) h / tp per transfer, for the m v + pp - 1 transfers of
                          a 1F1B schedule's critical path (16-bit activations / gradients)."""
    hidden = np.asarray(hidden, float)
    per_layer = 12.0 * hidden ** 2 if layer_params is None else np.asarray(layer_params, float)
    eg = tp if expert_ranks is None else expert_ranks
    split = np.asarray(eg, float) != np.asarray(tp, float)
    experts = np.where(split, expert_params, 0.0)
    sync = sync_bytes_per_param(zero, microbatches, grad_bytes, gather_bytes)
    dp_bytes = sync * np.asarray(layers, float) * (per_layer - experts) / (tp * pp)
    ep_bytes = sync * np.asarray(layers, float) * experts / (eg * pp)
    transfers = microbatches * virtual_stages + pp - 1
    pp_bytes = np.where(pp > 1, 2.0 * microbatch * seq_len / cp * hidden / tp * transfers, 0.0)
    return dp_bytes, ep_bytes, pp_bytes
