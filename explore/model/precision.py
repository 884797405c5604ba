"""Precision recipes: which work runs at which precision, scaling overhead, bytes per parameter.

``training.precision`` = bf16 / fp16: everything at 16 bit. ``fp8`` (Micikevicius et al.
2022, "FP8 Formats for Deep Learning", arXiv:2209.05433; Transformer Engine;
DeepSeek-V3 arXiv:2412.19437 Sec. 3.3):

* FP8 runs the linear-layer GEMMs (QKV, output projection, MLP and expert MLPs,
  forward and both backward GEMMs) at the FP8 peak. The attention core (fused
  attention in BF16, as Transformer Engine's default), the output layer (logits)
  and the router stay at the 16-bit peak (DeepSeek-V3 Sec. 3.3.1 keeps embedding,
  output head, gating, normalisation and attention in BF16/FP32).
* Scaling: ``per-tensor`` current scaling needs the tensor's amax before casting it;
  ``blockwise`` (DeepSeek-V3: 1 x 128 activation tiles, 128 x 128 weight blocks, Sec. 3.3.2)
  and ``mxfp8`` (OCP Microscaling v1.0: 32-element blocks with an E8M0 scale; Blackwell tensor
  cores) compute the scale inside the cast. Counted as memory-bound bytes per quantized element
  over the elements ``cast_elements`` counts: the input of every FP8 GEMM in the forward and its
  output gradient in the backward, once each (the forward's column-wise copy of the input is kept
  for the weight gradient; Transformer Engine's Linear saves it). A cast reads 2 B and writes a
  row-wise 1 B copy and, for the weight gradient, a column-wise one: MXFP8 and blockwise always
  (their scales run along the reduction dimension; + 1 B per 32 or 4 B per 128 elements per copy),
  per-tensor only where the part's FP8 GEMMs are TN-only (``fp8_gemm_any_layout`` 0: Hopper; TE
  ``is_non_tn_fp8_gemm_supported``: compute capability 10.x runs any layout from one buffer).
  Current scaling's amax is a separate read of the 2-B tensor (TE csrc/quantizer.cpp
  ``Float8CurrentScalingQuantizer::quantize_impl``: ``nvte_compute_amax``, then the cast) except
  where the producing kernel computes it: TE's LayerNormLinear norm (``quantize_with_amax``,
  csrc/extensions/normalization.cpp), which feeds the QKV and dense MLP up-projections
  (``AMAX_BYTES_PER_ELEMENT`` on the rest). Weights: cast once per step and cached for the other
  microbatches (TE ``is_first_microbatch``), or gathered already in FP8 (``fp8_param_gather``);
  not counted.
* Bytes per parameter: weights 2 (BF16; FP8 copies are made per layer, transient),
  gradients ``parallelism.grad_reduce_bytes`` (the main-gradient buffer is kept in the dtype it is
  reduced in: Megatron-Core ``DistributedDataParallelConfig.grad_reduce_in_fp32``, FSDP2
  ``MixedPrecisionPolicy.reduce_dtype``; 4 = FP32), optimizer 4 (FP32 master) + 2 x 4 (Adam m, v)
  or 2 x 2 with ``optimizer_moments = "bf16"`` (DeepSeek-V3 Sec. 3.3.3).
* ``fp4`` (B200 class; the part's ``peak_flops_fp4``, 0 = not supported, which makes
  the design invalid): the linear GEMMs in NVFP4 at the FP4 peak, everything else as
  under FP8; quantization as NVFP4 (``NVFP4_CAST_BYTES_PER_ELEMENT``). The BF16 layers
  NVFP4 recipes keep (the last few) are not modelled.
* ``fp8_dispatch``: the MoE dispatch all-to-all carries FP8 (1 B + a 4 B scale per
  128 elements; DeepSeek-V3 Sec. 3.3.3); the combine stays BF16.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwmodels.select import where

from explore.model.cardinality import fit

RECIPES = ("per-tensor", "blockwise", "mxfp8")
CAST_BYTES_PER_ELEMENT = np.array([2.0 + 1.0 + 1.0, 2.0 + 1.0 + 1.0 + 2 * 4.0 / 128, 2.0 + 1.0 + 1.0 + 2 / 32])
"""Read 2 B, write the row-wise and the column-wise 1-B copies (+ their block scales); per-tensor's
column-wise (transposed) copy is dropped where the part's FP8 GEMMs take any layout."""
AMAX_BYTES_PER_ELEMENT = np.array([2.0, 0.0, 0.0])
"""Current scaling's separate amax pass (a 2-B read) on elements whose producer does not compute it."""
NVFP4_AMAX_BYTES_PER_ELEMENT = 2.0
MXFP8_GEMM_RATE = 6.812 / 7.161
"""MXFP8's block-scaled GEMMs relative to per-tensor FP8 GEMMs of the same shapes (the rate the catalog's
per-tensor FP8 figure gives): Transformer Engine docs/examples/gemm_profiling/gemm_profiling.rst (commit
1609c890e), 'Autocast vs Pre-quantized', B300, kernel-only (``--pre-quantize``) per-layer GEMM time of a
hidden 4096 / intermediate 16384 layer at M = 15,872: FP8 CurrentScaling 6.812 ms, MXFP8 7.161 ms
(Fprop + Dgrad + Wgrad). Blackwell's block-scaled MMA reads the 1 x 32 scales with the operands."""
NVFP4_CAST_BYTES_PER_ELEMENT = 2.0 + 0.5 + 0.5 + 2 / 16
"""NVFP4 (NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv:2509.25149): 16-element
blocks with an E4M3 scale and a per-tensor FP32 scale (hence an amax read, 2 B), two 4-bit copies."""
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128


@dataclass(frozen=True)
class Recipe:
    fp8: np.ndarray                   # bool: linear GEMMs in FP8
    other_peak_flops: np.ndarray      # FLOP/s of attention core and logits
    cast_bytes_per_element: np.ndarray
    amax_bytes_per_element: np.ndarray
    gemm_rate: np.ndarray             # the linear GEMMs' rate relative to the per-tensor FP8 (or 16-bit) peak
    weight_bytes: np.ndarray
    optimizer_bytes: np.ndarray
    dispatch_bytes: np.ndarray
    combine_bytes: np.ndarray
    unfused_loss: np.ndarray = False    # training.loss = unfused (memory.loss_bytes_per_logit)
    foundry_kernels: np.ndarray = False  # training.elementwise_kernels = llm-foundry-* (calibration.py)
    foundry_unpad: np.ndarray = False    # ... = llm-foundry-flash: flash-attn varlen (un)padding copies
    train_metrics: np.ndarray = 0.0      # training.train_metrics: fp32 cross-entropies per microbatch
    composer_syncs: np.ndarray = 0.0     # training.step_syncs = composer-0.17 (host_syncs.py)
    te_loss: np.ndarray = False          # training.loss_kernel = te (calibration.TE_LOGITS_*)

    @classmethod
    def from_resolved(cls, r, system) -> "Recipe":
        v, n = r.values, r.n
        b = lambda a: fit(a, n, float)  # noqa: E731   (constants stay length 1)
        prec = fit(v["training.precision"], n)
        fp4 = prec == "fp4"
        fp8 = (prec == "fp8") | fp4            # low-precision GEMMs (the peak is the system's)
        code = sum(i * (np.asarray(v["training.fp8_recipe"]) == name) for i, name in enumerate(RECIPES))
        moments = where(np.asarray(v["training.optimizer_moments"]) == "bf16", 4.0, 8.0)
        dispatch = where(fp8 & np.asarray(v["training.fp8_dispatch"], bool), FP8_DISPATCH_BYTES, 2.0)
        return cls(fp8=fp8,
                   other_peak_flops=b(where(fp8, system.peak_flops_bf16, system.peak_flops)),
                   cast_bytes_per_element=b(where(fp4, NVFP4_CAST_BYTES_PER_ELEMENT,
                                                     where(fp8, CAST_BYTES_PER_ELEMENT[code]
                                                           - where(code == 0, system.fp8_gemm_any_layout, 0.0),
                                                           0.0))),
                   gemm_rate=b(where((prec == "fp8") & (code == 2), MXFP8_GEMM_RATE, 1.0)),
                   amax_bytes_per_element=b(where(fp4, NVFP4_AMAX_BYTES_PER_ELEMENT,
                                                     where(fp8, AMAX_BYTES_PER_ELEMENT[code], 0.0))),
                   weight_bytes=b(2.0),
                   optimizer_bytes=b(4.0 + moments), dispatch_bytes=b(dispatch), combine_bytes=b(2.0),
                   unfused_loss=b(np.asarray(v["training.loss"]) == "unfused"),
                   foundry_kernels=b(np.isin(np.asarray(v["training.elementwise_kernels"]),
                                                 ("llm-foundry-flash", "llm-foundry-triton"))),
                   foundry_unpad=b(np.asarray(v["training.elementwise_kernels"]) == "llm-foundry-flash"),
                   train_metrics=b(np.asarray(v["training.train_metrics"], dtype=float)),
                   composer_syncs=b(np.asarray(v["training.step_syncs"]) == "composer-0.17"),
                   te_loss=b(np.asarray(v["training.loss_kernel"]) == "te"))

    @classmethod
    def default(cls, system) -> "Recipe":
        """16-bit training as the step model had it before recipes (2 / 12 bytes per parameter for weights
        and optimizer; gradients from the plan)."""
        n = np.shape(system.peak_flops)
        z = np.zeros(n)
        return cls(fp8=z.astype(bool), other_peak_flops=system.peak_flops, cast_bytes_per_element=z,
                   amax_bytes_per_element=z, gemm_rate=z + 1.0,
                   weight_bytes=z + 2.0, optimizer_bytes=z + 12.0,
                   dispatch_bytes=z + 2.0, combine_bytes=z + 2.0)


def cast_elements(m):
    """(forward, backward, forward with a separate amax, backward with a separate amax) elements quantized
    per token and layer, the K (forward) and N (backward) widths of the layer's GEMMs (gemm.layer_gemm_shapes)
    at tp = 1. Forward: the inputs of QKV and the output projection (2 h) and of each MLP copy's up and down
    projections (h + f); backward: their output gradients (h (1 + 2 g/a) + h; (k_f f + h) per MLP copy).
    The amax is computed by the producer only for the norm-fed inputs: QKV (h) and, in dense layers, the
    MLP up-projection (h) (TE LayerNormLinear; MoE layers normalise before the router and permute the
    tokens). Megatron-Core's own SwiGLU (``use_te_activation_func`` False by default) and all backward
    gradients take the separate pass."""
    from explore.model import moe as _moe
    kf = where(m.gated_mlp, 2.0, 1.0)
    h = m.hidden
    copies = m.top_k * m.capacity_factor + m.shared_experts
    fwd = 2.0 * h + _moe.mean_over_layers(m, copies * (h + m.moe_ffn_hidden), h + m.ffn_hidden)
    bwd = h * (2.0 + 2.0 * m.kv_heads / m.heads) + _moe.mean_over_layers(m, copies * (kf * m.moe_ffn_hidden + h),
                                                                          kf * m.ffn_hidden + h)
    fused = h + _moe.mean_over_layers(m, 0.0, h)
    return fwd, bwd, fwd - fused, bwd
