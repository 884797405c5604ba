"""Named calibration constants of the step-time model.

Each constant is physically meaningful, shared by every design (never one per
run), and fitted by ``python -m explore.validation --fit`` on the published runs in
``tests/validation/published_runs.csv``. The
fitted values, the fit's method and the error each leaves are recorded here
and in README.md (current figures; detail in docs/validation.md); ``tests/validation/test_published_runs.py`` asserts the
error bounds per run.
"""
from __future__ import annotations

from dataclasses import dataclass


# Fitted by `python -m explore.validation --fit` (scipy least_squares minimising
# sum |log(predicted/published step time)|^6, which weighs the worst runs) over the 42 runs of
# the calibration set (tests/validation/published_runs.csv and comm_runs.csv without the
# held-out MT-NLG, DeepSpeed ZeRO-3 and llm-foundry FSDP runs; A100: Narayanan 2021 Tables 1 and 2 (PTD-P rows),
# Korthikanti 2022 Table 5, MegaScale 2024 Table 2, BLOOM; H100: Megatron-Core weak scaling), each
# constant inside the cited range of explore.validation.FIT_BOUNDS. Result when fitted: MAPE 3.65 %,
# max 10.7 % (mcore 32B). Not refitted in session 7 of issue 10: with its mechanisms (the distributed
# optimizer's parameter gather in its own window, the 32B row at microbatch 2) these constants give
# 3.48 % / 9.46 %, and a refit would give gemm 0.8403, hbm 0.6402, overlap_slowdown 0.020 (3.51 % /
# 8.86 %; tests/validation/full_report.txt). Last refitted in session 6 of issue 10 after the per-microbatch gradient accumulation
# (parallelism.grad_accumulation) and Narayanan 2021 Table 1's plan facts from its run script
# (gemm 0.8333 -> 0.8426, hbm 0.6697 -> 0.6325; MAPE 3.60 % / max 10.91 % before it); refitted after NCCL's protocol choice by its own estimates (issue 10, session 5:
# gemm 0.8331 -> 0.8333, hbm 0.6649 -> 0.6697; MAPE 3.47 % / max 10.98 % before it); refitted with Narayanan 2021 Table 2's six PTD-P runs added (issue 10; before: 36
# runs, MAPE 3.82 %, gemm 0.8332; earlier, before the collective protocol choice: MAPE 3.85 %,
# gemm 0.8321, hbm 0.6446). Per-run errors in
# tests/validation/last_report.txt, full_report.txt, README.md and docs/validation.md.
# The two link efficiencies are measured bus bandwidths (not fitted on training runs).
# flash_attention_efficiency sits at the lower end of its cited range (0.3): the small
# Megatron-Core H100 runs are slower than the model, which it absorbs as far as it may;
# overlap_slowdown sits at the lower end of its range (0) since the per-step gradient-buffer
# passes and the fp32 cross-entropy were added (README "Validation and calibration").


@dataclass(frozen=True)
class Calibration:
    gemm_efficiency: float = 0.8426
    """Fraction of the accelerator's maximum achievable matmul rate (catalog ``matmul_peak_fraction``
    x dense peak, a measured best-shape figure) that a training step's GEMMs reach."""
    gemm_overhead_s: float = 0.0
    """Fixed time per GEMM kernel (launch, wave quantisation tail). Not fitted: the fit drives it to 0
    on the calibration set (its GEMMs are all large), so it stays 0 unless a user sets it."""
    hbm_efficiency: float = 0.6325
    """Fraction of HBM bandwidth that memory-bound kernels (norms, softmax, activations, optimizer) reach."""
    # the scale-up (NVLink-class) efficiency is a measured figure per link generation, not a constant
    # here: catalog links.toml ``bus_efficiency`` (SystemSpec.su_bus_efficiency)
    scale_out_link_efficiency: float = 0.86
    """Fraction of a NIC's nominal per-direction bandwidth that inter-domain collectives reach.
    Measured: nccl-tests all_reduce_perf across two 8 x A100 nodes with 4 x HDR 200 Gb/s each,
    86 GB/s of 100 GB/s (tests/validation/collective_bench.csv)."""
    overlap_slowdown: float = 0.0
    """Slowdown of compute while a collective runs under it (SM and HBM contention), per second
    of overlapped communication (explore.model.overlap). Cited range 0-0.40, mean 0.189:
    arXiv:2507.03114 (2025), A100/H100/MI250/MI210 measurements."""
    flash_attention_efficiency: float = 0.30
    """Attention-core FLOP rate of a fused (flash) attention kernel relative to GEMM efficiency.
    Fitted only by the H100 runs (the A100 runs used unfused attention); it also absorbs whatever
    else makes small-hidden, long-sequence models slow, so treat it as an effective value."""


DEFAULT = Calibration()

# Estimates (not fitted): bytes moved by memory-bound work, from kernel-by-kernel counting.
MEMBOUND_BYTES_PER_SBH_REPLICATED = 22.0
"""Per layer forward: two layer norms (4 s b h each, read + write), two fused
bias-dropout-residual adds (7 s b h each: two reads, a write, a mask) = 22 s b h
bytes; replicated across the tensor group unless sequence parallelism shards it.
With ``model.hidden_dropout`` 0 the adds write no mask (``HIDDEN_DROPOUT_FWD_BYTES_PER_SBH``)."""
HIDDEN_DROPOUT_FWD_BYTES_PER_SBH = 2.0
"""The dropout part of that count: each of the two adds writes a 1-byte mask (1 s b h each). Megatron-Core's
bias-dropout-add (megatron/core/fusions/fused_bias_dropout.py ``_bias_dropout_add_func``, Megatron-LM
d98e8a64dd) calls ``torch.nn.functional.dropout(x, p=prob)`` and then adds the residual; PyTorch takes
the fused dropout kernel (which writes the mask) only when ``0 < p < 1`` (ATen Dropout.cpp
``is_fused_kernel_acceptable``) and otherwise returns the input when ``p == 0`` (``_dropout_impl``), so at
``hidden_dropout`` 0 the add reads two tensors and writes one (6 s b h): 20 s b h per layer."""
HIDDEN_DROPOUT_BWD_BYTES_PER_SBH = 10.0
"""The backward's dropout passes, per layer: dropout's backward multiplies the incoming gradient by the
saved mask and the scale (ATen Dropout.cpp ``native_dropout_backward``: ``grad * mask * scale``): read
the gradient (2) and the mask (1), write the gradient (2) = 5 s b h, twice. At ``hidden_dropout`` 0 there
is no dropout node in the graph (its forward returned its input), so these passes are not run. The rest
of the backward's memory-bound work stays 2 x the forward's count (layer_compute); at dropout > 0 this
10 s b h is inside that 2 x 22 s b h estimate, so models with dropout keep today's figure."""
SOFTMAX_BYTES_PER_SCORE = 9.0
"""Unfused attention, per score element and head: scale-mask-softmax read+write
(4 bytes) and dropout read, write and mask (5 bytes, ``ATTENTION_DROPOUT_BYTES_PER_SCORE``)."""
ATTENTION_DROPOUT_BYTES_PER_SCORE = 5.0
"""The attention-dropout part of that count (read 2, write 2, mask 1), not run at ``model.attention_dropout``
0 (PyTorch returns the softmax output itself, as above); the backward stays 2 x the forward's count."""
LOGITS_FWD_BYTES_PER_ELEMENT = 38.0
"""Unfused vocabulary-parallel cross-entropy forward, per logit (Megatron-LM
megatron/core/tensor_parallel/cross_entropy.py, tag core_r0.8.0; the same kernels in the
2021-22 megatron/mpu/cross_entropy.py, called on ``output.float()``): cast the 16-bit logits
to fp32 (read 2, write 4), max over the vocabulary (read 4), subtract the max in place
(read 4, write 4), exp in place (read 4, write 4), sum (read 4), divide by the sum in place to
keep the softmax for backward (read 4, write 4) = 38 bytes."""
LOGITS_BWD_BYTES_PER_ELEMENT = 14.0
"""Its backward, per logit: scale the saved softmax by the incoming gradient in place (read 4,
write 4; the target-logit update is one element per token) and autograd's cast of the fp32
gradient back to 16 bits for the output-layer GEMMs (read 4, write 2) = 14 bytes."""
TE_LOGITS_FWD_BYTES_PER_ELEMENT = 6.0
"""Transformer Engine's fused cross-entropy forward (``training.loss_kernel = "te"``: Megatron-Core
``cross_entropy_loss_fusion`` True with ``cross_entropy_fusion_impl = "te"``, language_module.py
``compute_language_model_loss`` -> ``te_parallel_cross_entropy``, Megatron-LM 92c8482e6d), per logit,
on the 16-bit logits the output layer wrote: TE release_v2.9
transformer_engine/pytorch/triton/cross_entropy.py ``cross_entropy_forward`` runs
``online_softmax_kernel`` (reads each logit once, 2 B, writes max / sum / target logit per row) and
``cross_entropy_kernel`` (reads each logit again, 2 B, and writes its gradient in place into the input
buffer in the input's dtype, 2 B) = 6 bytes; the per-row values are negligible."""
TE_LOGITS_BWD_BYTES_PER_ELEMENT = 4.0
"""Its backward (``cross_entropy_backward``): ``element_mul_kernel`` scales the gradient stored in the
forward by the per-token incoming gradient in place (read 2, write 2) = 4 bytes. It is skipped only
when the incoming gradient is the scalar 1.0; Megatron's loss multiplies the per-token losses by the
loss mask before reducing them, and under full-iteration CUDA graphs (``is_cg_capturable``) the check
is not made, so it runs. No cast follows: the gradient is already in the logits' 16-bit dtype."""
EMBEDDING_GRAD_BYTES_PER_PARAM = 12.0
"""Input-embedding backward, per embedding parameter (V h / t) and microbatch: PyTorch's dense
embedding backward writes a V x h 16-bit gradient (2 B; the scatter of the b s token rows is
small), which Megatron's gradient hook adds into the fp32 main gradient
(``param.main_grad.add_(param.grad)``: read 4 + 2, write 4) = 12 bytes. The linear layers
accumulate into main_grad inside their weight-gradient GEMM (gradient-accumulation fusion),
so this pass is the embedding's alone (unless ``parallelism.grad_accumulation`` is hook or autograd: step.py)."""
GRAD_BUFFER_PASSES = 4.0
"""Passes over the local gradient buffer (elements of ``grad_reduce_bytes``, every local
parameter: the distributed optimizer does not shard it) once per step, outside the optimizer:
zero it before the step
(one write), the NaN check's norm before the reduction (one read) and the 1/dp scaling
(read + write). Megatron-Core core_r0.8.0 megatron/core/distributed/param_and_grad_buffer.py
(``Bucket.start_grad_sync``: ``grad_data.norm``, ``grad_data *= gradient_scaling_factor``;
``ParamAndGradBuffer.reset``: ``grad_data.zero_()``); Megatron-LM 2021-22's local DDP zeroes
and divides its buffer the same way (its NaN check runs on the optimizer's main gradients).
ZeRO-2/3 (FSDP, DeepSpeed) scale the unsharded gradients before every microbatch's
reduce-scatter (FSDP's ``_div_if_needed(unsharded_grad, ...)``) and zero only their shard:
the same count, once per step, is a lower bound there."""
OPTIMIZER_BYTES_PER_PARAM = 30.0
"""Adam step per (ZeRO-sharded) parameter: read fp32 grad, master weight, m, v (16 B); write
master, m, v (12 B), 16-bit weight (2 B). Zeroing the gradient is in ``GRAD_BUFFER_PASSES``."""
MEMORY_RESERVED_BYTES = 3e9
"""Per device, outside the framework's caching allocator: CUDA/runtime context and communication
library buffers (estimate, a few GB on 80 GB parts)."""
ALLOCATOR_OVERHEAD = 0.195
"""Memory the caching allocator reserves beyond the peak of the per-step allocations (fragmentation
and cached blocks), as a fraction of them (explore.model.memory.peak_memory). Fitted on
torchtitan's published peak reserved memory (tests/validation/memory_runs.csv,
``python -m explore.validation_memory --fit``: MAPE 3.69 % over 11 runs, mean signed error -0.6 %;
14.5 % with no reserve, 4.4 % at 0.175, 4.1 % at 0.215, the value before the ring-attention
buffers of context parallelism were counted, runtime_memory.cp_gather_bytes). Physical range: GMLake (Guo et al., ASPLOS 2024,
arXiv:2401.08156) measures PyTorch's caching allocator on eight LLMs (A100 80 GB, recompute, ZeRO)
at 15 % fragmentation of reserved memory on average, up to 33 % (0.18 and 0.49 of the allocated).
Applied to the ``torch`` runtime only (``parallelism.runtime``), where it was fitted: no published
Megatron-Core peak-reserved figure is at hand to fit it on, and Megatron's per-step allocations
(activations of identical shape every microbatch; weights and gradients in buffers allocated once)
fragment less: with 0.215 on its activations, Llama 3 405B's published plan (tests/explore/test_memory.py,
run on 80 GB H100s) would not fit."""

# Memory-bound kernels of MPT in eager PyTorch, as llm-foundry ran its H100 benchmarks
# (``training.elementwise_kernels = "llm-foundry"``). Estimates (not fitted), counted kernel by kernel
# from the code that ran: mosaicml/llm-foundry commit 5e85bd62d4ec9e13353ca95877477602ab538e5b (the
# commit that added the "H100 80GB BF16 (Large Scale, >= 128 GPUs)" table and its sweep.py):
# llmfoundry/models/layers/blocks.py (MPTBlock.forward: norm_1, attention, residual add, norm_2, FFN,
# residual add; resid_pdrop 0, so nn.Dropout returns its input), norm.py (LPLayerNorm: torch's
# layer_norm on bf16 inputs; FSDP mixed precision DEFAULT keeps bf16 parameters, so the casts are no-ops),
# ffn.py (MPTMLP: up_proj, F.gelu, down_proj; biases, no_bias False), attention.py (one fused Wqkv GEMM,
# split into views; flash_attn_fn unpads query, key and value with flash-attn's
# bert_padding.unpad_input and pads the output back), setup.py (torch 2.1.0, the gpu-flash2 extra:
# flash-attn 2.4.2); flash-attn v2.4.2 flash_attn/bert_padding.py (IndexFirstAxis: torch.gather forward,
# torch.zeros + scatter_ backward, over a broadcast index; IndexPutFirstAxis: torch.zeros + index put
# forward, an index gather backward). Bytes per element of b s h (16-bit activations); the ffn-width
# terms per element of b s f. Kernels inside the attention call (flash-attn's own pre/post passes)
# stay in flash_attention_efficiency, as for Megatron.
FOUNDRY_FWD_BYTES_PER_SBH = 20.0
"""Forward, per layer: two LayerNorms (read 2, write 2: 8) and two residual adds (read 2 + 2, write 2:
12) = 20. Plus the GELU over the FFN width (read 2, write 2 per element of b s f), as in the default
count."""
FOUNDRY_BWD_BYTES_PER_SBH = 54.0
"""Backward, per layer: two LayerNorm backwards (torch's input-gradient kernel reads dy and x and writes
dx: 6; its weight/bias-gradient kernel reads dy and x again: 4; 20 for two), the two residual
branches' gradient sums (autograd adds the two incoming gradients: read 2 + 2, write 2; 12 for two),
the bias-gradient reductions of Wqkv, out_proj and down_proj (read the output gradient, 2 B per output
element: 3 h + h + h, 10) and the split's backward concatenating the query, key and value gradients
into the Wqkv output gradient (read 2, write 2 over 3 h: 12) = 54."""
FOUNDRY_UNPAD_FWD_BYTES_PER_SBH = 18.0
"""``attn_impl: flash`` (flash-attn 2 varlen) only, forward: the unpadding gathers of query, key and
value (read 2, write 2 each: 12) and the padding of the attention output (a zeroed buffer, then the rows
put in: write 2, read 2, write 2: 6) = 18. ``attn_impl: triton`` (llm-foundry's flash_attn_triton.py)
takes the strided views as they are."""
FOUNDRY_UNPAD_BWD_BYTES_PER_SBH = 22.0
"""Its backward: the padding's gather (read 2, write 2: 4) and the unpadding gathers' zeroed buffer +
scatter (write 2, read 2, write 2, for each of query, key and value: 18) = 22."""
FOUNDRY_BWD_BYTES_PER_FFN_ELEMENT = 8.0
"""Backward, per element of b s f: GELU's backward (read the gradient and the input, write: 6) and the
up_proj bias-gradient reduction (read 2) = 8 (the default count charges 2 x the forward's 4)."""
FOUNDRY_LOGITS_FWD_BYTES_PER_ELEMENT = 2.0
"""flash-attn's Triton cross-entropy (flash_attn/ops/triton/cross_entropy.py, v2.4.2; llm-foundry's
default ``loss_fn: fused_crossentropy``, llmfoundry/models/mpt/modeling_mpt.py), called on the bf16
logits: the forward kernel reads each logit once (2 B) and writes one log-sum-exp per row."""
FOUNDRY_LOGITS_BWD_BYTES_PER_ELEMENT = 4.0
"""Its backward kernel reads each logit again and writes its gradient into a new bf16 tensor
(``inplace_backward`` False): 2 + 2 = 4 B."""
TRAIN_METRIC_BYTES_PER_ELEMENT = 14.0
"""One training metric's cross-entropy, per logit and microbatch, after the backward
(``training.train_metrics`` counts them): llm-foundry's
ComposerMPTCausalLM registers LanguageCrossEntropy and LanguagePerplexity as train metrics
(llmfoundry/models/mpt/modeling_mpt.py, ``use_train_metrics`` default True, commit 5e85bd62d; the
benchmark yamls leave it on), and Composer v0.17.2 (llm-foundry's pin, ``mosaicml>=0.17.2,<0.18``)
updates them after every microbatch's backward (composer/trainer/trainer.py ``_train_microbatches`` ->
``_eval_train_metrics``: ``eval_forward`` reuses the training outputs, then ``update_metric`` per
metric under the bf16 autocast context). Each update (composer/metrics/nlp.py,
``LanguageCrossEntropy.update``; LanguagePerplexity subclasses it) calls torch's
``CrossEntropyLoss(reduction='sum')`` on the bf16 logits, which autocast runs in fp32 (PyTorch 2.1
docs, amp.rst, "CUDA Ops that can autocast to float32": cross_entropy): the cast (read 2, write 4)
and log_softmax's output (read 4, write 4) = 14 B per metric (llm-foundry: two). A lower bound on the HBM
traffic: torch 2.1's cunn_SoftMaxForward (rows of 50,368 fp32 exceed its 48 KB shared-memory path)
reads each row three times (max, sum of exponentials, output); the two re-reads (8 B per metric) are
not counted, as they may hit L2. nll_loss reads one element per row (not counted)."""

TRAIN_METRIC_STATES = 2.0
"""Tensor states per training metric that torchmetrics synchronizes when the metric is computed
(``training.train_metrics`` counts the metrics): Composer's LanguageCrossEntropy registers
``sum_loss`` and ``total_items`` (``add_state``, composer/metrics/nlp.py at v0.17.2, commit
7e0e40a72a6b); LanguagePerplexity subclasses it and adds none. A count read from the code, not a
fitted constant. Used for the per-step metric synchronization in ``host_syncs.py``: Composer v0.17.2
computes the training metrics after every batch (composer/trainer/trainer.py ``_train_loop`` ->
``_compute_and_log_metrics`` -> ``Metric.compute``), and torchmetrics below 1.1 (Composer 0.17.2's
pin ``torchmetrics>=0.10.0,<1.1``, setup.py) syncs each state with ``gather_all_tensors``
(src/torchmetrics/utilities/distributed.py at v1.0.3, commit 5988d3761943): a ``barrier`` over all
ranks, then ``world_size`` ``zeros_like`` tensors built in Python and a list-form ``all_gather``."""
