"""Carbon per trained token: operational (grid) plus embodied (manufacturing), amortised like capex.

Operational: facility energy x grid carbon intensity (``datacenter.grid``, a
``hwmodels/catalog/grid.toml`` region, or ``datacenter.grid_kg_per_kwh``).

Embodied, per accelerator (ACT, Gupta et al. ISCA 2022): each logic die
``area x (CI_fab x EPA + GPA + MPA) / yield`` with the node's ACT figures and
lightpath's negative-binomial yield of that die, plus HBM (kg per GB),
``package_kg_per_ic`` per die and stack, and the board; per host share, NIC,
packet switch, transceiver and OCS a fixed figure (``catalog/carbon.toml``).
Embodied carbon is amortised linearly over ``lifetime_years`` exactly as capex
is (``costs.py``): ``E_emb / lifetime x step time`` per step.
"""
from __future__ import annotations

import numpy as np
from hwmodels.select import where

from explore.model.costs import SECONDS_PER_YEAR
from hwmodels import package as hw_package
from hwmodels import silicon
from hwmodels.codes import codes as hw_codes
from hwmodels.parts import lookup, part_ids, table

# ACT publishes 7/5/3 nm classes; lightpath's nodes map onto them (n4/n4p are 5 nm-class, n2 has none).
ACT_CLASS = {"n7": "act-7nm", "n6": "act-7nm", "n5": "act-5nm", "n4": "act-5nm", "n4p": "act-5nm",
             "n3": "act-3nm", "n2": "act-3nm"}
MFG = "manufacturing"
MFG_FIELDS = ("fab_grid_kg_per_kwh", "package_kg_per_ic", "hbm_kg_per_gb", "board_kg_per_accelerator",
              "host_kg_per_accelerator", "nic_kg", "switch_kg", "transceiver_kg", "ocs_kg")


def logic_die_kg(area_mm2, node_ids, fab_grid_kg_per_kwh):
    """Embodied kg CO2e of one good logic die (ACT): area x CPA / yield."""
    nodes = np.asarray(node_ids)
    act = np.vectorize(lambda x: ACT_CLASS.get(str(x), "act-3nm"), otypes=[str])(nodes) if nodes.size < 64 \
        else _act_ids(nodes)
    f = table("carbon", act, ("epa_kwh_per_cm2", "gpa_kg_per_cm2", "mpa_kg_per_cm2"))
    nd = table("process_nodes", nodes, ("defect_density_per_cm2", "clustering_alpha"))
    y = silicon.negative_binomial_yield(area_mm2, nd["defect_density_per_cm2"], nd["clustering_alpha"])
    cpa = fab_grid_kg_per_kwh * f["epa_kwh_per_cm2"] + f["gpa_kg_per_cm2"] + f["mpa_kg_per_cm2"]
    return np.asarray(area_mm2, float) / 100.0 * cpa / y


def _act_ids(nodes):
    uniq, code = hw_codes(nodes, part_ids("process_nodes"))
    return np.array([ACT_CLASS.get(str(u), "act-3nm") for u in uniq])[code]


DESIGN_KEYS = ("compute_dies", "die_area_mm2", "node", "io_dies", "io_die_area_mm2", "io_node",
               "hbm_stacks", "hbm_stack_capacity_bytes")


def accelerator_design(v: dict, n: int, per_element: bool = True):
    """(fields, code): die areas, nodes and HBM of each design's accelerator, the
    reconstruction of its catalog part (``accelerator_designs.toml``; the default design
    for parts without one) overridden by inline parametric fields. With
    ``per_element=False`` and no inline field, the fields are per unique part and ``code``
    maps designs onto them (fewer string look-ups); otherwise ``code`` is None."""
    base = np.broadcast_to(v.get("system.accelerator", np.array([hw_package.DEFAULT_DESIGN])), (n,))
    uniq, code = hw_codes(base, part_ids("accelerators"))
    known = set(hw_package.design_ids())
    design = np.array([u if u in known else hw_package.DEFAULT_DESIGN for u in uniq])
    d = hw_package.design_params(design)
    given = {k: v[f"system.accelerator.{k}"] for k in DESIGN_KEYS if f"system.accelerator.{k}" in v}
    if not per_element and not given:
        return {k: np.broadcast_to(d[k], (len(uniq),)) for k in DESIGN_KEYS}, code
    out = {k: (np.broadcast_to(given[k], (n,)) if k in given else np.broadcast_to(d[k], (len(uniq),))[code])
           for k in DESIGN_KEYS}
    return out, None


def accelerator_kg(a: dict, m: dict) -> np.ndarray:
    """Embodied kg CO2e of one accelerator: logic dies (ACT), HBM, package per IC, board."""
    dies = logic_die_kg(a["die_area_mm2"], a["node"], m["fab_grid_kg_per_kwh"]) * a["compute_dies"]
    io_area = where(a["io_dies"] > 0, a["io_die_area_mm2"], 1.0)
    io = where(a["io_dies"] > 0, a["io_dies"] * logic_die_kg(io_area, a["io_node"], m["fab_grid_kg_per_kwh"]), 0.0)
    hbm = a["hbm_stacks"] * a["hbm_stack_capacity_bytes"] / 1e9 * m["hbm_kg_per_gb"]
    pkg = (a["compute_dies"] + a["io_dies"] + a["hbm_stacks"]) * m["package_kg_per_ic"]
    return dies + io + hbm + pkg + m["board_kg_per_accelerator"]


def embodied_kg(v: dict, n: int, s, bom: dict) -> dict[str, np.ndarray]:
    """Embodied kg CO2e of the whole cluster by component (``v``: resolved scenario values).

    Without a catalog perturbation (explore.uncertainty) the accelerator term is computed
    once per catalog part; with one, per design element so that sampled figures apply."""
    from hwmodels.parts import PERTURBATION
    # one manufacturing entry: length 1 (broadcasts), per element only while figures are perturbed
    mfg_id = np.array([MFG]) if PERTURBATION.get() is None else np.broadcast_to(np.array([MFG]), (n,))
    m = {f: lookup("carbon", mfg_id, f) for f in MFG_FIELDS}
    a, code = accelerator_design(v, n, per_element=PERTURBATION.get() is not None)
    if code is None:
        per_acc = accelerator_kg(a, m)
    else:
        m1 = {f: lookup("carbon", np.array([MFG]), f) for f in MFG_FIELDS}
        per_acc = accelerator_kg(a, m1)[code]
    d = s.devices
    return {
        "accelerators": d * per_acc,
        "hosts": d * m["host_kg_per_accelerator"],
        "nics": bom["nics"] * m["nic_kg"],
        "switches": bom["switches"] * m["switch_kg"],
        "transceivers": bom["transceivers"] * m["transceiver_kg"],
        "ocs": bom.get("ocs", 0.0) * m["ocs_kg"],
    }


def grid_kg_per_kwh(v: dict, n: int) -> np.ndarray:
    if "datacenter.grid_kg_per_kwh" in v:
        return np.asarray(v["datacenter.grid_kg_per_kwh"], float)
    return lookup("grid", np.broadcast_to(v["datacenter.grid"], (n,)), "kg_per_kwh")


def carbon(v: dict, s, out: dict) -> dict[str, np.ndarray]:
    """Carbon metrics from the energy/cost outputs ``out`` (per step) of ``costs.energy_and_cost``:
    ``carbon_per_token_kg``, ``carbon_per_step_kg``, ``embodied_carbon_kg`` (whole cluster)
    and the per-step breakdown ``carbon_kg_operational`` / ``carbon_kg_embodied_<component>``."""
    step = out["energy_per_step_j"] / out["power_w"]
    bom = {"nics": _nics(s), "switches": out["network_switches"], "transceivers": out["network_transceivers"],
           "ocs": out.get("network_ocs", 0.0)}
    n = max(np.size(a) for a in v.values())   # inputs may be constants (length 1) or per design
    emb = embodied_kg(v, n, s, bom)
    life_s = np.asarray(v["datacenter.lifetime_years"], float) * SECONDS_PER_YEAR
    op = out["energy_per_step_j"] / 3.6e6 * grid_kg_per_kwh(v, n)
    res = {"carbon_kg_operational": op}
    for k, e in emb.items():
        res[f"carbon_kg_embodied_{k}"] = e / life_s * step
    per_step = sum(res.values())
    tokens = out["energy_per_step_j"] / out["energy_per_token_j"]
    res["carbon_per_step_kg"] = per_step
    res["carbon_per_token_kg"] = per_step / tokens
    res["embodied_carbon_kg"] = sum(emb.values())
    res["embodied_carbon_share"] = (per_step - op) / per_step
    return res


def _nics(s) -> np.ndarray:
    """NICs of the scale-out fabric (0 for a single scale-up domain), as costs.network_bom counts them."""
    single = s.devices <= s.su_size
    return where(single, 0.0, np.ceil(s.devices * s.nics_per_device))


def profile_mean_kg_per_kwh(profile_kg_per_kwh, start_hour, duration_s) -> np.ndarray:
    """Time-average grid intensity over a run of ``duration_s`` starting at ``start_hour``
    (hours since the profile's origin) for an hourly, periodic profile (24 values for a day,
    8760 for a year; any length). Exact for a constant load: the integral of the step
    profile over [t0, t0 + T] / T, from its cumulative sum (vectorised over designs).
    Use it to set ``datacenter.grid_kg_per_kwh`` from an hourly profile."""
    p = np.asarray(profile_kg_per_kwh, float)
    n = len(p)
    cum = np.concatenate([[0.0], np.cumsum(p)])              # integral over whole hours

    def integral(t_h):                                        # integral of the profile from 0 to t (hours)
        t_h = np.asarray(t_h, float)
        periods, rest = np.divmod(t_h, n)
        k = np.floor(rest).astype(int)
        return periods * cum[-1] + cum[k] + (rest - k) * p[np.minimum(k, n - 1)]

    t0 = np.asarray(start_hour, float)
    T = np.asarray(duration_s, float) / 3600.0
    return (integral(t0 + T) - integral(t0)) / T
