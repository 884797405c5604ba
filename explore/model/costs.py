"""Energy and cost per step from the system's components.

Accelerator power: idle power all the time, plus (TDP - idle) while computing
(the step model's busy time), plus (waiting power - idle) while it waits on
communication or a pipeline bubble (``waiting_power_w``, a cited measurement).
Host power is the server's rated share net of the NVSwitch and NIC power, which the
scale-up and NIC entries charge (hwmodels/catalog/accelerators.toml); hosts draw
``HOST_POWER_FRACTION_OF_RATED`` of it (the measured average of GPU servers in training,
not their rated maximum) for the whole step. Scale-up switches, NICs and the scale-out
network (switches, transceivers, OCS, copper cables, fibre; ``topologies.bom``) draw
their rated power for the whole step. Facility energy = IT energy x PUE. Capex is amortised
linearly over ``lifetime_years`` (Epoch AI's straight-line depreciation,
docs/reference/hardware.md sec. 7 [E3]); electricity at ``electricity_usd_per_kwh``.
"""
from __future__ import annotations

import numpy as np
from hwmodels.select import where

from explore.model.cardinality import UniqueRows, per_rows, sharing_allowed
from explore.model.system import SystemSpec
from topologies import fat_tree

SECONDS_PER_YEAR = 365.25 * 86400.0


def network_bom(s: SystemSpec) -> dict[str, np.ndarray]:
    """Scale-out fabric counts (endpoints = devices * nics_per_device) plus, under the keys
    ``capex_usd`` and ``power_w``, its components by ``topologies.bom.COMPONENTS``.

    With ``s.network`` (issue 4) every family and link technology is costed by
    ``topologies.bom``; without it, the foundation's fat-tree with fixed-power
    transceivers."""
    endpoints = np.ceil(s.devices * s.nics_per_device)
    single_domain = s.devices <= s.su_size
    net = getattr(s, "network", None)
    if net is not None:
        out, capex, power = _network_bom_per_hardware(s)   # zero for a single domain
        out["reconfig_s_per_step"] = where(single_domain, 0.0, net.reconfigs_per_step * net.ocs_reconfig_s
                                              * (net.family == 5))
        out["nics"] = where(single_domain, 0.0, endpoints)
        out["capex_usd"], out["power_w"] = capex, power
        return out
    # a NIC port faster than the switch port uses several switch ports
    ports_per_nic = np.maximum(np.ceil(s.nic_bandwidth_bps / s.switch_port_bandwidth_bps), 1.0)
    bom = fat_tree.bill_of_materials(endpoints * ports_per_nic, s.switch_radix, s.oversubscription)
    out = {k: where(single_domain, 0.0, v) for k, v in bom.items()} | {
        "nics": where(single_domain, 0.0, endpoints)}
    out["capex_usd"] = {"switches": out["switches"] * s.switch_cost_usd,
                        "transceivers": out["transceivers"] * s.transceiver_cost_usd}
    out["power_w"] = {"switches": out["switches"] * s.switch_power_w,
                      "transceivers": out["transceivers"] * s.transceiver_power_w}
    return out


PLAN_TRAFFIC = ("dp_bytes_per_node", "pp_bytes_per_node", "reconfigs_per_step")
"""NetworkSpec fields that follow the plan; the bill of materials does not read them."""


def _network_bom_per_hardware(s: SystemSpec):
    """``topologies.bom.network_bom`` once per distinct hardware (fabric, its parts, device count),
    gathered back to the designs (``explore.model.cardinality``); a job inside one scale-up
    domain has no scale-out network (zero counts, capex and power; infinite link margin)."""
    import dataclasses
    from topologies import bom as net_bom
    args = (s.devices, s.su_size, s.nics_per_device, s.nic_bandwidth_bps, s.switch_radix,
            s.switch_port_bandwidth_bps, s.oversubscription, s.switch_power_w, s.switch_cost_usd)
    net = dataclasses.replace(s.network, **{f: np.full(1, np.nan) for f in PLAN_TRAFFIC})
    cols = list(args)
    for f in dataclasses.fields(net):
        a = getattr(net, f.name)
        cols.extend(a if isinstance(a, tuple) else (a,))
    n = max(np.size(a) for a in cols)
    rows = UniqueRows(cols, n) if n > 1 and sharing_allowed() else None

    def flat(*a):
        counts, capex, power = net_bom.network_bom(*a)
        single = a[1] <= a[2]                       # devices <= scale-up size
        zero = lambda d: {k: where(single, 0.0, v) for k, v in d.items()}  # noqa: E731
        margin = where(single, np.inf, counts.pop("link_budget_margin_db"))
        counts, capex, power = zero(counts), zero(capex), zero(power)
        counts["link_budget_margin_db"] = margin
        return {**{("n", k): v for k, v in counts.items()}, **{("c", k): v for k, v in capex.items()},
                **{("p", k): v for k, v in power.items()}}
    out = per_rows(flat, rows, net, *args)
    return tuple({k: v for (t, k), v in out.items() if t == part} for part in "ncp")


HOST_POWER_FRACTION_OF_RATED = 0.75
"""Average draw of a GPU server's host (CPUs, DRAM, storage, fans, PSU losses) during training
as a fraction of its rated share (the catalog's ``host_power_w``: the server's rated maximum
per accelerator less the GPU TDP and the NVSwitch and NIC shares). Epoch AI's
``server_TDP_fraction`` for GPU servers (epoch-research/training-cost-trends energy.py,
docs/reference/hardware.md sec. 7 [E2]): servers draw 75 % of their rated power during
training. Measured on an 8-GPU H100 node training Llama2-13b and ResNet (Latif et al. 2024,
arXiv:2412.08602, abstract; [E5]): at most ~8.4 kW of the rated 10.2 kW (82 %) with the GPUs near
full utilisation; Newkirk et al. 2025 (arXiv:2506.14551, abstract; [E6]): 76 % of 10.2 kW for
compute-intensive training. Applied to the host alone, which is conservative: the GPUs, whose
power lightpath models from the step's busy and waiting time, draw nearer their TDP than the
node does its rating."""


def capex_and_power(s: SystemSpec, bom=None) -> tuple[dict, dict]:
    """Capex (USD) and static power (W) by component, whole cluster (``bom``: a precomputed network_bom)."""
    bom = network_bom(s) if bom is None else bom
    capex = {
        "accelerators": s.devices * s.price_usd,
        "hosts": s.devices * s.host_price_usd,
        "scale_up": s.devices * s.su_cost_usd,
        "nics": bom["nics"] * s.nic_cost_usd,
        **bom["capex_usd"],
    }
    power = {
        "accelerators_idle": s.devices * s.idle_power_w,
        "hosts": s.devices * HOST_POWER_FRACTION_OF_RATED * s.host_power_w,
        "scale_up": s.devices * s.su_power_w,
        "nics": bom["nics"] * s.nic_power_w,
        **bom["power_w"],
    }
    return capex, power, bom


def split_accelerator(s: SystemSpec, capex: dict, energy: dict) -> None:
    """Replace the accelerator capex and energy entries by hardware components (in place).

    Only for a parametric accelerator (``s.accelerator_parts`` from
    ``hwmodels.package.build``): capex splits by each component's share of the
    unit cost (price = cost x markup, so shares carry over); idle energy by
    static-power shares, busy energy by dynamic-power-at-TDP shares. Totals are
    unchanged.
    """
    hw = s.accelerator_parts
    if hw is None:
        return
    total = capex.pop("accelerators")
    cost = {k[len("cost_usd_"):]: v for k, v in hw.items() if k.startswith("cost_usd_")}
    csum = sum(cost.values())
    for k, v in cost.items():
        capex[k] = total * where(csum > 0, v / csum, 0.0)
    e_idle, e_busy = energy.pop("accelerators_idle"), energy.pop("accelerators_busy")
    for prefix, e in (("static_power_w_", e_idle), ("dynamic_power_w_", e_busy)):
        parts = {k[len(prefix):]: v for k, v in hw.items() if k.startswith(prefix)}
        psum = sum(parts.values())
        for k, v in parts.items():
            energy[k] = energy.get(k, 0.0) + e * where(psum > 0, v / psum, 0.0)


WAIT_POWER_FRACTION_OF_TDP = 0.49
"""Accelerator power while it waits inside a running job, as a fraction of its busy power (taken
as TDP). Derived from "The Energy Cost of Execution-Idle in GPU Clusters" (arXiv:2604.04745,
abstract): the execution-idle state is 19.7 % of in-execution time and 10.7 % of energy, so its
power is (0.107 / 0.893) / (0.197 / 0.803) = 0.49 of the busy power, across GPU generations."""


def waiting_power_w(s: SystemSpec):
    return np.maximum(WAIT_POWER_FRACTION_OF_TDP * s.tdp_w, s.idle_power_w)


def energy_and_cost(s: SystemSpec, step_time_s, busy_time_s, tokens_per_step, goodput,
                    pue, usd_per_kwh, lifetime_years, bom=None) -> dict[str, np.ndarray]:
    capex, static_power, bom = capex_and_power(s, bom)
    dyn_power = s.devices * (s.tdp_w - s.idle_power_w)
    energy = {k: p * step_time_s for k, p in static_power.items()}
    energy["accelerators_busy"] = dyn_power * busy_time_s
    # waiting on communication or a pipeline bubble is not idle: the GPU stays clocked up with
    # collective kernels spinning (waiting_power_w above the idle floor for the waiting time)
    wait_extra = s.devices * np.maximum(waiting_power_w(s) - s.idle_power_w, 0.0)
    energy["accelerators_waiting"] = wait_extra * np.maximum(step_time_s - busy_time_s, 0.0)
    it_energy = sum(energy.values())
    facility_energy = it_energy * pue
    energy["facility_overhead"] = it_energy * (pue - 1.0)
    split_accelerator(s, capex, energy)  # issue 3: parametric accelerator components
    capex_total = sum(capex.values())
    amort_usd = capex_total / (lifetime_years * SECONDS_PER_YEAR) * step_time_s
    energy_usd = facility_energy / 3.6e6 * usd_per_kwh
    trained = tokens_per_step * goodput
    out = {
        "energy_per_token_j": facility_energy / trained,
        "cost_per_token_usd": (amort_usd + energy_usd) / trained,
        "capex_usd": capex_total,
        "power_w": facility_energy / step_time_s,
        "energy_per_step_j": facility_energy,
        "cost_per_step_usd": amort_usd + energy_usd,
    }
    for k, v in capex.items():
        out[f"capex_usd_{k}"] = v
    for k, v in energy.items():
        out[f"energy_j_{k}"] = v
        out[f"power_w_{k}"] = v / step_time_s
    out["network_switches"] = bom["switches"]
    out["network_transceivers"] = bom["transceivers"]
    for k in ("ocs", "ocs_ports", "fibres", "fibre_m", "copper_cables", "link_budget_margin_db",
              "laser_power_w_per_lane", "reconfig_s_per_step", "fit"):
        if k in bom:  # issue 4: network inventory and optical link budget
            out[f"network_{k}"] = bom[k]
    return out
