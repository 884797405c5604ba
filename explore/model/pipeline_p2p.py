"""Pipeline point-to-point time between stages (one device of the slowest stage, per step).

Activations and their gradients go scatter-gathered over the tensor group (Narayanan et al. 2021
Sec. 4.1). Megatron-LM batches the send to and the receive from a neighbour: one exchange per
forward and per backward slot, 2 (v m + p - 1) in all. DeepSpeed's pipeline engine
(``pp_p2p = "serial"``) sends and receives one tensor at a time: ``serial_p2p_transfers`` each
way, each scattered tensor after its partition metadata, the gradient whole before v0.5.4
(``pp_scatter_grads`` false). Megatron-Core's interleaved schedule with ``overlap_p2p_comm``
(``pp_p2p = "overlapped"``, ``"overlapped_send_wait"``): ``overlapped_p2p_transfers``.
"""
from __future__ import annotations

import numpy as np
from hwmodels.select import where

ACT_BYTES = 2.0  # 16-bit activations exchanged between ranks
PARTITION_META_BYTES = 8.0 * 15  # DeepSpeed PartitionedTensor.to_meta of a 3-D tensor over 8 ranks: 15 int64


def serial_p2p_transfers(m, p):
    """Transfers each way on the critical path of DeepSpeed's TrainSchedule with blocking sends.

    Stage s runs microbatch k's forward at step s + 2k and its backward at step 2p - 1 - s + 2k
    (deepspeed/runtime/pipe/schedule.py); a forward step first receives the activation and sends the
    previous backward's gradient, a backward step sends the previous forward's activation and receives
    the gradient, each a blocking call. Counted by event simulation for p <= 35 (tests/explore/
    test_pipeline_p2p.py): 2m + p - 4 for p >= 3 and m >= 2 (two per microbatch: every slot of the
    slowest stage waits for four serialized transfers), p - 1 for m = 1, m for p = 2."""
    return where(p <= 2, m, where(m <= 1, p - 1, 2.0 * m + p - 4.0))


def overlapped_p2p_transfers(m, p, v, send_wait):
    """Transfers on the critical path of Megatron-Core's interleaved 1F1B with overlap_p2p_comm (v > 1).

    megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_with_interleaving
    (NVIDIA/Megatron-LM 92c8482e6d, 23265d2db3, addc601f57), overlap_p2p_comm_warmup_flush off
    (its default, model_parallel_config.py): the warm-up's and the cool-down's send_forward_recv_forward /
    send_backward_recv_backward are blocking; in the steady state each pass posts its send and the next
    pass's receive non-blocking (pp_post_forward / pp_post_backward), the receive waited just before the
    pass that consumes it (pp_pre_forward / pp_pre_backward), the send when the next one is posted. Only
    the first microbatch's forward chain through the p v virtual stages and the last one's backward
    chain back wait: 2 (p v - 1) transfers. From addc601f57 a forward send is also waited as soon as
    it is posted when deallocate_pipeline_outputs (Megatron-Bridge GPTModelProvider sets it True) so
    that the output can be freed (``send_wait``): the slowest stage's steady-state forward sends add
    max(v (m - p) - 1, 0). Both counted by event simulation of the program order
    (tests/explore/test_pipeline_p2p.py), microbatch groups of p (microbatch_group_size_per_vp_stage)."""
    extra = where(send_wait, np.maximum(v * (m - p) - 1.0, 0.0), 0.0)
    return 2.0 * (p * v - 1.0) + extra


def pipeline_p2p(fab, plan, p, v, mb, t, sbh):
    """(time, activation bytes, gradient bytes) of the stage-to-stage transfers of one step on
    ``fab`` (explore.model.fabric.Fabric), for ``sbh`` activation elements per microbatch."""
    p2p_bytes = ACT_BYTES * sbh / t
    grad_p2p_bytes = where(plan.pp_scatter_grads, p2p_bytes, ACT_BYTES * sbh)
    pp_stride = t * plan.cp * plan.dp
    # more than two stages (or chunks wrapping round): the stage-to-stage pairs cross every leaf edge
    chain = (p > 2) | (v > 1)
    t_p2p = where(p > 1, 2.0 * (v * mb + p - 1) * fab.p2p(p2p_bytes, pp_stride, chain), 0.0)
    if np.any(plan.pp_p2p_overlapped):   # Megatron-Bridge: overlap_p2p_comm when vp > 1, batched otherwise
        n_ov = overlapped_p2p_transfers(mb, p, v, plan.pp_p2p_send_wait)
        t_ov = where(p > 1, n_ov * fab.p2p(p2p_bytes, pp_stride, chain), 0.0)
        t_p2p = where(plan.pp_p2p_overlapped & (v > 1), t_ov, t_p2p)
    if np.any(plan.pp_p2p_serial):
        meta = fab.p2p(PARTITION_META_BYTES, pp_stride, chain)
        per_pair = (fab.p2p(p2p_bytes, pp_stride, chain) + fab.p2p(grad_p2p_bytes, pp_stride, chain)
                    + where(t > 1, meta, 0.0) + where((t > 1) & plan.pp_scatter_grads, meta, 0.0))
        t_serial = where(p > 1, serial_p2p_transfers(v * mb, p) * per_pair, 0.0)
        t_p2p = where(plan.pp_p2p_serial, t_serial, t_p2p)
    return t_p2p, p2p_bytes, grad_p2p_bytes
