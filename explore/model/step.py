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
* unfused gradient accumulation (``grad_accumulation`` "hook": Megatron-LM 2021's local DDP;
  "autograd": PyTorch DDP under no_sync, DeepSpeed's pipeline engine, every microbatch but the
  first): each microbatch adds each local weight gradient into the accumulator, 2 + 2 x
  grad_reduce_bytes bytes per parameter at ``hbm``.
* vocabulary and per-step memory traffic: the fp32 cross-entropy over the
  logits on the last stage, the embedding's dense gradient accumulation on the
  first stage, Adam on the ZeRO-sharded states and passes over the local
  gradient buffer once per step (byte counts in ``calibration.py``, from
  Megatron-LM's kernels).

The pipeline runs (m + (p-1)/v) slowest-stage microbatch times (interleaved
1F1B, Narayanan et al. 2021 Sec. 2.2; with the embedding counted as a layer of the split, less what
the embedding-only chunk saves on the fill and drain, ``plan.bubble_time``), plus blocking point-to-point sends: Megatron-LM's batched
exchange per slot, or DeepSpeed's pipeline engine sending one tensor at a time (``pp_p2p``
serial: ``pipeline_p2p.serial_p2p_transfers`` each way; ``pp_scatter_grads`` false sends the gradient whole).
Data-parallel gradient reduce-scatter (or all-reduce without ZeRO) overlaps
the backward pass of the last microbatch when enabled; ZeRO-3 all-gathers the
parameters for every microbatch's forward and backward (``zero3_gather_passes``; 3 when
the recompute gathers again), in ``zero3_calls_per_layer`` collectives per layer, each
paying its latency; list-form collectives (``list_collectives``) add a host copy per rank
and call plus the caller's Python tensor calls per rank (``list_gather_host_calls``,
``list_reduce_host_calls``), and ``zero3_replicated_params_per_layer`` small parameters are
regathered rank by rank after the step (``zero3_replicated_host_calls`` Python calls and a copy
each; DeepSpeed 2021 stage 3: explore/validation.py DEEPSPEED_2021_ZERO3); a list call's per-rank
copies take the longer of their host issue and their HBM traffic. ``zero3_fetch_sync`` (DeepSpeed
2021's fetch): every gather buffer is zero-filled before a device synchronize, so each gradient
reduce-scatter hides only under the next weight's backward GEMMs (``overlap.hook_serialized``).

Issue 11 (marked blocks): context parallelism holds s/cp tokens per rank and
exchanges key/value blocks in a ring (``context.py``), MoE layers add the expert
all-to-all (``moe.py``, ``topologies/alltoall.py``) and reduce expert gradients over
the expert-data-parallel group, and the precision recipe (``precision.py``) sets
the peak of non-GEMM work, the FP8 quantization traffic and bytes per parameter.
"""
from __future__ import annotations

import numpy as np
from hwmodels.select import where

from explore.model import calibration as cal
from explore.model.cardinality import UniqueRows, per_rows, sharing_allowed, varying
from explore.model import gemm, host_syncs, overlap
from explore.model.memory import stage_layers
from explore.model.plan import ParallelPlan, bubble_time
from explore.model.system import SystemSpec
from explore.model.workload import (ModelSpec, layer_attention_flops_per_token,
                              layer_gemm_flops_per_token, layer_params, logits_flops_per_token,
                              mlp_inner_width)
from explore.model.fabric import Fabric  # noqa: F401  (re-exported: explore.model.step.Fabric)
from explore.model import context as ctx, moe, moe_overlap  # issue 11
from explore.model.precision import Recipe  # issue 11
from topologies.placement import group_span  # issue 11
from explore.model.pipeline_p2p import ACT_BYTES, pipeline_p2p
from explore.model.device_memory import expert_split, memory_model
from explore.model.layer_compute import _share, layer_compute  # noqa: F401  (re-exported)



def step_model(m: ModelSpec, plan: ParallelPlan, s: SystemSpec, flash,
               c: cal.Calibration = cal.DEFAULT, recipe: Recipe | None = None,
               memory: dict | None = None) -> dict[str, np.ndarray]:
    """Times (s), FLOPs and memory (bytes) per device for one optimizer step. ``memory``: the
    ``memory_model`` parts of these designs when already computed."""
    t, b, sq, h = plan.tp, plan.microbatch, m.seq_len, m.hidden
    sp = plan.sp_active
    # --- issue 11: context parallelism holds s/cp tokens per rank; precision recipe
    cp, ep = plan.cp, plan.ep
    recipe = recipe if recipe is not None else Recipe.default(s)
    tokens_mb = b * sq / cp
    # --- end issue 11
    # measured max achievable matmul rate (catalog) at the linear GEMMs' precision (FP8: its own figure)
    # and recipe (MXFP8's block-scaled GEMMs: precision.MXFP8_GEMM_RATE)
    peak = (s.peak_flops * where(np.isnan(s.gemm_peak_fraction), s.matmul_peak_fraction, s.gemm_peak_fraction)
            * recipe.gemm_rate)
    peak_other = recipe.other_peak_flops * s.matmul_peak_fraction  # attention core, logits (issue 11)
    hbm = s.hbm_bandwidth_bytes_per_s * c.hbm_efficiency
    fab = Fabric(s, c)

    # --- per layer, per microbatch, forward, one device: the compute times depend on few inputs
    # (microbatch, cp, tp, sp, flash, the rates, the model): evaluated once per distinct
    # combination of them and gathered back (explore.model.cardinality)
    gemm_flops = layer_gemm_flops_per_token(m) * tokens_mb / t
    attn_flops = layer_attention_flops_per_token(m) * tokens_mb / t
    sbh = tokens_mb * h
    f = mlp_inner_width(m)
    args = (b, cp, t, sp, flash, peak, peak_other, hbm, recipe.cast_bytes_per_element,
            recipe.amax_bytes_per_element, recipe.foundry_kernels,
            recipe.foundry_unpad)
    n = max(np.size(a) for a in args)
    rows = (UniqueRows(list(args) + varying(n, m), n)
            if n > 1 and sharing_allowed(c) else None)
    lt = per_rows(lambda *a: layer_compute(*a, c), rows, m, *args)
    t_gemm, t_attn, t_mem, t_softmax = lt["gemm"], lt["attn"], lt["mem"], lt["softmax"]
    t_mem_bwd = lt["mem_bwd"]
    tp_bytes = ACT_BYTES * sbh
    tp_collective = where(sp, 2 * fab.all_gather(tp_bytes, 1.0, t) + 2 * fab.reduce_scatter(tp_bytes, 1.0, t),
                             2 * fab.all_reduce(tp_bytes, 1.0, t))
    tp_collective = where(t > 1, tp_collective, 0.0)
    # issue 11: a MoE layer with expert TP 1 has the attention block's all-gather / reduce-scatter
    # only: its dispatcher takes the sequence-parallel shard as it is and returns it so
    # (Megatron-LM d98e8a64dd megatron/core/transformer/moe/token_dispatcher.py: the alltoall
    # dispatcher's gather / reduce-scatter run over pg_collection.expt_tp, of size etp, lines 86-89,
    # 741-751, 824-833; the flex dispatcher exchanges over tp_ep = etp x ep), so half the layer's
    # collectives (Korthikanti et al. 2022 Sec. 4.2.2)
    no_mlp_tp = sp & (plan.etp == 1)
    tp_collective = tp_collective * (1.0 - 0.5 * moe.moe_layer_fraction(m) * where(no_mlp_tp, 1.0, 0.0))
    kappa = c.overlap_slowdown

    # --- issue 11: MoE all-to-all (moe.py, topologies/alltoall.py) and ring attention (context.py)
    # dispatch + combine per MoE layer forward, their gradients backward; the ep group has stride etp.
    # Exposed unless overlap_moe_comm (below).
    tokens_rank = tokens_mb / t
    etp = plan.etp
    a2a_fwd = np.zeros_like(tokens_rank)
    if np.any(ep > 1):  # dispatch + combine as one exchange of both buffers (alpha counted twice)
        out_frac = moe.scale_out_copy_fraction(m, ep, group_span(etp, ep, fab.domain)[0], plan.deepep)
        both = moe.a2a_buffer_bytes(m, tokens_rank, recipe.dispatch_bytes + recipe.combine_bytes)
        a2a_fwd = moe.moe_layer_fraction(m) * where(ep > 1, fab.all_to_all(both, etp, ep, out_frac, 2.0), 0.0)
        # Megatron-Core's unfused permute / unpermute passes (moe_permute_fusion False), memory-bound
        # compute of the MoE layer (moe.unfused_permute_bytes)
        perm_fwd, perm_bwd = moe.unfused_permute_bytes(m, tokens_rank, ACT_BYTES)
        unfused = moe.moe_layer_fraction(m) * where((ep > 1) & ~np.asarray(plan.permute_fusion, bool), 1.0, 0.0) / hbm
        t_mem = t_mem + unfused * perm_fwd
        t_mem_bwd = t_mem_bwd + unfused * perm_bwd

    # --- one layer's wall time (forward, backward, recompute) with its TP collectives: exposed,
    # or with TP overlap pipelined with the GEMMs they feed (forward: the layer's GEMMs; backward:
    # data- and weight-gradient GEMMs, twice as long) at the overlap slowdown (explore.model.overlap)
    other_fwd = t_attn + t_mem + t_softmax
    other_bwd = 2.0 * (t_attn + t_softmax) + t_mem_bwd
    fwd_compute = t_gemm + other_fwd
    bwd_compute = 2.0 * t_gemm + other_bwd
    ov_tp = plan.overlap_tp_comm
    fwd_hidden = overlap.hide(t_gemm, tp_collective, kappa)
    bwd_hidden = overlap.hide(2.0 * t_gemm, tp_collective, kappa)
    if np.any(plan.tp_per_gemm):
        # Transformer Engine userbuffers (tp_overlap per_gemm): each collective under its own GEMM
        # (overlap.userbuffers_exposed); the four forward GEMMs split t_gemm as their shapes do
        shapes = gemm.layer_gemm_shapes(tokens_mb, h, m.heads, m.kv_heads, f, m.gated_mlp, t)
        parts = [gemm.gemm_time_s([sh], peak, c.gemm_efficiency, hbm) for sh in shapes]
        whole = sum(parts)
        gemms = [_share(pt, whole) * (t_gemm - 4 * c.gemm_overhead_s) + c.gemm_overhead_s for pt in parts]
        ub_gather = fab.all_gather(where(recipe.fp8, 1.0, ACT_BYTES) * sbh, 1.0, t)
        ub_scatter = fab.reduce_scatter(ACT_BYTES * sbh, 1.0, t)
        ub_reduce = (t + 1.0) / t * ACT_BYTES * sbh / hbm
        ub_fwd, ub_bwd = overlap.userbuffers_exposed(gemms, ub_gather, ub_scatter, ub_reduce, t, kappa)
        pg = plan.tp_per_gemm & (t > 1) & sp
        fwd_hidden = where(pg, t_gemm + ub_fwd, fwd_hidden)
        bwd_hidden = where(pg, 2.0 * t_gemm + ub_bwd, bwd_hidden)
    fwd_base = where(ov_tp, fwd_hidden + other_fwd, fwd_compute + tp_collective)
    bwd_base = where(ov_tp, bwd_hidden + other_bwd, bwd_compute + tp_collective)
    rc_full = plan.recompute == 2
    rc_sel = plan.recompute == 1
    rc_compute = where(rc_full, fwd_compute, where(rc_sel, t_attn + t_softmax, 0.0))
    # overlap_moe_comm: Megatron-Core's combined 1F1B pairs one layer's forward with another
    # microbatch's backward in the steady state (moe_overlap.py, cited there)
    # (evaluated only when some design asks for it, as the other frontier terms)
    a2a_exp_fwd = a2a_exp_bwd = a2a_fwd
    if np.any(plan.overlap_moe_comm):
        pair_fwd, pair_bwd = moe_overlap.exposed_per_layer(
            m, plan, fwd_base, bwd_base + rc_compute, t_gemm, t_attn, t_softmax, t_mem, t_mem_bwd, rc_compute,
            tp_collective, a2a_fwd, recipe.dispatch_bytes, recipe.combine_bytes,
            share=moe.comm_sm_share(s.sm_count))   # DeepEP's 20 SMs of the part's
        a2a_exp_fwd = where(plan.overlap_moe_comm, pair_fwd, a2a_fwd)
        a2a_exp_bwd = where(plan.overlap_moe_comm, pair_bwd, a2a_fwd)
    # ring attention: cp - 1 key/value blocks per layer (2x backward) to the next cp rank (stride tp),
    # overlapped with the attention blocks they feed
    ring_fwd = (where(cp > 1, (cp - 1) * fab.p2p(ctx.kv_chunk_bytes(m, b, cp, t, ACT_BYTES), t), 0.0)
                if np.any(cp > 1) else np.zeros_like(tokens_rank))
    ring_exp_fwd = np.maximum(ring_fwd - t_attn, 0.0)
    ring_exp_bwd = np.maximum(2.0 * ring_fwd - 2.0 * t_attn, 0.0)
    frontier_fwd = a2a_exp_fwd + ring_exp_fwd
    frontier_bwd = a2a_exp_bwd + ring_exp_bwd
    # --- end issue 11

    fwd_wall = fwd_base + frontier_fwd
    bwd_wall = bwd_base + frontier_bwd
    rc_wall = where(rc_full, fwd_wall, rc_compute)

    # --- output layer (last stage): logits GEMM, cross-entropy; embedding lookup is negligible
    logit_flops = logits_flops_per_token(m) * tokens_mb / t
    # (the unfused fp32 cross-entropy kernels, cal.LOGITS_*_BYTES_PER_ELEMENT); the input
    # embedding's dense gradient is added into the fp32 main gradient on the first stage
    # (llm-foundry: flash-attn's Triton cross-entropy on the bf16 logits, cal.FOUNDRY_LOGITS_*)
    # (training.loss_kernel te: Transformer Engine's Triton cross-entropy on the 16-bit logits, cal.TE_LOGITS_*)
    fnd = np.asarray(recipe.foundry_kernels) > 0
    te_ce = np.asarray(recipe.te_loss, dtype=bool)
    logit_fwd_bytes = where(fnd, cal.FOUNDRY_LOGITS_FWD_BYTES_PER_ELEMENT,
                            where(te_ce, cal.TE_LOGITS_FWD_BYTES_PER_ELEMENT, cal.LOGITS_FWD_BYTES_PER_ELEMENT))
    logit_bwd_bytes = where(fnd, cal.FOUNDRY_LOGITS_BWD_BYTES_PER_ELEMENT,
                            where(te_ce, cal.TE_LOGITS_BWD_BYTES_PER_ELEMENT, cal.LOGITS_BWD_BYTES_PER_ELEMENT))
    head_fwd = (logit_flops / (peak_other * c.gemm_efficiency) + c.gemm_overhead_s
                + logit_fwd_bytes * tokens_mb * m.vocab / t / hbm)
    head_bwd = (2.0 * logit_flops / (peak_other * c.gemm_efficiency) + 2 * c.gemm_overhead_s
                + logit_bwd_bytes * tokens_mb * m.vocab / t / hbm)
    emb_bwd = cal.EMBEDDING_GRAD_BYTES_PER_PARAM * m.vocab * h / t / hbm
    # training metrics (training.train_metrics; Composer's, as llm-foundry ran them): one fp32
    # cross-entropy over the logits each after every microbatch's backward
    # (cal.TRAIN_METRIC_BYTES_PER_ELEMENT), on the compute stream after FSDP's final callback has made
    # it wait for the gradient reduction: serial, no communication window (pp = 1 where it is set; with
    # pp > 1 it is charged per microbatch on top of the step, an upper bound). Memory: its two fp32
    # tensors of the logits' shape live after the backward has freed the activations, below the peak
    t_metric = recipe.train_metrics * cal.TRAIN_METRIC_BYTES_PER_ELEMENT * tokens_mb * m.vocab / t / hbm

    # --- 1F1B steady state: each slot is one forward and one backward of the slowest stage;
    # forward and backward are bounded separately (the fullest stage or the last stage + head)
    # (the first stage, a full one, adds the embedding gradient; with pp = 1 it is the last stage too;
    # with the embedding counted as a layer of the split it holds n_first = c v - 1 layers)
    n_full, n_last, n_first = stage_layers(m, plan)
    split = np.asarray(plan.emb_layer, bool) | np.asarray(plan.loss_layer, bool)
    split_any = bool(np.any(split))
    p = plan.pp
    head_only_bwd = head_bwd                    # the output layer's backward alone (FSDP root unit below)
    head_bwd = head_bwd + where(p == 1, emb_bwd, 0.0)
    # unfused gradient accumulation: a microbatch's backward adds each local weight gradient into the
    # step's accumulator in its own element-wise kernel (hook: Megatron-LM 2021 local DDP's
    # main_grad.add_(grad), every microbatch; autograd: AccumulateGrad into .grad, every microbatch but
    # the first, whose gradient it keeps; spread over the slots), read the 16-bit gradient, read and
    # write the accumulator; the layers' weights on every stage and the output layer's tied copy on the
    # last (the input embedding's add is already in emb_bwd); ZeRO-2/3 reduce-scatter every
    # microbatch and accumulate their shard only (1 / (dp cp) of it)
    adds = where(plan.grad_acc_hook, 1.0, where(plan.grad_acc_autograd, (plan.microbatches - 1.0)
                                                  / np.maximum(plan.microbatches, 1.0), 0.0))
    acc_b = (adds * (ACT_BYTES + 2.0 * plan.grad_reduce_bytes)
             / where(plan.zero >= 2, np.maximum(plan.dp * plan.cp, 1.0), 1.0))
    # issue 11: routed experts are split over etp*ep ranks instead of tp (moe.py)
    expert_total, expert_shard, layer_p = expert_split(m, plan)
    acc_full = acc_b * n_full * layer_p / hbm
    acc_first = acc_b * n_first * layer_p / hbm if split_any else acc_full
    acc_last = acc_b * (n_last * layer_p + where((p > 1) | ~m.tied_embeddings, m.vocab * h / t, 0.0)) / hbm
    t_fwd_stage = np.maximum(n_full * fwd_wall, n_last * fwd_wall + head_fwd)
    first_bwd = n_first * (bwd_wall + rc_wall) + emb_bwd + acc_first
    last_bwd_wall = n_last * (bwd_wall + rc_wall) + head_bwd + acc_last
    t_bwd_stage = np.maximum(first_bwd, last_bwd_wall)
    last_fwd = n_full * fwd_wall < n_last * fwd_wall + head_fwd
    last_bwd = first_bwd < last_bwd_wall
    bwd_compute_stage = where(last_bwd, n_last * (bwd_compute + rc_compute) + head_bwd + acc_last,
                              n_first * (bwd_compute + rc_compute) + emb_bwd + acc_first)
    if split_any:
        # the embedding counted as a layer: the first rank holds one layer fewer than the middle
        # ones, which (without the embedding's gradient) may set the backward
        mid_bwd = n_full * (bwd_wall + rc_wall) + acc_full
        mid_slowest = mid_bwd > t_bwd_stage
        t_bwd_stage = np.maximum(t_bwd_stage, mid_bwd)
        bwd_compute_stage = where(mid_slowest, n_full * (bwd_compute + rc_compute) + acc_full, bwd_compute_stage)
    t_stage = t_fwd_stage + t_bwd_stage
    compute_stage = (where(last_fwd, n_last * fwd_compute + head_fwd, n_full * fwd_compute)
                     + bwd_compute_stage)

    # issue 11: the layer's exposed communication and the MoE / ring-attention parts of it
    layer_comm = (fwd_wall - fwd_compute) + (bwd_wall - bwd_compute) + (rc_wall - rc_compute)
    rc_twice = where(rc_full, 2.0, 1.0)
    moe_layer = a2a_exp_fwd * rc_twice + a2a_exp_bwd
    cp_layer = ring_exp_fwd * rc_twice + ring_exp_bwd

    mb = plan.microbatches
    v = plan.virtual_stages
    bubble = (p - 1) / v * t_stage
    if split_any:
        # the fill and drain cross the first rank's first chunk once, which holds the embedding in place
        # of one layer: one layer's forward, backward and recompute fewer, its embedding gradient more
        # (plan.bubble_time: exact in an event-level step-through of Megatron-LM's interleaved order for
        # p > 2, middle chunks uniform, whatever the loss's chunk). The loss's chunk in place of one layer
        # shortens the step too, by 1 to m times its difference as the critical path runs (the same
        # step-through): not taken off, the bubble stays an upper bound there
        layer_time = fwd_wall + bwd_wall + rc_wall + acc_b * layer_p / hbm
        saving = where(split & np.asarray(plan.emb_layer, bool), np.maximum(layer_time - emb_bwd, 0.0), 0.0)
        bubble = bubble_time(t_stage, p, v, saving)
    pipe_steady = mb * t_stage

    # point-to-point between stages (pipeline_p2p.py: Megatron-LM's batched exchange or DeepSpeed's serial sends)
    t_p2p, p2p_bytes, grad_p2p_bytes = pipeline_p2p(fab, plan, p, v, mb, t, sbh)

    # --- parameters per device (fullest stage, incl. embedding on stage 0 / head when pp = 1)
    emb = m.vocab * m.hidden
    untied = ~m.tied_embeddings
    # the stage with the most parameters of the first ranks: the first (embedding; a full one unless the
    # embedding counts as a layer of the split, then the middle ranks' c v layers when they hold more)
    n_pf, emb_pf = n_full, emb
    if split_any:
        first_more = n_first * layer_params(m) + emb >= n_full * layer_params(m)
        n_pf, emb_pf = where(first_more, n_first, n_full), where(first_more, emb, 0.0)
    params_full = n_pf * layer_params(m) / t + emb_pf / t + where((p == 1) & untied, emb / t, 0.0)
    params_last = n_last * layer_params(m) / t + emb / t  # output layer (a tied copy, too)
    # issue 11: routed experts are split over etp*ep ranks (expert_shard above); sharded
    # states see every replica's share
    params_full_replica, params_last_replica = params_full, params_last
    params_full = params_full - n_pf * expert_total * expert_shard
    params_last = params_last - n_last * expert_total * expert_shard

    # --- data parallel: gradient reduction in buckets (ZeRO 0/1: once per step; ZeRO-2: per
    # microbatch; ZeRO-3: per layer and microbatch) and parameter gathers (ZeRO 1/2: once per
    # step, in buckets; ZeRO-3: per layer, for every microbatch's forward and backward)
    # issue 11: dense-weight gradients reduce over the dp*cp ranks (stride tp); routed-expert
    # gradients (when experts are sharded unlike the dense weights) over the expert-data-parallel
    # group of tp*dp*cp/(etp*ep) ranks (stride etp*ep), each in its own buckets
    dp = plan.dp
    params_dev = np.maximum(params_full, params_last)
    grad_bytes = params_dev * plan.grad_reduce_bytes
    zero = plan.zero
    eg = plan.etp * ep
    sep = eg != t
    exp_dev = where(sep, n_full * expert_total / eg, 0.0)
    dense_dev = params_dev - exp_dev
    dpc, edp = dp * cp, t * dp * cp / eg
    on = dpc > 1
    on_e = sep & (edp > 1)
    z3 = (zero == 3) & (on | on_e)
    rs_times = where(zero >= 2, mb, 1.0)

    k3 = plan.zero3_calls_per_layer          # ZeRO-3 collectives per layer and pass (1: coalesced)
    lists = bool(np.any(plan.list_collectives))

    def dp_group(size, stride, n, active):
        """(reduce time per pass, its last bucket, ZeRO-1/2 gather, one layer's ZeRO-3 gather)."""
        buckets = np.maximum(np.ceil(size / plan.grad_bucket_params), 1.0)
        calls = where(zero == 3, n_full * k3, buckets)
        red = where(zero >= 1, fab.reduce_scatter(size * plan.grad_reduce_bytes, stride, n, calls),
                       fab.all_reduce(size * plan.grad_reduce_bytes, stride, n, calls))
        gb = plan.param_gather_bytes     # bytes per gathered element (fp8_param_gather: 1)
        ag = where((zero >= 1) & (zero <= 2), fab.all_gather(size * gb, stride, n, buckets), 0.0)
        layer = fab.all_gather(size * gb / n_full, stride, n, k3)
        if lists:   # list-form calls: per-rank work and copies per call (all-reduce takes one tensor)
            lst = plan.list_collectives
            red = red + where(lst & (zero >= 1), fab.list_overhead(
                n, calls, plan.list_reduce_host_calls, size * plan.grad_reduce_bytes / calls, hbm), 0.0)
            ag = ag + where(lst & (zero >= 1) & (zero <= 2), fab.list_overhead(
                n, buckets, plan.list_gather_host_calls, size * gb / buckets, hbm), 0.0)
            layer = layer + where(lst, fab.list_overhead(n, k3, plan.list_gather_host_calls,
                                                         size * gb / (n_full * k3), hbm), 0.0)
        # DeepSpeed 2021 fetch (zero3_fetch_sync): each gather buffer is zero-filled (torch.zeros, one
        # gathered element, 2 B in 16 bits, written per element) before the device is synchronized and
        # the gather issued
        if np.any(plan.zero3_fetch_sync):
            layer = layer + where(plan.zero3_fetch_sync & (n > 1), size * gb / n_full / hbm, 0.0)
        red = where(active, red, 0.0)
        ag = where(active, ag, 0.0)
        layer = where(active, layer, 0.0)
        return red, red / calls, ag, layer

    rs_once, rs_last, t_ag, z3_layer = dp_group(dense_dev, t, dpc, on)
    if np.any(on_e):
        e = dp_group(exp_dev, eg, edp, on_e)
        rs_once, rs_last, t_ag, z3_layer = (rs_once + e[0], rs_last + e[1], t_ag + e[2], z3_layer + e[3])
    t_rs = rs_times * rs_once
    t_z3 = where(z3, plan.zero3_gather_passes * mb * n_full * z3_layer, 0.0)
    # backward_prefetch "post" (FSDP BACKWARD_POST): a layer's backward gather is issued after the
    # previous layer's gradient computation, so the computation waits for it (torch.distributed.fsdp
    # BackwardPrefetch): the backward half of the gathers is on the critical path
    z3_post = where(z3 & plan.backward_prefetch_post, mb * n_full * z3_layer, 0.0)
    stall = where(on, fab.reconfiguration_stall(t, dpc), 0.0)
    # FSDP root unit (plan.fsdp_root_unit; torch 2.1 torch/distributed/fsdp/_runtime_utils.py): the
    # parameters outside the layers (embedding, tied head, final norm) are the root's flat parameter.
    # Every forward first makes the gather stream wait for the compute stream (_root_pre_forward), then
    # gathers the root and queues the first layer's gather behind it on the same communicator, with
    # no compute to hide under; the root's gradient is complete only after the embedding's backward,
    # so its reduce-scatter queues behind the first layer's, and the step waits for both
    # (_post_backward_final_callback). Under FULL_SHARD with BACKWARD_PRE the root's pre-backward hook
    # prefetches the last layer's gather, hidden only under the output layer's backward. Per
    # microbatch: ag_root + ag_layer + max(rs_layer, emb_bwd) - emb_bwd + rs_root (+ max(ag_layer -
    # head backward, 0) under FULL_SHARD), a lower bound on the step beyond the compute.
    fsdp_ends = np.zeros_like(np.asarray(stall, dtype=float))
    if np.any(plan.fsdp_root_unit):
        root = emb / t + where((p == 1) & untied, emb / t, 0.0)
        one = np.maximum(dense_dev - root, 0.0) / n_full            # one layer's parameters
        ag_layer = fab.all_gather(one * plan.param_gather_bytes, t, dpc, k3)
        ag_root = fab.all_gather(root * plan.param_gather_bytes, t, dpc, 1.0)
        rs_layer = fab.reduce_scatter(one * plan.grad_reduce_bytes, t, dpc, k3)
        rs_root = fab.reduce_scatter(root * plan.grad_reduce_bytes, t, dpc, 1.0)
        e_bwd = where(p == 1, emb_bwd, 0.0)
        ends = (ag_root + ag_layer + np.maximum(rs_layer, e_bwd) - e_bwd + rs_root
                + where((zero == 3) & ~np.asarray(plan.backward_prefetch_post, bool),
                        np.maximum(ag_layer - head_only_bwd, 0.0), 0.0))
        fsdp_ends = where(plan.fsdp_root_unit & on & (zero >= 2) & plan.overlap_grad_reduce
                          & plan.overlap_param_gather, mb * ends, 0.0)

    # --- the step as scheduled streams on the data-parallel link (explore.model.overlap): the
    # gradient reduction runs under the last backward slot (ZeRO-2/3: every slot; grad_reduce_window per_chunk:
    # overlap.per_chunk_reduce), the ZeRO-3 gathers under the whole pipeline (prefetched one layer ahead: each
    # microbatch's first gather exposed); the link serialises them, the last bucket starts when the compute ends
    compute_wall = pipe_steady + bubble + t_p2p
    ov_rs, ov_ag = plan.overlap_grad_reduce, plan.overlap_param_gather
    s_rs = where(ov_rs, t_rs, 0.0)
    s_ag = where(ov_ag, t_ag, 0.0)
    s_z3 = where(ov_ag, t_z3 - z3_post, 0.0)
    before_ch, bound_ch = overlap.per_chunk_reduce(compute_wall, t_bwd_stage, where(plan.rs_per_chunk, v, 1.), np.minimum(p, mb), s_rs)
    before_rs = where(zero >= 2, compute_wall - mb * t_bwd_stage, before_ch)
    streams = [(s_rs, before_rs), (s_z3, np.zeros_like(compute_wall))]
    bounds = [compute_wall + where(ov_rs, rs_last, 0.0), where(zero >= 2, 0.0, bound_ch),
              compute_wall + where(ov_ag & z3, mb * z3_layer, 0.0), compute_wall + fsdp_ends]
    wall, _ = overlap.nested(compute_wall, streams, kappa, bounds)
    # the distributed optimizer's parameter gather follows the optimizer step, which waits for the
    # gradient reduction, so it hides under the next step's first forward slot only: a window of its
    # own at the other end of the step, and its exposure adds to the reduction's (Megatron-Core
    # core_r0.8.0 optimizer/distrib_optimizer.py: dispatched in zero_grad at the start of train_step,
    # each bucket waited on in the first forward's pre-hooks). Interleaved (v > 1): each model chunk
    # has its own buffers and align_param_gather issues chunk k's gather ahead of chunk k's first
    # forward (pipeline_parallel/schedules.py), so the first chunk's share (1/v) is exposed and the
    # other chunks' gathers hide under the (v - 1) min(p, m) chunk forwards of the warm-up before
    # them (one chunk's forward: t_fwd_stage / v)
    chunk_win = (v - 1.0) * np.minimum(p, mb) * t_fwd_stage / v
    ag_exposed = where(v > 1, s_ag / v + overlap.hide(chunk_win, s_ag * (v - 1.0) / v, kappa) - chunk_win,
                       overlap.hide(t_fwd_stage, s_ag, kappa) - t_fwd_stage)
    wall = wall + ag_exposed
    if np.any(plan.zero3_fetch_sync):
        # DeepSpeed 2021 stage 3 (zero3_fetch_sync): a weight's gradient reduce-scatter is issued from
        # the next weight's gradient hook and the gather after it synchronizes the device, so each call
        # hides only under one weight's backward GEMMs (bwd_compute / k3), and the last one, issued in
        # the backward's epilogue, is exposed whole; the step is at least that long
        sync_rs = where(z3 & ov_rs & plan.zero3_fetch_sync & on, 1.0, 0.0)
        exposed = rs_times * overlap.hook_serialized(bwd_compute / k3, rs_last, n_full * k3, kappa)
        wall = np.maximum(wall, compute_wall + sync_rs * exposed)
    dp_serial = where(ov_rs, 0.0, t_rs) + where(ov_ag, 0.0, t_ag) + stall
    z3_serial = where(ov_ag, z3_post, t_z3)
    if np.any(plan.zero3_replicated_params_per_layer > 0):
        # DeepSpeed 2021 stage 3 re-gathers its replicated small parameters after the optimizer
        # step, one copy per parameter and rank issued from Python (_post_step -> _allgather_params),
        # on the host path
        z3_serial = z3_serial + where(z3, fab.rank_copies(dpc, n_full * plan.zero3_replicated_params_per_layer,
                                                          plan.zero3_replicated_host_calls), 0.0)
    ov_total = s_rs + s_ag + s_z3
    z3_share = where(ov_total > 0, s_z3 / where(ov_total > 0, ov_total, 1.0), 0.0)
    overlap_cost = wall - compute_wall           # exposed + slowdown of the overlapped streams
    dp_exposed = dp_serial + (1.0 - z3_share) * overlap_cost
    z3_exposed = z3_serial + z3_share * overlap_cost

    # --- optimizer step (memory-bound), states sharded by ZeRO >= 1
    # issue 11: ZeRO shards over dp*cp ranks; with ep the shard is the unsplit replica / (dp*cp)
    params_replica = np.maximum(params_full_replica, params_last_replica)
    opt_params = where(zero >= 1, params_replica / dpc, params_dev)
    # plus the per-step passes over the local gradient buffer (zero, NaN-check norm, 1/dp scale)
    # over every local parameter (ZeRO-2/3 scale the full gradients before each reduce-scatter)
    t_opt = (cal.OPTIMIZER_BYTES_PER_PARAM * opt_params
             + cal.GRAD_BUFFER_PASSES * plan.grad_reduce_bytes * params_dev) / hbm

    # per-step synchronizations nothing overlaps: training metrics and the loop's scalar collectives
    world = t * p * dpc
    metric_sync = host_syncs.metric_sync_s(fab, world, recipe.train_metrics, hbm)
    step_sync = host_syncs.composer_step_syncs_s(fab, world, recipe.composer_syncs)

    step = wall + dp_serial + z3_serial + t_opt + mb * t_metric + metric_sync + step_sync

    # --- memory per device (bytes): memory_model (explore.evaluate computes it first, for every design)
    mem_parts = memory_model(m, plan, s, flash, c, recipe) if memory is None else memory
    mem = mem_parts["total"]

    # --- FLOPs actually executed per device per step (hardware FLOPs, incl. recompute)
    rc_flops = where(rc_full, gemm_flops + attn_flops, where(rc_sel, attn_flops, 0.0))
    hw_flops_layer = 3.0 * (gemm_flops + attn_flops) + rc_flops
    busy = mb * (compute_stage + t_metric) + t_opt

    return {
        "step_time_s": step,
        "params_per_device": params_dev,
        "hw_flops_per_device": mb * (m.layers / p) * hw_flops_layer + mb * 3 * logit_flops / p,
        "busy_time_s": busy,
        "time_s_compute": mb * (compute_stage + t_metric),
        # issue 11: exposed MoE all-to-all and ring-attention exchange, split out of the layer comm
        "time_s_tp_comm": mb * (t_stage - compute_stage) * np.maximum(1.0 - _share(moe_layer + cp_layer, layer_comm), 0.0),
        "time_s_moe_comm": mb * (t_stage - compute_stage) * _share(moe_layer, layer_comm),
        "time_s_cp_comm": mb * (t_stage - compute_stage) * _share(cp_layer, layer_comm),
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
        "memory_bytes_allocator": mem_parts["allocator"],   # caching allocator's reserve (runtimes torch, deepspeed)
        "bytes_scale_out_per_device": grad_bytes * 2 + where(p > 1, v * mb * (p2p_bytes + grad_p2p_bytes), 0.0),
    }
