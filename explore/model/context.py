"""Context parallelism: ring attention over ``cp`` ranks (Liu et al. 2023, "Ring Attention with
Blockwise Transformers", arXiv:2310.01889; Megatron-Core / Transformer Engine context parallelism).

The sequence is split into cp chunks (each rank holds s / cp tokens of every
layer's activations); a rank computes attention for its queries against all keys
by passing its key/value chunk around the ring: cp - 1 send/receive steps per
layer, each overlapped with the attention block of the chunk in hand. Per rank,
per layer and microbatch (b sequences), forward:
    bytes = (cp - 1) (s / cp) b w_kv e / t,
w_kv the key+value width per token (``attention.kv_width``), e the element size,
t the tensor-parallel degree (heads split over the tensor group; heads replicated
when kv_heads < t). Backward sends keys/values again and their gradients: 2 x
forward. Every exposed second is the part the attention compute does not hide.
"""
from __future__ import annotations

import numpy as np
from hwmodels.select import where

from explore.model.attention import kv_width


def kv_chunk_bytes(m, micro, cp, tp, element_bytes=2.0):
    """One ring step's key/value block on one rank: (s/cp) b w_kv e / t (heads over the tensor group)."""
    heads_split = where(m.kv_lora_rank > 0, tp, np.minimum(tp, m.kv_heads))
    return m.seq_len / cp * micro * kv_width(m) * element_bytes / heads_split


def ring_bytes_per_layer(m, micro, cp, tp, element_bytes=2.0):
    """Forward bytes a rank sends per layer and microbatch: (cp - 1) chunks."""
    return (np.asarray(cp, dtype=float) - 1.0) * kv_chunk_bytes(m, micro, cp, tp, element_bytes)
