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
# sum |log(predicted/published step time)|^6, which weighs the worst runs) over the 36 runs of
# the calibration set (tests/validation/published_runs.csv and comm_runs.csv without the
# held-out MT-NLG runs; A100: Narayanan 2021 Table 1, Korthikanti 2022 Table 5, MegaScale 2024
# Table 2, BLOOM; H100: Megatron-Core weak scaling), each constant inside the cited range of
# explore.validation.FIT_BOUNDS. Result: MAPE 5.10 %, max 12.7 % (Korthikanti 1T full recompute);
# refitted after the collective model's protocol choice (Simple pipeline time, issue 10): was
# MAPE 5.00 %, max 12.3 % with gemm 0.8009, hbm 0.6141, overlap slowdown 0.03875. Per-run errors in
# tests/validation/last_report.txt, full_report.txt and README.md.
# The two link efficiencies are measured bus bandwidths (not fitted on training runs).
# flash_attention_efficiency sits at the lower end of its cited range (0.3): the small
# Megatron-Core H100 runs are slower than the model, which it absorbs as far as it may.


@dataclass(frozen=True)
class Calibration:
    gemm_efficiency: float = 0.8008
    """Fraction of the accelerator's maximum achievable matmul rate (catalog ``matmul_peak_fraction``
    x dense peak, a measured best-shape figure) that a training step's GEMMs reach."""
    gemm_overhead_s: float = 0.0
    """Fixed time per GEMM kernel (launch, wave quantisation tail). Not fitted: the fit drives it to 0
    on the calibration set (its GEMMs are all large), so it stays 0 unless a user sets it."""
    hbm_efficiency: float = 0.6341
    """Fraction of HBM bandwidth that memory-bound kernels (norms, softmax, activations, optimizer) reach."""
    link_efficiency: float = 0.775
    """Fraction of a scale-up link's nominal per-direction bandwidth that collectives reach (bus
    bandwidth). Measured, not fitted on training runs: nccl-tests all_reduce_perf on one 8 x A100
    SXM node, 232.5 GB/s bus bandwidth of 300 GB/s (tests/validation/collective_bench.csv; NCCL's
    own tuning caps A100 bus bandwidth at 235 GB/s, src/graph/tuning.cc)."""
    scale_out_link_efficiency: float = 0.86
    """Fraction of a NIC's nominal per-direction bandwidth that inter-domain collectives reach.
    Measured: nccl-tests all_reduce_perf across two 8 x A100 nodes with 4 x HDR 200 Gb/s each,
    86 GB/s of 100 GB/s (tests/validation/collective_bench.csv)."""
    overlap_slowdown: float = 0.03621
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
