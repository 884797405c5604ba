"""Memory a training runtime holds besides weights, optimizer states and stored activations.

``parallelism.runtime = "megatron"`` (default): Megatron-Core with Transformer Engine; only the
FP8 saved inputs below. ``"torch"``: the PyTorch-native stack torchtitan ran in Dec 2024 (torch
1963fc8, torchtitan 9dec370; the Markdown file benchmarks/llama3_h100_202412_torchtitan of
pytorch/torchtitan):

* **Pipeline buffers** (``torch.distributed.pipelining``, ``stage.py`` of that time): every
  stage appends each microbatch's output to ``output_chunks``, kept until the step returns
  them (only the last stage's since pytorch/pytorch PR 153383, May 2025; the last stage's
  still, issue 159251); a receive buffer per microbatch for the stage input on non-first
  stages and one for the output gradient on non-last stages (``_create_act_recv_info`` /
  ``_create_grad_recv_info``, one per chunk, allocated once); and on non-first stages the
  gradient of each stage input: ``stage_backward`` (``_backward.py``) runs
  ``torch.autograd.backward`` on the stage output, which accumulates the input gradient into the
  ``.grad`` of the receive buffer (a leaf), and reads it from there to send it; nothing resets it
  until ``clear_runtime_states`` at the start of the next step (``a.buffer.grad = None``), so every
  microbatch whose backward has run keeps one (released right after the send only since
  pytorch/pytorch PR 164329, Oct 2025, which sets ``val.grad = None`` in ``stage_backward``).
  At the peak (the last time the rank's chunk-forwards in flight reach their maximum, every
  forward done) the chunk-backwards already run are the ``v (m - f)`` microbatches not in flight,
  the receive buffers not counted as stored inputs. Per rank holding ``v`` chunks, with ``m``
  microbatches, ``f`` of them in flight (their receive buffers are the stored first-layer inputs
  already counted) and ``x`` bytes per inter-stage tensor:
      held = x [2 m (v - last) + 2 (m - f)(v - first)] + last (m - 1) logits16
  (``last``/``first``: 1 on the rank with the last/first stage; ``logits16``: one
  microbatch's 16-bit vocab-sharded logits, the last stage's output; torchtitan 9dec370
  returns them from the model and upcasts inside the loss).
* **Sequence parallelism in DTensor** (``PrepareModuleInput`` to ``Replicate`` before the
  column-parallel QKV and MLP-in GEMMs, torchtitan ``parallelize_llama.apply_tp``): the
  all-gathered input is what the GEMM saves for its weight gradient, where Megatron keeps the
  shard and gathers again in backward (Korthikanti et al. 2022, Sec. 4.2.2, which the stored
  count in ``workload.activation_bytes_per_layer`` follows). Per layer, two gathered inputs
  of ``e`` bytes minus their shard: ``2 e s b h (1 - 1/t)``, ``e`` = 1 with FP8 (torchao
  ``Float8ColwiseParallel`` casts before the all-gather: the Float8 notes in the torchtitan
  docs folder, file float8), else 2; the output layer's gathered input (16-bit, not converted
  to FP8) at the loss.
* **Context parallelism** (``torch.distributed.tensor.experimental.context_parallel`` with
  torchtitan's default ``context_parallel_rotate_method = "allgather"``; ring attention in
  ``torch/distributed/tensor/experimental/_attention.py``, ``_templated_ring_attention`` and
  ``_templated_ring_attention_backward``). torchtitan 9dec370's ``Attention.forward``
  (``torchtitan/models/llama/model.py``) repeats the keys and values to every query head
  (``repeat_kv``) *before* ``scaled_dot_product_attention``, so the ring moves keys and values
  of width ``2 a d_h / t`` per token, not the GQA ``2 g d_h / t`` (16 times more for Llama 3.1
  405B, 4 times for 8B). With ``c`` = one rank's repeated key+value chunk (``s/cp`` tokens, 2 B):
  the backward of the recomputed layer's attention holds the all-gathered keys and values of
  the whole sequence (``_AllGatherRotater``: ``cp c``), the fp32 gradient accumulator of the
  queries (``convert_to_f32``: ``c``, queries being half the key+value width) and the fp32
  key/value gradients in flight around the ring (``dkv_rotater``, all-to-all: the one sent and
  the one received, ``2 x 2 c``): ``(cp + 5) c`` while cp > 1. The forward (and its recompute)
  holds less: the gather, the fp32 ``_SDPAMerger`` output (``c``) and one step's output.

**FP8 saved inputs** (``"megatron"``, Transformer Engine): with FP8 GEMMs, ``Linear`` /
``LayerNormLinear`` / ``LayerNormMLP`` save the quantized FP8 input (column-wise copy only) for
the weight-gradient GEMM instead of the 16-bit one (TransformerEngine
``transformer_engine/pytorch/module/linear.py``, ``_Linear.forward``: ``saved_inputmat = inputmat``
after ``update_usage(rowwise_usage=False, columnwise_usage=True)``): one byte less per element of
the four GEMM inputs of a layer, QKV and MLP-in (h each, sharded by sequence parallelism),
attention projection (h / t) and MLP-out (f / t).

``"deepspeed"``: DeepSpeed's ZeRO stage 3 as of 2021 (``deepspeed/runtime/zero/stage3.py``; defaults
in ``deepspeed/runtime/zero/constants.py`` of microsoft/DeepSpeed, commit 02a63e4). It registers its
gather and release hooks on every submodule that owns parameters, so what it holds unsharded is a
submodule's parameters, not a transformer layer's: two copies of the largest submodule's 16-bit
weights (the one computing and the next, prefetched, where ``stage3_max_live_parameters`` = 1e9
allows it; for matrices above that alone, as 530B's, the upper reading: the flat output
``torch.distributed.all_gather`` with a tensor list fills before it copies the chunks into the
parameter, docs/validation.md "Where the model is still wrong", DeepSpeed PR 1188), and in the backward that
submodule's 16-bit gradient plus one reduce bucket (``reduce_bucket_size`` = 5e8 elements). The largest submodule is
the fused QKV projection ``h (a + 2 g) d_h`` or the MLP input projection ``k h f`` (gate and up
fused, Megatron's ``dense_h_to_4h``): 1.68e9 parameters (3.4 GB in fp16) for the 530B GPT of
Narayanan et al. 2021, against 5.0e9 for its whole layer. DeepSpeed allocates them every step
through PyTorch's caching allocator, as FSDP2 does, so the allocator's reserve applies as for
``"torch"``.

**Gradients of one model chunk** (``"torch"``, interleaved schedule, unsharded gradients): each
model chunk is its own FSDP2 root (torchtitan 9dec370 ``train.py`` applies ``fully_shard`` per
``model_parts`` entry), and the pipeline stage turns gradient synchronisation off except on that
stage's last microbatch backward (torch ``pipelining/stage.py``, ``backward_maybe_with_nosync``:
``set_requires_gradient_sync(last_backward)``, pytorch/pytorch PR 127946 of June 2024; moved to the end
of the step only by PR 165106, Oct 2025). So a chunk's fp32 unsharded gradients exist from its first
backward to its last, when FSDP2 reduce-scatters and frees them. ``ScheduleInterleaved1F1B`` runs the
backwards in rounds of ``m / rounds`` microbatches per chunk, the rank's last chunk first
(``backward_stage_index`` in ``schedules.py``); with one round (m < 2 p; m = p is torchtitan's default)
a chunk finishes all its backwards before the next chunk starts, so at the activation peak (the first
backward, after the warm-up forwards) the rank holds the gradients of its last chunk alone: 1 / v of
its layers, with the output layer on the last rank. With two rounds or more every chunk has started
its backward while forwards continue, and the peak holds them all, as 1F1B does. Megatron-Core keeps
its gradient buffer for the whole run (``param_and_grad_buffer``): all of them.

ZeRO-3's unsharded layers in flight are in ``memory.py`` (every runtime); so is the caching
allocator's reserve over the torch and DeepSpeed runtimes' per-step allocations
(``calibration.ALLOCATOR_OVERHEAD``).
"""
from __future__ import annotations

import numpy as np
from hwmodels.select import where

from explore.model import context as ctx
from explore.model.memory import ZERO3_LAYERS_UNSHARDED, in_flight

DEEPSPEED_REDUCE_BUCKET_ELEMENTS = 5e8
"""DeepSpeed ZeRO ``reduce_bucket_size`` default (microsoft/DeepSpeed, deepspeed/runtime/zero/constants.py,
commit 02a63e4: ``ZERO_OPTIMIZATION_REDUCE_BUCKET_SIZE_DEFAULT = 500000000``)."""

def pipeline_held_bytes(stage_bytes, logits16_bytes, p, v, m, torch_rt):
    """(first, middle, last) rank bytes the torch pipelining runtime holds (module docstring)."""
    def rank(first, last, stage):
        f = in_flight(p, v, m, stage)
        # output chunks + gradient receive buffers (non-last); receive buffers not in flight + the input
        # gradients of the backwards already run, one each per microbatch not in flight (non-first)
        return (stage_bytes * (2.0 * m * (v - last) + 2.0 * (m - f) * (v - first))
                + last * np.maximum(m - 1.0, 0.0) * logits16_bytes)
    on = torch_rt & (p > 1)
    if not np.any(on):          # no design runs the torch runtime with stages: nothing held
        shape = np.broadcast_shapes(*(np.shape(a) for a in (stage_bytes, logits16_bytes, p, v, m, on)))
        return tuple(np.zeros(shape) for _ in range(3))
    return tuple(where(on, rank(a, b, s), 0.0) for a, b, s in ((1.0, 0.0, 0.0), (0.0, 0.0, 1.0),
                                                              (0.0, 1.0, p - 1.0)))


def gathered_input_bytes(tokens, hidden, tp, sp, fp8, torch_rt):
    """(per layer: the QKV and MLP GEMMs' saved gathered inputs, output layer's) extra bytes
    DTensor sequence parallelism stores beyond Megatron's shard."""
    on = torch_rt & sp & (tp > 1)
    gathered = tokens * hidden * (1.0 - 1.0 / tp)
    layer = where(on, 2.0 * where(fp8, 1.0, 2.0) * gathered, 0.0)
    head = where(on, 2.0 * gathered, 0.0)
    return layer, head


def one_chunk_gradients(p, v, m, torch_rt):
    """Whether the peak holds the gradients of one model chunk per rank (module docstring): torch
    runtime, interleaved (v > 1) with one backward round per chunk (m < 2 p)."""
    return torch_rt & (p > 1) & (v > 1) & (m < 2.0 * p)


CP_RING_BACKWARD_CHUNKS = 5.0
"""Repeated key+value chunks (2 B) the ring-attention backward holds besides the all-gathered
sequence: fp32 query-gradient accumulator (1) and the fp32 key/value gradients sent and received
around the ring (2 x 2); module docstring."""


def repeated_kv_chunk_bytes(m, micro, cp, tp, element_bytes=2.0):
    """One rank's key+value chunk after torchtitan's ``repeat_kv`` (every query head):
    (s/cp) b 2 a d_h e / t; MLA keys and values already carry every head (``context.kv_chunk_bytes``)."""
    from explore.model.attention import is_mla
    repeated = m.seq_len / cp * micro * 2.0 * m.heads * m.head_dim * element_bytes / tp
    return where(is_mla(m), ctx.kv_chunk_bytes(m, micro, cp, tp, element_bytes), repeated)


def cp_gather_bytes(m, micro, cp, tp, torch_rt, element_bytes=2.0):
    """Ring-attention buffers on one rank while the recomputed layer's attention runs its backward
    (all-gather CP, torch runtime): (cp + 5) repeated key+value chunks (module docstring)."""
    c = repeated_kv_chunk_bytes(m, micro, cp, tp, element_bytes)
    return where(torch_rt & (cp > 1), (cp + CP_RING_BACKWARD_CHUNKS) * c, 0.0)



def fp8_saved_input_savings(tokens, hidden, mlp_inner, tp, sp, fp8, torch_rt):
    """Bytes per layer Transformer Engine saves by keeping FP8 (1 B) GEMM inputs (module docstring)."""
    per_token = 2.0 * hidden / where(sp, tp, 1.0) + (hidden + mlp_inner) / tp
    return where(fp8 & ~torch_rt, tokens * per_token, 0.0)


def largest_submodule_params(m, tp):
    """Parameters of a layer's largest submodule on one tensor-parallel rank: the fused QKV
    projection h (a + 2 g) d_h or the MLP input projection k h f (k = 2 gated, gate and up fused)."""
    from explore.model.workload import is_moe
    f = where(is_moe(m), m.moe_ffn_hidden, m.ffn_hidden)
    qkv = m.hidden * (m.heads + 2.0 * m.kv_heads) * m.head_dim
    mlp_in = where(m.gated_mlp, 2.0, 1.0) * m.hidden * f
    return np.maximum(qkv, mlp_in) / tp


def deepspeed_zero3_unsharded(m, tp, layer_params, deepspeed):
    """(16-bit weights, gradients) in parameters that ZeRO-3 holds unsharded: DeepSpeed (module
    docstring) two submodules' weights and one submodule's gradients plus a reduce bucket; otherwise
    ``memory.py``'s two layers' weights and one layer's gradients."""
    sub = largest_submodule_params(m, tp)
    w = where(deepspeed, 2.0 * sub, ZERO3_LAYERS_UNSHARDED * layer_params)
    g = where(deepspeed, sub + DEEPSPEED_REDUCE_BUCKET_ELEMENTS, layer_params)
    return w, g
