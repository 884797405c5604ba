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
"""
from __future__ import annotations

import numpy as np

from explore.model import calibration as cal
from explore.model import gemm, memory, overlap
from explore.model.plan import ParallelPlan
from explore.model.system import SystemSpec
from explore.model.workload import (ModelSpec, activation_bytes_per_layer,
                              layer_attention_flops_per_token,
                              layer_gemm_flops_per_token, layer_params, logits_flops_per_token,
                              mlp_inner_width)
from explore.model.fabric import Fabric  # noqa: F401  (re-exported: explore.model.step.Fabric)

ACT_BYTES = 2.0  # 16-bit activations exchanged between ranks


def stage_layers(m: ModelSpec, plan: ParallelPlan):
    """Layers on the fullest stage and on the last stage (which also holds the logits).

    Layers need not divide evenly (Llama 3 405B: 126 on 16 stages): the fullest
    stage holds ceil(L/p); the last stage, which carries the output layer,
    holds floor(L/p)."""
    return np.ceil(m.layers / plan.pp), np.floor(m.layers / plan.pp)


def step_model(m: ModelSpec, plan: ParallelPlan, s: SystemSpec, flash,
               c: cal.Calibration = cal.DEFAULT) -> dict[str, np.ndarray]:
    """Times (s), FLOPs and memory (bytes) per device for one optimizer step."""
    t, b, sq, h = plan.tp, plan.microbatch, m.seq_len, m.hidden
    sp = plan.sp_active
    tokens_mb = b * sq
    peak = s.peak_flops * s.matmul_peak_fraction   # measured max achievable matmul rate (catalog)
    hbm = s.hbm_bandwidth_bytes_per_s * c.hbm_efficiency
    fab = Fabric(s, c)

    # --- per layer, per microbatch, forward, one device
    gemm_flops = layer_gemm_flops_per_token(m) * tokens_mb / t
    attn_flops = layer_attention_flops_per_token(m) * tokens_mb / t
    # a fused causal kernel skips the masked half of the score tiles (its executed FLOPs)
    attn_exec = np.where(flash, layer_attention_flops_per_token(m, causal=True) * tokens_mb / t, attn_flops)
    shapes = gemm.layer_gemm_shapes(tokens_mb, h, m.heads, m.kv_heads, mlp_inner_width(m), m.gated_mlp, t)
    t_gemm = gemm.gemm_time_s(shapes, peak, c.gemm_efficiency, hbm) + 4 * c.gemm_overhead_s
    t_attn = np.where(flash, attn_exec / (peak * c.gemm_efficiency * c.flash_attention_efficiency),
                      attn_flops / (peak * c.gemm_efficiency) + 2 * c.gemm_overhead_s)
    sbh = tokens_mb * h
    f = mlp_inner_width(m)
    act_fn_bytes = np.where(m.gated_mlp, 6.0, 4.0) * tokens_mb * f / t
    repl_bytes = cal.MEMBOUND_BYTES_PER_SBH_REPLICATED * sbh / np.where(sp, t, 1.0)
    softmax_bytes = np.where(flash, 0.0, cal.SOFTMAX_BYTES_PER_SCORE * m.heads * sq * sq * b / t)
    t_mem = (act_fn_bytes + repl_bytes) / hbm
    t_softmax = softmax_bytes / hbm
    tp_bytes = ACT_BYTES * sbh
    tp_collective = np.where(sp, 2 * fab.all_gather(tp_bytes, 1.0, t) + 2 * fab.reduce_scatter(tp_bytes, 1.0, t),
                             2 * fab.all_reduce(tp_bytes, 1.0, t))
    tp_collective = np.where(t > 1, tp_collective, 0.0)
    kappa = c.overlap_slowdown

    # --- one layer's wall time (forward, backward, recompute) with its TP collectives: exposed,
    # or with TP overlap pipelined with the GEMMs they feed (forward: the layer's GEMMs; backward:
    # data- and weight-gradient GEMMs, twice as long) at the overlap slowdown (explore.model.overlap)
    other_fwd = t_attn + t_mem + t_softmax
    fwd_compute = t_gemm + other_fwd
    bwd_compute = 2.0 * fwd_compute
    ov_tp = plan.overlap_tp_comm
    fwd_wall = np.where(ov_tp, overlap.hide(t_gemm, tp_collective, kappa) + other_fwd,
                        fwd_compute + tp_collective)
    bwd_wall = np.where(ov_tp, overlap.hide(2.0 * t_gemm, tp_collective, kappa) + 2.0 * other_fwd,
                        bwd_compute + tp_collective)
    rc_full = plan.recompute == 2
    rc_sel = plan.recompute == 1
    rc_compute = np.where(rc_full, fwd_compute, np.where(rc_sel, t_attn + t_softmax, 0.0))
    rc_wall = np.where(rc_full, fwd_wall, rc_compute)

    # --- output layer (last stage): logits GEMM, cross-entropy; embedding lookup is negligible
    logit_flops = logits_flops_per_token(m) * tokens_mb / t
    head_fwd = (logit_flops / (peak * c.gemm_efficiency) + c.gemm_overhead_s
                + 0.5 * cal.LOGITS_BYTES_PER_ELEMENT * tokens_mb * m.vocab / t / hbm)
    head_bwd = (2.0 * logit_flops / (peak * c.gemm_efficiency) + 2 * c.gemm_overhead_s
                + 0.5 * cal.LOGITS_BYTES_PER_ELEMENT * tokens_mb * m.vocab / t / hbm)

    # --- 1F1B steady state: each slot is one forward and one backward of the slowest stage;
    # forward and backward are bounded separately (the fullest stage or the last stage + head)
    n_full, n_last = stage_layers(m, plan)
    t_fwd_stage = np.maximum(n_full * fwd_wall, n_last * fwd_wall + head_fwd)
    t_bwd_stage = np.maximum(n_full * (bwd_wall + rc_wall), n_last * (bwd_wall + rc_wall) + head_bwd)
    t_stage = t_fwd_stage + t_bwd_stage
    last_fwd = n_full * fwd_wall < n_last * fwd_wall + head_fwd
    last_bwd = n_full * (bwd_wall + rc_wall) < n_last * (bwd_wall + rc_wall) + head_bwd
    compute_stage = (np.where(last_fwd, n_last * fwd_compute + head_fwd, n_full * fwd_compute)
                     + np.where(last_bwd, n_last * (bwd_compute + rc_compute) + head_bwd,
                                n_full * (bwd_compute + rc_compute)))

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

    # --- data parallel: gradient reduction in buckets (ZeRO 0/1: once per step; ZeRO-2: per
    # microbatch; ZeRO-3: per layer and microbatch) and parameter gathers (ZeRO 1/2: once per
    # step, in buckets; ZeRO-3: per layer, for every microbatch's forward and backward)
    dp = plan.dp
    dp_stride = t * plan.cp
    params_dev = np.maximum(params_full, params_last)
    grad_bytes = params_dev * plan.grad_reduce_bytes
    zero = plan.zero
    on = dp > 1
    buckets = np.ceil(params_dev / plan.grad_bucket_params)
    z3 = (zero == 3) & on
    rs_calls = np.where(zero == 3, n_full, buckets)
    rs_once = np.where(zero >= 1, fab.reduce_scatter(grad_bytes, dp_stride, dp, rs_calls),
                       fab.all_reduce(grad_bytes, dp_stride, dp, rs_calls))
    rs_times = np.where(zero >= 2, mb, 1.0)
    t_rs = np.where(on, rs_times * rs_once, 0.0)
    rs_last = np.where(on, rs_once / rs_calls, 0.0)            # the last bucket: after the compute
    t_ag = np.where(on & (zero >= 1) & (zero <= 2), fab.all_gather(params_dev * 2.0, dp_stride, dp, buckets), 0.0)
    z3_layer = fab.all_gather(params_dev * 2.0 / n_full, dp_stride, dp)
    t_z3 = np.where(z3, 2.0 * mb * n_full * z3_layer, 0.0)
    stall = np.where(on, fab.reconfiguration_stall(dp_stride, dp), 0.0)

    # --- the step as scheduled streams on the data-parallel link (explore.model.overlap): the
    # gradient reduction runs under the last backward slot (ZeRO-2/3: under every backward slot),
    # the parameter gather under the first forward slot, ZeRO-3 gathers under the whole pipeline
    # (prefetched one layer ahead: each microbatch's first gather is exposed); the link
    # serialises them and the last gradient bucket starts when the compute ends
    compute_wall = pipe_steady + bubble + t_p2p
    before_rs = compute_wall - np.where(zero >= 2, mb, 1.0) * t_bwd_stage
    ov_rs, ov_ag = plan.overlap_grad_reduce, plan.overlap_param_gather
    s_rs = np.where(ov_rs, t_rs, 0.0)
    s_ag = np.where(ov_ag, t_ag, 0.0)
    s_z3 = np.where(ov_ag, t_z3, 0.0)
    streams = [(s_rs, before_rs), (s_ag, compute_wall - t_fwd_stage), (s_z3, np.zeros_like(compute_wall))]
    bounds = [compute_wall + np.where(ov_rs, rs_last, 0.0),
              compute_wall + np.where(ov_ag & z3, mb * z3_layer, 0.0)]
    wall, _ = overlap.nested(compute_wall, streams, kappa, bounds)
    dp_serial = np.where(ov_rs, 0.0, t_rs) + np.where(ov_ag, 0.0, t_ag) + stall
    z3_serial = np.where(ov_ag, 0.0, t_z3)
    ov_total = s_rs + s_ag + s_z3
    z3_share = np.where(ov_total > 0, s_z3 / np.where(ov_total > 0, ov_total, 1.0), 0.0)
    overlap_cost = wall - compute_wall           # exposed + slowdown of the overlapped streams
    dp_exposed = dp_serial + (1.0 - z3_share) * overlap_cost
    z3_exposed = z3_serial + z3_share * overlap_cost

    # --- optimizer step (memory-bound), states sharded by ZeRO >= 1
    opt_params = params_dev / np.where(zero >= 1, dp, 1.0)
    t_opt = cal.OPTIMIZER_BYTES_PER_PARAM * opt_params / hbm

    step = wall + dp_serial + z3_serial + t_opt

    # --- memory per device (bytes): peak over the first, a full middle and the last stage
    act_layer = activation_bytes_per_layer(m, b, t, sp, plan.recompute, flash)
    mem_parts = memory.peak_memory(act_layer, layer_params(m) / t, emb / t, 4.0 * tokens_mb * m.vocab / t,
                                   m.layers, p, v, mb, zero, dp, untied)
    mem = mem_parts["total"]

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
        "time_s_tp_comm": mb * (t_stage - compute_stage),
        "time_s_pp_bubble": bubble,
        "time_s_pp_p2p": t_p2p,
        "time_s_dp_comm": dp_exposed,
        "time_s_zero3_comm": z3_exposed,
        "time_s_optimizer": t_opt,
        "memory_per_device_bytes": mem,
        "memory_bytes_weights": mem_parts["weights"],
        "memory_bytes_gradients": mem_parts["gradients"],
        "memory_bytes_optimizer": mem_parts["optimizer"],
        "memory_bytes_activations": mem_parts["activations"],
        "bytes_scale_out_per_device": grad_bytes * 2 + np.where(p > 1, 2 * v * mb * p2p_bytes, 0.0),
    }
