"""``explore.evaluate``: scenario (arrays allowed) -> xarray.Dataset of metrics.

One pure function over whole batches: resolve and validate the scenario once,
build the three typed inputs (ModelSpec, ParallelPlan, SystemSpec), run the
step, energy/cost and reliability models as numpy expressions, and attach
units last (xarray drops attrs in arithmetic).
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from explore.model import calibration as cal
from explore.model.costs import energy_and_cost
from explore.model.cardinality import UniqueRows, fit, per_rows
from explore.model.plan import ParallelPlan, bubble_fraction, rule_codes
from explore.model.reliability import goodput as goodput_model
from explore.scenario import Resolved, resolve
from explore.model.step import step_model
from explore.model.system import SystemSpec, build_system, hardware_invalid_code
from hwmodels import package as hw_package
from explore.model.workload import ModelSpec, model_flops_per_token, total_params

UNITS = {
    "step_time_s": "s", "tokens_per_s": "token/s", "model_flops_per_s_per_device": "FLOP/s",
    "mfu": "1", "hfu": "1", "memory_per_device_bytes": "B", "fits_memory": "bool",
    "time_to_train_s": "s", "energy_per_token_j": "J/token", "cost_per_token_usd": "USD/token",
    "capex_usd": "USD", "power_w": "W", "goodput": "1", "params": "", "microbatches": "",
    "bubble_fraction": "1", "checkpoint_interval_s": "s", "checkpoint_time_s": "s",
    "mtbi_s": "s", "energy_per_step_j": "J", "cost_per_step_usd": "USD",
    "params_per_device": "1", "hw_flops_per_device": "FLOP", "busy_time_s": "s",
    "bytes_scale_out_per_device": "B",
    "valid": "bool", "reason": "",
    "network_switches": "1", "network_transceivers": "1", "network_ocs": "1", "network_ocs_ports": "1",
    "network_fibres": "1", "network_fibre_m": "m", "network_copper_cables": "1",
    "network_link_budget_margin_db": "dB", "network_laser_power_w_per_lane": "W",
    "network_reconfig_s_per_step": "s", "network_fit": "FIT (failures per 1e9 h)",
}
BREAKDOWNS = ("time_s", "energy_j", "capex_usd", "power_w", "memory_bytes")
HEADLINE = ("step_time_s", "tokens_per_s", "model_flops_per_s_per_device", "mfu",
            "memory_per_device_bytes", "fits_memory", "time_to_train_s",
            "energy_per_token_j", "cost_per_token_usd")


def breakdown_of(name: str):
    """('time_s', 'compute') for 'time_s_compute'; None for a headline metric."""
    for b in BREAKDOWNS:
        if name.startswith(b + "_") and name != b:
            return b, name[len(b) + 1:]
    return None


def evaluate(scenario: dict, calibration: cal.Calibration = cal.DEFAULT, *,
             reason_codes: bool = False) -> xr.Dataset:
    """Evaluate a scenario (nested dicts; any numeric or choice field may be a 1-D array).

    Returns a Dataset with a ``design`` dimension, one variable per metric
    (``units`` in attrs), breakdown variables ``time_s_*``, ``energy_j_*``,
    ``capex_usd_*``, ``power_w_*``, ``memory_bytes_*``, and ``valid``/``reason``.
    With ``reason_codes``, ``reason`` holds integer codes into ``reason.attrs["codes"]``.
    Raises ``ScenarioError`` only when the scenario is malformed as a whole.
    """
    r = resolve(scenario)
    return evaluate_resolved(r, calibration, reason_codes=reason_codes)


def evaluate_resolved(r: Resolved, calibration: cal.Calibration = cal.DEFAULT, *,
                      reason_codes: bool = False) -> xr.Dataset:
    """``reason_codes``: ``reason`` as integer codes into ``attrs["codes"]`` (sweep stores)."""
    r = Resolved(r.n, {k: fit(a, r.n) for k, a in r.values.items()}, r.name)  # constants: length 1
    v = r.values
    model = ModelSpec.from_resolved(r)
    plan = ParallelPlan.from_resolved(r)
    system = build_system(r)
    flash = fit(np.asarray(v["training.flash_attention"], bool), r.n)
    rows = UniqueRows([a for k, a in v.items() if k not in STEP_FREE], r.n) if r.n > 1 else None
    out = _metrics(model, plan, system, flash, v, calibration, n=r.n, rows=rows)
    return _assemble(out, r, reason_codes)


STEP_FREE = ("datacenter.pue", "datacenter.electricity_usd_per_kwh", "datacenter.lifetime_years",
             "datacenter.interruptions_per_device_hour", "datacenter.restart_s",
             "datacenter.checkpoint_write_bps_per_device")
"""Inputs the step model does not read (economics and reliability): designs that differ only
in these share one step-model evaluation (``cardinality.per_rows``; tested in test_cardinality)."""

# reasons found after the plan rules and the hardware limits (codes follow those tables)
LATE_REASONS = ("optics: link budget does not close (margin < 0 dB)",
                "does not fit in accelerator memory",
                "reliability: interruptions outpace checkpoints (goodput <= 0)")


def _metrics(model: ModelSpec, plan: ParallelPlan, system: SystemSpec, flash, v, c, n=None,
             rows=None) -> dict:
    """Metrics of every design; ``out["reason"]`` is an integer code into ``out["reason_table"]``."""
    code, table = rule_codes(model, plan, system.devices, system.peak_flops > 0)
    n = n or code.size
    code = np.broadcast_to(code, (n,)).copy()
    valid = code == 0
    hw_code = np.broadcast_to(hardware_invalid_code(system), (n,))  # issue 3: reticle, shoreline, ...
    hw_bad = (hw_code > 0) & valid
    if hw_bad.any():
        code[hw_bad] = hw_code[hw_bad] + (len(table) - 1)
        valid = valid & ~hw_bad
    table = table + tuple(hw_package.REASONS[1:])
    late = {why: len(table) + i for i, why in enumerate(LATE_REASONS)}
    table = table + LATE_REASONS
    with np.errstate(divide="ignore", invalid="ignore"):
        st = per_rows(lambda *a: step_model(*a, c), rows, model, plan, system, flash)
        tokens_per_step = plan.global_batch * model.seq_len
        step = st["step_time_s"]
        tps = tokens_per_step / step
        mflops_tok = model_flops_per_token(model)
        mfps = mflops_tok * tps / system.devices
        n_params = total_params(model)
        gp, tau, delta, mtbi = goodput_model(
            system.devices, system.interruptions_per_hour, n_params,
            v["datacenter.checkpoint_write_bps_per_device"], v["datacenter.restart_s"])
        gp_ok = gp > 0.0
        gp_c = np.where(gp_ok, gp, np.nan)
        ec = energy_and_cost(system, step, st["busy_time_s"], tokens_per_step, gp_c,
                             v["datacenter.pue"], v["datacenter.electricity_usd_per_kwh"],
                             v["datacenter.lifetime_years"])
        tokens = v["training.tokens"]
        out = {
            "step_time_s": step,
            "tokens_per_s": tps,
            "model_flops_per_s_per_device": mfps,
            "mfu": mfps / system.peak_flops,
            "hfu": st["hw_flops_per_device"] / step / system.peak_flops,
            "memory_per_device_bytes": st["memory_per_device_bytes"],
            "fits_memory": st["memory_per_device_bytes"] <= system.hbm_capacity_bytes,
            "time_to_train_s": tokens / tps / gp_c,
            "goodput": gp_c,
            "checkpoint_interval_s": tau, "checkpoint_time_s": delta, "mtbi_s": mtbi,
            "params": n_params,
            "microbatches": plan.microbatches,
            "bubble_fraction": bubble_fraction(plan),
            **{k: val for k, val in st.items() if k != "step_time_s" and k != "memory_per_device_bytes"},
            **ec,
        }
    margin = out.get("network_link_budget_margin_db")
    if margin is not None:  # an optical path that cannot close its link budget is not buildable
        optics_bad = valid & (margin < 0)
        code[optics_bad] = late[LATE_REASONS[0]]
        valid = valid & ~optics_bad
        hw_bad = hw_bad | optics_bad
    fits = out["fits_memory"]
    mem_bad = valid & ~fits
    code[mem_bad] = late[LATE_REASONS[1]]
    gp_bad = valid & fits & ~gp_ok
    code[gp_bad] = late[LATE_REASONS[2]]
    valid = valid & fits & gp_ok
    rule_bad = code != 0
    rule_bad &= ~(mem_bad | gp_bad | hw_bad)
    if rule_bad.any():
        for k, a in out.items():
            if a.dtype.kind == "f":
                out[k] = np.where(rule_bad, np.nan, a)
    out["valid"] = valid
    out["reason"] = code
    out["reason_table"] = table
    return out


def _assemble(out: dict, r: Resolved, reason_codes: bool = False) -> xr.Dataset:
    """Units (and breakdown tags) attached as each variable is built, last, as xarray drops attrs.

    ``reason`` becomes strings (``""`` where valid), or stays integer codes into its
    ``codes`` attribute with ``reason_codes``."""
    n = r.n
    out = dict(out)
    table = out.pop("reason_table", None)
    units = {"time_s": "s", "energy_j": "J", "capex_usd": "USD", "power_w": "W", "memory_bytes": "B"}
    data = {}
    for k, a in out.items():
        a = np.asarray(a)
        if a.shape != (n,) or a.strides[0] == 0:   # scalars and broadcast views: own the data
            a = np.array(np.broadcast_to(a, (n,)))
        bd = breakdown_of(k)
        attrs = ({"units": units[bd[0]], "breakdown": bd[0], "component": bd[1]} if bd
                 else {"units": UNITS.get(k, "")})
        if k == "reason" and table is not None:
            if reason_codes:
                a, attrs = a.astype(np.int16), {"units": "", "codes": list(table)}
            else:
                a = np.asarray(table, dtype=object)[a]
        # object strings (reason): skip xarray's per-element conversion of object arrays
        data[k] = xr.Variable(("design",), a, attrs, fastpath=a.dtype.kind == "O")
    ds = xr.Dataset(data, coords={"design": np.arange(n)})
    ds.attrs["scenario_name"] = r.name
    return ds


def to_json_dict(ds: xr.Dataset, i: int = 0) -> dict:
    """One design of a result as the JSON object of DESIGN.md (breakdowns nested)."""
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
