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
                one_chunk_grads=False):
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
    (``runtime_memory.one_chunk_gradients``)."""
    f_alloc = cal.ALLOCATOR_OVERHEAD if allocator_overhead is None else allocator_overhead
    layer_replica = layer_params if layer_replica is None else layer_replica
    shard_ranks = dp if shard_ranks is None else shard_ranks
    first, full, last = stage_layout(layers, p)
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
    a_first = (act_layer * first * in_flight(p, v, mb, 0.0) + where(single, np.maximum(logits_bytes, work_bytes),
                                                                      work_bytes) + h_first)
    a_mid = where(p > 2, act_layer * full * in_flight(p, v, mb, 1.0) + work_bytes + h_mid, 0.0)
    a_last = act_layer * last * in_flight(p, v, mb, p - 1.0) + np.maximum(logits_bytes, work_bytes) + h_last
    # ZeRO-3: two layers' parameters and one layer's gradient unsharded (module docstring)
    z3 = (zero >= 3) & (shard_ranks > 1)
    w_b, g_b = bytes_per_param[0], bytes_per_param[1]
    z3_live = ZERO3_LAYERS_UNSHARDED * layer_params if z3_unsharded_params is None else z3_unsharded_params
    z3_grad = layer_params if z3_grad_params is None else z3_grad_params
    z3_w = where(z3, w_b * z3_live, 0.0)
    z3_g = where(z3, g_b * z3_grad, 0.0)
    # gradients held at the peak when only the rank's last model chunk has run a backward
    one = one_chunk_grads & per_step_states & (zero < 2)
    vv = np.maximum(v, 1.0)
    g_first, g_mid, g_last = (first / vv * layer_params, full / vv * layer_params,
                              last / vv * layer_params + emb_params)
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
