"""Vectorised bill of materials, capex and power of every scale-out family (the hot path).

Each family is an inventory of link classes (count, rate, length, OCS hops);
a link class uses the design's optics technology, except that ``copper``
applies only within copper reach and falls back to the DSP pluggable beyond
it. Per optical link: two ends (transceivers / engines) at the link-budget
power ``hwmodels.optics.port_power_w`` (each OCS crossed adds its insertion
loss, so raises the laser power) and a fibre; per copper link one cable.
Counts per family (N = NIC endpoints, T tiers, o oversubscription):

* fat-tree, rail-optimized: ``topologies.fat_tree.bill_of_materials``; N endpoint
  links (2 m), N/o leaf-spine links (30 m), N (T-2)/o spine-core links (100 m).
* dragonfly (balanced for the switch radix): ``topologies.dragonfly.counts``;
  endpoint links 2 m, local 5 m, global 50 m.
* torus: devices * nics / 2 neighbour links (5 m), no switches.
* ocs-torus: ``topologies.ocs.counts``; a fraction 1 - 1/c of links inside cubes
  (1.5 m), 1/c through one OCS (2 x 50 m fibre).
* ocs-reconfigurable: every NIC port through one OCS (2 x 50 m), no packet switch.

Lengths are estimates of a row-scale layout (leaf at top of rack, spines at
end of row, core and OCS rows across the hall).
"""
from __future__ import annotations

import numpy as np

from hwmodels import optics as opt
from hwmodels.parts import get_part
from hwmodels.switches import ports_per_endpoint
from topologies import dragonfly, fat_tree, ocs
from topologies.network import (DRAGONFLY, FAT_TREE, OCS_RECONF, OCS_TORUS, RAIL, TORUS,
                                NetworkSpec)

LEN_ENDPOINT_M, LEN_LEAF_SPINE_M, LEN_CORE_M = 2.0, 30.0, 100.0
LEN_LOCAL_M, LEN_GLOBAL_M, LEN_TORUS_M, LEN_CUBE_M, LEN_OCS_M = 5.0, 50.0, 5.0, 1.5, 100.0
COMPONENTS = ("switches", "transceivers", "ocs", "cables", "fibre")


def _techs():
    return [opt.LinkTech.of(t) for t in opt.TECHNOLOGIES]


_TECH_CACHE: list = []


def _tech_table():
    """Parameters of the five technologies stacked by code (arrays indexed by optics code)."""
    if not _TECH_CACHE:
        ts = _techs()
        fields = opt.LinkTech.__dataclass_fields__
        _TECH_CACHE.append(opt.LinkTech(**{f: np.array([float(getattr(t, f)) for t in ts]) for f in fields}))
    return _TECH_CACHE[0]


def _select(table: opt.LinkTech, code) -> opt.LinkTech:
    return opt.LinkTech(**{f: getattr(table, f)[code] for f in opt.LinkTech.__dataclass_fields__})


def link_classes(net: NetworkSpec, devices, su_size, nics_per_device, nic_bandwidth_bps,
                 switch_radix, switch_port_bandwidth_bps, oversubscription):
    """Switch/OCS counts and the link classes [(count, rate_bps, length_m, ocs_hops)] per design."""
    f = net.family
    d = np.asarray(devices, dtype=float)
    nics = np.asarray(nics_per_device, dtype=float)
    ppn = ports_per_endpoint(nic_bandwidth_bps, switch_port_bandwidth_bps)
    ep = np.ceil(d * nics) * ppn
    ep_rate = nic_bandwidth_bps / ppn
    ft = fat_tree.bill_of_materials(ep, switch_radix, oversubscription)
    t = ft["tiers"]
    o = np.asarray(oversubscription, dtype=float)
    p, a, h = dragonfly.balanced(switch_radix)
    df = dragonfly.counts(ep, p, a, h)
    nodes = d / su_size
    oc = ocs.counts(nodes, net.cube_dim, net.ocs_radix)
    ends = d * nics
    switched = (f == FAT_TREE) | (f == RAIL)
    z = np.zeros_like(d)
    switches = np.where(switched, ft["switches"], np.where(f == DRAGONFLY, df["routers"], z))
    frac_ocs = 1.0 / net.cube_dim
    # a node with more than one port per torus direction needs that many OCS planes
    n_ocs = np.where(f == OCS_TORUS, oc["ocs"] * np.ceil(su_size * nics / 6.0 - 1e-9),
                     np.where(f == OCS_RECONF, np.ceil(ends / net.ocs_radix), z))
    sw_bw = switch_port_bandwidth_bps
    classes = [
        # endpoint links (switched families)
        (np.where(switched | (f == DRAGONFLY), ep, z), ep_rate, LEN_ENDPOINT_M, 0.0),
        (np.where(switched & (t >= 2), ep / o, z), sw_bw, LEN_LEAF_SPINE_M, 0.0),
        (np.where(switched & (t >= 3), ep * np.maximum(t - 2, 0) / o, z), sw_bw, LEN_CORE_M, 0.0),
        (np.where(f == DRAGONFLY, df["local_links"], z), sw_bw, LEN_LOCAL_M, 0.0),
        (np.where(f == DRAGONFLY, df["global_links"], z), sw_bw, LEN_GLOBAL_M, 0.0),
        (np.where(f == TORUS, ends / 2, z), nic_bandwidth_bps, LEN_TORUS_M, 0.0),
        (np.where(f == OCS_TORUS, ends / 2 * (1 - frac_ocs), z), nic_bandwidth_bps, LEN_CUBE_M, 0.0),
        (np.where(f == OCS_TORUS, ends / 2 * frac_ocs, z), nic_bandwidth_bps, LEN_OCS_M, 1.0),
        (np.where(f == OCS_RECONF, ends / 2, z), nic_bandwidth_bps, LEN_OCS_M, 1.0),
    ]
    return {"switches": switches, "switch_ports": np.where(switched, ft["switch_ports"], z),
            "tiers": np.where(switched, t, z), "ocs": n_ocs,
            "ocs_ports": np.where(f == OCS_TORUS, ends * frac_ocs, np.where(f == OCS_RECONF, ends, z)),
            "nics": ends}, classes


def network_bom(net: NetworkSpec, devices, su_size, nics_per_device, nic_bandwidth_bps, switch_radix,
                switch_port_bandwidth_bps, oversubscription, switch_power_w, switch_cost_usd):
    """Counts, capex (USD) and power (W) by component of the scale-out network, per design."""
    counts, classes = link_classes(net, devices, su_size, nics_per_device, nic_bandwidth_bps,
                                   switch_radix, switch_port_bandwidth_bps, oversubscription)
    table = _tech_table()
    copper = _select(table, np.zeros_like(net.optics))
    is_cu_choice = net.optics == 0
    fibre = get_part("cables", "fibre-smf")
    z = np.zeros_like(np.asarray(devices, dtype=float))
    tr_n = tr_w = tr_usd = cu_n = cu_w = cu_usd = fib_n = fib_m = fib_usd = z
    margin = np.full_like(z, np.inf)
    laser = z
    override = np.isfinite(net.transceiver_power_w)
    for count, rate, length, hops in classes:
        use_cu = is_cu_choice & (length <= copper.reach_m)
        t_opt = _select(table, np.where(is_cu_choice, 1, net.optics))    # optical fallback for copper
        il = net.ocs_insertion_loss_db
        e_w = opt.port_power_w(t_opt, rate, length, hops, il)
        e_w = np.where(override, net.transceiver_power_w, e_w)
        e_usd = np.where(override, net.transceiver_cost_usd, opt.port_cost_usd(t_opt, rate))
        n_opt = np.where(use_cu, 0.0, count)
        n_cu = np.where(use_cu, count, 0.0)
        tr_n = tr_n + 2 * n_opt
        tr_w = tr_w + 2 * n_opt * e_w
        tr_usd = tr_usd + 2 * n_opt * e_usd
        cu_n = cu_n + n_cu
        cu_w = cu_w + n_cu * opt.port_power_w(copper, rate, length)
        cu_usd = cu_usd + n_cu * opt.port_cost_usd(copper, rate)
        fib_n = fib_n + n_opt
        fib_m = fib_m + n_opt * length
        fib_usd = fib_usd + n_opt * (fibre["cost_usd_per_m"] * length + fibre["cost_usd_per_link"])
        m = opt.budget_margin_db(t_opt, length, hops, il)
        margin = np.where(n_opt > 0, np.minimum(margin, m), margin)
        laser = np.where(n_opt > 0, np.maximum(laser, opt.laser_power_w(t_opt, length, hops, il)), laser)
    capex = {"switches": counts["switches"] * switch_cost_usd, "transceivers": tr_usd,
             "ocs": counts["ocs"] * net.ocs_cost_usd, "cables": cu_usd, "fibre": fib_usd}
    power = {"switches": counts["switches"] * switch_power_w, "transceivers": tr_w,
             "ocs": counts["ocs"] * net.ocs_power_w, "cables": cu_w, "fibre": z}
    counts.update(transceivers=tr_n, copper_cables=cu_n, fibres=fib_n, fibre_m=fib_m,
                  link_budget_margin_db=margin, laser_power_w_per_lane=laser)
    return counts, capex, power
