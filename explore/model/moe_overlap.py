"""Megatron-Core's 1F1B EP all-to-all overlap (``--overlap-moe-expert-parallel-comm
--delay-wgrad-compute``, "combined 1F1B"), as its code schedules it.

Read from NVIDIA/Megatron-LM at commit d98e8a64ddf34856e74b24714e3bedb2f5a39553:

* Which passes pair (megatron/core/pipeline_parallel/schedules.py, ``get_pp_rank_microbatches``
  and ``forward_backward_pipelining_with_interleaving``): only the steady-state 1F1B loop calls
  the combined forward-backward step with a forward *and* a backward chunk; warm-up forwards and
  cool-down backwards run alone, their all-to-all exposed. Pipeline rank r warms up with
  2 (p - r - 1) + (V - 1) g forward chunks (g = ``microbatch_group_size_per_vp_stage``, default p:
  megatron/core/model_parallel_config.py) plus one more with the overlap ("to ensure the forward and
  backward computations are independent in all 1f1b steps"), so rank 0 pairs m V - W of its
  m V chunk passes, W = 2 (p - 1) + (V - 1) p + 1. With pp = 1 (``combined_1f1b_schedule_for_no_pipelining``,
  combined_1f1b.py) the first forward and the last backward run alone: W = 1, the same formula.
  pp > 1 requires a virtual pipeline size (transformer_config.py), so the interleaved rule always holds.
* At what granularity (megatron/core/models/common/model_chunk_schedule_plan.py,
  ``TransformerLayerSchedulePlan.run``): one layer's forward (microbatch i) with one layer's
  backward (microbatch j), on a computation and a communication stream,

      comm: combine_bwd        | dispatch_fwd -> dispatch_bwd      | combine_fwd
      comp: attention_fwd      | mlp_bwd -> mlp_bwd_dw -> mlp_fwd  | attention_bwd (+ its dw)

  with the data dependencies of each microbatch (dispatch_fwd after attention_fwd, mlp_fwd after
  dispatch_fwd, mlp_bwd after combine_bwd, dispatch_bwd after mlp_bwd, combine_fwd after mlp_fwd,
  attention_bwd after dispatch_bwd) and each stream in issue order. The layer's wall time, both
  streams starting together:

      s  = max(A_f, c_b)
      T  = s + max(max(E_d + E_w, d_f) + E_f, max(d_f, E_d) + d_b) + max(A_b, c_f)

  (A = attention block incl. its TP collectives, E = experts, E_d / E_w their data- and
  weight-gradient halves, split by ``delay_wgrad_compute``; d / c = dispatch / combine). A piece
  smaller than the all-to-all it must hide leaves the rest exposed. Checked against an event
  simulation of the two streams over whole chunks (tests/explore/test_moe_overlap.py).
* SMs: the DeepEP normal kernels run on ``Buffer.num_sms`` = 20 SMs (deepseek-ai/DeepEP
  deep_ep/buffers/legacy.py; Megatron sets 20 when ``moe_flex_dispatcher_num_sms`` is unset,
  token_dispatcher.py), so overlapped all-to-all slows compute by the share of the part's SMs they
  take, ``moe.comm_sm_share`` (20 / the catalog ``sm_count``: 20/132 on Hopper, 20/148 on B200; the
  H800's 20/132, ``moe.COMM_SM_SHARE``, where the count is unknown), of the hidden part, as in ``overlap.nested``: wall = (1 - k) T + k (compute + comm), monotone (comm: every
  stream in the windows, the attention block's overlapped TP collectives included, so the serial bound
  is never below T and a larger k never shortens the layer; tests/explore/test_moe_overlap.py).
* TP collectives: a MoE layer with expert TP 1 runs the attention block's only (step.py, from
  token_dispatcher.py). On Hopper and earlier the EP overlap's second stream needs
  CUDA_DEVICE_MAX_CONNECTIONS > 1 while Megatron's TP overlap needs 1 (megatron/training/arguments.py,
  megatron/core/tensor_parallel/layers.py); the NVIDIA recipes that run the overlap there turn the TP
  overlap off (``overlap_tp_comm`` False, explore/validation_frontier.py EP_OVERLAP_TP_*), and the TP
  collectives then sit serial in the attention pieces, concurrent with the all-to-all on the other stream.
* Checked and left as they are: the pipeline's warm-up / cool-down pairing against an event
  simulation of the interleaved schedule (tests/explore/test_moe_overlap.py: an upper bound within
  0.6 % at p 8, v 4, m 128); ``backward_dw`` records no event (megatron/core/models/common/utils.py
  TransformerLayerNode.backward_dw), so dispatch_bwd waits for the data gradient only, as modelled;
  DeepEP's dispatch blocks the host until the receive counts arrive (fused_a2a.py "the CPU will wait
  for GPU's signal"), with the backward's expert GEMMs already queued behind it: no GPU idle charged.
* Full recompute is refused with the overlap (transformer_config.py asserts
  ``recompute_granularity != 'full'``); a recompute the plan still asks for is counted in the
  attention backward piece.
"""
from __future__ import annotations

import numpy as np
from hwmodels.select import where

from explore.model import attention as _attn
from explore.model.moe import COMM_SM_SHARE, imbalance_extra_active_params


def unpaired_chunks(pp, v):
    """Chunk passes rank 0 runs alone (warm-up forwards = cool-down backwards):
    2 (p - 1) + (V - 1) p + 1 (schedules.py ``get_pp_rank_microbatches`` with the overlap's extra one)."""
    p = np.asarray(pp, dtype=float)
    return 2.0 * (p - 1.0) + (np.asarray(v, dtype=float) - 1.0) * p + 1.0


def paired_fraction(microbatches, pp, v):
    """Share of rank 0's m V forward (and backward) chunk passes that run paired."""
    total = np.asarray(microbatches, dtype=float) * np.asarray(v, dtype=float)
    return np.clip(1.0 - unpaired_chunks(pp, v) / np.maximum(total, 1.0), 0.0, 1.0)


def attention_gemm_share(m):
    """Share of a layer's forward GEMM FLOPs in the attention block (QKV and output projections);
    the rest are the (routed, shared) expert and router GEMMs."""
    k = where(m.gated_mlp, 3.0, 2.0)
    from explore.model.workload import layer_gemm_flops_per_token  # (workload imports moe)
    total = layer_gemm_flops_per_token(m) + 2.0 * imbalance_extra_active_params(m, k)
    return 2.0 * _attn.attention_params(m) / total


def paired_layer_wall(a_f, e_f, a_b, e_b, d_f, c_f, d_b, c_b, tp_f=0.0, tp_b=0.0, share=COMM_SM_SHARE):
    """Wall time of one forward layer paired with one backward layer (module docstring): compute
    pieces a (attention block) and e (experts), all-to-all pieces d / c; ``tp_f`` / ``tp_b``: the
    attention block's overlapped TP collectives, which share its window with the all-to-all
    (summed before they meet it, explore/model/overlap.py)."""
    e_d = 0.5 * e_b                          # data-gradient GEMMs; the weight-gradient half follows
    s = np.maximum(a_f, c_b + tp_f)
    mid = np.maximum(np.maximum(e_b, d_f) + e_f, np.maximum(d_f, e_d) + d_b)
    core = s + mid + np.maximum(a_b, c_f + tp_b)
    compute = a_f + e_f + a_b + e_b
    return (1.0 - share) * core + share * (compute + d_f + c_f + d_b + c_b + tp_f + tp_b)


def exposed_per_layer(m, plan, fwd_base, bwd_base, t_gemm, t_attn, t_softmax, t_mem, t_mem_bwd,
                      rc_compute, tp, a2a, dispatch_bytes, combine_bytes, share=COMM_SM_SHARE):
    """Exposed all-to-all of one layer and microbatch, forward and backward (each half of the total).

    ``fwd_base`` / ``bwd_base``: the layer's forward / backward(+recompute) wall without the
    all-to-all, TP collectives included (what the unpaired passes take); ``tp``: one direction's TP
    collectives, which belong to the attention block (with expert TP 1 the experts have none; the
    flex dispatcher starts from the sequence-parallel shard): overlapped with the attention window
    when ``plan.overlap_tp_comm``, else serial in it; ``a2a``: one direction's dispatch + combine.
    ``share``: the part's SM share of the all-to-all kernels (``moe.comm_sm_share``, per design).
    Paired passes expose max(paired wall - base, 0); warm-up and cool-down passes all of it."""
    g_a = t_gemm * attention_gemm_share(m)
    att_f = g_a + t_attn + t_softmax + t_mem * _frac(g_a, t_gemm)
    att_b = 2.0 * (g_a + t_attn + t_softmax) + t_mem_bwd * _frac(g_a, t_gemm) + rc_compute
    e_f = t_gemm + t_attn + t_softmax + t_mem - att_f
    e_b = 2.0 * (t_gemm + t_attn + t_softmax) + t_mem_bwd + rc_compute - att_b
    ov = np.asarray(plan.overlap_tp_comm, dtype=bool)
    tp_win = where(ov, tp, 0.0)
    att_f, att_b = att_f + where(ov, 0.0, tp), att_b + where(ov, 0.0, tp)
    dshare = dispatch_bytes / (dispatch_bytes + combine_bytes)
    d, c = a2a * dshare, a2a * (1.0 - dshare)   # backward mirrors: combine_bwd ~ dispatch, dispatch_bwd ~ combine
    wall = paired_layer_wall(att_f, e_f, att_b, e_b, d, c, c, d, tp_win, tp_win, share=share)
    paired = np.maximum(wall - (fwd_base + bwd_base), 0.0)
    phi = paired_fraction(plan.microbatches, plan.pp, plan.virtual_stages)
    half = 0.5 * phi * paired + (1.0 - phi) * a2a
    return half, half


def _frac(part, whole):
    return where(whole > 0, part / where(whole > 0, whole, 1.0), 0.0)
