"""Overlap of communication streams with compute, as scheduled streams.

A *window* is compute wall time a communication *stream* may run under. Two rules
keep the model honest and monotone (faster links never lengthen a step):

* a window hides one stream once: streams that share a window (or a link) are
  summed before they meet it, never each compared with the whole window;
* hiding is not free: while a stream runs under compute it takes SMs and HBM
  bandwidth from it, so the overlapped part slows compute by a factor kappa
  (``Calibration.overlap_slowdown``).

For one stream of time ``comm`` under a window ``window``:

    T = max(window, comm) + kappa * min(window, comm)

which is non-decreasing in both arguments for 0 <= kappa <= 1, and never below
the window (exposed time never negative).

For a step with several windows nested in the compute time C (each stream can
only start after some compute ``C - W_i`` has run), the wall time is bounded
below by every schedule constraint,

    T_core = max(C, max_i (B_i + comm_i), sum_i comm_i),   B_i = C - W_i

(the link serialises the streams that share it), and the overlapped
communication D - (T_core - C) slows compute by kappa:

    T = (1 - kappa) T_core + kappa (C + D),   D = sum_i comm_i,

non-decreasing in every comm_i, every C - W_i and C. References: the overlap
windows of Megatron-LM (Narayanan et al. 2021, Sec. 4; --overlap-grad-reduce
buckets issued as the backward pass produces them); compute slowdown under
overlapped collectives: "Characterizing Compute-Communication Overlap in
GPU-Accelerated Distributed Deep Learning" (arXiv:2507.03114, 2025, abstract and
Sec. 4) measures 18.9 % on average, 40 % at most, on A100, H100, MI250 and MI210.
"""
from __future__ import annotations

import numpy as np


def hide(window, comm, slowdown):
    """Wall time of ``window`` of compute with one stream ``comm`` overlapped:
    max(window, comm) + slowdown * min(window, comm)."""
    window = np.asarray(window, dtype=float)
    comm = np.asarray(comm, dtype=float)
    return np.maximum(window, comm) + slowdown * np.minimum(window, comm)


def nested(compute, streams, slowdown, bounds=()):
    """Wall time of ``compute`` (s) with ``streams``, a list of (comm, before) pairs on one link.

    A stream can only start after ``before`` seconds of the compute (its window is the
    remaining ``compute - before``; ``before`` must be a sum of non-negative terms of
    ``compute`` so both are monotone); streams on the same link serialise.
    ``bounds`` are further lower bounds on the wall time (e.g. compute + the last bucket,
    which can only start when the compute has ended); each must be monotone too.
    Returns (wall time, exposed communication time T_core - C >= 0)."""
    compute = np.asarray(compute, dtype=float)
    total = sum((np.asarray(c, dtype=float) for c, _ in streams), np.zeros_like(compute))
    core = np.maximum(compute, total)
    for comm, before in streams:
        core = np.maximum(core, before + comm)
    for b in bounds:
        core = np.maximum(core, b)
    wall = (1.0 - slowdown) * core + slowdown * (compute + total)
    return wall, core - compute


def hook_serialized(window, comm, calls, slowdown):
    """Exposed time of ``calls`` communication calls issued one behind the compute they follow.

    DeepSpeed 2021 stage 3's gradient reduction: the gradient hook of weight k issues the
    reduce-scatter of weight k - 1 and the gather before weight k + 1 synchronizes the device, so each
    call can hide only under one ``window`` of compute (a weight's backward GEMMs), and the last call,
    issued in the backward's epilogue, is exposed whole:

        (calls - 1) * (hide(window, comm) - window) + comm

    (checked against an event simulation of the hook order, tests/explore/test_overlap.py)."""
    per_call = hide(window, comm, slowdown) - np.asarray(window, dtype=float)
    return np.maximum(np.asarray(calls, dtype=float) - 1.0, 0.0) * per_call + np.asarray(comm, dtype=float)


def per_chunk_reduce(compute, bwd_stage, v, group, comm):
    """(before, bound) of the data-parallel gradient reduction when each of ``v`` model chunks has its own
    buffers (Megatron-Core interleaved, v > 1), for ``overlap.nested``.

    megatron/core/distributed/distributed_data_parallel.py keeps one DDP wrapper, buffers and bucket groups
    per model chunk; forward_backward_pipelining_with_interleaving (pipeline_parallel/schedules.py,
    backward_step_helper_preprocess / _postprocess, NVIDIA/Megatron-LM 92c8482e6d, addc601f57) enables a
    chunk's gradient sync for its last microbatch's backward only. In the cool-down the last group of
    ``group`` microbatches (microbatch_group_size_per_vp_stage, p) runs chunk v - 1 first and chunk 0 last,
    so chunk j's reduction (comm / v) may start at its last backward, (j group + 1) chunk backwards
    (bwd_stage / v each) before the compute ends. On one link, first come first served, the step ends no
    earlier than max_j (start_j + the reductions of chunks j .. 0), linear in j: the earliest chunk's
    start with all of ``comm`` (returned as the stream's ``before``) or chunk 0's alone (``bound``).
    Checked against a queue simulation of the cool-down order (tests/explore/test_overlap_per_chunk.py)."""
    v = np.asarray(v, dtype=float)
    chunk = np.asarray(bwd_stage, dtype=float) / v
    before = np.asarray(compute, dtype=float) - ((v - 1.0) * group + 1.0) * chunk
    bound = np.asarray(compute, dtype=float) - chunk + np.asarray(comm, dtype=float) / v
    return before, bound


def userbuffers_exposed(gemms, gather, scatter, reduce_pass, tp, slowdown):
    """Exposed (forward, backward) time of one layer's tensor-parallel collectives under Transformer
    Engine's userbuffers overlap (Megatron-Core tp_comm_overlap, ``parallelism.tp_overlap`` per_gemm),
    as the FP8 layouts of Megatron-Bridge's comm_overlap.py userbuffers_fp8_{b200_h16384_tp4,
    h100_h16384_tp8}_cp2_mbs1_seqlen8192 place them: each collective is fused into one GEMM call and
    waited at its end (transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp, release_v2.9:
    the main stream waits on the send/recv streams before the call returns), so it hides under that
    GEMM only, never under the layer's others.

    ``gemms`` = (qkv, proj, fc1, fc2) forward GEMM times; a backward data- or weight-gradient GEMM
    takes the same time. ``gather`` / ``scatter``: one all-gather / reduce-scatter of the layer's
    sequence-parallel activation over the tensor group; ``reduce_pass``: the HBM pass that sums a
    ring reduce-scatter's tp received chunks (reduce_bf16 / reduce_fp8_in_bf16_out, on the main stream
    after the last chunk).

    * ring exchange (split_overlap_ag / split_overlap_rs; qkv, fc1 forward all-gathers, proj, fc2
      forward reduce-scatters, proj, fc2 data-gradient all-gathers): the GEMM runs in tp chunks, the
      first (all-gather) or last (reduce-scatter) without a transfer beside it, so the window is
      (tp - 1) / tp of the GEMM; a reduce-scatter adds its reduce pass;
    * bulk (bulk_overlap; qkv, fc1 backward): the input all-gather for the weight gradient under the
      data-gradient GEMM, the data gradient's reduce-scatter under the weight-gradient GEMM, whole.

    Each exposure is hide(window, comm) - window (the overlap slowdown applies to the hidden part), so
    the layer's wall time, GEMMs + exposures, is non-decreasing in every GEMM and every collective."""
    qkv, proj, fc1, fc2 = (np.asarray(g, dtype=float) for g in gemms)
    r = (np.asarray(tp, dtype=float) - 1.0) / np.asarray(tp, dtype=float)

    def exp(window, comm):
        return hide(window, comm, slowdown) - np.asarray(window, dtype=float)

    fwd = (exp(r * qkv, gather) + exp(r * proj, scatter) + exp(r * fc1, gather) + exp(r * fc2, scatter)
           + 2.0 * np.asarray(reduce_pass, dtype=float))
    bwd = (exp(r * proj, gather) + exp(r * fc2, gather)
           + exp(qkv, gather) + exp(qkv, scatter) + exp(fc1, gather) + exp(fc1, scatter))
    return fwd, bwd
