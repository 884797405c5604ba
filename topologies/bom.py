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
* dragonfly (balanced for the switch radix, global links tapered by
  ``global_link_fraction`` f: g ceil(a h f) / 2 of them): ``topologies.dragonfly.counts``;
  endpoint links 2 m, local 5 m, global 50 m. The counts also carry the groups g and the most
  the global ports can join, ceil(a h f) + 1: a design needing more is not buildable
  (``explore.evaluate`` marks it invalid).
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


def _per_element(t, code, n):
    """The technology table with per-element values when a perturbation is active
    (``hwmodels.parts.perturb_rows``): fields become (technologies, n) and are gathered at
    ``(code, ix)``; otherwise unchanged with ``ix`` None."""
    from hwmodels.parts import PERTURBATION, perturb_rows
    if PERTURBATION.get() is None:
        return t, None
    used = np.unique(np.where(code == 0, 1, code)).tolist() + ([0] if (code == 0).any() else [])
    f = {k: perturb_rows("optics", opt.TECHNOLOGIES, k, getattr(t, k), used) for k in opt.LinkTech.__dataclass_fields__}
    if all(np.ndim(v) == 1 for v in f.values()):
        return t, None
    f = {k: np.broadcast_to(v[:, None], (len(v), n)) if np.ndim(v) == 1 else v for k, v in f.items()}
    return opt.LinkTech(**f), np.arange(n)


def link_classes(net: NetworkSpec, devices, su_size, nics_per_device, nic_bandwidth_bps,
                 switch_radix, switch_port_bandwidth_bps, oversubscription):
    """Switch/OCS counts and three link-class slots [(count, rate_bps, length_m, ocs_hops)] per design."""
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
    df = dragonfly.counts(ep, p, a, h, net.global_link_fraction)   # tapered: ceil(a h f) global ports a group
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
    sw_bw = np.asarray(switch_port_bandwidth_bps, dtype=float)
    nic = np.asarray(nic_bandwidth_bps, dtype=float)
    tor, otor, rec, dfl = f == TORUS, f == OCS_TORUS, f == OCS_RECONF, f == DRAGONFLY
    half = ends / 2
    # three link-class slots per design (a family uses at most three classes)
    s0 = (np.select([switched | dfl, tor, otor, rec], [ep, half, half * (1 - frac_ocs), half], z),
          np.where(switched | dfl, ep_rate, nic),
          np.select([switched | dfl, tor, otor], [LEN_ENDPOINT_M, LEN_TORUS_M, LEN_CUBE_M], LEN_OCS_M),
          np.where(rec, 1.0, 0.0))
    s1 = (np.select([switched & (t >= 2), dfl, otor], [ep / o, df["local_links"], half * frac_ocs], z),
          np.where(otor, nic, sw_bw),
          np.select([switched, dfl], [LEN_LEAF_SPINE_M, LEN_LOCAL_M], LEN_OCS_M),
          np.where(otor, 1.0, 0.0))
    s2 = (np.select([switched & (t >= 3), dfl], [ep * np.maximum(t - 2, 0) / o, df["global_links"]], z),
          sw_bw, np.where(dfl, LEN_GLOBAL_M, LEN_CORE_M), 0.0)
    return {"switches": switches, "switch_ports": np.where(switched, ft["switch_ports"], z),
            "tiers": np.where(switched, t, z), "ocs": n_ocs,
            "ocs_ports": np.where(otor, ends * frac_ocs, np.where(rec, ends, z)),
            "nics": ends,
            # dragonfly: its endpoints, the groups they fill and the most its global ports can join
            # (ceil(a h f) + 1); zero on the other families (explore.evaluate marks groups > max invalid)
            "dragonfly_endpoints": np.where(dfl, ep, z), "dragonfly_groups": np.where(dfl, df["groups"], z),
            "dragonfly_max_groups": np.where(dfl, df["max_groups"], z)}, [s0, s1, s2]


def network_bom(net: NetworkSpec, devices, su_size, nics_per_device, nic_bandwidth_bps, switch_radix,
                switch_port_bandwidth_bps, oversubscription, switch_power_w, switch_cost_usd):
    """Counts, capex (USD) and power (W) by component of the scale-out network, per design.

    A family uses at most three link classes, held in three slots per design; the
    link budget is evaluated per slot with the design's technology (gathered by
    optics code), so the cost is a few array operations per slot."""
    counts, classes = link_classes(net, devices, su_size, nics_per_device, nic_bandwidth_bps,
                                   switch_radix, switch_port_bandwidth_bps, oversubscription)
    n = max(np.size(counts["switches"]), np.size(net.optics), np.size(net.ocs_insertion_loss_db),
            np.size(net.transceiver_power_w), np.size(net.transceiver_cost_usd))   # constants: 1
    t = _tech_table()
    code = np.broadcast_to(net.optics, (n,))
    t, ix = _per_element(t, code, n)   # issue 14: sampled optics figures (explore.uncertainty)
    base_dbm = t.receiver_sensitivity_dbm + t.link_margin_db + opt.path_loss_db(t, 0.0)
    fixed = t.dsp_energy_per_bit_j + t.analog_energy_per_bit_j
    per_w = 1e-3 / t.laser_wall_plug_efficiency / t.lane_rate_bps
    fibre = get_part("cables", "fibre-smf")
    is_cu_choice = code == 0
    co = np.where(is_cu_choice, 1, code)                      # optical fallback for copper: pluggable
    cx = co if ix is None else (co, ix)
    override = np.isfinite(net.transceiver_power_w)
    il = np.broadcast_to(np.asarray(net.ocs_insertion_loss_db, dtype=float), (n,))
    z = np.zeros(n)
    tr_n = tr_w = tr_usd = cu_n = cu_w = cu_usd = fib_n = fib_m = z
    margin = np.full(n, np.inf)
    laser = z
    bdm, fdb, fx, pw, usd = base_dbm[cx], t.fibre_loss_db_per_m[cx], fixed[cx], per_w[cx], t.cost_usd_per_bps[cx]
    mx = 10.0 * np.log10(np.maximum(t.laser_max_power_w / t.lanes_per_laser, 1e-30))[cx] + 30.0
    for c, r, ln, hp in classes:
        dbm = bdm + ln * fdb + hp * il
        lp = np.where(t.optical[cx] > 0, 10.0 ** (dbm / 10.0), 0.0)      # mW per lane
        e_w = np.where(override, net.transceiver_power_w, (fx + pw * lp) * r)
        e_usd = np.where(override, net.transceiver_cost_usd, usd * r)
        use_cu = is_cu_choice & (ln <= t.reach_m[0])
        n_opt = np.where(use_cu, 0.0, c)
        n_cu = c - n_opt
        tr_n = tr_n + 2 * n_opt
        tr_w = tr_w + 2 * n_opt * e_w
        tr_usd = tr_usd + 2 * n_opt * e_usd
        cu_n = cu_n + n_cu
        cu_w = cu_w + n_cu * (fixed[0] * r)
        cu_usd = cu_usd + n_cu * (t.cost_usd_per_bps[0] * r)
        fib_n = fib_n + n_opt
        fib_m = fib_m + n_opt * ln
        some = n_opt > 0
        margin = np.where(some, np.minimum(margin, mx - dbm), margin)
        laser = np.where(some, np.maximum(laser, lp * 1e-3), laser)
    fib_usd = fibre["cost_usd_per_m"] * fib_m + fibre["cost_usd_per_link"] * fib_n
    capex = {"switches": counts["switches"] * switch_cost_usd, "transceivers": tr_usd,
             "ocs": counts["ocs"] * net.ocs_cost_usd, "cables": cu_usd, "fibre": fib_usd}
    power = {"switches": counts["switches"] * switch_power_w, "transceivers": tr_w,
             "ocs": counts["ocs"] * net.ocs_power_w, "cables": cu_w, "fibre": z}
    # failures in time (per 1e9 h) of the link ends, cables and OCSes (switch FIT n/f: not counted)
    fit = tr_n * t.fit[cx] + cu_n * t.fit[0] + counts["ocs"] * net.ocs_fit
    counts.update(transceivers=tr_n, copper_cables=cu_n, fibres=fib_n, fibre_m=fib_m,
                  link_budget_margin_db=margin, laser_power_w_per_lane=laser, fit=fit)
    return counts, capex, power
