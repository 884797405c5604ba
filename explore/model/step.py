"""Step-time and memory model: (ModelSpec, ParallelPlan, SystemSpec) -> times and bytes per device.

Per layer and microbatch on one device of the slowest pipeline stage:

* GEMMs: FLOPs / (peak * gemm_efficiency) + gemm_overhead_s per kernel
  (roofline with an achievable-efficiency term); backward = 2 x forward.
* memory-bound work (norms, dropout, residuals, activation functions,
  unfused softmax): bytes / (HBM bandwidth * hbm_efficiency).
* tensor-parallel collectives on the fabric the tensor group crosses:
  2 all-reduces forward and 2 backward (Shoeybi et al. 2019), or with
  sequence parallelism 2 all-gathers + 2 reduce-scatters each way
  (Korthikanti et al. 2022, Sec. 4.2.2); exposed unless ``overlap_tp_comm``,
  which hides them behind the GEMMs they feed (only the excess is exposed).
* recompute: full repeats the forward (with its collectives), selective
  repeats the attention core (Korthikanti et al. 2022, Sec. 5).

The pipeline runs (m + (p-1)/v) slowest-stage microbatch times (interleaved
1F1B, Narayanan et al. 2021 Sec. 2.2), plus blocking point-to-point sends.
Data-parallel gradient reduce-scatter (or all-reduce without ZeRO) overlaps
the backward pass of the last microbatch when enabled; ZeRO-3 all-gathers the
parameters for every microbatch's forward and backward.

Issue 11 (marked blocks): context parallelism holds s/cp tokens per rank and
exchanges key/value blocks in a ring (``context.py``), MoE layers add the expert
all-to-all (``moe.py``, ``topologies/alltoall.py``) and reduce expert gradients over
the expert-data-parallel group, and the precision recipe (``precision.py``) sets
the peak of non-GEMM work, the FP8 quantization traffic and bytes per parameter.
"""
from __future__ import annotations

import numpy as np

from explore.model import calibration as cal
from explore.model.plan import ParallelPlan
from explore.model.system import SystemSpec
from explore.model.workload import (ModelSpec, activation_bytes_per_layer,
                              layer_attention_flops_per_token,
                              layer_gemm_flops_per_token, layer_params, logits_flops_per_token,
                              mlp_inner_width)
from topologies import collectives as coll
from topologies import alltoall as a2a  # issue 11
from explore.model import context as ctx, moe  # issue 11
from explore.model.precision import Recipe, cast_elements_per_token_layer  # issue 11
from topologies.placement import Placement, group_span

ACT_BYTES = 2.0  # 16-bit activations exchanged between ranks


class Fabric:
    """Effective per-device bandwidths a collective sees (link efficiency and oversubscription).

    Every group is split into its scale-up part (ring inside the domain) and its
    scale-out part, which ``topologies.placement.Placement`` puts on the design's
    network family (contention from oversubscription, rails, dragonfly global
    links, torus rings shared by interleaved groups, circuits that follow the plan).
    """

    def __init__(self, s: SystemSpec, c: cal.Calibration):
        if s.network is None:
            raise ValueError("SystemSpec.network is None: every system has a scale-out network "
                             "(explore.model.system.build_system sets it)")
        self.su_bw = s.su_bandwidth_bps * c.link_efficiency
        self.su_lat = s.su_latency_s
        self.domain = s.su_size
        self.place = Placement(s.network, s.su_size, s.so_bandwidth_bps, s.so_latency_s,
                               s.nics_per_device, s.nic_bandwidth_bps, c.scale_out_link_efficiency,
                               s.oversubscription, s.switch_radix, s.devices)

    def all_reduce(self, size_bytes, stride, n):
        inner, outer = group_span(stride, n, self.domain)
        t_in = coll.ring_reduce_scatter_s(size_bytes, inner, self.su_bw, self.su_lat)
        shard = np.asarray(size_bytes) / inner
        return 2 * t_in + self.place.outer_all_reduce(shard, stride, outer) + self.place.reconfiguration_stall(outer)

    def _reduce_scatter(self, size_bytes, stride, n):
        inner, outer = group_span(stride, n, self.domain)
        t_in = coll.ring_reduce_scatter_s(size_bytes, inner, self.su_bw, self.su_lat)
        return t_in + self.place.outer_reduce_scatter(np.asarray(size_bytes) / inner, stride, outer), outer

    def reduce_scatter(self, size_bytes, stride, n):
        t, outer = self._reduce_scatter(size_bytes, stride, n)
        return t + self.place.reconfiguration_stall(outer)

    def all_gather(self, size_bytes, stride, n):
        return self._reduce_scatter(size_bytes, stride, n)[0]

    def all_to_all(self, size_bytes, stride, n, out_fraction=None, messages=1.0):
        """Issue 11: MoE dispatch/combine on the fabric it crosses (topologies/alltoall.py)."""
        return a2a.all_to_all_s(self.place, self.su_bw, self.su_lat, size_bytes, stride, n, out_fraction, messages)

    def p2p(self, size_bytes, stride):
        cross = stride >= self.domain
        return np.where(cross, self.place.p2p(size_bytes, stride),
                        coll.p2p_s(size_bytes, self.su_bw, self.su_lat))


def _share(part, whole):
    """part / whole, 0 where whole is 0 (issue 11 breakdown split)."""
    return np.where(whole > 0, part / np.where(whole > 0, whole, 1.0), 0.0)


def stage_layers(m: ModelSpec, plan: ParallelPlan):
    """Layers on the fullest stage and on the last stage (which also holds the logits).

    Layers need not divide evenly (Llama 3 405B: 126 on 16 stages): the fullest
    stage holds ceil(L/p); the last stage, which carries the output layer,
    holds floor(L/p)."""
    return np.ceil(m.layers / plan.pp), np.floor(m.layers / plan.pp)


def step_model(m: ModelSpec, plan: ParallelPlan, s: SystemSpec, flash,
               c: cal.Calibration = cal.DEFAULT, recipe: Recipe | None = None) -> dict[str, np.ndarray]:
    """Times (s), FLOPs and memory (bytes) per device for one optimizer step."""
    t, b, sq, h = plan.tp, plan.microbatch, m.seq_len, m.hidden
    sp = plan.sp_active
    # --- issue 11: context parallelism holds s/cp tokens per rank; precision recipe
    cp, ep = plan.cp, plan.ep
    recipe = recipe if recipe is not None else Recipe.default(s)
    peak_other = recipe.other_peak_flops
    tokens_mb = b * sq / cp
    # --- end issue 11
    peak = s.peak_flops
    hbm = s.hbm_bandwidth_bytes_per_s * c.hbm_efficiency
    fab = Fabric(s, c)

    # --- per layer, per microbatch, forward, one device
    gemm_flops = layer_gemm_flops_per_token(m) * tokens_mb / t
    attn_flops = layer_attention_flops_per_token(m) * tokens_mb / t
    # issue 11: the busiest expert's extra tokens (capacity_factor) set the MoE layer's pace
    gemm_time_flops = gemm_flops + 2.0 * moe.imbalance_extra_active_params(
        m, np.where(m.gated_mlp, 3.0, 2.0)) * tokens_mb / t
    t_gemm = gemm_time_flops / (peak * c.gemm_efficiency) + 4 * c.gemm_overhead_s
    t_attn = np.where(flash, attn_flops / (peak_other * c.gemm_efficiency * c.flash_attention_efficiency),
                      attn_flops / (peak_other * c.gemm_efficiency) + 2 * c.gemm_overhead_s)
    sbh = tokens_mb * h
    f = mlp_inner_width(m)
    act_fn_bytes = np.where(m.gated_mlp, 6.0, 4.0) * tokens_mb * f / t
    repl_bytes = cal.MEMBOUND_BYTES_PER_SBH_REPLICATED * sbh / np.where(sp, t, 1.0)
    softmax_bytes = np.where(flash, 0.0, cal.SOFTMAX_BYTES_PER_SCORE * m.heads * sq * tokens_mb / t)
    cast_bytes = recipe.cast_bytes_per_element * cast_elements_per_token_layer(m) * tokens_mb / t  # issue 11
    t_mem = (act_fn_bytes + repl_bytes + cast_bytes) / hbm
    t_softmax = softmax_bytes / hbm
    tp_bytes = ACT_BYTES * sbh
    tp_collective = np.where(sp, 2 * fab.all_gather(tp_bytes, 1.0, t) + 2 * fab.reduce_scatter(tp_bytes, 1.0, t),
                             2 * fab.all_reduce(tp_bytes, 1.0, t))
    tp_collective = np.where(t > 1, tp_collective, 0.0)
    # with TP overlap the collectives are pipelined with the GEMMs they feed (forward: the layer's
    # GEMMs; backward: the data- and weight-gradient GEMMs, twice as long): only the excess is exposed
    tp_exposed = np.where(plan.overlap_tp_comm, np.maximum(tp_collective - t_gemm, 0.0), tp_collective)
    tp_exposed_bwd = np.where(plan.overlap_tp_comm, np.maximum(tp_collective - 2.0 * t_gemm, 0.0),
                              tp_collective)

    fwd_compute = t_gemm + t_attn + t_mem + t_softmax
    bwd_compute = 2.0 * fwd_compute
    rc_full = plan.recompute == 2
    rc_sel = plan.recompute == 1
    rc_compute = np.where(rc_full, fwd_compute, np.where(rc_sel, t_attn + t_softmax, 0.0))

    # --- issue 11: MoE all-to-all (moe.py, topologies/alltoall.py) and ring attention (context.py)
    # dispatch + combine per MoE layer forward, their gradients backward; the ep group has stride etp.
    # Exposed unless overlap_moe_comm, which hides it behind another microbatch's compute (at the
    # cost of the SMs the communication kernels occupy, moe.COMM_SM_SHARE).
    tokens_rank = tokens_mb / t
    etp = plan.etp
    a2a_fwd = np.zeros_like(tokens_rank)
    if np.any(ep > 1):  # dispatch + combine as one exchange of both buffers (alpha counted twice)
        out_frac = moe.scale_out_copy_fraction(m, ep, group_span(etp, ep, fab.domain)[0], plan.deepep)
        both = moe.a2a_buffer_bytes(m, tokens_rank, recipe.dispatch_bytes + recipe.combine_bytes)
        a2a_fwd = moe.moe_layer_fraction(m) * np.where(ep > 1, fab.all_to_all(both, etp, ep, out_frac, 2.0), 0.0)
    a2a_exp_fwd = moe.overlapped_exposed(a2a_fwd, fwd_compute, plan.overlap_moe_comm)
    a2a_exp_bwd = moe.overlapped_exposed(a2a_fwd, bwd_compute, plan.overlap_moe_comm)
    # ring attention: cp - 1 key/value blocks per layer (2x backward) to the next cp rank (stride tp),
    # overlapped with the attention blocks they feed
    ring_fwd = (np.where(cp > 1, (cp - 1) * fab.p2p(ctx.kv_chunk_bytes(m, b, cp, t, ACT_BYTES), t), 0.0)
                if np.any(cp > 1) else np.zeros_like(tokens_rank))
    ring_exp_fwd = np.maximum(ring_fwd - t_attn, 0.0)
    ring_exp_bwd = np.maximum(2.0 * ring_fwd - 2.0 * t_attn, 0.0)
    frontier_fwd = a2a_exp_fwd + ring_exp_fwd
    frontier_comm = frontier_fwd + a2a_exp_bwd + ring_exp_bwd
    # --- end issue 11
    rc_comm = np.where(rc_full, tp_exposed + frontier_fwd, 0.0)
    layer_compute = fwd_compute + bwd_compute + rc_compute
    layer_comm = tp_exposed + tp_exposed_bwd + rc_comm + frontier_comm

    # --- output layer (last stage): logits GEMM, cross-entropy; embedding lookup is negligible
    logit_flops = logits_flops_per_token(m) * tokens_mb / t
    head_compute = (3.0 * logit_flops / (peak_other * c.gemm_efficiency) + 3 * c.gemm_overhead_s
                    + cal.LOGITS_BYTES_PER_ELEMENT * tokens_mb * m.vocab / t / hbm)

    n_full, n_last = stage_layers(m, plan)
    stage_full = n_full * (layer_compute + layer_comm)
    stage_last = n_last * (layer_compute + layer_comm) + head_compute
    slow_is_last = stage_last > stage_full
    t_stage = np.maximum(stage_full, stage_last)
    compute_stage = np.where(slow_is_last, n_last * layer_compute + head_compute, n_full * layer_compute)
    comm_stage = np.where(slow_is_last, n_last, n_full) * layer_comm

    mb = plan.microbatches
    p, v = plan.pp, plan.virtual_stages
    bubble = (p - 1) / v * t_stage
    pipe_steady = mb * t_stage

    # point-to-point between stages: scatter-gather over the tensor group (Narayanan et al. 2021 Sec. 4.1)
    p2p_bytes = ACT_BYTES * sbh / t
    pp_stride = t * plan.cp * plan.dp
    t_p2p = np.where(p > 1, 2.0 * (v * mb + p - 1) * fab.p2p(p2p_bytes, pp_stride), 0.0)

    # --- parameters per device (fullest stage, incl. embedding on stage 0 / head when pp = 1)
    emb = m.vocab * m.hidden
    untied = ~m.tied_embeddings
    params_full = n_full * layer_params(m) / t + emb / t + np.where((p == 1) & untied, emb / t, 0.0)
    params_last = n_last * layer_params(m) / t + emb / t  # output layer (a tied copy, too)
    # issue 11: routed experts are split over ep (moe.py); sharded states see every replica's share
    expert_total = moe.expert_params_per_layer(m, np.where(m.gated_mlp, 3.0, 2.0))
    params_full_replica, params_last_replica = params_full, params_last
    expert_shard = 1.0 / t - 1.0 / (plan.etp * ep)   # experts over etp*ep ranks instead of tp
    params_full = params_full - n_full * expert_total * expert_shard
    params_last = params_last - n_last * expert_total * expert_shard

    # --- data parallel
    dp = plan.dp
    params_dev = np.maximum(params_full, params_last)
    grad_bytes = params_dev * plan.grad_reduce_bytes
    zero = plan.zero
    # --- issue 11: gradients of the dense weights reduce over the dp*cp ranks (stride tp; for cp = 1 the
    # data-parallel group), routed-expert gradients (ep > 1) over the expert-data-parallel group of
    # tp*dp*cp/(etp*ep) ranks (stride etp*ep)
    eg = plan.etp * ep
    sep = eg != t                                   # experts sharded unlike the dense weights
    exp_dev = np.where(sep, n_full * expert_total / eg, 0.0)
    dpc, edp = dp * cp, t * dp * cp / eg

    def red(size, stride, n):
        return np.where(n > 1, np.where(zero >= 1, fab.reduce_scatter(size, stride, n),
                                        fab.all_reduce(size, stride, n)), 0.0)

    def gat(size, stride, n):
        return np.where((n > 1) & (zero >= 1), fab.all_gather(size, stride, n), 0.0)

    t_rs = red((params_dev - exp_dev) * plan.grad_reduce_bytes, t, dpc)
    t_ag = gat((params_dev - exp_dev) * 2.0, t, dpc)
    if np.any(sep):
        t_rs = t_rs + np.where(sep, red(exp_dev * plan.grad_reduce_bytes, eg, edp), 0.0)
        t_ag = t_ag + np.where(sep, gat(exp_dev * 2.0, eg, edp), 0.0)
    # --- end issue 11
    # ZeRO-3: parameters gathered for each microbatch's forward and backward
    z3 = (zero == 3) & (dpc > 1)
    t_z3 = np.where(z3, 2.0 * mb * fab.all_gather(params_dev * 2.0, t, dpc), 0.0)
    t_ag = np.where(z3, 0.0, t_ag)
    # overlap windows: the wall time of the last microbatch's backward (incl. recompute and exposed
    # TP collectives) and of the first microbatch's forward; both are part of pipe_steady, so a
    # faster fabric never lengthens the step
    last_bwd = n_full * (bwd_compute + rc_compute + tp_exposed_bwd + rc_comm)
    first_fwd = n_full * (fwd_compute + tp_exposed)
    dp_exposed = (np.where(plan.overlap_grad_reduce, np.maximum(t_rs - last_bwd, 0.0), t_rs)
                  + np.where(plan.overlap_param_gather, np.maximum(t_ag - first_fwd, 0.0), t_ag))
    z3_exposed = np.where(plan.overlap_param_gather, np.maximum(t_z3 - pipe_steady, 0.0), t_z3)

    # --- optimizer step (memory-bound), states sharded by ZeRO >= 1
    # issue 11: ZeRO shards over dp*cp ranks; with ep the shard is the unsplit replica / (dp*cp)
    params_replica = np.maximum(params_full_replica, params_last_replica)
    opt_params = np.where(zero >= 1, params_replica / (dp * cp), params_dev)
    t_opt = cal.OPTIMIZER_BYTES_PER_PARAM * opt_params / hbm

    step = pipe_steady + bubble + t_p2p + dp_exposed + z3_exposed + t_opt

    # --- memory per device (bytes)
    act_layer = activation_bytes_per_layer(m, b / cp, t, sp, plan.recompute, flash)  # issue 11: s/cp tokens
    in_flight_full = np.minimum(p * (1 + (p - 1) / (p * v)), np.maximum(mb, 1))
    mem_act_first = act_layer * n_full * in_flight_full
    mem_act_last = act_layer * n_last + 4.0 * tokens_mb * m.vocab / t  # fp32 logits
    w_b, g_b, o_b = recipe.weight_bytes, recipe.grad_bytes, recipe.optimizer_bytes  # issue 11: per recipe

    def state_bytes(params, replica):
        # issue 11: a sharded state holds replica / (dp*cp) (= params / dp when cp = ep = 1)
        shard = replica / (dp * cp)
        w = np.where(zero >= 3, shard, params) * w_b
        g = np.where(zero >= 2, shard, params) * g_b
        o = np.where(zero >= 1, shard, params) * o_b
        return w, g, o

    wf, gf, of = state_bytes(params_full, params_full_replica)
    wl, gl, ol = state_bytes(params_last, params_last_replica)
    mem_first = wf + gf + of + mem_act_first + np.where(p == 1, 4.0 * tokens_mb * m.vocab / t, 0.0)
    mem_last = wl + gl + ol + mem_act_last
    first_peak = mem_first >= mem_last
    mem = np.maximum(mem_first, mem_last) + cal.MEMORY_RESERVED_BYTES

    # --- FLOPs actually executed per device per step (hardware FLOPs, incl. recompute)
    rc_flops = np.where(rc_full, gemm_flops + attn_flops, np.where(rc_sel, attn_flops, 0.0))
    hw_flops_layer = 3.0 * (gemm_flops + attn_flops) + rc_flops
    busy = mb * compute_stage + t_opt

    return {
        "step_time_s": step,
        "params_per_device": params_dev,
        "hw_flops_per_device": mb * (m.layers / p) * hw_flops_layer + mb * 3 * logit_flops / p,
        "busy_time_s": busy,
        "time_s_compute": mb * compute_stage,
        # issue 11: exposed MoE all-to-all and ring-attention exchange, split out of the layer comm
        "time_s_tp_comm": mb * comm_stage * (1.0 - _share(frontier_comm + np.where(rc_full, frontier_fwd, 0.0),
                                                           layer_comm)),
        "time_s_moe_comm": mb * comm_stage * _share(a2a_exp_fwd * np.where(rc_full, 2.0, 1.0) + a2a_exp_bwd,
                                                    layer_comm),
        "time_s_cp_comm": mb * comm_stage * _share(ring_exp_fwd * np.where(rc_full, 2.0, 1.0) + ring_exp_bwd,
                                                   layer_comm),
        "time_s_pp_bubble": bubble,
        "time_s_pp_p2p": t_p2p,
        "time_s_dp_comm": dp_exposed,
        "time_s_zero3_comm": z3_exposed,
        "time_s_optimizer": t_opt,
        "memory_per_device_bytes": mem,
        "memory_bytes_weights": np.where(first_peak, wf, wl),
        "memory_bytes_gradients": np.where(first_peak, gf, gl),
        "memory_bytes_optimizer": np.where(first_peak, of, ol),
        "memory_bytes_activations": np.where(first_peak, mem_first - wf - gf - of, mem_act_last),
        "bytes_scale_out_per_device": grad_bytes * 2 + np.where(p > 1, 2 * v * mb * p2p_bytes, 0.0),
    }
