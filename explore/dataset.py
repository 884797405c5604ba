"""The result dataset of ``explore.evaluate``: its variables' units and long names, the metrics a
valid design must have positive, the breakdown families, the Dataset's construction and one
design as the JSON object of docs/architecture.md."""
from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

UNITS = {
    "step_time_s": "s", "tokens_per_s": "token/s", "model_flops_per_s_per_device": "FLOP/s",
    "mfu": "1", "hfu": "1", "memory_per_device_bytes": "B", "fits_memory": None,
    "time_to_train_s": "s", "energy_per_token_j": "J/token", "cost_per_token_usd": "USD/token",
    "capex_usd": "USD", "power_w": "W", "goodput": "1", "params": "1", "microbatches": "1",
    "bubble_fraction": "1", "checkpoint_interval_s": "s", "checkpoint_time_s": "s",
    "mtbi_s": "s", "energy_per_step_j": "J", "cost_per_step_usd": "USD",
    "params_per_device": "1", "active_params": "", "interruptions_per_hour": "1/h",
    **{f"interruptions_per_hour_{k}": "1/h" for k in
       ("accelerator", "hbm", "host", "nic", "software", "network")}, "hw_flops_per_device": "FLOP", "busy_time_s": "s",
    "bytes_scale_out_per_device": "B",
    "valid": None, "reason": None,
    "network_switches": "1", "network_transceivers": "1", "network_ocs": "1", "network_ocs_ports": "1",
    "network_fibres": "1", "network_fibre_m": "m", "network_copper_cables": "1",
    "network_link_budget_margin_db": "dB", "network_laser_power_w_per_lane": "W",
    "network_reconfig_s_per_step": "s", "network_fit": "FIT",
    "carbon_per_token_kg": "kgCO2e/token", "carbon_per_step_kg": "kgCO2e", "embodied_carbon_kg": "kgCO2e",
    "embodied_carbon_share": "1",
}
LONG_NAMES = {
    "step_time_s": "time per optimizer step", "tokens_per_s": "training throughput",
    "model_flops_per_s_per_device": "model FLOP/s per device", "mfu": "model FLOP utilisation",
    "hfu": "hardware FLOP utilisation", "memory_per_device_bytes": "memory per device",
    "fits_memory": "fits in accelerator memory", "time_to_train_s": "time to train the token budget",
    "energy_per_token_j": "energy per trained token", "cost_per_token_usd": "cost per trained token",
    "capex_usd": "capital expenditure", "power_w": "facility power", "goodput": "goodput fraction",
    "params": "model parameters", "microbatches": "microbatches per step",
    "bubble_fraction": "pipeline bubble fraction", "mtbi_s": "mean time between interruptions",
    "valid": "design is valid", "reason": "why the design is invalid (empty if valid)",
    "network_fit": "network failure rate (failures per 1e9 h)",
}
# a valid design must have these finite and > 0 (else it is marked invalid, never silently kept)
MUST_BE_POSITIVE = ("step_time_s", "tokens_per_s", "time_to_train_s", "energy_per_token_j",
                    "cost_per_token_usd", "capex_usd", "power_w", "memory_per_device_bytes", "mfu")
BREAKDOWNS = ("time_s", "energy_j", "capex_usd", "power_w", "memory_bytes", "carbon_kg")
HEADLINE = ("step_time_s", "tokens_per_s", "model_flops_per_s_per_device", "mfu",
            "memory_per_device_bytes", "fits_memory", "time_to_train_s",
            "energy_per_token_j", "cost_per_token_usd")


def breakdown_of(name: str):
    """('time_s', 'compute') for 'time_s_compute'; None for a headline metric."""
    for b in BREAKDOWNS:
        if name.startswith(b + "_") and name != b:
            return b, name[len(b) + 1:]
    return None


DIRECT_DATASET = True
"""Build results with xarray's internal ``Dataset._construct_direct`` (False: the public constructor)."""


def _dataset(data: dict, coords: dict, n: int) -> xr.Dataset:
    """``xr.Dataset(data, coords={"design": np.arange(n), **coords})`` (``coords``: name ->
    (dims, values, attrs)), built from its variables directly: the data variables and the input
    coordinates are consistent by construction (every variable along ``design`` of length ``n``, or
    a scalar), which xarray's constructor would check and merge one by one (~3 ms of a 100,000-design
    call for ~190 variables; ``tests/explore/test_results_contract.py`` checks the result is identical)."""
    direct = getattr(xr.Dataset, "_construct_direct", None) if DIRECT_DATASET else None
    if direct is not None:      # xarray's internal constructor; the public one if a release changes it
        from xarray.indexes import PandasIndex
        index = PandasIndex(pd.Index(np.arange(n), name="design"), "design")
        variables = dict(data)
        variables.update(index.create_variables())
        for k, (dims, val, attrs) in coords.items():
            variables[k] = xr.Variable(dims, np.asarray(val), attrs, fastpath=True)
        try:
            return direct(variables, {"design", *coords}, dims={"design": n}, indexes={"design": index})
        except TypeError:
            pass
    return xr.Dataset(data, coords={"design": np.arange(n), **coords})


def to_json_dict(ds: xr.Dataset, i: int = 0) -> dict:
    """One design of a result as the JSON object of docs/architecture.md (breakdowns nested)."""
    row = ds.isel(design=i)
    obj: dict = {}
    bds: dict = {b: {} for b in BREAKDOWNS}
    for k in ds.data_vars:
        val = row[k].item()
        if isinstance(val, float) and not np.isfinite(val):
            val = None
        bd = breakdown_of(k)
        if bd:
            bds[bd[0]][bd[1]] = val
        else:
            obj[k] = val
    obj["breakdown"] = bds
    obj["name"] = ds.attrs.get("scenario_name", "")
    return obj
