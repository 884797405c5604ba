"""Compute times of one transformer layer and microbatch on one device (the step model's
per-layer term, ``explore.model.step``): GEMMs from their shapes (``explore.model.gemm``), the
attention core, memory-bound kernels, FP8 casts (``explore.model.precision.cast_elements``) and the
backward's memory-bound work."""
from __future__ import annotations

import numpy as np
from hwmodels.select import where

from explore.model import calibration as cal
from explore.model import gemm, moe
from explore.model.precision import cast_elements
from explore.model.workload import (ModelSpec, layer_attention_flops_per_token, layer_gemm_flops_per_token,
                                    mlp_inner_width)


def _share(part, whole):
    """part / whole, 0 where whole is 0 (issue 11 breakdown split)."""
    return where(whole > 0, part / where(whole > 0, whole, 1.0), 0.0)


def layer_compute(m: ModelSpec, b, cp, t, sp, flash, peak, peak_other, hbm, cast_bytes_per_element,
                  amax_bytes_per_element, foundry, unpad, c: cal.Calibration) -> dict[str, np.ndarray]:
    """Forward compute times of one layer and microbatch on one device: GEMMs at the matmul
    ``peak``, attention core at ``peak_other``, memory-bound work and softmax at ``hbm``; and the
    backward's memory-bound work (``mem_bwd``): 2 x the forward's (less the dropout passes where
    ``m.hidden_dropout`` is 0, calibration.HIDDEN_DROPOUT_*), or with ``foundry``
    (``training.elementwise_kernels = "llm-foundry"``) MPT's eager kernels counted one by one
    (calibration.FOUNDRY_*; with ``unpad`` also flash-attn's varlen (un)padding copies; counted at
    tp = 1 and divided by t)."""
    sq, h = m.seq_len, m.hidden
    tokens_mb = b * sq / cp
    gemm_flops = layer_gemm_flops_per_token(m) * tokens_mb / t
    attn_flops = layer_attention_flops_per_token(m) * tokens_mb / t
    # a fused causal kernel skips the masked half of the score tiles (its executed FLOPs)
    attn_exec = where(flash, layer_attention_flops_per_token(m, causal=True) * tokens_mb / t, attn_flops)
    shapes = gemm.layer_gemm_shapes(tokens_mb, h, m.heads, m.kv_heads, mlp_inner_width(m), m.gated_mlp, t)
    # the dense shapes set the rate; issue 11's FLOPs (routed experts, the busiest expert's extra
    # tokens at capacity_factor, MLA widths) scale the time by their ratio to the shapes' FLOPs
    gemm_time_flops = gemm_flops + 2.0 * moe.imbalance_extra_active_params(
        m, where(m.gated_mlp, 3.0, 2.0)) * tokens_mb / t
    shape_flops = sum(2.0 * mm * nn * kk for mm, nn, kk in shapes)
    t_gemm = (gemm.gemm_time_s(shapes, peak, c.gemm_efficiency, hbm) * _share(gemm_time_flops, shape_flops)
              + 4 * c.gemm_overhead_s)
    t_attn = where(flash, attn_exec / (peak_other * c.gemm_efficiency * c.flash_attention_efficiency),
                      attn_flops / (peak_other * c.gemm_efficiency) + 2 * c.gemm_overhead_s)
    sbh = tokens_mb * h
    f = mlp_inner_width(m)
    act_fn_bytes = where(m.gated_mlp, 6.0, 4.0) * tokens_mb * f / t
    # dropout-free layers (p = 0) write no masks and run no dropout passes (calibration.HIDDEN_DROPOUT_*)
    no_hd = m.hidden_dropout <= 0
    repl_bytes = ((cal.MEMBOUND_BYTES_PER_SBH_REPLICATED - where(no_hd, cal.HIDDEN_DROPOUT_FWD_BYTES_PER_SBH, 0.0))
                  * sbh / where(sp, t, 1.0))
    repl_full = cal.MEMBOUND_BYTES_PER_SBH_REPLICATED * sbh / where(sp, t, 1.0)
    no_drop_bwd = where(no_hd, cal.HIDDEN_DROPOUT_BWD_BYTES_PER_SBH, 0.0) * sbh / where(sp, t, 1.0)
    softmax_per_score = cal.SOFTMAX_BYTES_PER_SCORE - where(m.attention_dropout <= 0,
                                                            cal.ATTENTION_DROPOUT_BYTES_PER_SCORE, 0.0)
    softmax_bytes = where(flash, 0.0, softmax_per_score * m.heads * sq * tokens_mb / t)
    # issue 11: FP8 casts, the GEMM inputs in the forward and the output gradients in the backward, once each
    e_fwd, e_bwd, a_fwd, a_bwd = cast_elements(m)
    cast_bytes = (cast_bytes_per_element * e_fwd + amax_bytes_per_element * a_fwd) * tokens_mb / t
    cast_bytes_bwd = (cast_bytes_per_element * e_bwd + amax_bytes_per_element * a_bwd) * tokens_mb / t
    t_mem = (act_fn_bytes + repl_bytes + cast_bytes) / hbm
    t_softmax = softmax_bytes / hbm
    fnd = np.asarray(foundry) > 0
    pad = np.asarray(unpad) > 0
    fwd_sbh = cal.FOUNDRY_FWD_BYTES_PER_SBH + where(pad, cal.FOUNDRY_UNPAD_FWD_BYTES_PER_SBH, 0.0)
    bwd_sbh = cal.FOUNDRY_BWD_BYTES_PER_SBH + where(pad, cal.FOUNDRY_UNPAD_BWD_BYTES_PER_SBH, 0.0)
    t_mem_fnd = (fwd_sbh * sbh / t + act_fn_bytes + cast_bytes) / hbm
    t_bwd_fnd = (bwd_sbh * sbh / t + cal.FOUNDRY_BWD_BYTES_PER_FFN_ELEMENT * tokens_mb * f / t
                 + cast_bytes_bwd) / hbm
    return {"gemm": t_gemm, "attn": t_attn, "mem": where(fnd, t_mem_fnd, t_mem),
            "mem_bwd": where(fnd, t_bwd_fnd, 2.0 * (act_fn_bytes + repl_full) / hbm + cast_bytes_bwd / hbm
                             - no_drop_bwd / hbm),
            "softmax": t_softmax}
