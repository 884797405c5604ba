"""Memory per device of a plan (bytes), before any time: ``memory.peak_memory``'s parts for a design
(weights, gradients, optimizer states, activations and the runtime's own buffers), from the model,
the plan, the system and the precision recipe. ``explore.evaluate`` checks the fit of every design
with it before it times the ones it returns; ``step.step_model`` reuses the parts."""
from __future__ import annotations

import numpy as np
from hwmodels.select import where

from explore.model import calibration as cal
from explore.model import memory, moe, runtime_memory as rt
from explore.model.pipeline_p2p import ACT_BYTES
from explore.model.plan import ParallelPlan
from explore.model.precision import Recipe
from explore.model.system import SystemSpec
from explore.model.workload import ModelSpec, activation_bytes_per_layer, layer_params, mlp_inner_width


def expert_split(m: ModelSpec, plan: ParallelPlan):
    """(routed-expert parameters per layer, the share of them a device does not hold when the experts are
    split over etp*ep ranks instead of tp, one layer's parameters on a device) (issue 11, moe.py)."""
    expert_total = moe.expert_params_per_layer(m, where(m.gated_mlp, 3.0, 2.0))
    expert_shard = 1.0 / plan.tp - 1.0 / (plan.etp * plan.ep)
    return expert_total, expert_shard, layer_params(m) / plan.tp - expert_total * expert_shard


def memory_model(m: ModelSpec, plan: ParallelPlan, s: SystemSpec, flash,
                 c: cal.Calibration = cal.DEFAULT, recipe: Recipe | None = None) -> dict[str, np.ndarray]:
    """Memory per device (bytes): ``memory.peak_memory``'s parts (``total``, ``weights``, ``gradients``,
    ``optimizer``, ``activations``, ``allocator``) of ``step_model``'s designs. It reads no time: a
    design's fit is known before its step time (``explore.evaluate`` times only the designs it returns)."""
    t, b, h = plan.tp, plan.microbatch, m.hidden
    sp = plan.sp_active
    cp = plan.cp
    recipe = recipe if recipe is not None else Recipe.default(s)
    tokens_mb = b * m.seq_len / cp
    sbh = tokens_mb * h
    f = mlp_inner_width(m)
    p, v, mb = plan.pp, plan.virtual_stages, plan.microbatches
    emb = m.vocab * m.hidden
    untied = ~m.tied_embeddings
    zero, dp = plan.zero, plan.dp
    dpc = dp * cp
    layer_p = expert_split(m, plan)[2]
    # peak over the first, a full middle and the last stage
    act_layer = activation_bytes_per_layer(m, b / cp, t, sp, plan.recompute, flash)  # issue 11: s/cp tokens
    # full recompute: the layer being recomputed holds its activations (as without recompute, minus s^2
    # scores: selective's count) on top of the stored layer inputs
    work = np.where(plan.recompute == 2, activation_bytes_per_layer(m, b / cp, t, sp, 1, flash), 0.0)
    # the runtime's own buffers (runtime_memory.py): DTensor SP's gathered GEMM inputs (stored per layer,
    # or in the recomputed layer), all-gathered keys/values under CP, pipeline buffers per microbatch
    torch_rt = plan.runtime_torch
    sp_layer, sp_head = rt.gathered_input_bytes(tokens_mb, h, t, sp, recipe.fp8, torch_rt)
    # Transformer Engine with FP8 saves the FP8 copies of the GEMM inputs (1 B less per element)
    fp8_saved = rt.fp8_saved_input_savings(tokens_mb, h, f, t, sp, recipe.fp8, torch_rt)
    act_layer = act_layer + where(plan.recompute == 2, 0.0, sp_layer - fp8_saved)
    work = (work + where(plan.recompute == 2, sp_layer - fp8_saved, 0.0)
            + rt.cp_gather_bytes(m, b, cp, t, torch_rt))
    logits16 = ACT_BYTES * tokens_mb * m.vocab / t
    held = rt.pipeline_held_bytes(ACT_BYTES * sbh / where(sp, t, 1.0), logits16, p, v, mb, torch_rt)
    # ZeRO-3's unsharded weights and gradients: two layers / one layer, or DeepSpeed's submodules
    ds_rt = plan.runtime_deepspeed
    z3_w, z3_g = rt.deepspeed_zero3_unsharded(m, t, layer_p, ds_rt)
    mem_parts = memory.peak_memory(act_layer, layer_p, emb / t,
                                   memory.loss_bytes_per_logit(recipe.unfused_loss, t, ~torch_rt | (p > 1))
                                   * tokens_mb * m.vocab / t + sp_head,
                                   m.layers, p, v, mb, zero, dp, untied,
                                   layer_replica=layer_params(m) / t, shard_ranks=dpc,
                                   bytes_per_param=(recipe.weight_bytes, plan.grad_reduce_bytes,
                                                    recipe.optimizer_bytes), work_bytes=work, held_bytes=held,
                                   per_step_states=torch_rt,
                                   allocator_overhead=where(torch_rt | ds_rt, cal.ALLOCATOR_OVERHEAD, 0.0),
                                   z3_unsharded_params=z3_w, z3_grad_params=z3_g,
                                   one_chunk_grads=rt.one_chunk_gradients(p, v, mb, torch_rt),
                                   emb_layer=plan.emb_layer, loss_layer=plan.loss_layer)
    return mem_parts
