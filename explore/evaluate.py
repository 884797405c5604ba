"""``explore.evaluate``: scenario (arrays allowed) -> xarray.Dataset of metrics.

One pure function over whole batches: resolve and validate the scenario once,
build the three typed inputs (ModelSpec, ParallelPlan, SystemSpec), run the
step, energy/cost and reliability models as numpy expressions, and attach
units last (xarray drops attrs in arithmetic).

Invalid designs (``valid == False``) get NaN in every float metric unless
``keep_invalid=True``, so reductions such as ``ds.time_to_train_s.min()`` need
no mask. Units parse with ``explore.units.registry()`` (pint).
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from explore.model import calibration as cal
from explore.model.carbon import carbon
from explore.model.costs import energy_and_cost
from explore.model.plan import ParallelPlan, bubble_fraction, check_rules
from explore.model.reliability import goodput as goodput_model
from explore.model.reliability import interruption_rates  # issue 11
from explore.model.costs import network_bom  # issue 11
from explore.scenario import Resolved, resolve
from explore.model.step import step_model
from explore.model.system import SystemSpec, build_system, hardware_invalid
from explore.model.workload import ModelSpec, active_params, model_flops_per_token, total_params
from explore.model.precision import Recipe  # issue 11
from explore.units import input_units

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


def evaluate(scenario: dict, calibration: cal.Calibration = cal.DEFAULT, *, samples: int | None = None,
             seed: int = 0, keep_invalid: bool = False, inputs: bool = True) -> xr.Dataset:
    """Evaluate a scenario (nested dicts; any numeric or choice field may be a 1-D array).

    Returns a Dataset with a ``design`` dimension, one variable per metric
    (``units`` and ``long_name`` in attrs), breakdown variables ``time_s_*``,
    ``energy_j_*``, ``capex_usd_*``, ``power_w_*``, ``memory_bytes_*``, ``carbon_kg_*``,
    and ``valid``/``reason``. Float metrics of invalid designs are NaN unless
    ``keep_invalid``. With ``inputs`` the resolved scenario fields are coordinates,
    named with ``_`` for ``.`` (``parallelism.tp`` -> ``parallelism_tp``): along
    ``design`` where they vary, scalar where fixed.
    With ``samples=N``: N joint draws of the uncertain catalog figures and calibration
    constants (``explore.uncertainty.evaluate_samples``), dimensions ``(sample, design)``.
    Raises ``ScenarioError`` only when the scenario is malformed as a whole.
    """
    if samples is not None or (isinstance(scenario, dict) and "uncertainty" in scenario):
        if samples is not None:
            from explore.uncertainty import evaluate_samples
            return evaluate_samples(scenario, samples, seed, calibration=calibration)
        scenario = {k: v for k, v in scenario.items() if k != "uncertainty"}
    r = resolve(scenario)
    return evaluate_resolved(r, calibration, keep_invalid=keep_invalid, inputs=inputs)


def evaluate_resolved(r: Resolved, calibration: cal.Calibration = cal.DEFAULT, *,
                      keep_invalid: bool = False, inputs: bool = True) -> xr.Dataset:
    v = r.values
    model = ModelSpec.from_resolved(r)
    plan = ParallelPlan.from_resolved(r)
    system = build_system(r)
    flash = np.broadcast_to(np.asarray(v["training.flash_attention"], bool), (r.n,))
    recipe = Recipe.from_resolved(r, system)  # issue 11: precision recipe
    out = _metrics(model, plan, system, flash, v, calibration, recipe)
    if not keep_invalid:
        bad = ~out["valid"]
        if bad.any():
            for k, a in out.items():
                if np.asarray(a).dtype.kind == "f":
                    out[k] = np.where(bad, np.nan, a)
    ds = _assemble(out, r)
    return ds.assign_coords(input_coords(r)) if inputs else ds


def coord_name(path: str) -> str:
    """Result name of a scenario field: ``system.scale_out.link`` -> ``system_scale_out_link``."""
    return path.replace(".", "_")


def input_attrs(path: str) -> dict:
    """``field``, ``long_name`` and (numeric fields) ``units`` of a scenario input coordinate."""
    from explore.scenario import field_spec
    try:
        kind = field_spec(path).kind
    except KeyError:
        kind = "float"
    attrs = {"field": path, "long_name": path}
    u = input_units(path, kind)
    if u is not None:
        attrs["units"] = u
    return attrs


def input_coords(r: Resolved) -> dict:
    """The resolved inputs: varying ones along ``design``, fixed ones as scalars."""
    coords = {}
    for path, a in r.values.items():
        a = np.asarray(a)
        first = a[:1]
        fixed = a.size <= 1 or bool((a == first).all())
        val = a[0] if fixed else np.array(a)
        if a.dtype.kind in "UO":
            val = str(val) if fixed else val.astype(str)
        coords[coord_name(path)] = ((), val, input_attrs(path)) if fixed else \
            (("design",), val, input_attrs(path))
    return coords


def _metrics(model: ModelSpec, plan: ParallelPlan, system: SystemSpec, flash, v, c, recipe=None) -> dict:
    valid, reason = check_rules(model, plan, system.devices, system.peak_flops > 0)
    prec_bad = ~valid & (reason == "training.precision is not supported by the accelerator")
    for p in np.unique(np.asarray(v["training.precision"])[np.broadcast_to(prec_bad, valid.shape)]):
        sel = prec_bad & (np.broadcast_to(v["training.precision"], valid.shape) == p)
        reason[sel] = (f"training.precision: value {str(p)!r} is not supported by the accelerator "
                       f"(system.accelerator.peak_flops_{p} = 0); allowed: a precision with peak FLOP/s > 0")
    idle_bad = valid & ~(system.idle_power_w <= system.tdp_w)
    _reasons(reason, idle_bad, lambda idle, tdp: f"system.accelerator.idle_power_w: value {idle:g} W "
             f"exceeds tdp_w = {tdp:g} W; allowed: 0 <= idle_power_w <= tdp_w",
             system.idle_power_w, system.tdp_w)
    valid = valid & ~idle_bad
    hw_bad, hw_reason = hardware_invalid(system)  # issue 3: reticle, shoreline, interposer, power
    hw_bad = hw_bad & valid
    reason[hw_bad] = hw_reason[hw_bad]
    valid = valid & ~hw_bad
    with np.errstate(divide="ignore", invalid="ignore"):
        st = step_model(model, plan, system, flash, c, recipe)
        tokens_per_step = plan.global_batch * model.seq_len
        step = st["step_time_s"]
        tps = tokens_per_step / step
        mflops_tok = model_flops_per_token(model)
        mfps = mflops_tok * tps / system.devices
        n_params = total_params(model)
        # issue 11: interruption rate per component class, the network's from its bill of materials
        bom = network_bom(system)
        rates = interruption_rates(system.devices, system.nics_per_device, bom["fit"])
        rate_total = np.where(system.interruptions_given > 0, system.devices * system.interruptions_per_hour,
                              sum(rates.values()))
        gp, tau, delta, mtbi = goodput_model(
            system.devices, rate_total / system.devices, n_params,
            v["datacenter.checkpoint_write_bps_per_device"], v["datacenter.restart_s"])
        gp_ok = gp > 0.0
        gp_c = np.where(gp_ok, gp, np.nan)
        ec = energy_and_cost(system, step, st["busy_time_s"], tokens_per_step, gp_c,
                             v["datacenter.pue"], v["datacenter.electricity_usd_per_kwh"],
                             v["datacenter.lifetime_years"], bom)
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
            "interruptions_per_hour": rate_total,  # issue 11: by class (0 when an all-cause rate is given)
            **{f"interruptions_per_hour_{k}": np.where(system.interruptions_given > 0, 0.0, r)
               for k, r in rates.items()},
            "params": n_params,
            "active_params": active_params(model),  # issue 11
            "microbatches": plan.microbatches,
            "bubble_fraction": bubble_fraction(plan),
            **{k: val for k, val in st.items() if k != "step_time_s" and k != "memory_per_device_bytes"},
            **ec,
        }
        out.update(carbon(v, system, ec))   # issue 14: operational + embodied carbon per token
    margin = out.get("network_link_budget_margin_db")
    if margin is not None:  # an optical path that cannot close its link budget is not buildable
        optics_bad = valid & (margin < 0)
        reason[optics_bad] = "optics: link budget does not close (margin < 0 dB)"
        valid = valid & ~optics_bad
        hw_bad = hw_bad | optics_bad
    fits = out["fits_memory"]
    mem_bad = valid & ~fits
    reason[mem_bad] = "does not fit in accelerator memory"
    gp_bad = valid & fits & ~gp_ok
    reason[gp_bad] = "reliability: interruptions outpace checkpoints (goodput <= 0)"
    valid = valid & fits & gp_ok
    num_bad = np.zeros_like(valid)
    for k in MUST_BE_POSITIVE:   # the last guard: no NaN, inf or negative metric on a valid design
        a = np.broadcast_to(np.asarray(out[k], dtype=float), valid.shape)
        new = valid & ~num_bad & ~(np.isfinite(a) & (a > 0))
        _reasons(reason, new, lambda x, k=k: f"numerical: {k} = {x:g} is not finite and positive; "
                 f"an input is outside the model's range", a)
        num_bad |= new
    valid = valid & ~num_bad
    rule_bad = reason != ""
    rule_bad &= ~(mem_bad | gp_bad | hw_bad | num_bad)
    for k, a in out.items():
        if a.dtype.kind == "f":
            out[k] = np.where(rule_bad, np.nan, a)
    out["valid"] = valid
    out["reason"] = reason
    return out


def _reasons(reason: np.ndarray, mask: np.ndarray, text, *arrays) -> None:
    """reason[mask] = text(*values), formatted once per distinct tuple of values (no loop per design)."""
    if not mask.any():
        return
    cols = np.column_stack([np.broadcast_to(np.asarray(a, float), mask.shape)[mask] for a in arrays])
    uniq, inv = np.unique(cols, axis=0, return_inverse=True)
    texts = np.array([text(*row) for row in uniq], dtype=object)
    reason[mask] = texts[np.asarray(inv).ravel()]


def _assemble(out: dict, r: Resolved) -> xr.Dataset:
    """Units (and breakdown tags) attached as each variable is built, last, as xarray drops attrs."""
    n = r.n
    units = {"time_s": "s", "energy_j": "J", "capex_usd": "USD", "power_w": "W", "memory_bytes": "B",
             "carbon_kg": "kgCO2e"}
    data = {}
    for k, a in out.items():
        a = np.asarray(a)
        if a.shape != (n,) or a.strides[0] == 0:   # scalars and broadcast views: own the data
            a = np.array(np.broadcast_to(a, (n,)))
        if k == "reason":
            a = a.astype(str)
        bd = breakdown_of(k)
        if bd:
            attrs = {"units": units[bd[0]], "long_name": f"{bd[0].rpartition('_')[0]}: "
                     f"{bd[1].replace('_', ' ')}", "breakdown": bd[0], "component": bd[1]}
        else:
            attrs = {"long_name": LONG_NAMES.get(k, k.replace("_", " "))}
            u = UNITS.get(k, "1" if a.dtype.kind in "iuf" else None)
            if u is not None and a.dtype.kind not in "bUOS":
                attrs["units"] = u
        data[k] = xr.Variable(("design",), a, attrs)
    ds = xr.Dataset(data, coords={"design": np.arange(n)})
    ds.attrs["scenario_name"] = r.name
    return ds


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
