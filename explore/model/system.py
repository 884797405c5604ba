"""SystemSpec: the accelerator, the scale-up domain and the scale-out fabric as arrays.

Built from the catalog (``hwmodels/catalog``) and the scenario's overrides.
Catalog ids may differ per design: unique ids are looked up once and
broadcast (``hwmodels.parts.lookup``), so no Python loop runs per design.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explore.model.cardinality import fit
from explore.scenario import ACCEL_EXTRA_FIELDS, ACCEL_FIELDS
from hwmodels import package as hw_package
from hwmodels.codes import codes as hw_codes
from hwmodels.parts import get_part, lookup, part_ids


@dataclass(frozen=True)
class SystemSpec:
    devices: np.ndarray
    peak_flops: np.ndarray                 # dense FLOP/s at the training precision
    peak_flops_bf16: np.ndarray
    hbm_capacity_bytes: np.ndarray
    hbm_bandwidth_bytes_per_s: np.ndarray
    tdp_w: np.ndarray
    idle_power_w: np.ndarray
    price_usd: np.ndarray
    host_power_w: np.ndarray
    host_price_usd: np.ndarray
    interruptions_per_hour: np.ndarray
    su_size: np.ndarray
    su_bandwidth_bps: np.ndarray
    su_latency_s: np.ndarray
    su_power_w: np.ndarray
    su_cost_usd: np.ndarray
    so_bandwidth_bps: np.ndarray            # per device, per direction (all its NIC share)
    so_latency_s: np.ndarray
    nics_per_device: np.ndarray
    nic_bandwidth_bps: np.ndarray
    nic_power_w: np.ndarray
    nic_cost_usd: np.ndarray
    oversubscription: np.ndarray
    switch_radix: np.ndarray
    switch_port_bandwidth_bps: np.ndarray
    switch_power_w: np.ndarray
    switch_cost_usd: np.ndarray
    transceiver_power_w: np.ndarray
    transceiver_cost_usd: np.ndarray
    # --- parametric accelerator (issue 3, hwmodels.package); defaults keep catalog parts unchanged.
    # Fields with defaults must stay last. hbm_bandwidth_bytes_per_s above is already the
    # effective bandwidth, capped by die-to-die links for multi-die parts.
    hw_invalid_code: np.ndarray = 0.0            # index into hwmodels.package.REASONS, 0 = feasible
    d2d_energy_per_memory_byte_j: np.ndarray = 0.0  # die-to-die energy per byte of HBM traffic
    d2d_latency_s: np.ndarray = 0.0              # one die-to-die crossing
    io_bandwidth_bps: np.ndarray = np.inf        # off-package I/O the package offers, per direction
    accelerator_parts: dict | None = None        # per-component cost and power shares (costs.py)
    network: object | None = None                # topologies.network.NetworkSpec (the step model requires it)
    interruptions_given: np.ndarray = False      # issue 11: an all-cause rate per device was given explicitly
    matmul_peak_fraction: np.ndarray = 1.0       # measured max achievable matmul FLOP/s / dense peak
    gemm_peak_fraction: np.ndarray = np.nan      # the same at the linear GEMMs' precision (FP8: catalog
                                                 # matmul_peak_fraction_fp8); NaN = matmul_peak_fraction
    fp8_gemm_any_layout: np.ndarray = 0.0        # 1: FP8 GEMMs take any operand layout (no transposed copies)
    sm_count: np.ndarray = np.nan                # streaming multiprocessors (catalog sm_count); NaN = unknown
                                                 # (moe.comm_sm_share falls back to the H800's 20/132)
    su_in_switch_reduction: np.ndarray = 0.0     # 1: the scale-up switch reduces (NVLink SHARP), 0: no
    su_bus_efficiency: np.ndarray = np.nan       # measured ring bus bandwidth / su_bandwidth_bps (catalog bus_efficiency)
    sub_domains: tuple = ()                      # (size, NetworkSpec) per split of the domain (sub_domain_networks)


def accelerator_arrays(r) -> dict[str, np.ndarray]:
    """Accelerator fields: catalog entry of ``system.accelerator`` then inline overrides."""
    v = r.values
    if any(f"system.accelerator.{k}" in v for k in ACCEL_EXTRA_FIELDS):
        return parametric_accelerator_arrays(r)
    out: dict[str, np.ndarray] = {}
    ids = v.get("system.accelerator")
    for f in ACCEL_FIELDS:
        key = f"system.accelerator.{f}"
        if key in v:
            out[f] = fit(v[key].astype(float), r.n)
        elif ids is not None:
            out[f] = fit(lookup("accelerators", ids, f), r.n)
    return out


def parametric_accelerator_arrays(r) -> dict[str, np.ndarray]:
    """Accelerator fields derived from parameters by ``hwmodels.package.build`` (issue 3).

    Parameters not given take the reconstruction of ``base`` (or of
    ``hwmodels.package.DEFAULT_DESIGN``); giving ``hbm`` resets the per-stack
    capacity and bandwidth to that generation's, ``node`` resets the clock to
    the node's, and a multi-die part without ``d2d_bandwidth_bps`` provisions
    each die's share of the HBM bandwidth. Price = manufacturing cost x
    markup, the markup defaulting to base price / base reconstruction cost.
    Explicit ACCEL_FIELDS overrides (e.g. ``price_usd``) still win.
    """
    v, n = r.values, r.n
    base = v.get("system.accelerator", np.array([hw_package.DEFAULT_DESIGN]))
    uniq, code = hw_codes(np.broadcast_to(base, (n,)), part_ids("accelerators"))
    known = set(hw_package.design_ids())
    design = np.array([u if u in known else hw_package.DEFAULT_DESIGN for u in uniq])
    dflt = hw_package.design_params(design)
    given = {k: v[f"system.accelerator.{k}"] for k in ACCEL_EXTRA_FIELDS if f"system.accelerator.{k}" in v}

    def pick(k, fallback=None):
        if k in given:
            return np.broadcast_to(given[k], (n,))
        if fallback is not None:
            return np.broadcast_to(fallback, (n,))
        return np.broadcast_to(dflt[k], (len(uniq),))[code]

    p = {k: pick(k) for k in tuple(hw_package.PARAMS) + tuple(hw_package.IDS)}
    if "hbm" in given:
        gen = hw_package.hbm.generation(p["hbm"])
        p["hbm_stack_capacity_bytes"] = pick("hbm_stack_capacity_bytes", gen["capacity_bytes"])
        p["hbm_stack_bandwidth_bytes_per_s"] = pick("hbm_stack_bandwidth_bytes_per_s", gen["bandwidth_bytes_per_s"])
    if "node" in given and "clock_hz" not in given:
        p["clock_hz"] = hw_package.compute_die.NodeArrays.of(p["node"]).clock_hz
    if "d2d_bandwidth_bps" not in given:
        share = p["hbm_stacks"] * p["hbm_stack_bandwidth_bytes_per_s"] * 8.0 / p["compute_dies"]
        p["d2d_bandwidth_bps"] = np.where(p["d2d_bandwidth_bps"] > 0, p["d2d_bandwidth_bps"], share)
    hw = hw_package.build(p)
    base_ids = uniq  # the catalog parts themselves give price, host and reliability figures
    base_cost = hw_package.build(dflt)["unit_cost_usd"]
    base_price = lookup("accelerators", base_ids, "price_usd")
    markup = pick("price_markup") if "price_markup" in given else (base_price / base_cost)[code]
    out = {k: hw[k] for k in ("peak_flops_bf16", "peak_flops_fp16", "peak_flops_fp8", "hbm_capacity_bytes",
                              "hbm_bandwidth_bytes_per_s", "tdp_w", "idle_power_w")}
    out["price_usd"] = hw["unit_cost_usd"] * markup
    for f in ("host_power_w", "host_price_usd", "interruptions_per_hour"):
        out[f] = lookup("accelerators", base_ids, f)[code]
    for f in ACCEL_FIELDS:
        if f"system.accelerator.{f}" in v:
            out[f] = np.broadcast_to(v[f"system.accelerator.{f}"].astype(float), (n,))
    # SM count: the base part's while the compute dies are its reconstruction's (count, area, matrix
    # share, node); a design that changes them has no known SM count: NaN (moe.comm_sm_share's fallback)
    same = np.ones(n, dtype=bool)
    for k in ("compute_dies", "die_area_mm2", "matrix_fraction", "node"):
        same &= np.broadcast_to(p[k], (n,)) == np.broadcast_to(dflt[k], (len(uniq),))[np.broadcast_to(code, (n,))]
    out["sm_count"] = np.where(same, lookup("accelerators", base_ids, "sm_count")[np.broadcast_to(code, (n,))],
                               np.nan)
    out["hw"] = hw
    return out


def hardware_invalid_code(s: SystemSpec) -> np.ndarray:
    """Per-design index into ``hwmodels.package.REASONS`` (0 = feasible; a constant: length 1)."""
    return np.asarray(s.hw_invalid_code).astype(np.intp)


def hardware_invalid(s: SystemSpec) -> tuple[np.ndarray, np.ndarray]:
    """Per-design (invalid mask, reason) of a parametric accelerator's hardware limits."""
    code = hardware_invalid_code(s)
    return code > 0, np.asarray(hw_package.REASONS, dtype=object)[code]


def _parametric_kw(acc: dict, su_bw) -> dict:
    """SystemSpec fields of a parametric accelerator, incl. the scale-up I/O feasibility check."""
    hw = acc.get("hw")
    if hw is None:
        return {}
    code = np.where((hw["invalid_code"] == 0) & (su_bw > hw["io_bandwidth_bps"] * (1 + 1e-9)),
                    float(hw_package.REASONS.index(
                        "scale-up bandwidth exceeds the package's off-package I/O bandwidth")),
                    hw["invalid_code"])
    return dict(hw_invalid_code=code, d2d_energy_per_memory_byte_j=hw["d2d_energy_per_memory_byte_j"],
                d2d_latency_s=hw["d2d_latency_s"], io_bandwidth_bps=hw["io_bandwidth_bps"])


def _link(r, table: str):
    v = r.values
    ids = v[f"{table}.link"]
    bw = v.get(f"{table}.bandwidth_bps")
    lat = v.get(f"{table}.latency_s")
    bw = lookup("links", ids, "bandwidth_bps") if bw is None else bw
    lat = lookup("links", ids, "latency_s") if lat is None else lat
    return (bw.astype(float), lat.astype(float), lookup("links", ids, "power_w"),
            lookup("links", ids, "cost_usd"))


def in_switch_reduction(ids) -> np.ndarray:
    """1 where the scale-up link's switch reduces in the network (catalog ``in_switch_reduction``,
    NVLink SHARP), else 0 (links without the field)."""
    uniq, inv = np.unique(np.asarray(ids).astype(str), return_inverse=True)
    vals = np.array([float(get_part("links", u).get("in_switch_reduction", 0.0)) for u in uniq])
    return vals[inv].reshape(np.shape(ids))


def bus_efficiency(ids) -> np.ndarray:
    """The scale-up link's measured bus efficiency (catalog ``bus_efficiency``: nccl-tests ring
    all-reduce bus bandwidth / per-direction bandwidth, each with its source)."""
    try:
        return lookup("links", ids, "bus_efficiency")
    except KeyError:
        allowed = [p for p in part_ids("links") if "bus_efficiency" in get_part("links", p)]
        bad = sorted({str(u) for u in np.unique(np.asarray(ids).astype(str)) if u not in allowed})
        raise ValueError(f"system.scale_up.link: {', '.join(map(repr, bad))} has no measured bus_efficiency "
                         f"(not a scale-up link); allowed: {', '.join(allowed)}") from None


def build_system(r, sub_domains: bool = True) -> SystemSpec:
    """The designs' SystemSpec; ``sub_domains=False`` leaves ``sub_domains`` empty (the caller adds
    ``sub_domain_networks`` for the designs it times: only the Fabric reads them)."""
    v = r.values
    n = r.n
    acc = accelerator_arrays(r)
    prec = np.asarray(v["training.precision"])
    peak = np.where(prec == "fp8", acc["peak_flops_fp8"],
                    np.where(prec == "fp16", acc["peak_flops_fp16"], acc["peak_flops_bf16"]))
    if np.any(prec == "fp4"):  # issue 11: FP4 peak of catalog parts (0 = none; parametric parts: none)
        ids = v.get("system.accelerator")
        fp4 = (lookup("accelerators", ids, "peak_flops_fp4") if ids is not None and "hw" not in acc
               else 0.0)
        peak = np.where(prec == "fp4", np.broadcast_to(fp4, (n,)), peak)
    su_bw, su_lat, su_pw, su_cost = _link(r, "system.scale_up")
    su_pw, su_cost = _scale_up_switches(r, su_bw, su_pw, su_cost)  # issue 4: switched domains
    nic_bw, so_lat, nic_pw, nic_cost = _link(r, "system.scale_out")
    nics = v["system.scale_out.nics_per_device"].astype(float)
    sw = v["system.scale_out.switch"]
    tr = v.get("system.scale_out.transceiver")
    kw = dict(
        devices=v["system.devices"].astype(float), peak_flops=peak,
        peak_flops_bf16=acc["peak_flops_bf16"],
        hbm_capacity_bytes=acc["hbm_capacity_bytes"],
        hbm_bandwidth_bytes_per_s=acc["hbm_bandwidth_bytes_per_s"], tdp_w=acc["tdp_w"],
        idle_power_w=acc["idle_power_w"], price_usd=acc["price_usd"],
        host_power_w=acc["host_power_w"], host_price_usd=acc["host_price_usd"],
        interruptions_per_hour=(v["datacenter.interruptions_per_device_hour"].astype(float)
                                if "datacenter.interruptions_per_device_hour" in v
                                else acc["interruptions_per_hour"]),
        su_size=v["system.scale_up.size"].astype(float), su_bandwidth_bps=su_bw,
        su_latency_s=su_lat, su_power_w=su_pw, su_cost_usd=su_cost,
        so_bandwidth_bps=nic_bw * nics, so_latency_s=so_lat, nics_per_device=nics,
        nic_bandwidth_bps=nic_bw, nic_power_w=nic_pw, nic_cost_usd=nic_cost,
        oversubscription=v["system.scale_out.oversubscription"].astype(float),
        switch_radix=lookup("switches", sw, "radix"),
        switch_port_bandwidth_bps=lookup("switches", sw, "port_bandwidth_bps"),
        switch_power_w=lookup("switches", sw, "power_w"),
        switch_cost_usd=lookup("switches", sw, "cost_usd"),
        transceiver_power_w=np.nan if tr is None else lookup("switches", tr, "power_w"),
        transceiver_cost_usd=np.nan if tr is None else lookup("switches", tr, "cost_usd"),
    )
    kw.update(_parametric_kw(acc, su_bw))  # issue 3: parametric accelerator
    kw["interruptions_given"] = float("datacenter.interruptions_per_device_hour" in v
                                      or "system.accelerator.interruptions_per_hour" in v)  # issue 11
    parts = acc["hw"] if "hw" in acc else None
    # the catalog part (or the parametric design's base part): measured max achievable matmul rate
    ids = v.get("system.accelerator")
    ids_or = ids if ids is not None else np.array(["h100-sxm-80gb"])
    kw["matmul_peak_fraction"] = lookup("accelerators", ids_or, "matmul_peak_fraction")
    # FP8 GEMMs at the part's measured FP8 rate (per-tensor scaled, catalog matmul_peak_fraction_fp8); the
    # layout flag decides whether an FP8 cast writes a transposed copy (precision.py)
    kw["gemm_peak_fraction"] = np.where(prec == "fp8", lookup("accelerators", ids_or, "matmul_peak_fraction_fp8"),
                                        kw["matmul_peak_fraction"])
    kw["fp8_gemm_any_layout"] = lookup("accelerators", ids_or, "fp8_gemm_any_layout")
    # SM count (the DeepEP all-to-all share, moe.comm_sm_share): the catalog part's (or a parametric
    # design's, parametric_accelerator_arrays); NaN for an inline accelerator without a base part
    kw["sm_count"] = (acc["sm_count"] if "sm_count" in acc
                      else lookup("accelerators", ids, "sm_count") if ids is not None else np.nan)
    kw["su_in_switch_reduction"] = in_switch_reduction(v["system.scale_up.link"])
    kw["su_bus_efficiency"] = bus_efficiency(v["system.scale_up.link"])
    network = network_spec(r)
    return SystemSpec(**{k: fit(a, n, float) for k, a in kw.items()},
                      accelerator_parts=parts, network=network,
                      sub_domains=sub_domain_networks(r, network) if sub_domains else ())


def _scale_up_switches(r, su_bw, su_pw, su_cost):
    """Per-device scale-up power and cost when the domain is built from counted switches
    (``topologies.scale_up``: switches = ceil(size * B_device / (radix * B_port)); NVL72 with
    NVLink switch trays: 72 x 7.2 Tb/s / (144 x 400 Gb/s) = 9 trays)."""
    sw = r.values.get("system.scale_up.switch")
    if sw is None:
        return su_pw, su_cost
    from topologies import scale_up
    size = r.values["system.scale_up.size"].astype(float)
    n_sw = scale_up.switches_per_domain(size, su_bw, lookup("switches", sw, "radix"),
                                        lookup("switches", sw, "port_bandwidth_bps"))
    per = lambda f: n_sw * lookup("switches", sw, f) / size  # noqa: E731
    return per("power_w"), per("cost_usd")


def sub_domain_networks(r, network):
    """The scale-out network of each design of a torus, ocs-torus or ocs-reconfigurable family as
    its scale-up domains would have it split into 2, 4, ... parts (down to one device each, as
    long as the parts are whole): ((part size, NetworkSpec), ...), empty when no design has
    these families. A domain of 2k devices can run as two of k (scale-up links where the smaller
    domains had a network hop between them; ports, NICs and circuits the same per device), so
    its collectives take the fastest of these configurations (``explore.model.fabric.Fabric``)
    and a larger domain never loses one the smaller had. On a torus each configuration has its
    own near-cubic shape of twice the nodes (``topologies.network.balanced_dims``), which folds
    (two neighbours along the first dimension in one domain) into a torus of the real nodes: the
    placement takes the best of these shapes; given torus dimensions split along the first.
    Designs of other families (or whose domain does not split) repeat their own network."""
    from topologies import network as net
    fam = network.family
    on = np.isin(fam, (net.TORUS, net.OCS_TORUS, net.OCS_RECONF))
    if not on.any():
        return ()
    su = fit(r.values["system.scale_up.size"], r.n, float)
    out, k = [], 1
    while 2.0 ** k <= float(np.max(np.where(on, su, 0.0))):
        part = su / 2.0 ** k
        ok = on & (part >= 1.0) & (np.mod(part, 1.0) == 0.0)
        if ok.any():
            part = np.where(ok, part, su)
            out.append((part, network_spec(r, su=part)))
        k += 1
    return tuple(out)


def network_spec(r, su=None):
    """The scale-out network of every design (issue 4): family and optics codes, torus dimensions,
    OCS part, reconfiguration policy and the plan's traffic per scale-up node for circuit planning.
    ``su``: the scale-up domain size it is built for (default the design's; a part of it:
    ``sub_domain_networks``)."""
    from topologies import network as net
    from topologies import reconfig
    v, n = r.values, r.n
    f = lambda k: fit(v[k], n, float)  # noqa: E731
    so = "system.scale_out."
    devices, real = f("system.devices"), f("system.scale_up.size")
    su = real if su is None else su
    nodes = np.maximum(np.floor(devices / su), 1.0)
    dflt = net.balanced_dims(nodes)
    given = [v.get(so + k) for k in ("torus_x", "torus_y", "torus_z")]
    dims = [fit(g, n, float) if g is not None else d
            for g, d in zip(given, dflt)]
    if given[0] is not None and given[1] is not None and given[2] is None:
        real_nodes = np.maximum(np.floor(devices / real), 1.0)
        dims[2] = np.maximum(np.ceil(real_nodes / (dims[0] * dims[1])), 1.0)
    if given[0] is not None:
        dims[0] = dims[0] * (real / su)      # given dimensions: the domain's parts along the first
    ocs_id = fit(v[so + "ocs"], n)
    il = v.get(so + "ocs_insertion_loss_db")
    rs = v.get(so + "ocs_reconfig_s")
    tp, pp = f("parallelism.tp"), f("parallelism.pp")
    dp = f("parallelism.dp") if "parallelism.dp" in v else np.maximum(
        np.floor(devices / (tp * pp * f("parallelism.cp"))), 1.0)  # issue 11: cp ranks
    gb, seq = f("training.global_batch"), f("model.seq_len")
    family = net.codes(fit(v[so + "topology"], n), net.FAMILIES)
    if np.any(family == net.OCS_RECONF):
        dp_node, pp_node = circuit_demand(r, su, tp, pp, dp)
    else:
        dp_node = pp_node = np.zeros(n)
    policy = net.codes(fit(v[so + "reconfiguration"], n), reconfig.POLICIES)
    steps = f("training.tokens") / (gb * seq)
    tr = v.get(so + "transceiver")
    b = lambda a: fit(a, n, float)  # noqa: E731
    return net.NetworkSpec(
        family=family,
        optics=net.codes(fit(v[so + "optics"], n), net.TECHNOLOGIES),
        torus_dims=tuple(dims), cube_dim=f(so + "cube_dim"),
        ocs_radix=b(lookup("ocs", ocs_id, "radix")),
        ocs_insertion_loss_db=b(lookup("ocs", ocs_id, "insertion_loss_db") if il is None else il),
        ocs_reconfig_s=b(lookup("ocs", ocs_id, "reconfig_s") if rs is None else rs),
        ocs_power_w=b(lookup("ocs", ocs_id, "power_w")), ocs_cost_usd=b(lookup("ocs", ocs_id, "cost_usd")),
        reconfig_policy=policy, reconfigs_per_step=reconfig.reconfigurations_per_step(policy, steps),
        dp_bytes_per_node=dp_node, pp_bytes_per_node=pp_node,
        transceiver_power_w=b(np.nan if tr is None else lookup("switches", tr, "power_w")),
        transceiver_cost_usd=b(np.nan if tr is None else lookup("switches", tr, "cost_usd")),
        ocs_fit=b(lookup("ocs", ocs_id, "fit")),
        global_link_fraction=f(so + "global_link_fraction"))


def circuit_demand(r, su, tp, pp, dp):
    """Traffic per step per scale-up node that ocs-reconfigurable circuits are planned for, in
    bytes weighted as on the step's critical path: (collective circuits, each pipeline chain).

    Only what leaves the node counts: a group inside one domain, or a pipeline whose stages share
    a domain, asks for none (hierarchical reduction: a node sends each group's gradient shard
    once, (outer - 1) / outer of it, for each of the su / inner groups it holds; every device of
    a node has its own pipeline peer outside it)."""
    from explore.model import moe
    from explore.model.context import ring_bytes_per_layer
    from explore.model.precision import FP8_DISPATCH_BYTES
    from explore.model.workload import ModelSpec, layer_params
    from topologies import network as net
    from topologies import reconfig
    from topologies.placement import group_span
    v, n = r.values, r.n
    f = lambda k: fit(v[k], n, float)  # noqa: E731
    m = ModelSpec.from_resolved(r)
    layers, mbs, seq, cp, ep = (f("model.layers"), f("parallelism.microbatch"), f("model.seq_len"),
                                f("parallelism.cp"), f("parallelism.ep"))
    etp = f("parallelism.etp") if "parallelism.etp" in v else tp
    eg = etp * ep
    mb = np.maximum(f("training.global_batch") / (dp * mbs), 1.0)
    rc_full = net.codes(fit(v["parallelism.recompute"], n), ("none", "selective", "full")) == 2
    # the gradient rings for the model's real layer (gated MLP, MoE experts), as step.py reduces
    # it: dense weights over the dp * cp ranks of a stage (tp apart), routed experts sharded over
    # etp * ep ranks over their own expert-data-parallel group; both share the collective circuits
    experts = fit(moe.expert_params_per_layer(m, np.where(m.gated_mlp, 3.0, 2.0)), n, float)
    dp_b, ep_b, pp_b = reconfig.plan_traffic_bytes(
        layers, f("model.hidden"), seq, mbs, mb, tp, pp, f("parallelism.virtual_stages"),
        f("parallelism.grad_reduce_bytes"), fit(layer_params(m), n, float), cp=cp,
        zero=f("parallelism.zero"), expert_params=experts, expert_ranks=eg,
        gather_bytes=f("parallelism.param_gather_bytes"))

    def ring(bytes_dev, stride, size):
        inner, outer = group_span(stride, size, su)
        return bytes_dev * (su / inner) * (outer - 1.0) / outer

    dp_node = ring(dp_b, tp, dp * cp) + ring(ep_b, eg, tp * dp * cp / eg)
    pp_node = np.where(tp * cp * dp >= su, pp_b * su, 0.0)
    # per layer, in every stage slot: m + (pp - 1) / v of them on the critical path (bubble included)
    slots = layers / pp * (mb + (pp - 1.0) / f("parallelism.virtual_stages"))
    # ring attention: cp - 1 key/value blocks per layer (forward, backward twice, a full recompute
    # once more) leave the node when the next cp rank, tp away, is outside it; they ride the
    # point-to-point circuits with the pipeline, half on each chain's
    kv = fit(ring_bytes_per_layer(m, mbs, cp, tp), n, float) * (3.0 + rc_full) * slots
    pp_node = pp_node + np.where((cp > 1) & (tp >= su), kv * su / 2.0, 0.0)
    # expert all-to-all: dispatch + combine buffers (forward, backward, a full recompute once
    # more), the share of them that leaves the node; it rides the collective circuits
    fp8 = (np.isin(fit(v["training.precision"], n), ("fp8", "fp4"))
           & fit(v["training.fp8_dispatch"], n, bool))
    buf = fit(moe.a2a_buffer_bytes(m, mbs * seq / cp / tp, np.where(fp8, FP8_DISPATCH_BYTES, 2.0) + 2.0), n, float)
    deepep = fit(v["parallelism.moe_dispatcher"], n) == "deepep"
    out = fit(moe.scale_out_copy_fraction(m, ep, group_span(etp, ep, su)[0], deepep), n, float)
    a2a = fit(moe.moe_layer_fraction(m), n, float) * buf * out * (2.0 + rc_full) * slots
    dp_node = dp_node + np.where(ep > 1, a2a * su, 0.0)
    return dp_node, pp_node
