"""Human units for figures, tables and study summaries: ``human(metric)`` maps an SI metric to
the unit a reader expects (days, MW, USD per million tokens, J/token, %), ``fmt`` prints a value
with three significant digits, and an axis whose positive values span more than ``LOG_SPAN``
is drawn on a log scale (``should_log``). Used by ``explore.figures`` (which re-exports these
names), the CLI tables and the studies.
"""
from __future__ import annotations

import numpy as np

LOG_SPAN = 10.0
"""An axis is logarithmic when max / min of its positive values exceeds this (a decade)."""

# metric -> (label, unit, scale from SI); power and energy pick their prefix from the data.
_HUMAN = {
    "time_to_train_s": ("time to train", "days", 1 / 86400),
    "step_time_s": ("step time", "s", 1.0),
    "energy_per_token_j": ("energy per token", "J/token", 1.0),
    "cost_per_token_usd": ("cost", "USD per million tokens", 1e6),
    "capex_usd": ("capex", "million USD", 1e-6),
    "tokens_per_s": ("throughput", "million tokens/s", 1e-6),
    "memory_per_device_bytes": ("memory per device", "GB", 1e-9),
    "mfu": ("MFU", "%", 100.0),
    "goodput": ("goodput", "%", 100.0),
    "bubble_fraction": ("pipeline bubble", "%", 100.0),
    "checkpoint_interval_s": ("checkpoint interval", "min", 1 / 60),
    "mtbi_s": ("mean time between interruptions", "h", 1 / 3600),
    "ocs_reconfig_s": ("OCS reconfiguration time", "s", 1.0),
    "devices": ("accelerators", "", 1.0),
}
_POWER = ((1e6, "MW"), (1e3, "kW"), (1.0, "W"))
_ENERGY = ((1e9, "GJ"), (1e6, "MJ"), (1e3, "kJ"), (1.0, "J"))


def human(metric: str, values=None) -> tuple[str, str, float]:
    """(label, unit, scale): ``value_in_unit = si_value * scale``."""
    if metric in _HUMAN:
        return _HUMAN[metric]
    table = _POWER if metric.startswith("power_w") else _ENERGY if metric.endswith("_j") else None
    if table is not None:
        v = np.abs(np.asarray(values, float)) if values is not None else np.array([1.0])
        ref = np.nanmedian(v[v > 0]) if np.any(v > 0) else 1.0
        for s, u in table:
            if ref >= s:
                return metric.replace("_", " "), u, 1 / s
        return metric.replace("_", " "), table[-1][1], 1.0
    if metric.endswith("_usd"):
        return metric[:-4].replace("_", " "), "USD", 1.0
    if metric.endswith("_s"):
        return metric[:-2].replace("_", " "), "s", 1.0
    return metric.replace("_", " "), "", 1.0


def axis_label(metric: str, values=None) -> str:
    label, unit, _ = human(metric, values)
    return f"{label} [{unit}]" if unit else label


def fmt(x: float, unit: str = "") -> str:
    """A value with 3 significant digits (no exponent for ordinary magnitudes) and its unit."""
    if x is None or not np.isfinite(x):
        return "n/a"
    a = abs(x)
    s = f"{x:.3g}" if (a == 0 or 1e-3 <= a < 1e5) else f"{x:.2e}"
    if 1e3 <= a < 1e5:
        s = f"{x:,.0f}"
    return f"{s} {unit}".strip()


def in_units(metric: str, values) -> tuple[np.ndarray, str]:
    """Values converted to the metric's human unit, and the axis label."""
    v = np.asarray(values, float)
    label, unit, scale = human(metric, v)
    return v * scale, (f"{label} [{unit}]" if unit else label)


def should_log(*arrays) -> bool:
    v = np.concatenate([np.ravel(np.asarray(a, float)) for a in arrays])
    v = v[np.isfinite(v) & (v > 0)]
    return bool(len(v) and v.max() / v.min() > LOG_SPAN)
