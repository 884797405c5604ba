"""Memory per device: weights, gradients, optimizer states and activations, per pipeline stage.

Stages: ``L`` layers on ``p`` stages; when ``p`` does not divide ``L`` the ``L mod p`` fuller
stages (ceil(L/p) layers) sit in the middle and the first and last stages hold floor(L/p),
as Llama 3 did ("one layer fewer on the first and the last stage", Dubey et al. 2024,
Sec. 3.3.2); with ``L mod p = p - 1`` the first stage is full too.

Activations in flight on stage i (in units of one microbatch through the stage's layers):

* 1F1B (v = 1): p - i microbatches (warm-up of p - i - 1 forwards plus one),
  Narayanan et al. 2021 Sec. 2.2.1;
* interleaved 1F1B (v chunks): (v p + p - 1 - 2 i) / v, from Megatron-LM's warm-up count
  2 (p - i - 1) + (v - 1) p model chunks plus one; for i = 0 this is Korthikanti et al.
  2022's p (1 + (p - 1) / (p v)) (Sec. 4.2.3);

never more than the step's microbatches. ZeRO-3 also holds unsharded the 16-bit parameters of the
layer being computed and of the next one, prefetched (FSDP2 ``fully_shard``'s implicit prefetch
of one layer; ZeRO-3, Rajbhandari et al. 2020, Sec. 5.3), and the gradient of the layer being
reduced: ``(2 w + g) P_layer`` when it shards over more than one rank; DeepSpeed gathers per
submodule rather than per layer (``runtime_memory.deepspeed_zero3_unsharded``). Optimizer states: 2-byte weights, 4-byte fp32
gradients, 12-byte Adam states (master weights, m, v) per parameter, divided by dp when
ZeRO shards them (stage 3, 2, 1 respectively).

**Embedding and loss counted as layers** (``parallelism.pp_embedding_as_layer`` /
``pp_loss_as_layer``: Megatron-Core ``account_for_embedding_in_pipeline_split`` /
``account_for_loss_in_pipeline_split``, megatron/core/transformer/transformer_block.py
``get_num_layers_to_build`` at NVIDIA/Megatron-LM d98e8a64dd): the ``L + e + l`` slots are split
evenly, ``c = (L + e + l) / (p v)`` per model chunk, and the first chunk of the first rank
builds ``c - e`` layers, the last chunk of the last rank ``c - l``; every other chunk ``c``.
With one slot per chunk (Llama 3 405B: 126 + 2 on 16 x 8) the first rank's first chunk holds
only the embedding and the last rank's last chunk only the output layer and the loss (Dubey et
al. 2024, Sec. 3.3.2). The chunks then differ in size, so the rank's peak is no longer
(chunk-forwards in flight) x (layers per chunk): it is the largest, over the schedule, of the
sum over chunks of (that chunk's microbatches in flight) x (its layers). Megatron-LM's
interleaved order (megatron/core/pipeline_parallel/schedules.py at d98e8a64dd,
``get_schedule_table`` / ``get_model_chunk_id`` with ``microbatch_group_size_per_vp_stage`` = p,
its default in model_parallel_config.py; ``get_pp_rank_microbatches``: W = 2 (p - i - 1) +
(v - 1) p warm-up chunk-forwards on rank i, then one forward and one backward per step,
backwards in the forwards' table order with the chunk reversed) keeps W + 1 chunk-forwards in
flight after each steady-state forward, so the rank peaks there at c (W + 1) less the
embedding's (loss's) chunk's count of microbatches at its smallest over the steady state:

* first rank, chunk 0: the forwards run p microbatches per chunk and its backwards come last in
  each group, so chunk 0 holds 2 p - 1 microbatches (right after the first steady forward) or
  2 p; when m <= p every forward is in the warm-up (W >= m v): all m;
* last rank, chunk v - 1: its backward follows its forward at once; it holds 1 microbatch
  while m = p, none from the second group of p microbatches on (m > p);
* v = 1: the rank's single chunk holds the 1F1B count.

``activation_terms`` / ``stage_activation_layers`` give these layer-microbatches per rank
(tests/explore/test_pipeline_layout.py steps through the schedule). On the first rank, whose
first chunk carries the most microbatches, the embedding-only chunk lowers the peak by 2 p - 1
layer-microbatches (m by m <= p); the middle ranks, which hold the most, are unchanged (Llama 3
405B at m = 32: 112 on rank 0, 141 on rank 1).
"""
from __future__ import annotations

import numpy as np
from hwmodels.select import where

from explore.model import calibration as cal

WEIGHT_BYTES = 2.0
GRAD_BYTES = 4.0
ADAM_BYTES = 12.0
ZERO3_LAYERS_UNSHARDED = 2.0
"""Layers whose 16-bit parameters ZeRO-3 holds unsharded: the one computing and the one prefetched."""
LOGIT_BYTES = {"fused": 4.0, "unfused": 12.0}
"""Bytes per logit (token x vocabulary / tp) at the loss's peak. fused: Megatron's vocab-parallel
cross-entropy holds the fp32 logits once and computes the gradient in place. unfused (PyTorch
``cross_entropy(logits.float(), ...)``, torchtitan 2024; counted tensor by tensor), backward of
``aten`` cross-entropy: the saved fp32 log-softmax output (4), the nll gradient (4) and the
log-softmax gradient (4) = 12 (the forward peak, 16-bit logits + fp32 copy + output, is 10)."""
UNFUSED_LOSS_PARALLEL_BYTES = 4.0
"""Extra bytes per logit of DTensor's loss-parallel cross-entropy (vocabulary sharded over tp > 1;
``torch.distributed.tensor.parallel.loss``: the backward adds exp(x) to a zero-filled gradient and
multiplies: saved output + zeros + exp + sum = 16)."""
CALLER_LOGIT_BYTES = 2.0
"""The 16-bit logits themselves, while the caller still holds them during the loss's backward
(torchtitan deletes them before ``loss.backward()`` without pipeline parallelism; the pipeline
schedule keeps every microbatch's output)."""


def loss_bytes_per_logit(unfused, tp, caller_keeps):
    """Bytes per logit (token x vocabulary / tp) at the loss's peak (constants above)."""
    extra = where(tp > 1, UNFUSED_LOSS_PARALLEL_BYTES, 0.0) + where(caller_keeps, CALLER_LOGIT_BYTES, 0.0)
    return where(unfused, LOGIT_BYTES["unfused"] + extra, LOGIT_BYTES["fused"])


def stage_layout(layers, p):
    """(layers on the first stage, on a full middle stage, on the last stage)."""
    full = np.ceil(layers / p)
    low = np.floor(layers / p)
    r = layers - p * low
    first = where((r > 0) & (r <= p - 2), low, full)
    last = where(p > 1, low, full)
    return first, full, last


def in_flight(p, v, mb, stage):
    """Microbatches whose activations stage ``stage`` holds at its peak (see module docstring)."""
    inter = (v * p + p - 1.0 - 2.0 * stage) / v
    one = p - stage
    return np.clip(where(v > 1, inter, one), 1.0, np.maximum(mb, 1.0))


def split_layout(layers, p, v, emb_layer, loss_layer):
    """Layer slots per model chunk ``c = (L + e + l) / (p v)`` and the layers on the (first, a
    middle, last) rank, ``(c v - e, c v, c v - l)``, when the embedding (``e``) and / or the loss
    (``l``) count as one layer of the pipeline split (module docstring; Megatron-Core
    ``get_num_layers_to_build``). ``plan.rule_codes`` requires ``p v`` to divide ``L + e + l``."""
    e = where(emb_layer, 1.0, 0.0)
    l = where(loss_layer, 1.0, 0.0)
    vv = np.maximum(v, 1.0)
    c = (layers + e + l) / (p * vv)
    return c, c * vv - e, c * vv, c * vv - l


def activation_terms(layers, p, v, mb, emb_layer=False, loss_layer=False):
    """Per (first, a middle, last) rank: (layer slots, microbatches in flight per slot, layer-microbatches
    the embedding-only / loss-only slot does not hold): the rank's peak is ``slots x in_flight - less``
    layer-microbatches (``stage_activation_layers``). Without the split, ``stage_layout``'s layers, the
    1F1B / interleaved ``in_flight`` and nothing less (None)."""
    first, full, last = stage_layout(layers, p)
    f0, f1, fl = in_flight(p, v, mb, 0.0), in_flight(p, v, mb, 1.0), in_flight(p, v, mb, p - 1.0)
    split = np.asarray(emb_layer, bool) | np.asarray(loss_layer, bool)
    if not np.any(split):
        return (first, f0, None), (full, f1, None), (last, fl, None)
    c, s_first, slots, s_last = split_layout(layers, p, v, emb_layer, loss_layer)
    # fewest microbatches the embedding's chunk (first rank, chunk 0) and the loss's chunk (last rank,
    # chunk v - 1) hold at a steady-state peak, when every chunk-forward of the warm-up and one more
    # are in flight (module docstring); v = 1: the stage's single chunk, all of them
    inter = v > 1
    held_first = where(inter, where(mb > p, np.minimum(2.0 * p - 1.0, mb), mb), f0)
    held_last = where(inter, where(mb > p, 0.0, 1.0), fl)
    less_first = where(split & np.asarray(emb_layer, bool), held_first, 0.0)
    less_last = where(split & np.asarray(loss_layer, bool), held_last, 0.0)
    return ((where(split, slots, first), f0, less_first), (where(split, slots, full), f1, None),
            (where(split, slots, last), fl, less_last))


def stage_activation_layers(layers, p, v, mb, emb_layer=False, loss_layer=False):
    """Layer-microbatches of stored activations at the peak of the (first, a middle, last) rank:
    the largest, over the schedule, of the sum over the rank's chunks of (microbatches in flight)
    x (layers) (module docstring; ``activation_terms``)."""
    return tuple(n * f - (0.0 if less is None else less)
                 for n, f, less in activation_terms(layers, p, v, mb, emb_layer, loss_layer))


def state_bytes(params, zero, dp, replica=None, bytes_per_param=(WEIGHT_BYTES, GRAD_BYTES, ADAM_BYTES)):
    """(weights, gradients, optimizer states) bytes of ``params`` parameters under ZeRO stage ``zero``.

    A sharded state holds ``replica / dp`` (``replica``: the parameters of one model-parallel
    replica that this device's shard group splits; with expert parallelism it exceeds the
    device's ``params``, since ZeRO shards the unsplit replica; default ``params``)."""
    replica = params if replica is None else replica
    w_b, g_b, o_b = bytes_per_param
    shard = replica / dp
    w = where(zero >= 3, shard, params) * w_b
    g = where(zero >= 2, shard, params) * g_b
    o = where(zero >= 1, shard, params) * o_b
    return w, g, o


def peak_memory(act_layer, layer_params, emb_params, logits_bytes, layers, p, v, mb, zero, dp, untied,
                layer_replica=None, shard_ranks=None,
                bytes_per_param=(WEIGHT_BYTES, GRAD_BYTES, ADAM_BYTES), work_bytes=0.0, held_bytes=(0.0, 0.0, 0.0),
                per_step_states=False, allocator_overhead=None, z3_unsharded_params=None, z3_grad_params=None,
                one_chunk_grads=False, emb_layer=False, loss_layer=False):
    """Peak bytes per device over the first, a full middle and the last stage, and its parts
    (weights, gradients, optimizer, activations) on the peak stage.

    ``layer_replica`` (default ``layer_params``): a layer's parameters before expert parallelism
    splits the routed experts, which ZeRO shards over ``shard_ranks`` (default ``dp``; dp*cp with
    context parallelism); ``bytes_per_param``: (weight, gradient, optimizer) bytes of the
    precision recipe; ``work_bytes``: activations of the one layer being recomputed in the backward
    pass under full recompute (its stored input alone is ``act_layer``), held on top of the stored ones
    (on the stage with the loss, the larger of it and ``logits_bytes``: the loss's tensors are
    freed before the backward reaches the layers);
    ``held_bytes``: what the runtime holds on the (first, middle, last) stage beyond the stored
    activations (``runtime_memory.pipeline_held_bytes``), counted with the activations;
    ``per_step_states``: the runtime allocates the unsharded weights and the gradients every step
    (FSDP2 all-gathers, gradients set to None) rather than once in contiguous buffers (Megatron-Core's
    ``param_and_grad_buffer``); ``allocator_overhead`` (default ``calibration.ALLOCATOR_OVERHEAD``):
    what the caching allocator reserves beyond the peak of the per-step allocations (activations,
    the runtime's buffers, ZeRO-3's unsharded layers, and with ``per_step_states`` the unsharded
    weights and gradients), as a fraction of them; ``z3_unsharded_params`` / ``z3_grad_params``
    (default ``ZERO3_LAYERS_UNSHARDED * layer_params`` / ``layer_params``): the parameters whose
    16-bit weights / gradients ZeRO-3 holds unsharded (a runtime that gathers per submodule holds
    less: ``runtime_memory.deepspeed_zero3_unsharded``); ``one_chunk_grads``: with ``per_step_states``
    and unsharded gradients (ZeRO < 2), the peak holds the gradients of one model chunk per rank, the
    last (its first layers / v; on the last rank with the output layer), not the rank's v chunks
    (``runtime_memory.one_chunk_gradients``); ``emb_layer`` / ``loss_layer``: the embedding / the
    loss counts as one layer of the pipeline split (``split_layout``, ``stage_activation_layers``)."""
    f_alloc = cal.ALLOCATOR_OVERHEAD if allocator_overhead is None else allocator_overhead
    layer_replica = layer_params if layer_replica is None else layer_replica
    shard_ranks = dp if shard_ranks is None else shard_ranks
    first, full, last = stage_layout(layers, p)
    split = np.asarray(emb_layer, bool) | np.asarray(loss_layer, bool)
    vv = np.maximum(v, 1.0)
    # layers of the rank's last model chunk (its gradients alone under one_chunk_grads)
    c_first, c_mid, c_last = first / vv, full / vv, last / vv
    if np.any(split):
        c, s_first, s_mid, s_last = split_layout(layers, p, v, emb_layer, loss_layer)
        first, full, last = where(split, s_first, first), where(split, s_mid, full), where(split, s_last, last)
        e_one = where(v > 1, 0.0, where(emb_layer, 1.0, 0.0))   # the first rank's last chunk is its first when v = 1
        c_first = where(split, c - e_one, c_first)
        c_mid = where(split, c, c_mid)
        c_last = where(split, c - where(loss_layer, 1.0, 0.0), c_last)
    (n0, f0, d0), (n1, f1, d1), (n2, f2, d2) = activation_terms(layers, p, v, mb, emb_layer, loss_layer)

    def stored(n, f, less):
        return act_layer * n * f if less is None else act_layer * n * f - act_layer * less
    single = p == 1
    # first stage: embedding (and the untied output layer and logits when p = 1)
    extra_first = emb_params + where(single & untied, emb_params, 0.0)
    p_first = first * layer_params + extra_first
    p_mid = full * layer_params
    p_last = last * layer_params + emb_params
    r_first, r_mid, r_last = first * layer_replica + extra_first, full * layer_replica, last * layer_replica + emb_params
    h_first, h_mid, h_last = held_bytes
    # the loss's tensors are freed before the backward reaches (and recomputes) the last layer:
    # the stage holding the loss peaks at the larger of the two
    a_first = (stored(n0, f0, d0) + where(single, np.maximum(logits_bytes, work_bytes),
                                          work_bytes) + h_first)
    a_mid = where(p > 2, stored(n1, f1, d1) + work_bytes + h_mid, 0.0)
    a_last = stored(n2, f2, d2) + np.maximum(logits_bytes, work_bytes) + h_last
    # ZeRO-3: two layers' parameters and one layer's gradient unsharded (module docstring)
    z3 = (zero >= 3) & (shard_ranks > 1)
    w_b, g_b = bytes_per_param[0], bytes_per_param[1]
    z3_live = ZERO3_LAYERS_UNSHARDED * layer_params if z3_unsharded_params is None else z3_unsharded_params
    z3_grad = layer_params if z3_grad_params is None else z3_grad_params
    z3_w = where(z3, w_b * z3_live, 0.0)
    z3_g = where(z3, g_b * z3_grad, 0.0)
    # gradients held at the peak when only the rank's last model chunk has run a backward
    one = one_chunk_grads & per_step_states & (zero < 2)
    g_first, g_mid, g_last = (c_first * layer_params, c_mid * layer_params,
                              c_last * layer_params + emb_params)
    parts = []
    for params, replica, act, g_one in ((p_first, r_first, a_first, g_first), (p_mid, r_mid, a_mid, g_mid),
                                        (p_last, r_last, a_last, g_last)):
        w, g, o = state_bytes(params, zero, shard_ranks, replica, bytes_per_param)
        g = where(one, g_b * g_one, g)
        dyn = act + z3_w + z3_g + where(per_step_states & (zero < 3), w + g, 0.0)
        w, g = w + z3_w, g + z3_g
        parts.append((w + g + o + act + f_alloc * dyn, w, g, o, act, f_alloc * dyn))
    parts[1] = tuple(where(p > 2, x, 0.0) for x in parts[1])
    # the peak stage: the first largest total (np.argmax over the stages, a NaN counting as the
    # largest), as comparisons and selects (argmax over a short axis and np.choose cost ~10x)
    best, k1, k2 = parts[0][0], None, None
    for j, t in ((1, parts[1][0]), (2, parts[2][0])):
        t = np.asarray(t)
        nb = np.isnan(best)
        up = (t > best) | (np.isnan(t) & ~nb)
        best = where(up, t, best)
        if j == 1:
            k1 = up
        else:
            k2 = up

    def pick(j):
        a0, a1, a2 = (np.asarray(q[j], dtype=float) for q in parts)
        shape = np.broadcast_shapes(a0.shape, a1.shape, a2.shape, np.shape(k1), np.shape(k2))
        a0, a1, a2 = (np.broadcast_to(a, shape) if a.shape != shape else a for a in (a0, a1, a2))
        return where(np.broadcast_to(k2, shape) if np.shape(k2) != shape else k2, a2,
                     where(np.broadcast_to(k1, shape) if np.shape(k1) != shape else k1, a1, a0))
    return {"total": pick(0) + cal.MEMORY_RESERVED_BYTES, "weights": pick(1), "gradients": pick(2),
            "optimizer": pick(3), "activations": pick(4), "allocator": pick(5)}


def stage_layers(m, plan):
    """Layers on the fullest stage, on the last stage (which also holds the logits) and on the first
    (which also holds the embedding).

    Layers need not divide evenly (Llama 3 405B: 126 on 16 stages): the fullest
    stage holds ceil(L/p); the last stage, which carries the output layer,
    holds floor(L/p); the first is counted as a full one. With the embedding / the loss
    counted as a layer of the split (``plan.emb_layer`` / ``loss_layer``,
    ``split_layout``): c v on the middle ranks, c v - e on the first and c v - l on the
    last, c = (L + e + l) / (p v)."""
    full, last = np.ceil(m.layers / plan.pp), np.floor(m.layers / plan.pp)
    split = np.asarray(plan.emb_layer, bool) | np.asarray(plan.loss_layer, bool)
    if not np.any(split):
        return full, last, full
    _, s_first, s_mid, s_last = split_layout(m.layers, plan.pp, plan.virtual_stages,
                                                    plan.emb_layer, plan.loss_layer)
    return where(split, s_mid, full), where(split, s_last, last), where(split, s_first, full)
