"""Reliability: expected interruptions, checkpoint cost and goodput.

Interruptions arrive at rate ``lambda = devices * interruptions_per_device_hour``
(mean time between interruptions M = 1/lambda). A checkpoint of duration delta
every tau seconds wastes delta/tau of the time, and each interruption loses on
average tau/2 of work plus the restart time R (Young 1974, "A first order
approximation to the optimum checkpoint interval", CACM 17(9); Daly 2006,
FGCS 22(3)). The optimum is tau* = sqrt(2 delta M) and

    waste = delta / tau + (tau / 2 + R) / M,   goodput = 1 - waste.
"""
from __future__ import annotations

import numpy as np

CHECKPOINT_BYTES_PER_PARAM = 14.0
"""bf16 weights (2 B) + fp32 master weights, Adam m and v (12 B), written once per checkpoint."""


def goodput(devices, interruptions_per_device_hour, total_params, write_bps_per_device, restart_s):
    """Returns (goodput fraction, checkpoint interval s, checkpoint time s, MTBI s)."""
    rate_per_s = np.asarray(devices) * np.asarray(interruptions_per_device_hour) / 3600.0
    mtbi = np.where(rate_per_s > 0, 1.0 / np.maximum(rate_per_s, 1e-300), np.inf)
    delta = CHECKPOINT_BYTES_PER_PARAM * np.asarray(total_params) * 8.0 / (
        np.asarray(devices) * np.asarray(write_bps_per_device))
    tau = np.sqrt(2.0 * delta * mtbi)
    with np.errstate(invalid="ignore", divide="ignore"):
        waste = np.where(np.isfinite(mtbi), delta / tau + (tau / 2.0 + restart_s) / mtbi, 0.0)
    return 1.0 - waste, tau, delta, mtbi
