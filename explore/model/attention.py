"""Attention variants that set parameters, FLOPs and the key/value volume at long context.

* MHA / GQA / MQA (Ainslie et al. 2023, arXiv:2305.13245): ``kv_heads`` key/value
  heads of width ``head_dim`` (default hidden / heads) shared by heads / kv_heads
  query heads. Weights per layer: h a d_h (Q) + 2 h g d_h (K, V) + a d_h h (output).
* Multi-head latent attention (MLA, DeepSeek-V2 arXiv:2405.04434 Sec. 2.1, used by
  DeepSeek-V3 arXiv:2412.19437 Sec. 2.1.1) when ``kv_lora_rank`` > 0. Weights:
  queries h r_q + r_q a (d_h + d_r) (or h a (d_h + d_r) without query compression),
  keys/values h (r_kv + d_r) + r_kv a (d_h + d_h), output a d_h h (value width = d_h).
  Approximation: the attention core is counted on the up-projected keys (width
  d_h + d_r) and values (d_h), as in training (no weight absorption); the norms on
  the latent vectors are ignored.
* Sliding window (Beltagy et al. 2020, arXiv:2004.05150; Mistral 7B): a token attends
  to at most ``sliding_window`` keys, so the score and value work per token scales
  with min(s, w) instead of s.
"""
from __future__ import annotations

import numpy as np
from hwmodels.select import where


def head_dim(m):
    return m.head_dim


def is_mla(m):
    return m.kv_lora_rank > 0


def attention_params(m):
    """Q, K, V and output projection weights of one layer (biases and latent norms ignored)."""
    h, a, d = m.hidden, m.heads, m.head_dim
    gqa = h * a * d + 2.0 * h * m.kv_heads * d + a * d * h
    qk = d + m.rope_head_dim
    q = where(m.q_lora_rank > 0, h * m.q_lora_rank + m.q_lora_rank * a * qk, h * a * qk)
    mla = q + h * (m.kv_lora_rank + m.rope_head_dim) + m.kv_lora_rank * a * 2.0 * d + a * d * h
    return where(is_mla(m), mla, gqa)


def attention_span(m):
    """Keys a query attends to: the sequence, or the sliding window when it is shorter."""
    return where(m.sliding_window > 0, np.minimum(m.seq_len, m.sliding_window), m.seq_len)


def core_width(m):
    """(Q.K width + A.V width) / 2 over all heads: h for standard attention with d_h = h/a;
    MLA: a (2 d_h + d_r) / 2. Attention-core forward FLOPs per token = 4 span core_width."""
    return where(is_mla(m), m.heads * (2.0 * m.head_dim + m.rope_head_dim) / 2.0, m.heads * m.head_dim)


def kv_width(m):
    """Key + value elements per token and layer that context parallelism exchanges:
    2 g d_h (GQA), or a (d_h + d_r) + a d_h for MLA (up-projected keys and values)."""
    return where(is_mla(m), m.heads * (2.0 * m.head_dim + m.rope_head_dim), 2.0 * m.kv_heads * m.head_dim)
