"""Reliability: interruption rates per component, checkpoint cost and goodput.

Interruptions arrive at rate ``lambda`` (mean time between interruptions M = 1/lambda).
A checkpoint of duration delta every tau seconds wastes delta/tau of the time, and each
interruption loses on average tau/2 of work plus the restart time R (Young 1974, "A first
order approximation to the optimum checkpoint interval", CACM 17(9); Daly 2006,
FGCS 22(3)). The optimum is tau* = sqrt(2 delta M) and

    waste = delta / tau + (tau / 2 + R) / M,   goodput = 1 - waste.

The rate is a sum over component classes (issue 11; ``explore/data/failures.toml``):
accelerator, HBM, host and software interruptions per device-hour and NIC
interruptions per NIC-hour from the Llama 3 405B run's Table 5 counts over its
exposure, and network interruptions from the network bill of materials (FIT of
every transceiver, cable and OCS, ``topologies.bom``) times interruptions per
failure derived on the same run. So the network's size, optics type and OCS
count move the rate, the checkpoint interval and the goodput. A given
``datacenter.interruptions_per_device_hour`` (or an inline accelerator's
``interruptions_per_hour``) replaces the whole model by an all-cause rate per device.
"""
from __future__ import annotations

import functools
import tomllib
from pathlib import Path

import numpy as np
from hwmodels.select import where

CHECKPOINT_BYTES_PER_PARAM = 14.0
"""bf16 weights (2 B) + fp32 master weights, Adam m and v (12 B), written once per checkpoint."""
CLASSES = ("accelerator", "hbm", "host", "nic", "software", "network")


@functools.cache
def failure_data() -> dict:
    return tomllib.loads((Path(__file__).resolve().parent.parent / "data" / "failures.toml").read_text())


def class_rates_per_hour() -> dict[str, float]:
    """Interruptions per unit-hour of each class except the network (per device or per NIC)."""
    d = failure_data()
    a = d["anchor"]
    out = {}
    for k, c in d["classes"].items():
        if c["per"] == "device":
            out[k] = c["count"] / (a["devices"] * a["hours"])
        elif c["per"] == "nic":
            out[k] = c["count"] / (a["nics"] * a["hours"])
    return out


def interruption_rates(devices, nics_per_device, network_fit) -> dict[str, np.ndarray]:
    """Interruptions per hour of the whole system, by component class."""
    r = class_rates_per_hour()
    d = np.asarray(devices, dtype=float)
    out = {k: d * r[k] for k in ("accelerator", "hbm", "host", "software")}
    out["nic"] = d * np.asarray(nics_per_device, dtype=float) * r["nic"]
    out["network"] = np.asarray(network_fit, dtype=float) * 1e-9 * failure_data()["network"]["interruptions_per_failure"]
    return out


def goodput(devices, interruptions_per_device_hour, total_params, write_bps_per_device, restart_s):
    """Returns (goodput fraction, checkpoint interval s, checkpoint time s, MTBI s)."""
    rate_per_s = np.asarray(devices) * np.asarray(interruptions_per_device_hour) / 3600.0
    mtbi = where(rate_per_s > 0, 1.0 / np.maximum(rate_per_s, 1e-300), np.inf)
    delta = CHECKPOINT_BYTES_PER_PARAM * np.asarray(total_params) * 8.0 / (
        np.asarray(devices) * np.asarray(write_bps_per_device))
    tau = np.sqrt(2.0 * delta * mtbi)
    with np.errstate(invalid="ignore", divide="ignore"):
        waste = where(np.isfinite(mtbi), delta / tau + (tau / 2.0 + restart_s) / mtbi, 0.0)
    return 1.0 - waste, tau, delta, mtbi
