"""Per-step synchronizations of a training loop that nothing overlaps: small collectives whose results
the host reads back (or the stream waits on) after every batch, all over the ``world`` ranks.

* ``metric_sync_s``: training metrics' per-step synchronization (``training.train_metrics``;
  ``calibration.TRAIN_METRIC_STATES`` states per metric). Composer v0.17.2 computes its training
  metrics after every batch, after the optimizer step, and torchmetrics (< 1.1) gathers each metric
  state over all ranks with ``gather_all_tensors``: a barrier (ProcessGroupNCCL: an all-reduce of one
  element, then a device synchronize, so the host waits and nothing overlaps), ``world_size``
  ``zeros_like`` from Python (a Python tensor call and a fill kernel per rank: ``fab.rank_copies``) and a
  list-form ``all_gather`` of the scalar (the ring call over all ranks, then ProcessGroupNCCL's copy out of
  the flat buffer rank by rank: ``fab.list_overhead``). Host and ring latency both grow with the world
  size at fixed per-GPU work.
* ``composer_step_syncs_s``: the training loop's own per-batch scalar collectives
  (``training.step_syncs = "composer-0.17"``), read in mosaicml/composer at v0.17.2 (commit
  7e0e40a72a6b), as llm-foundry 5e85bd62d ran it: in composer/trainer/trainer.py ``_train_loop``, the loss
  all-reduce (one 4 B fp32 key, 'loss/train/total'; MPT's ``loss`` returns one tensor) read back with
  ``.cpu().item()``, and ``_accumulate_time_across_ranks``: the samples/tokens all-reduce (8 B, int32 x 2)
  and the batch time's broadcast from rank 0 (4 B), each read back with ``.cpu().item()``; in
  composer/callbacks/speed_monitor.py ``batch_end`` (the yamls' speed_monitor) the FLOPs all-reduce (4 B)
  and ``.item()``; and the gradient_clipping algorithm (the yamls' clipping_type norm;
  composer/algorithms/gradient_clipping/gradient_clipping.py) calls the root FSDP module's
  ``clip_grad_norm_`` (torch 2.1): one 4 B all-reduce that the gradient scaling waits on. The host reads
  make each call wait for all queued work, so nothing overlaps them. The all-reduces are the fabric's
  small-message calls; NCCL runs a broadcast as a ring chain from the root (ring only), so its 4 bytes
  cross the n - 1 ring steps one after the other: the ring pass of a 4 B slice per rank
  (``fab.all_gather`` of 4 n B), as the metric sync's gather. Not counted (no measured figure): the host
  reads themselves, the tensor creations and Python around them.

Both are 0 where no design sets their field (the fabric is not called then) and on one rank.
"""
from __future__ import annotations

import numpy as np
from hwmodels.select import where

from explore.model import calibration as cal


def metric_sync_s(fab, world, train_metrics, hbm_bytes_per_s):
    """Seconds per step of the training metrics' synchronization (module docstring)."""
    if not np.any(np.asarray(train_metrics) > 0):
        return 0.0
    states = train_metrics * cal.TRAIN_METRIC_STATES
    one_state = (fab.all_reduce(4.0, 1.0, world) + fab.all_gather(4.0 * world, 1.0, world)
                 + fab.list_overhead(world, 1.0, 0.0, 4.0 * world, hbm_bytes_per_s) + fab.rank_copies(world, 1.0, 1.0))
    return where(world > 1, states * one_state, 0.0)


def composer_step_syncs_s(fab, world, composer_syncs):
    """Seconds per step of Composer v0.17.2's per-batch scalar collectives (module docstring)."""
    if not np.any(np.asarray(composer_syncs) > 0):
        return 0.0
    calls = (3.0 * fab.all_reduce(4.0, 1.0, world) + fab.all_reduce(8.0, 1.0, world)
             + fab.all_gather(4.0 * world, 1.0, world))
    return where((composer_syncs > 0) & (world > 1), calls, 0.0)
