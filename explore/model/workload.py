"""Workload model: parameters, FLOPs and activation memory of decoder-only transformers.

Dense or mixture-of-experts layers, multi-head or grouped-query attention,
plain (2-matrix) or gated (SwiGLU, 3-matrix) MLPs. Every function takes a
``ModelSpec`` whose fields are broadcasting numpy arrays.

FLOP convention (Narayanan et al. 2021, SC21, Eq. 3 and Appendix): a GEMM of
an (m x k) by (k x n) matrix costs 2mkn; attention scores and the
attention-weighted values cost 2 * 2 s h per token and layer (the full s x s
product, no causal discount, as Megatron-LM and the published MFU figures
count it); backward = 2 x forward, so training = 3 x forward; the logits
GEMM costs 2 h V per token. For a plain MLP with f = 4h and g = a this is
Megatron's 72 B s l h^2 (1 + s/6h + V/12hl) per batch.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwmodels.select import where

from explore.model import attention as _attn  # issue 11
from explore.model import moe as _moe          # issue 11
from explore.model.cardinality import fit


@dataclass(frozen=True)
class ModelSpec:
    layers: np.ndarray
    hidden: np.ndarray
    heads: np.ndarray
    kv_heads: np.ndarray
    ffn_hidden: np.ndarray
    vocab: np.ndarray
    seq_len: np.ndarray
    gated_mlp: np.ndarray
    tied_embeddings: np.ndarray
    experts: np.ndarray
    top_k: np.ndarray
    moe_ffn_hidden: np.ndarray
    shared_experts: np.ndarray
    # --- issue 11 (frontier workloads): MoE layout and attention variants, see moe.py / attention.py
    dense_layers: np.ndarray = 0.0
    capacity_factor: np.ndarray = 1.0
    head_dim: np.ndarray = None          # None: hidden / heads
    kv_lora_rank: np.ndarray = 0.0
    q_lora_rank: np.ndarray = 0.0
    rope_head_dim: np.ndarray = 64.0
    sliding_window: np.ndarray = 0.0
    # dropout probabilities (model.hidden_dropout / attention_dropout; Megatron-LM's default 0.1)
    hidden_dropout: np.ndarray = 0.1
    attention_dropout: np.ndarray = 0.1

    @classmethod
    def from_resolved(cls, r) -> "ModelSpec":
        v = r.values
        h = v["model.hidden"].astype(float)
        ffn = v.get("model.ffn_hidden", 4 * h)
        kw = dict(
            layers=v["model.layers"].astype(float), hidden=h,
            heads=v["model.heads"].astype(float),
            kv_heads=v.get("model.kv_heads", v["model.heads"]).astype(float),
            ffn_hidden=np.asarray(ffn, dtype=float),
            vocab=v["model.vocab"].astype(float), seq_len=v["model.seq_len"].astype(float),
            gated_mlp=np.asarray(v["model.gated_mlp"], dtype=bool),
            tied_embeddings=np.asarray(v["model.tied_embeddings"], dtype=bool),
            experts=v["model.experts"].astype(float), top_k=v["model.top_k"].astype(float),
            moe_ffn_hidden=np.asarray(v.get("model.moe_ffn_hidden", ffn), dtype=float),
            shared_experts=v["model.shared_experts"].astype(float),
            # issue 11: MoE layout, attention variants
            dense_layers=v["model.dense_layers"].astype(float),
            capacity_factor=v["model.capacity_factor"].astype(float),
            head_dim=np.asarray(v.get("model.head_dim", h / v["model.heads"]), dtype=float),
            kv_lora_rank=v["model.kv_lora_rank"].astype(float),
            q_lora_rank=v["model.q_lora_rank"].astype(float),
            rope_head_dim=v["model.rope_head_dim"].astype(float),
            sliding_window=v["model.sliding_window"].astype(float),
            hidden_dropout=v["model.hidden_dropout"].astype(float),
            attention_dropout=v["model.attention_dropout"].astype(float),
        )
        n = r.n
        return cls(**{k: fit(a, n) for k, a in kw.items()})   # constants stay length 1


def _mats(gated):
    return where(gated, 3.0, 2.0)


def attention_params(m: ModelSpec):
    """QKV and output projections: h (h + 2 h g/a) + h^2 (biases ignored) for d_h = h/a;
    general head width and MLA in ``attention.attention_params`` (issue 11)."""
    return _attn.attention_params(m)


def is_moe(m: ModelSpec):
    return m.experts > 1


def mlp_params(m: ModelSpec):
    """MLP weights per layer (mean over layers): dense k h f, or in MoE layers E experts +
    shared experts (width f_moe) + router; the first ``dense_layers`` are dense (moe.py)."""
    k = _mats(m.gated_mlp)
    dense = k * m.hidden * m.ffn_hidden
    moe = _moe.routed_params(m, k) + _moe.shared_params(m, k) + _moe.router_params(m)
    return _moe.mean_over_layers(m, moe, dense)


def mlp_active_params(m: ModelSpec):
    """MLP weights a token passes through (mean over layers): top_k routed + shared experts (+ router)."""
    k = _mats(m.gated_mlp)
    dense = k * m.hidden * m.ffn_hidden
    moe = m.top_k * k * m.hidden * m.moe_ffn_hidden + _moe.shared_params(m, k) + _moe.router_params(m)
    return _moe.mean_over_layers(m, moe, dense)


def active_params(m: ModelSpec):
    """Parameters a token passes through (MoE: active; dense: all), embeddings included."""
    return m.layers * (attention_params(m) + mlp_active_params(m) + 4 * m.hidden) + embedding_params(m) + 2 * m.hidden


def layer_params(m: ModelSpec):
    """One transformer layer: attention + MLP + two norms (2h each)."""
    return attention_params(m) + mlp_params(m) + 4 * m.hidden


def embedding_params(m: ModelSpec):
    """Input embedding V h, plus an untied output projection V h."""
    return m.vocab * m.hidden * where(m.tied_embeddings, 1.0, 2.0)


def total_params(m: ModelSpec):
    return m.layers * layer_params(m) + embedding_params(m) + 2 * m.hidden


def layer_gemm_flops_per_token(m: ModelSpec):
    """Forward GEMM FLOPs of one layer per token: 2 x (attention + active MLP weights)."""
    return 2.0 * (attention_params(m) + mlp_active_params(m))


CAUSAL_TILE = 128.0
"""Query/key block edge of fused attention kernels (FlashAttention-2's 128-row blocks)."""


def layer_attention_flops_per_token(m: ModelSpec, causal=False):
    """Forward attention-core FLOPs per token and layer: Q K^T and A V, 2 * 2 s h.
    Issue 11: s -> the attention span (sliding window), h -> the core width (head_dim, MLA).

    ``causal=True``: the FLOPs a causal fused kernel executes, which skips score blocks
    above the diagonal: (1 + B/s)/2 of the full product for B x B blocks (the diagonal
    blocks are computed whole; Dao 2023, FlashAttention-2, Sec. 3.1.1). A sliding window
    shorter than the sequence already bounds the span, so no further factor applies.
    MFU keeps the full count (``causal=False``), as Megatron-LM and the published MFU
    figures do."""
    span = _attn.attention_span(m)
    full = 4.0 * span * _attn.core_width(m)
    frac = where(span < m.seq_len, 1.0, np.minimum(0.5 * (1.0 + CAUSAL_TILE / m.seq_len), 1.0))
    return where(causal, frac * full, full)


def logits_flops_per_token(m: ModelSpec):
    return 2.0 * m.hidden * m.vocab


def forward_flops_per_token(m: ModelSpec):
    return (m.layers * (layer_gemm_flops_per_token(m) + layer_attention_flops_per_token(m))
            + logits_flops_per_token(m))


def model_flops_per_token(m: ModelSpec):
    """Training FLOPs per token without recomputation (the MFU numerator): 3 x forward."""
    return 3.0 * forward_flops_per_token(m)


def mlp_inner_width(m: ModelSpec):
    """Width of the MLP intermediate a token occupies (mean over layers): f, or
    (top_k x capacity_factor + shared) f_moe in MoE layers."""
    return _moe.mean_over_layers(m, (m.top_k * m.capacity_factor + m.shared_experts) * m.moe_ffn_hidden,
                                 m.ffn_hidden)


def activation_bytes_per_layer(m: ModelSpec, micro, tp, sp, recompute, flash):
    """Activation memory of one layer for one microbatch on one device (bytes, 16-bit activations).

    Korthikanti et al. 2022 (arXiv:2205.05198), Sec. 4 / Table 2:
    s b h (34 + 5 a s / h) without parallelism; with tensor parallelism t,
    s b h (10 + 24/t + 5 a s / (h t)); with sequence parallelism as well,
    s b h / t (34 + 5 a s / h); selective recompute drops the 5 a s / h term;
    full recompute keeps only the 2 s b h layer input (divided by t with SP).
    Generalised here to GQA (K and V are g/a of Q) and gated MLPs (three
    s b f tensors instead of two); a fused (flash) attention stores no s x s
    tensors, like selective recompute.

    Dropout (Korthikanti's count assumes it on): the two hidden-dropout masks
    (1 byte per element each, 2 s b h of the replicated 10 s b h) are stored only
    where ``m.hidden_dropout`` > 0, and of the 5 a s^2 b scores term the attention-
    dropout mask (a s^2 b) and the dropout output (2 a s^2 b) only where
    ``m.attention_dropout`` > 0: at p = 0 PyTorch's dropout returns its input
    (ATen Dropout.cpp ``_dropout_impl``), so the A V product saves the softmax output
    the softmax already keeps (2 a s^2 b). Table 2's 34 s b h becomes 32 s b h.

    ``recompute`` is an integer code: 0 none, 1 selective, 2 full.
    """
    sbh = m.seq_len * micro * m.hidden
    kvr = m.kv_heads / m.heads
    f = mlp_inner_width(m)
    # norm inputs (4), QKV and MLP inputs (2 + 2), and the two hidden-dropout masks (1 + 1) when dropout is on
    replicated = (8.0 + where(m.hidden_dropout > 0, HIDDEN_DROPOUT_MASK_BYTES_PER_SBH, 0.0)) * sbh
    mlp_inner = where(m.gated_mlp, 6.0, 4.0) * m.seq_len * micro * f
    sharded = (4.0 + 4.0 * kvr) * sbh + mlp_inner
    # softmax output (2), and with attention dropout its mask (1) and output (2)
    per_score = 2.0 + where(m.attention_dropout > 0, ATTENTION_DROPOUT_STORED_BYTES_PER_SCORE, 0.0)
    scores = per_score * m.heads * m.seq_len ** 2 * micro
    scores = where(flash | (recompute >= 1), 0.0, scores)
    per_layer = where(sp, (replicated + sharded + scores) / tp, replicated + (sharded + scores) / tp)
    full = where(sp, 2.0 * sbh / tp, 2.0 * sbh)
    return where(recompute == 2, full, per_layer)


HIDDEN_DROPOUT_MASK_BYTES_PER_SBH = 2.0
"""The two hidden-dropout masks a layer stores (after attention and after the MLP), 1 byte per
element each (Korthikanti et al. 2022 Sec. 4.1: "a mask with the size s b h")."""
ATTENTION_DROPOUT_STORED_BYTES_PER_SCORE = 3.0
"""Attention dropout per score element and head: its mask (1 byte) and its output (2 bytes), which the
A V product saves (Korthikanti et al. 2022 Sec. 4.1); without dropout that product saves the softmax
output itself."""
