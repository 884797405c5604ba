"""Scenario integration of the network families, BOM vs graphs, reconfiguration, validation facts."""
import copy
import dataclasses
import itertools
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import explore
from explore.model.plan import ParallelPlan
from explore.scenario import ScenarioError, resolve
from explore.model.step import step_model
from explore.model.system import build_system
from explore.model.workload import ModelSpec
from topologies import bom, fat_tree, metrics, reconfig, torus
from topologies.network import FAMILIES

CANON = "studies/scenarios/gpt3-175b-1024-a100.toml"
COMPARE = "studies/scenarios/network-comparison-175b-4096.toml"
TPU = "studies/scenarios/tpu-v4-4096-ocs-torus.toml"


def base():
    return explore.load_scenario(CANON)


def _step(sc):
    r = resolve(sc)
    s = build_system(r)
    fl = np.broadcast_to(np.asarray(r.values["training.flash_attention"], bool), (r.n,))
    return step_model(ModelSpec.from_resolved(r), ParallelPlan.from_resolved(r), s, fl)["step_time_s"]


@settings(max_examples=15, deadline=None)
@given(st.sampled_from([(1, 16), (1, 64), (8, 16), (8, 128), (4, 8), (2, 4)]), st.sampled_from([1, 8]))
def test_fat_tree_collectives_limits(group, su):
    """A non-blocking fat-tree, NCCL ring: a huge buffer runs at the bus bandwidth of the slowest
    hop (scale-up inside a domain; across domains min(scale-up, ranks per domain x NIC rate)), and
    a one-byte buffer costs the ring's latency: base + intra steps x NVLink + network steps x NIC
    latency (NVIDIA/nccl tuning.cc), counted here by hand from the group's layout."""
    from explore.model import calibration as cal
    from explore.model.fabric import Fabric, library
    stride, n = group
    sc = base()
    sc["system"]["scale_up"]["size"] = su
    r = resolve(sc)
    s = build_system(r)
    c = cal.DEFAULT
    fab = Fabric(s, c)
    per_domain = min(max(su // stride, 1), n)
    domains = -(-n // per_domain)
    su_bw, nic = float(s.su_bandwidth_bps[0] * s.su_bus_efficiency[0]), float(s.so_bandwidth_bps[0]) * c.scale_out_link_efficiency
    bus = su_bw if domains == 1 else min(su_bw, per_domain * nic)
    big = 1e12
    t = float(fab.reduce_scatter(big, np.float64(stride), np.float64(n))[0])
    assert t == pytest.approx((n - 1) / n * big * 8 / bus, rel=1e-3)
    lat_in, lat_out = float(s.su_latency_s[0]), float(s.so_latency_s[0])
    want = library()["base_latency_s"] + (n - domains) * lat_in + (domains - 1) * lat_out
    assert float(fab.reduce_scatter(1.0, np.float64(stride), np.float64(n))[0]) == pytest.approx(want, rel=1e-3)


def test_every_family_and_optics_evaluates_with_breakdowns():
    sc = base()
    fams = list(FAMILIES)
    opts = ["copper", "pluggable", "lpo", "cpo", "optical-io", "pluggable"]
    sc["system"]["scale_out"].update(topology=fams, optics=opts, link="ib-ndr-400")
    ds = explore.evaluate(sc)
    assert ds.valid.values.all(), ds.reason.values
    for comp in bom.COMPONENTS:
        assert np.isfinite(ds[f"capex_usd_{comp}"].values).all()
        assert np.isfinite(ds[f"power_w_{comp}"].values).all()
        assert f"energy_j_{comp}" in ds
    sw = ds.capex_usd_switches.values
    assert (sw[[0, 1, 3]] > 0).all() and (sw[[2, 4, 5]] == 0).all()     # torus/OCS: no packet switch
    assert (ds.capex_usd_ocs.values[[4, 5]] > 0).all() and (ds.capex_usd_ocs.values[[0, 1, 2, 3]] == 0).all()
    assert ds.capex_usd_cables.values[0] > 0                               # copper endpoint links
    # batch == one at a time
    for i in (0, 2, 5):
        one = copy.deepcopy(sc)
        one["system"]["scale_out"].update(topology=fams[i], optics=opts[i])
        d1 = explore.evaluate(one)
        for k in ("step_time_s", "cost_per_token_usd", "capex_usd_transceivers", "power_w_ocs"):
            assert d1[k].values[0] == pytest.approx(ds[k].values[i], rel=1e-12)


def test_cpo_cuts_optics_power_and_cost():
    sc = base()
    sc["system"]["scale_out"]["optics"] = ["pluggable", "cpo", "lpo"]
    ds = explore.evaluate(sc)
    p = ds.power_w_transceivers.values
    assert p[1] < p[2] < p[0]
    assert 3.0 < p[0] / p[1] < 4.5
    assert ds.network_transceivers.values[0] == ds.network_transceivers.values[1]
    assert (ds.step_time_s.values == ds.step_time_s.values[0]).all()
    fit = ds.network_fit.values   # CPO: 10x the resiliency claimed by NVIDIA (docs/reference/hardware.md sec.5 [O3])
    assert fit[1] == pytest.approx(fit[0] / 10, rel=0.01) and fit[2] < fit[0]


def test_bad_network_choices_are_scenario_errors():
    sc = base()
    sc["system"]["scale_out"]["topology"] = "fat-tre"
    with pytest.raises(ScenarioError, match=r"system.scale_out.topology.*fat-tree"):
        explore.evaluate(sc)
    sc = base()
    sc["system"]["scale_out"]["optics"] = "laser"
    with pytest.raises(ScenarioError, match="system.scale_out.optics"):
        explore.evaluate(sc)
    sc = base()
    sc["system"]["scale_out"]["ocs"] = "palomar"
    with pytest.raises(ScenarioError, match="palomar-136"):
        explore.evaluate(sc)


def test_network_bom_equals_graph_counts():
    """The hot-path BOM counts what the networkx builders build (fat-tree k=8, 4^3 torus)."""
    from topologies.network import NetworkSpec
    g = fat_tree.k_ary_fat_tree_graph(8)
    hosts = len(metrics.hosts(g))
    sc = base()
    sc["system"].update(devices=hosts)
    sc["system"]["scale_up"]["size"] = 1
    sc["parallelism"].update(tp=1, pp=1, dp=hosts)
    sc["system"]["scale_out"].update(link="ib-ndr-400", switch="quantum-2-qm9700")
    s = build_system(resolve(sc))
    s = dataclasses.replace(s, switch_radix=np.full(1, 8.0))
    counts, _ = bom.link_classes(s.network, s.devices, s.su_size, s.nics_per_device, s.nic_bandwidth_bps,
                                 s.switch_radix, s.switch_port_bandwidth_bps, s.oversubscription)[0], None
    classes = bom.link_classes(s.network, s.devices, s.su_size, s.nics_per_device, s.nic_bandwidth_bps,
                               s.switch_radix, s.switch_port_bandwidth_bps, s.oversubscription)[1]
    n_links = sum(float(c[0][0]) for c in classes)
    assert counts["switches"][0] == metrics.count_kinds(g)["edge"] + metrics.count_kinds(g)["agg"] + \
        metrics.count_kinds(g)["core"]
    assert n_links == g.number_of_edges()
    # torus family: links == torus edges
    net = dataclasses.replace(s.network, family=np.full(1, FAMILIES.index("torus")))
    s2 = dataclasses.replace(s, network=net, nics_per_device=np.full(1, 6.0), devices=np.full(1, 64.0))
    classes = bom.link_classes(s2.network, s2.devices, s2.su_size, s2.nics_per_device, s2.nic_bandwidth_bps,
                               s2.switch_radix, s2.switch_port_bandwidth_bps, s2.oversubscription)[1]
    assert sum(float(c[0][0]) for c in classes) == torus.torus_graph((4, 4, 4)).number_of_edges()
    assert isinstance(net, NetworkSpec)


@pytest.mark.parametrize("fraction,groups", [(1.0, 9), (0.5, 5), (0.75, 7), (0.25, 3)])
def test_tapered_dragonfly_bom_equals_graph_counts(fraction, groups):
    """A dragonfly of radix-7 routers (balanced p = h = 2, a = 4) with ``global_link_fraction`` f:
    the hot-path BOM's routers and its three link classes (terminal, local, global) are the
    networkx builder's nodes and edges, for 40 to 72 endpoints."""
    from topologies import dragonfly
    g = dragonfly.dragonfly_graph(2, 4, 2, groups=groups, global_link_fraction=fraction)
    hosts = len(metrics.hosts(g))
    sc = base()
    sc["system"].update(devices=hosts)
    sc["system"]["scale_up"]["size"] = 1
    sc["parallelism"].update(tp=1, pp=1, dp=hosts)
    sc["system"]["scale_out"].update(topology="dragonfly", link="ib-ndr-400", switch="quantum-2-qm9700",
                                     global_link_fraction=fraction)
    s = build_system(resolve(sc))
    assert float(s.network.global_link_fraction[0]) == fraction
    counts, classes = bom.link_classes(s.network, s.devices, s.su_size, s.nics_per_device, s.nic_bandwidth_bps,
                                       np.full(1, 7.0), s.switch_port_bandwidth_bps, s.oversubscription)
    by_kind = {k: sum(1 for *_, d in g.edges(data=True) if d["link"] == k) for k in ("terminal", "local", "global")}
    assert [float(c[0][0]) for c in classes] == [by_kind["terminal"], by_kind["local"], by_kind["global"]]
    assert counts["switches"][0] == metrics.count_kinds(g)["router"]


def test_fewer_global_links_cut_optics_capex_and_power_not_routers():
    """Removing global links removes their two transceivers and fibre each (capex and power fall by
    exactly those), and nothing else: routers, endpoint and local links stay. 4,096 H100 on 1 NIC
    each (8 groups of 512 on 64-port switches): 8 x 512 / 2 = 2,048 global links balanced,
    8 x 292 / 2 = 1,168 at Frontier's 292 / 512."""
    sc = base()
    sc["system"].update(devices=4096, accelerator="h100-sxm-80gb")
    sc["system"]["scale_up"] = {"size": 8, "link": "nvlink4"}
    sc["parallelism"].update(tp=8, pp=8, dp=64)
    sc["training"]["global_batch"] = 1024
    sc["system"]["scale_out"].update(topology="dragonfly", link="ib-ndr-400", switch="quantum-2-qm9700",
                                     global_link_fraction=np.array([1.0, 292 / 512]))
    ds = explore.evaluate(sc)
    tr = ds["network_transceivers"].values
    assert tr[0] - tr[1] == 2 * (2048 - 1168)
    assert ds["network_switches"].values[0] == ds["network_switches"].values[1] == 8 * 32
    assert ds["network_fibres"].values[0] - ds["network_fibres"].values[1] == 2048 - 1168
    assert ds["capex_usd_transceivers"].values[1] < ds["capex_usd_transceivers"].values[0]
    assert ds["power_w_transceivers"].values[1] < ds["power_w_transceivers"].values[0]
    assert ds["capex_usd_switches"].values[0] == ds["capex_usd_switches"].values[1]


def test_ocs_in_the_path_raises_laser_power_in_the_system():
    sc = explore.load_scenario(TPU)
    sc["system"]["scale_out"].update(topology=["torus", "ocs-torus"], optics="pluggable")
    del sc["system"]["scale_out"]["transceiver"]
    ds = explore.evaluate(sc)
    lp = ds.network_laser_power_w_per_lane.values
    assert lp[1] > lp[0]
    m = ds.network_link_budget_margin_db.values
    assert m[1] < m[0]


def _best_split_by_enumeration(dem, ports):
    """min over every integer split (one port per class with demand, at most ``ports``) of the
    summed transfer time sum_i D_i / c_i: the independent figure for reconfig.class_ports."""
    best = np.inf
    for c in itertools.product(range(ports + 1), repeat=len(dem)):
        if sum(c) <= ports and all(ci >= 1 for ci, d in zip(c, dem) if d > 0):
            best = min(best, sum(d / ci for ci, d in zip(c, dem) if d > 0))
    return best


def test_class_ports_minimise_the_summed_transfer_time():
    """The closed form (greedy on time saved, one call over all designs) reaches the exhaustive
    optimum of sum_i D_i / c_i for every design; its split is never larger than the ports."""
    rng = np.random.default_rng(3)
    dem = rng.lognormal(0.0, 2.0, size=(3, 60)) * (rng.random((3, 60)) < 0.85)
    ports = rng.integers(3, 13, 60)
    c = np.array(reconfig.class_ports(list(dem), ports))
    assert (c.sum(axis=0) <= ports).all()
    for k in range(60):
        got = sum(d / ci for ci, d in zip(c[:, k], dem[:, k]) if d > 0)
        assert got == pytest.approx(_best_split_by_enumeration(dem[:, k], int(ports[k])), rel=1e-12)


def test_twice_the_ports_never_lengthen_the_planned_time():
    """A node twice as large (twice the ports and the bandwidth) with at most twice each class's
    demand: the planned summed time per device, sum_i D_i / (c_i / P), never rises."""
    rng = np.random.default_rng(4)
    dem = rng.lognormal(0.0, 2.0, size=(3, 400))
    ports = rng.integers(3, 24, 400).astype(float)
    dem2 = 2.0 * dem * rng.uniform(0.05, 1.0, size=dem.shape) * (rng.random(dem.shape) < 0.9)
    def t(d, p):
        return sum(np.where(di > 0, di * p / np.maximum(ci, 1.0), 0.0)
                   for di, ci in zip(d, reconfig.class_ports(list(d), p)))

    assert (t(dem2, 2 * ports) / 2.0 <= t(dem, ports) * (1 + 1e-12)).all()


def test_circuit_assignment_near_the_closed_form():
    """scipy's permutation-round assignment of circuits over the whole plan (interior stages)
    never beats the per-node closed form's summed time (it is the per-node optimum) and stays
    within 8 % of it (its rounds also serve the end stages, so it can differ by a port)."""
    pp, dp, ports = 4, 4, 8
    for dp_b, pp_b in itertools.product((100.0, 30.0, 10.0, 2.0), (1.0, 3.0, 9.0)):
        c = reconfig.assign_circuits(reconfig.plan_demand_matrix(pp, dp, dp_b, pp_b), ports)
        cdp, cf, cb = (float(x) for x in reconfig.class_ports([dp_b, pp_b, pp_b], ports))
        opt = dp_b / cdp + pp_b / cf + pp_b / cb
        for s in range(1, pp - 1):
            for r in range(dp):
                i = s * dp + r
                got = (dp_b / c[i, s * dp + (r + 1) % dp] + pp_b / c[i, (s + 1) * dp + r]
                       + pp_b / c[i, (s - 1) * dp + r])
                assert opt * (1 - 1e-12) <= got <= 1.08 * opt
        assert (c.sum(axis=1) <= ports).all()


def test_reconfiguration_that_costs_more_than_it_saves_shows_it():
    sc = explore.load_scenario(COMPARE)
    ds = explore.evaluate(sc)
    t = ds.step_time_s.values
    per_job, slow, fast = 6, 7, 8
    assert ds.network_reconfig_s_per_step.values[slow] == pytest.approx(20.0)
    assert t[slow] > t[per_job] + 10.0               # 2 x 10 s per step swamps the bandwidth gain
    assert ds.cost_per_token_usd.values[slow] > ds.cost_per_token_usd.values[per_job]
    assert t[fast] < t[per_job]                        # a fast switch makes per-phase circuits pay
    assert ds.time_s_dp_comm.values[fast] < ds.time_s_dp_comm.values[per_job]


def test_validation_tpu_v4_ocs_and_optics_share():
    """Jouppi et al., "TPU v4: An Optically Reconfigurable Supercomputer ...", ISCA 2023: the OCSes
    and underlying optical components are < 5% of system cost and < 3% of system power
    (docs/reference/hardware.md sec.5 [G3]). The counts (48 OCS, 6,144 transceivers) come from the BOM; prices
    are the catalog's hyperscale estimates (transceiver-400g-cwdm4-bidi, palomar-136)."""
    ds = explore.evaluate(explore.load_scenario(TPU)).isel(design=0)
    assert bool(ds.valid)
    assert float(ds.network_ocs) == 48 and float(ds.network_transceivers) == 6144
    optics_cost = float(ds.capex_usd_ocs + ds.capex_usd_transceivers + ds.capex_usd_fibre)
    optics_power = float(ds.power_w_ocs + ds.power_w_transceivers + ds.power_w_fibre)
    assert optics_cost / float(ds.capex_usd) < 0.05
    assert optics_power / float(ds.power_w) < 0.03
    # the pod's documented 24 TB/s bisection (Google Cloud TPU v4 docs, docs/reference/hardware.md sec.1 [G1])
    assert torus.bisection_bandwidth_bps((16, 16, 16), 375e9) / 8 == pytest.approx(24e12)


def test_validation_dgx_h100_rail_optimized_per_gpu_bandwidth():
    """DGX H100 SuperPOD: 8 x ConnectX-7 400 Gb/s per 8-GPU node, one per GPU on its own rail
    (NVIDIA DGX H100 user guide; docs/reference/hardware.md sec.4 [N3]): 400 Gb/s = 50 GB/s per GPU scale-out,
    3.2 Tb/s per node."""
    sc = base()
    sc["system"].update(accelerator="h100-sxm-80gb", devices=512)
    sc["system"]["scale_up"].update(size=8, link="nvlink4")
    sc["system"]["scale_out"].update(topology="rail-optimized", link="ib-ndr-400", nics_per_device=1)
    sc["parallelism"].update(tp=8, pp=8, dp=8)
    s = build_system(resolve(sc))
    assert s.so_bandwidth_bps[0] == 400e9
    assert s.so_bandwidth_bps[0] * s.su_size[0] == 3.2e12
    g = __import__("topologies.rail_optimized", fromlist=["x"]).rail_optimized_graph(4, 8, 4, 8, 400e9)
    h = ("host", 0, 3)
    net_bw = sum(d["bandwidth_bps"] for _, n, d in g.edges(h, data=True) if g.nodes[n]["kind"] == "leaf")
    assert net_bw == s.so_bandwidth_bps[0]
    ds = explore.evaluate(sc)
    assert bool(ds.valid.values[0])


def test_network_comparison_study_runs():
    out = subprocess.run([sys.executable, "studies/network_comparison.py"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "fat-tree + CPO" in out.stdout and "OCS per phase, 10 s MEMS" in out.stdout


def test_nvl72_domain_counts_switch_trays():
    """GB200 NVL72: 72 GPUs, NVLink5 7.2 Tb/s per GPU per direction, 9 NVLink switch trays
    of 144 ports (docs/reference/hardware.md sec.4 [N4][S9])."""
    sc = base()
    sc["system"].update(accelerator="b200", devices=1152)
    sc["system"]["scale_up"].update(size=[72, 72], link="nvlink5", switch=["nvlink-switch-tray", "nvlink-switch-tray"])
    sc["parallelism"].update(tp=8, pp=8, dp=18)
    sc["training"]["global_batch"] = 1152
    s = build_system(resolve(sc))
    from hwmodels.parts import get_part
    tray = get_part("switches", "nvlink-switch-tray")
    assert s.su_cost_usd[0] * 72 == pytest.approx(9 * tray["cost_usd"])
    assert s.su_power_w[0] * 72 == pytest.approx(9 * tray["power_w"])
    ds = explore.evaluate(sc)
    assert ds.capex_usd_scale_up.values[0] == pytest.approx(1152 / 72 * 9 * tray["cost_usd"])
