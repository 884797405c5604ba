"""Precision recipes: which work runs at which precision, scaling overhead, bytes per parameter.

``training.precision`` = bf16 / fp16: everything at 16 bit. ``fp8`` (Micikevicius et al.
2022, "FP8 Formats for Deep Learning", arXiv:2209.05433; Transformer Engine;
DeepSeek-V3 arXiv:2412.19437 Sec. 3.3):

* FP8 runs the linear-layer GEMMs (QKV, output projection, MLP and expert MLPs,
  forward and both backward GEMMs) at the FP8 peak. The attention core (fused
  attention in BF16, as Transformer Engine's default), the output layer (logits)
  and the router stay at the 16-bit peak (DeepSeek-V3 Sec. 3.3.1 keeps embedding,
  output head, gating, normalisation and attention in BF16/FP32).
* Scaling: ``per-tensor`` current scaling needs an amax pass over a tensor before
  casting it; ``blockwise`` (DeepSeek-V3: 1 x 128 activation tiles, 128 x 128 weight
  blocks, Sec. 3.3.2) and ``mxfp8`` (OCP Microscaling v1.0: 32-element blocks with
  an E8M0 scale; Blackwell tensor cores) compute the scale inside the cast.
  Counted as memory-bound bytes per quantized element (estimate by counting: the
  input and the output gradient of every FP8 GEMM, ``cast_elements_per_token_layer``;
  a cast reads 2 B and writes a row-wise and a column-wise (transposed, for the
  weight gradient) 1 B copy; per-tensor current scaling reads the tensor once more
  for its amax (2 B); block scales add 4 B per 128 or 1 B per 32 elements per copy).
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
CAST_BYTES_PER_ELEMENT = np.array([2.0 + 2.0 + 1.0 + 1.0, 2.0 + 1.0 + 1.0 + 2 * 4.0 / 128, 2.0 + 1.0 + 1.0 + 2 / 32])
NVFP4_CAST_BYTES_PER_ELEMENT = 2.0 + 2.0 + 0.5 + 0.5 + 2 / 16
"""NVFP4 (NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv:2509.25149): 16-element
blocks with an E4M3 scale and a per-tensor FP32 scale (hence an amax read, 2 B), two 4-bit copies."""
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128


@dataclass(frozen=True)
class Recipe:
    fp8: np.ndarray                   # bool: linear GEMMs in FP8
    other_peak_flops: np.ndarray      # FLOP/s of attention core and logits
    cast_bytes_per_element: np.ndarray
    weight_bytes: np.ndarray
    optimizer_bytes: np.ndarray
    dispatch_bytes: np.ndarray
    combine_bytes: np.ndarray
    unfused_loss: np.ndarray = False    # training.loss = unfused (memory.loss_bytes_per_logit)
    foundry_kernels: np.ndarray = False  # training.elementwise_kernels = llm-foundry-* (calibration.py)
    foundry_unpad: np.ndarray = False    # ... = llm-foundry-flash: flash-attn varlen (un)padding copies
    train_metrics: np.ndarray = 0.0      # training.train_metrics: fp32 cross-entropies per microbatch

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
                                                     where(fp8, CAST_BYTES_PER_ELEMENT[code], 0.0))),
                   weight_bytes=b(2.0),
                   optimizer_bytes=b(4.0 + moments), dispatch_bytes=b(dispatch), combine_bytes=b(2.0),
                   unfused_loss=b(np.asarray(v["training.loss"]) == "unfused"),
                   foundry_kernels=b(np.isin(np.asarray(v["training.elementwise_kernels"]),
                                                 ("llm-foundry-flash", "llm-foundry-triton"))),
                   foundry_unpad=b(np.asarray(v["training.elementwise_kernels"]) == "llm-foundry-flash"),
                   train_metrics=b(np.asarray(v["training.train_metrics"], dtype=float)))

    @classmethod
    def default(cls, system) -> "Recipe":
        """16-bit training as the step model had it before recipes (2 / 12 bytes per parameter for weights
        and optimizer; gradients from the plan)."""
        n = np.shape(system.peak_flops)
        z = np.zeros(n)
        return cls(fp8=z.astype(bool), other_peak_flops=system.peak_flops, cast_bytes_per_element=z,
                   weight_bytes=z + 2.0, optimizer_bytes=z + 12.0,
                   dispatch_bytes=z + 2.0, combine_bytes=z + 2.0)


def cast_elements_per_token_layer(m, mlp_inner_width=None):
    """Elements quantized to FP8 per token and layer: the input (forward) and the output gradient
    (backward) of every FP8 GEMM. Attention: QKV and projection, ~4 h. MLP of width f (k_f = 2 gated,
    1 plain: fc1 output width k_f f): 2 h + (1 + k_f) f, once per routed copy (top_k x capacity_factor)
    and shared expert in MoE layers (mean over layers)."""
    from explore.model import moe as _moe
    kf = where(m.gated_mlp, 2.0, 1.0)
    mlp = lambda f: 2.0 * m.hidden + (1.0 + kf) * f  # noqa: E731
    moe_layer = (m.top_k * m.capacity_factor + m.shared_experts) * mlp(m.moe_ffn_hidden)
    return 4.0 * m.hidden + _moe.mean_over_layers(m, moe_layer, mlp(m.ffn_hidden))
