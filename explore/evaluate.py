"""``explore.evaluate``: scenario (arrays allowed) -> xarray.Dataset of metrics.

One pure function over whole batches: resolve and validate the scenario once,
build the three typed inputs (ModelSpec, ParallelPlan, SystemSpec), run the
step, energy/cost and reliability models as numpy expressions, and attach
units last (xarray drops attrs in arithmetic).

Invalid designs (``valid == False``) get NaN in every float metric unless
``keep_invalid=True``, so reductions such as ``ds.time_to_train_s.min()`` need
no mask. Validity is known before any time (plan rules, hardware and network limits,
memory, link budget, goodput), so the step time and what follows it are computed only for the
designs whose metrics are returned (``_metrics``). Units parse with ``explore.units.registry()`` (pint).
"""
from __future__ import annotations

import dataclasses
import functools
import os

import numpy as np
from hwmodels.select import where
import xarray as xr

from explore.model import calibration as cal
from explore.model.carbon import carbon
from explore.model.costs import energy_and_cost
from explore.model.cardinality import (WORTH_GATHERING, UniqueRows, fit, is_constant, per_rows,
                                       sharing_allowed, take)
from explore.model.plan import ParallelPlan, bubble_fraction, reason_details, rule_codes
from explore.model.reliability import goodput as goodput_model
from explore.model.reliability import interruption_rates  # issue 11
from explore.model.costs import network_bom  # issue 11
from topologies import dragonfly
from explore.scenario import Resolved, resolve
from explore.model.device_memory import memory_model
from explore.model.step import step_model
from explore.model.system import SystemSpec, build_system, hardware_invalid_code, sub_domain_networks
from hwmodels import package as hw_package
from explore.model.workload import ModelSpec, active_params, model_flops_per_token, total_params
from explore.model.precision import Recipe  # issue 11
from explore.units import input_units
from explore.allocator import keep_freed_memory

if os.environ.get("LIGHTPATH_MALLOC", "").lower() == "reuse":
    keep_freed_memory()   # opt-in: batches reuse freed array memory (no page fault per new array)

from explore.dataset import LONG_NAMES, MUST_BE_POSITIVE, UNITS, _dataset, breakdown_of


def evaluate(scenario: dict, calibration: cal.Calibration = cal.DEFAULT, *, samples: int | None = None,
             seed: int = 0, keep_invalid: bool = False, inputs: bool = True,
             reason_codes: bool = False, metrics=None) -> xr.Dataset:
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
    With ``reason_codes``, ``reason`` holds integer codes into ``reason.attrs["codes"]``.
    ``metrics`` (names): return only these (plus ``valid`` and ``reason``); every design is
    still checked in full, so validity and the values returned are the same as without it.
    Raises ``ScenarioError`` only when the scenario is malformed as a whole.
    """
    if samples is not None or (isinstance(scenario, dict) and "uncertainty" in scenario):
        if samples is not None:
            from explore.uncertainty import evaluate_samples
            return evaluate_samples(scenario, samples, seed, calibration=calibration)
        scenario = {k: v for k, v in scenario.items() if k != "uncertainty"}
    r = resolve(scenario)
    return evaluate_resolved(r, calibration, keep_invalid=keep_invalid, inputs=inputs,
                             reason_codes=reason_codes, metrics=metrics)


def evaluate_resolved(r: Resolved, calibration: cal.Calibration = cal.DEFAULT, *,
                      keep_invalid: bool = False, inputs: bool = True,
                      reason_codes: bool = False, metrics=None) -> xr.Dataset:
    """``reason_codes``: ``reason`` as integer codes into ``attrs["codes"]`` (sweep stores);
    ``metrics``: the names to return (None: all)."""
    r = Resolved(r.n, {k: fit(a, r.n) for k, a in r.values.items()}, r.name)  # constants: length 1
    share = r.n > 1 and sharing_allowed(calibration)
    rows = (UniqueRows([a for k, a in r.values.items() if k not in STEP_FREE], r.n, most=WORTH_GATHERING * r.n)
            if share else None)       # (more distinct rows than that: not worth sharing, not labelled)
    # designs repeated in every input (the step model's and constant economics): the whole model
    # runs once per distinct design and each returned metric is gathered back once, in _assemble
    whole = (rows is not None and rows.inverse is not None and rows.k <= WORTH_GATHERING * r.n
             and all(is_constant(r.values[k]) for k in STEP_FREE if k in r.values))
    d = Resolved(rows.k, {k: rows.take(a) for k, a in r.values.items()}, r.name) if whole else r
    v = d.values
    model = ModelSpec.from_resolved(d)
    plan = ParallelPlan.from_resolved(d)
    system = build_system(d, sub_domains=False)     # _metrics adds them for the designs it times
    flash = fit(np.asarray(v["training.flash_attention"], bool), d.n)
    recipe = Recipe.from_resolved(d, system)  # issue 11: precision recipe
    keep = None if metrics is None else frozenset(metrics) | {"valid", "reason"}
    out = _metrics(model, plan, system, flash, v, calibration, recipe, n=d.n,
                   rows=None if whole else rows,
                   details=not reason_codes,   # integer reasons carry no per-design texts
                   carbon_wanted=keep is None or any("carbon" in k for k in keep),
                   keep_invalid=keep_invalid)
    # one NaN pass, fused with the copy _assemble makes: the rule violations always, every
    # invalid design unless keep_invalid (a superset: a design with a reason code is invalid)
    rule_bad = out.pop("rule_bad")
    at = out.pop("at")
    nan_at = rule_bad if keep_invalid else ~out["valid"]
    return _assemble(out, r, reason_codes, input_coords(r) if inputs else None, keep=keep,
                     nan_at=nan_at if nan_at.any() else None, rows=rows if whole else None, at=at)


def coord_name(path: str) -> str:
    """Result name of a scenario field: ``system.scale_out.link`` -> ``system_scale_out_link``."""
    return path.replace(".", "_")


def input_attrs(path: str) -> dict:
    """``field``, ``long_name`` and (numeric fields) ``units`` of a scenario input coordinate."""
    return dict(_input_attrs(path))


@functools.lru_cache(maxsize=4096)
def _input_attrs(path: str) -> dict:
    """input_attrs, once per path (the field tables are fixed; callers get a copy)."""
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
        # a varying column usually differs in its first elements: the whole compare only if not
        fixed = a.size <= 1 or (bool((a[:64] == first).all()) and bool((a == first).all()))
        if a.dtype.kind in "UO":
            val = str(a[0]) if fixed else a.astype(str)     # a copy (astype), as np.array below
        else:
            val = a[0] if fixed else np.array(a)
        coords[coord_name(path)] = ((), val, input_attrs(path)) if fixed else \
            (("design",), val, input_attrs(path))
    return coords


STEP_FREE = ("datacenter.pue", "datacenter.electricity_usd_per_kwh", "datacenter.lifetime_years",
             "datacenter.interruptions_per_device_hour", "datacenter.restart_s",
             "datacenter.checkpoint_write_bps_per_device")
"""Inputs the step model does not read (economics and reliability): designs that differ only
in these share one step-model evaluation (``cardinality.per_rows``; tested in test_cardinality)."""

DRAGONFLY_RULE = ("system.scale_out.topology = dragonfly: the job needs more groups than the global ports "
                  "join (groups > ceil(a h global_link_fraction) + 1)")
"""A dragonfly whose endpoints fill more groups than one group's ceil(a h f) global ports can join,
each to every other (Kim et al. 2008: g <= a h + 1), cannot be built (``topologies.dragonfly.counts``
``feasible``; ``dragonfly_graph`` refuses it)."""
# reasons found after the plan rules and the hardware limits (codes follow those tables)
LATE_REASONS = ("optics: link budget does not close (margin < 0 dB)",
                "does not fit in accelerator memory",
                "reliability: interruptions outpace checkpoints (goodput <= 0)",
                "system.accelerator.idle_power_w exceeds tdp_w; allowed: 0 <= idle_power_w <= tdp_w",
                "numerical: a metric is not finite and positive; an input is outside the model's range",
                DRAGONFLY_RULE)
PRECISION_RULE = "training.precision is not supported by the accelerator"


def _metrics(model: ModelSpec, plan: ParallelPlan, system: SystemSpec, flash, v, c, recipe=None,
             n=None, rows=None, details: bool = True, carbon_wanted: bool = True,
             keep_invalid: bool = False) -> dict:
    """Metrics of every design; ``out["reason"]`` is an integer code into ``out["reason_table"]``
    (``details``: also the texts of reasons that name a design's values). Float metrics are not
    yet NaN at rule violations: ``out["rule_bad"]`` marks them (``_assemble`` masks). Carbon
    metrics (all named ``*carbon*``, no validity rule reads them) only if ``carbon_wanted``.

    Validity comes first, for every design (plan rules, hardware and network limits, memory, link
    budget, goodput: none of them reads a time); the step time and everything after it are computed only
    for the designs whose metrics are returned (the valid ones; with ``keep_invalid`` every design
    without a rule violation), plus one other design whose metrics ``_assemble`` sets to NaN for
    the rest. ``out["at"]`` holds those designs' rows (None: every design) and the float metrics
    are at those rows; ``fits_memory``, ``valid`` and ``reason`` (``AT_EVERY_DESIGN``) at every design."""
    # the plan rules read only step-model inputs: once per distinct row, as the step model
    tables = []

    def rules(*a):
        code, table = rule_codes(*a)
        tables.append(table)
        return {"code": code}
    code = per_rows(rules, rows, model, plan, system.devices, np.asarray(system.peak_flops > 0))["code"]
    table = tables[0]
    n = n or code.size
    code = np.broadcast_to(code, (n,)).copy()
    # reasons that name the design's values: (mask, strings) pieces, joined into details below
    notes = [reason_details(plan, code, table, model) if details else None]   # the expert-parallel rule (issue 11), the pipeline split
    valid = code == 0
    if PRECISION_RULE in table:                   # issue 13: name the precision and its peak field
        prec_bad = code == table.index(PRECISION_RULE)
        if details and prec_bad.any():
            p = np.broadcast_to(np.asarray(v["training.precision"]).astype(str), (n,))
            notes.append((prec_bad, _texts(prec_bad, lambda q: (
                f"training.precision: value {q!r} is not supported by the accelerator "
                f"(system.accelerator.peak_flops_{q} = 0); allowed: a precision with peak FLOP/s > 0"), p)))
    hw_code = np.broadcast_to(hardware_invalid_code(system), (n,))  # issue 3: reticle, shoreline, ...
    hw_bad = (hw_code > 0) & valid
    if hw_bad.any():
        code[hw_bad] = hw_code[hw_bad] + (len(table) - 1)
        valid = valid & ~hw_bad
    table = table + tuple(hw_package.REASONS[1:])
    late = {why: len(table) + i for i, why in enumerate(LATE_REASONS)}
    table = table + LATE_REASONS
    idle_bad = valid & ~np.broadcast_to(system.idle_power_w <= system.tdp_w, (n,))
    if idle_bad.any():
        code[idle_bad] = late[LATE_REASONS[3]]
        notes.append(None if not details else (idle_bad, _texts(idle_bad, lambda idle, tdp: (
            f"system.accelerator.idle_power_w: value {idle:g} W exceeds tdp_w = {tdp:g} W; "
            f"allowed: 0 <= idle_power_w <= tdp_w"), system.idle_power_w, system.tdp_w)))
        valid = valid & ~idle_bad
    with np.errstate(divide="ignore", invalid="ignore"):
        mem = per_rows(lambda *a: memory_model(*a[:4], c, a[4]), rows, model, plan, system, flash, recipe)
        fits = np.broadcast_to(mem["total"] <= system.hbm_capacity_bytes, (n,))
        n_params = total_params(model)
        # issue 11: interruption rate per component class, the network's from its bill of materials
        bom = network_bom(system)
        rates = interruption_rates(system.devices, system.nics_per_device, bom["fit"])
        rate_total = where(system.interruptions_given > 0, system.devices * system.interruptions_per_hour,
                              sum(rates.values()))
        gp, tau, delta, mtbi = goodput_model(
            system.devices, rate_total / system.devices, n_params,
            v["datacenter.checkpoint_write_bps_per_device"], v["datacenter.restart_s"])
        gp_ok = gp > 0.0
        gp_c = where(gp_ok, gp, np.nan)
    groups, max_groups = bom.get("dragonfly_groups"), bom.get("dragonfly_max_groups")
    if groups is not None:  # a dragonfly whose global ports cannot join all its groups is not buildable
        df_bad = valid & np.broadcast_to(groups > max_groups, (n,))
        if df_bad.any():
            code[df_bad] = late[DRAGONFLY_RULE]
            valid = valid & ~df_bad
            hw_bad = hw_bad | df_bad
            if details:
                notes.append((df_bad, _texts(df_bad, _dragonfly_text, bom["dragonfly_endpoints"], groups,
                                             max_groups, system.switch_radix,
                                             system.network.global_link_fraction)))
    margin = bom.get("link_budget_margin_db")
    if margin is not None:  # an optical path that cannot close its link budget is not buildable
        optics_bad = valid & (margin < 0)
        code[optics_bad] = late[LATE_REASONS[0]]
        valid = valid & ~optics_bad
        hw_bad = hw_bad | optics_bad
    mem_bad = valid & ~fits
    code[mem_bad] = late[LATE_REASONS[1]]
    gp_bad = valid & fits & ~gp_ok
    code[gp_bad] = late[LATE_REASONS[2]]
    valid = valid & fits & gp_ok
    # rule violations (plan rules, bad inputs) have no meaningful figures: NaN even with keep_invalid
    rule_bad = code != 0
    rule_bad &= ~(mem_bad | gp_bad | hw_bad)

    # --- the designs whose metrics are returned (and one more, the NaN slot of _assemble)
    need = ~rule_bad if keep_invalid else valid
    at = None
    if need.sum() < n - 1 and sharing_allowed(c):
        at = np.flatnonzero(need)
        j = int(np.argmin(need))                  # the first design not returned: the NaN slot
        at = np.insert(at, np.searchsorted(at, j), j)
        model, plan, system, recipe = (take(x, at) for x in (model, plan, system, recipe))
        flash, mem, bom, v, rates, rate_total, n_params, gp_c, tau, delta, mtbi = _at(
            (flash, mem, bom, v, rates, rate_total, n_params, gp_c, tau, delta, mtbi), at)
        rows = rows.at(at) if rows is not None else None
    # the splits of the scale-up domain (torus and OCS families), which only the step's Fabric reads
    system = dataclasses.replace(system, sub_domains=sub_domain_networks(
        Resolved(n if at is None else at.size, v), system.network))
    with np.errstate(divide="ignore", invalid="ignore"):
        parts = tuple(mem)
        st = per_rows(lambda *a: step_model(*a[:4], c, a[4], memory=dict(zip(parts, a[5:]))),
                      rows, model, plan, system, flash, recipe, *mem.values())
        tokens_per_step = plan.global_batch * model.seq_len
        step = st["step_time_s"]
        tps = tokens_per_step / step
        mflops_tok = model_flops_per_token(model)
        mfps = mflops_tok * tps / system.devices
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
            "fits_memory": fits,
            "time_to_train_s": tokens / tps / gp_c,
            "goodput": gp_c,
            "checkpoint_interval_s": tau, "checkpoint_time_s": delta, "mtbi_s": mtbi,
            "interruptions_per_hour": rate_total,  # issue 11: by class (0 when an all-cause rate is given)
            **{f"interruptions_per_hour_{k}": where(system.interruptions_given > 0, 0.0, r)
               for k, r in rates.items()},
            "params": n_params,
            "active_params": active_params(model),  # issue 11
            "microbatches": plan.microbatches,
            "bubble_fraction": bubble_fraction(plan),
            **{k: val for k, val in st.items() if k != "step_time_s" and k != "memory_per_device_bytes"},
            **ec,
        }
        if carbon_wanted:
            out.update(carbon(v, system, ec))   # issue 14: operational + embodied carbon per token
    num_bad = np.zeros_like(valid)
    valid_at = valid if at is None else valid[at]
    num_at = np.zeros_like(valid_at)
    for k in MUST_BE_POSITIVE:   # the last guard: no NaN, inf or negative metric on a valid design
        a = np.broadcast_to(np.asarray(out[k], dtype=float), valid_at.shape)
        new_at = valid_at & ~num_at & ~(np.isfinite(a) & (a > 0))
        if new_at.any():
            new = new_at if at is None else _scatter(new_at, at, n)
            code[new] = late[LATE_REASONS[4]]
            notes.append(None if not details else (new, _texts(new_at, lambda x, k=k: (
                f"numerical: {k} = {x:g} is not finite and positive; an input is outside the "
                f"model's range"), a)))
            num_bad |= new
        num_at |= new_at
    valid = valid & ~num_bad
    notes = [x for x in notes if x is not None]
    details = None
    if notes:
        full = np.empty(n, dtype=object)
        hit = np.zeros(n, bool)
        for m, texts in notes:
            full[m] = texts
            hit |= m
        details = (hit, full[hit])
    out["valid"] = valid
    out["reason"] = code
    out["reason_table"] = table
    out["reason_details"] = details
    out["rule_bad"] = rule_bad
    out["at"] = at
    return out


AT_EVERY_DESIGN = ("fits_memory", "valid", "reason")
"""``_metrics`` outputs held at every design (the others: at the designs ``out["at"]``)."""


def _at(items, idx):
    """Arrays (and dicts, tuples of them) over the designs at the rows ``idx``; constants as they are."""
    if isinstance(items, dict):
        return {k: _at(a, idx) for k, a in items.items()}
    if isinstance(items, tuple):
        return tuple(_at(a, idx) for a in items)
    a = np.asarray(items)
    if a.ndim == 0 or a.shape[0] == 1:
        return items
    if a.ndim == 1 and a.strides[0] == 0:          # one value broadcast over the designs
        return a[:1]
    return np.take(a, idx, axis=0)


def _scatter(mask_at, at, n):
    """A mask over the designs ``at`` as a mask over all ``n`` designs."""
    out = np.zeros(n, dtype=bool)
    out[at[mask_at]] = True
    return out


def _dragonfly_text(endpoints, groups, max_groups, radix, fraction) -> str:
    """The reason of a dragonfly with more groups than its global ports join, naming the design's
    values and what to change (``topologies.dragonfly``: g <= ceil(a h f) + 1)."""
    p, a, h = (int(x) for x in dragonfly.balanced(radix))
    ports = int(max_groups) - 1                       # ceil(a h f): the fraction as the BOM rounded it
    most = f"{int(max_groups)} groups ({int(max_groups) * p * a} endpoints)"
    if groups - 1 <= a * h:
        change = (f"system.scale_out.global_link_fraction > {(groups - 2) / (a * h):.6g} "
                  f"(ceil(a h f) >= {int(groups) - 1} of the a h = {a * h} global ports per group), a switch "
                  f"of higher radix, or fewer endpoints (at most {int(max_groups) * p * a})")
    else:
        change = (f"a switch of higher radix (even global_link_fraction = 1 joins at most a h + 1 = "
                  f"{a * h + 1} groups, {(a * h + 1) * p * a} endpoints), or fewer endpoints "
                  f"(at most {int(max_groups) * p * a})")
    return (f"system.scale_out.topology = dragonfly: {int(endpoints)} endpoints (devices x nics_per_device "
            f"x switch ports per NIC) need {int(groups)} groups of p a = {p * a} (radix {int(radix)}: p = {p}, "
            f"a = {a}, h = {h}), but system.scale_out.global_link_fraction = {fraction:.6g} wires "
            f"ceil(a h f) = {ports} of the {a * h} global ports per group, which join at most {most}; "
            f"allowed: groups <= ceil(a h f) + 1: "
            f"{change}")


def _texts(mask: np.ndarray, text, *arrays) -> np.ndarray:
    """text(*values) for the designs in ``mask``, formatted once per distinct tuple of values
    (no loop per design); object array of strings, in mask order."""
    cols = [np.broadcast_to(np.asarray(a), mask.shape)[mask] for a in arrays]
    if all(c.dtype.kind in "iuf" for c in cols):
        uniq, inv = np.unique(np.column_stack([c.astype(float) for c in cols]), axis=0, return_inverse=True)
    else:
        uniq, inv = np.unique(np.column_stack([c.astype(str) for c in cols]), axis=0, return_inverse=True)
    texts = np.array([text(*row) for row in uniq], dtype=object)
    return texts[np.asarray(inv).ravel()]


def _assemble(out: dict, r: Resolved, reason_codes: bool = False, coords: dict | None = None,
              keep=None, nan_at=None, rows: UniqueRows | None = None, at=None) -> xr.Dataset:
    """Units (and breakdown tags) attached as each variable is built, last, as xarray drops attrs.

    ``reason`` becomes strings (``""`` where valid), or stays integer codes into its
    ``codes`` attribute with ``reason_codes`` (then without the per-design details).
    Only the names in ``keep`` (None: all); float metrics are NaN where ``nan_at``. With
    ``rows``, ``out`` holds the distinct designs ``rows.index``: each metric is gathered back.
    With ``at`` (``_metrics``), the metrics other than ``AT_EVERY_DESIGN`` are held at those
    (distinct) designs only, every other design being masked (one of them among ``at``)."""
    n = r.n
    out = dict(out)
    table = out.pop("reason_table", None)
    details = out.pop("reason_details", None)
    units = {"time_s": "s", "energy_j": "J", "capex_usd": "USD", "power_w": "W", "memory_bytes": "B",
             "carbon_kg": "kgCO2e"}
    data = {}
    nan_n = None      # nan_at at the batch's rows (with ``rows``)
    slot = None       # with ``rows``: the inverse, masked designs sent to one masked distinct design
    slot_at = None    # with ``at``: each design's row among ``at``, masked designs sent to a masked one
    for k, a in out.items():
        if keep is not None and k not in keep:
            continue
        a = np.asarray(a)
        some = at is not None and k not in AT_EVERY_DESIGN   # ``a`` is over the designs ``at``
        at_rows = rows is not None or some        # ``a`` is gathered below
        index = None if rows is None else rows.inverse
        masked = nan_at is not None and a.dtype.kind == "f"
        if at_rows and is_constant(a):     # a constant: masked at the batch's rows directly
            at_rows = False
            if masked:
                if nan_n is None:
                    nan_n = nan_at if rows is None else rows.gather(nan_at)
                a = where(nan_n, np.nan, a)
        elif some:
            if a.dtype.kind != "f":
                raise AssertionError(f"{k}: a metric held at some designs only must be a float")
            if slot_at is None:
                j = int(np.argmax(nan_at[at]))          # a masked design among ``at``
                pos = np.full(nan_at.size, j, dtype=np.intp)
                pos[at] = np.arange(at.size)
                pos[nan_at] = j
                slot_at = pos if rows is None else np.take(pos, rows.inverse)
            if not a.flags.writeable:
                a = np.array(a)
            a[j] = np.nan       # ``a`` is this call's own array (computed on the designs ``at``)
            index = slot_at
        elif masked and at_rows and a.flags.writeable:
            # NaN at one masked distinct design, which every masked design of the batch reads:
            # the gather masks (``a`` is this call's own array, the model ran on a private copy)
            if slot is None:
                if nan_n is None:
                    nan_n = rows.gather(nan_at)
                slot = rows.inverse.copy()
                slot[nan_n] = j0 = int(np.argmax(nan_at))
            a[j0] = np.nan
            index = slot
        elif masked:
            a = where(nan_at, np.nan, a)        # a new array (constants broadcast)
        bd = breakdown_of(k)
        if bd:
            attrs = {"units": units[bd[0]], "long_name": f"{bd[0].rpartition('_')[0]}: "
                     f"{bd[1].replace('_', ' ')}", "breakdown": bd[0], "component": bd[1]}
        else:
            attrs = {"long_name": LONG_NAMES.get(k, k.replace("_", " "))}
            u = UNITS.get(k, "1" if a.dtype.kind in "iuf" else None)
            if u is not None and a.dtype.kind not in "bUOS":
                attrs["units"] = u
        if k == "reason" and table is not None:
            if reason_codes:
                a = a.astype(np.int16)
                attrs = {"long_name": LONG_NAMES["reason"], "codes": list(table)}  # codes[0] = "" (valid)
            else:
                a = np.asarray(table, dtype=object)[a]
                if details is not None:
                    a[details[0]] = details[1]
        if at_rows:
            a = np.take(a, index, axis=0)
        if a.shape != (n,) or a.strides[0] == 0:   # scalars and broadcast views: own the data
            a = np.array(np.broadcast_to(a, (n,)))
        # object strings (reason): skip xarray's per-element conversion of object arrays; plain
        # numeric arrays: xarray's checks would keep them as they are (fastpath: no checks)
        data[k] = xr.Variable(("design",), a, attrs,
                              fastpath=a.dtype.kind == "O" or (type(a) is np.ndarray and a.dtype.kind in "fiub"))
    ds = _dataset(data, coords or {}, n)
    ds.attrs["scenario_name"] = r.name
    return ds


