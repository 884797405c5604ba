"""Mixture-of-experts layers: parameters, expert parallelism and all-to-all volume.

A MoE model has ``layers`` layers of which the first ``dense_layers`` are dense
(MLP width ``ffn_hidden``) and the rest MoE: ``experts`` routed experts and
``shared_experts`` always-active experts, each a (gated) MLP of width
``moe_ffn_hidden``, plus a router (h x E). A token visits ``top_k`` routed
experts (Shazeer et al. 2017; Fedus et al. 2022; DeepSeek-V3 arXiv:2412.19437
Sec. 2.1.2). Per-layer figures elsewhere are means over the layers, so a
pipeline stage of n layers holds n x the mean (dense layers spread evenly).

Expert parallelism follows Megatron-Core (Shoeybi et al.; "MoE" docs of
Megatron-Core): devices = tp * pp * dp * cp; the ``ep`` ranks of an expert
group are taken from the dp * cp ranks (``ep`` divides dp * cp and
``experts``), experts are also split over the tensor group (expert TP = tp),
and expert weights are replicated over the expert-data-parallel group of
dp * cp / ep ranks, which reduces their gradients.

Token dispatch (Megatron-Core ``alltoall`` dispatcher, one copy per selected
expert, no de-duplication per rank): with routing uniform over the ep ranks,
a copy leaves its rank with probability (ep - 1) / ep, so the volume per token
and MoE layer that crosses the fabric is, forward,
    top_k h (b_dispatch + b_combine) (ep - 1) / ep   bytes,
and the same again backward (the gradients of both). The busiest expert sets
the pace: its load is ``capacity_factor`` x the mean, which scales routed-expert
compute and the all-to-all buffer.
"""
from __future__ import annotations

import numpy as np
from hwmodels.select import where

DEEPEP_SMS = 20.0
"""SMs DeepEP's all-to-all kernels occupy: DeepSeek-V3 (arXiv:2412.19437) Sec. 3.2.2 runs dispatch and
combine on 20 SMs; Megatron-Core's flex dispatcher runs DeepEP's normal kernels on 20 SMs as well
(DeepEP deep_ep/buffers/legacy.py ``Buffer.num_sms = 20``; Megatron-LM token_dispatcher.py sets 20 when
``moe_flex_dispatcher_num_sms`` is unset)."""

COMM_SM_SHARE = DEEPEP_SMS / 132.0
"""Share of the accelerator's SMs that all-to-all kernels occupy while they overlap compute, on the
reference part: DeepSeek-V3 (arXiv:2412.19437) Sec. 3.2.2 runs dispatch and combine on 20 of the
H800's 132 SMs (``DEEPEP_SMS``). Overlapped all-to-all time slows the compute it hides behind by the
part's share (``comm_sm_share``, moe_overlap.py); this one is its fallback where the SM count is unknown."""


def comm_sm_share(sm_count):
    """Per-design share of the SMs DeepEP's kernels take: ``DEEPEP_SMS`` / the part's SM count
    (catalog ``sm_count``: 20/132 on H100 / H200 / H800, 20/148 on B200 / GB200, 20/108 on A100).
    Where the count is missing (NaN or <= 0: non-NVIDIA parts such as TPU v4 and MI300X, where DeepEP
    does not run, inline accelerators without a base part, parametric designs whose compute dies
    differ from their base's) it falls back to the H800 reference share ``COMM_SM_SHARE`` (20/132).
    Broadcasts over the batch."""
    n = np.asarray(sm_count, dtype=float)
    ok = np.isfinite(n) & (n > 0)
    return np.where(ok, DEEPEP_SMS / np.where(ok, n, 1.0), COMM_SM_SHARE)


def is_moe(m):
    return m.experts > 1


def moe_layer_fraction(m):
    """Share of layers that are MoE: (L - dense_layers) / L, 0 for a dense model."""
    return where(is_moe(m), (m.layers - m.dense_layers) / m.layers, 0.0)


def moe_layers(m):
    return moe_layer_fraction(m) * m.layers


def routed_params(m, k):
    """Routed-expert weights of one MoE layer (k = 2 or 3 matrices per expert MLP)."""
    return m.experts * k * m.hidden * m.moe_ffn_hidden


def shared_params(m, k):
    return m.shared_experts * k * m.hidden * m.moe_ffn_hidden


def router_params(m):
    return m.hidden * m.experts


def mean_over_layers(m, moe_value, dense_value):
    f = moe_layer_fraction(m)
    return f * moe_value + (1.0 - f) * dense_value


def expert_params_per_layer(m, k):
    """Mean routed-expert weights per layer (the part expert parallelism divides)."""
    return moe_layer_fraction(m) * routed_params(m, k)


def imbalance_extra_active_params(m, k):
    """Mean extra routed-expert weights per token on the busiest rank: (capacity_factor - 1) top_k k h f_e."""
    return moe_layer_fraction(m) * (m.capacity_factor - 1.0) * m.top_k * k * m.hidden * m.moe_ffn_hidden


def a2a_bytes_per_token(m, ep, dispatch_bytes=2.0, combine_bytes=2.0):
    """Bytes one token sends across ranks per MoE layer, forward (dispatch + combine)."""
    ep = np.asarray(ep, dtype=float)
    return m.top_k * m.hidden * (dispatch_bytes + combine_bytes) * (ep - 1.0) / ep


def a2a_buffer_bytes(m, tokens_per_rank, element_bytes):
    """Per-rank all-to-all buffer of one dispatch (or combine): tokens x top_k copies x h x bytes,
    scaled by the busiest rank's load (capacity_factor)."""
    return tokens_per_rank * m.top_k * m.hidden * element_bytes * m.capacity_factor


def remote_domains_hit(m, domains):
    """Expected number of other scale-up domains a token's top_k experts fall in, the experts
    spread evenly over ``domains`` domains and every top_k subset equally likely:
    (G - 1) (1 - C(E - E/G, k) / C(E, k))."""
    g = np.maximum(np.asarray(domains, dtype=float), 1.0)
    e, k = m.experts, m.top_k
    miss = np.ones_like(e * g)
    for i in range(int(np.max(k))):
        term = np.clip((e - e / g - i) / np.maximum(e - i, 1.0), 0.0, 1.0)
        miss = miss * where(i < k, term, 1.0)
    return (g - 1.0) * (1.0 - miss)


def scale_out_copy_fraction(m, ep, inner, deepep):
    """Share of a rank's dispatch buffer (top_k copies per token) that crosses the scale-out network:
    (ep - inner) / ep with one copy per expert (alltoall), or remote domains hit / top_k when the
    dispatcher sends one copy per remote domain and forwards it inside (DeepEP, HybridEP)."""
    ep = np.asarray(ep, dtype=float)
    per_copy = (ep - inner) / ep
    dedup = remote_domains_hit(m, ep / inner) / m.top_k
    return where(deepep, np.minimum(dedup, per_copy), per_copy)


def unfused_permute_bytes(m, tokens_rank, element_bytes=2.0):
    """HBM bytes of Megatron-Core's unfused permute / unpermute (moe_permute_fusion False), one MoE
    layer and microbatch on a rank, (forward, backward). Megatron-LM core_r0.11.0 (791b70e031) /
    core_r0.12.0 (3cdfd613e6) megatron/core/transformer/moe/moe_utils.py, with X the permuted copies
    (tokens x top_k x capacity_factor rows of h elements) and T the tokens (tokens x h):
      forward  permute: tokens.index_select (read X, write X); unpermute: permuted_tokens * probs
               (read X, write X), torch.zeros (write T), scatter_add_ (read X, write T): 5X + 2T;
      backward (autograd) scatter_add_ -> gather (read X, write X); the broadcast mul -> grad * probs
               (read X, write X) and grad * tokens summed over h for the probs' gradient (read 2X,
               write X, read X); index_select -> zeros + index_add_ (write T, read X, write T): 9X + 2T.
    The fused kernels (Transformer Engine moe_permute / moe_unpermute) are not charged: the same
    copies in one pass each (2X + 2T forward), left out for every row as before.
    The router's softmax / top-k / capacity and aux-loss kernels act on tokens x experts fp32 scores
    (no h factor) and are not charged."""
    x = tokens_rank * m.top_k * m.capacity_factor * m.hidden * element_bytes
    t = tokens_rank * m.hidden * element_bytes
    return 5.0 * x + 2.0 * t, 9.0 * x + 2.0 * t
