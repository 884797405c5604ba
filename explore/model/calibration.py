"""Named calibration constants of the step-time model.

Each constant is physically meaningful, shared by every design (never one per
run), and fitted by ``python -m explore.validation --fit`` on the published runs in
``tests/validation/published_runs.csv``. The
fitted values, the fit's method and the error each leaves are recorded here
and in README.md; ``tests/validation/test_published_runs.py`` asserts the
error bounds per run.
"""
from __future__ import annotations

from dataclasses import dataclass


# Fitted by `python -m explore.validation --fit` (scipy least_squares minimising
# sum |log(predicted/published step time)|^6, which weighs the worst runs) over all 27 runs of
# tests/validation/published_runs.csv (A100: Narayanan 2021 Table 1, Korthikanti 2022 Table 5;
# H100: Megatron-Core weak scaling). Result: MAPE 3.94 %, max 11.4 % (mcore 32B); per-run
# errors in tests/validation/last_report.txt and README.md "Validation".
# scale_out_link_efficiency sits at its upper bound 1.0: the data would like even less exposed
# data-parallel communication than the model has (most likely Megatron-Core hides more of the
# gradient reduction than "overlap with the last microbatch's backward", as the model assumes);
# read scale-out-bound results with that in mind.


@dataclass(frozen=True)
class Calibration:
    gemm_efficiency: float = 0.7525
    """Fraction of the dense peak that large GEMMs reach (matrix units busy, tiles full)."""
    gemm_overhead_s: float = 0.0
    """Fixed time per GEMM kernel (launch, wave quantisation tail). Not fitted: the fit drives it to 0
    on the calibration set (its GEMMs are all large), so it stays 0 unless a user sets it."""
    hbm_efficiency: float = 0.6583
    """Fraction of HBM bandwidth that memory-bound kernels (norms, softmax, activations, optimizer) reach."""
    link_efficiency: float = 0.6605
    """Fraction of a scale-up link's nominal per-direction bandwidth that collectives reach (bus bandwidth)."""
    scale_out_link_efficiency: float = 1.0
    """Fraction of a NIC's nominal per-direction bandwidth that inter-domain collectives reach."""
    flash_attention_efficiency: float = 0.2726
    """Attention-core FLOP rate of a fused (flash) attention kernel relative to GEMM efficiency.
    Fitted only by the H100 runs (the A100 runs used unfused attention); it also absorbs whatever
    else makes small-hidden, long-sequence models slow, so treat it as an effective value."""


DEFAULT = Calibration()

# Estimates (not fitted): bytes moved by memory-bound work, from kernel-by-kernel counting.
MEMBOUND_BYTES_PER_SBH_REPLICATED = 22.0
"""Per layer forward: two layer norms (4 s b h each, read + write), two fused
bias-dropout-residual adds (7 s b h each: two reads, a write, a mask) = 22 s b h
bytes; replicated across the tensor group unless sequence parallelism shards it."""
SOFTMAX_BYTES_PER_SCORE = 9.0
"""Unfused attention, per score element and head: scale-mask-softmax read+write
(4 bytes) and dropout read, write and mask (5 bytes)."""
LOGITS_BYTES_PER_ELEMENT = 16.0
"""Cross-entropy over the vocabulary, per logit: fp32 write, softmax read, gradient write and read (4 x 4 bytes)."""
OPTIMIZER_BYTES_PER_PARAM = 32.0
"""Adam step per parameter: read fp32 grad, master weight, m, v (16 B); write master, m, v (12 B), bf16 weight (2 B), zero grad (2 B)."""
MEMORY_RESERVED_BYTES = 3e9
"""Per device: CUDA/runtime context, communication buffers and allocator fragmentation (estimate, a few GB on 80 GB parts)."""
