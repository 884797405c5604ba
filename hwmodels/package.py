"""Accelerator package = compute dies + HBM stacks + optional I/O dies + optional optical I/O.

``build(params)`` turns per-design parameter arrays (see ``PARAMS`` and
``IDS``; ``catalog/accelerator_designs.toml`` holds reconstructions of real
parts) into derived arrays: peak FLOP/s per precision, HBM capacity and
effective bandwidth, TDP and idle power by component, unit cost by
component, interposer area, off-package I/O bandwidth and a feasibility code
(``REASONS[code]``, 0 = feasible). Everything is a numpy expression over the
design axis; categorical ids are looked up once per unique id.

Power at TDP = compute dynamic (peak x J/FLOP) + static (leakage, HBM
background, board) + HBM at full effective bandwidth + die-to-die traffic of
that bandwidth + off-package I/O at its full rate.
Unit cost = (KGD compute + KGD I/O dies + HBM + optical chiplets) / (y2 y3)
+ packaging / (y1 y2 y3) + board + NRE / volume (``hwmodels.packaging``).
"""
from __future__ import annotations

import numpy as np

from hwmodels import compute_die, d2d, hbm, packaging, silicon
from hwmodels.parts import strings, table
from hwmodels.parts import get_part, load_catalog

PARAMS = ("compute_dies", "die_area_mm2", "matrix_fraction", "clock_hz", "hbm_stacks",
          "hbm_stack_capacity_bytes", "hbm_stack_bandwidth_bytes_per_s", "d2d_bandwidth_bps",
          "io_dies", "io_die_area_mm2", "optical_io", "io_bandwidth_bps", "board_power_w",
          "board_cost_usd", "power_limit_w", "nre_volume")
IDS = {"node": "process_nodes", "hbm": "hbm", "package": "packaging", "d2d": "d2d",
       "io_node": "process_nodes", "optical_io_type": "io_chiplets"}
DEFAULT_DESIGN = "h100-sxm-80gb"
REASONS = ("",
           "compute die exceeds the reticle (26 x 33 mm)",
           "I/O die exceeds the reticle (26 x 33 mm)",
           "a multi-die accelerator needs a die-to-die link (d2d = 'none')",
           "too many HBM stacks for the die shoreline",
           "die edge too short for the HBM, die-to-die and I/O PHYs",
           "interposer exceeds the package's size limit",
           "package power exceeds power_limit_w",
           "scale-up bandwidth exceeds the package's off-package I/O bandwidth")
COMPONENTS = ("compute_dies", "io_dies", "hbm", "d2d", "offchip_io", "package", "nre")
SERDES = "serdes-112g"
ATTACH_D2D = "ucie-standard"   # optical chiplets attach over this class when the package's d2d is not edge-based


def design_ids() -> list[str]:
    return sorted(load_catalog()["accelerator_designs"])


def design_params(ids) -> dict[str, np.ndarray]:
    """Parameters of the reconstructions named by ``ids`` (arrays over designs)."""
    out = table("accelerator_designs", ids, PARAMS)
    for k in IDS:
        out[k] = strings("accelerator_designs", ids, k)
    return out


def build(p: dict) -> dict[str, np.ndarray]:
    """Derived accelerator arrays from parameter arrays ``p`` (all keys of PARAMS and IDS)."""
    n = np.asarray(p["compute_dies"], float)
    area = np.asarray(p["die_area_mm2"], float)
    n_io = np.asarray(p["io_dies"], float)
    io_area = np.where(n_io > 0, p["io_die_area_mm2"], 0.0)
    stacks = np.asarray(p["hbm_stacks"], float)
    n_opt = np.asarray(p["optical_io"], float)
    node = compute_die.NodeArrays.of(p["node"])
    io_node = compute_die.NodeArrays.of(p["io_node"])
    h = hbm.generation(p["hbm"])
    dk = d2d.link_class(p["d2d"])
    pk = packaging.technology(p["package"])
    oc = table("io_chiplets", p["optical_io_type"], ("bandwidth_bps", "energy_per_bit_j", "area_mm2", "cost_usd"))
    serdes = get_part("io_chiplets", SERDES)
    attach = get_part("d2d", ATTACH_D2D)

    multi = n > 1
    stacked = (dk["stacked"] > 0) & (n_io > 0)
    d2d_bw = np.where(multi, p["d2d_bandwidth_bps"], 0.0)
    phy = np.where(stacked, 0.0, d2d.phy_area_mm2(d2d_bw, dk["phy_area_mm2_per_bps"]))
    logic = np.maximum(area - phy, 0.0)

    # --- compute
    die_flops = compute_die.peak_flops_bf16(logic, p["matrix_fraction"], p["clock_hz"], node)
    peak_bf16 = n * die_flops
    # --- memory (cross-die traffic caps what the dies can draw)
    hbm_raw = stacks * p["hbm_stack_bandwidth_bytes_per_s"]
    hbm_eff = np.minimum(hbm_raw, d2d.memory_bandwidth_cap_bytes_per_s(n, d2d_bw))
    d2d_j_per_byte = np.where(multi, d2d.energy_per_memory_byte_j(n, dk["energy_per_bit_j"]), 0.0)
    # --- off-package I/O
    opt_bw = n_opt * oc["bandwidth_bps"]
    io_bw = p["io_bandwidth_bps"] + opt_bw

    # --- power (W)
    static = {"compute_dies": n * compute_die.static_power_w(area, node),
              "io_dies": n_io * compute_die.static_power_w(io_area, io_node),
              "hbm": stacks * h["background_power_w"],
              "package": np.asarray(p["board_power_w"], float)}
    dynamic = {"compute_dies": compute_die.dynamic_power_w(peak_bf16, node),
               "hbm": hbm.active_power_w(hbm_eff, h["energy_per_bit_j"]),
               "d2d": hbm_eff * d2d_j_per_byte,
               "offchip_io": p["io_bandwidth_bps"] * serdes["energy_per_bit_j"] + opt_bw * oc["energy_per_bit_j"]}
    idle = sum(static.values())
    tdp = idle + sum(dynamic.values())

    # --- cost (USD)
    kgd = silicon.kgd_cost_usd(area, node.wafer_cost_usd, node.defect_density_per_cm2, node.clustering_alpha)
    kgd_io = np.where(n_io > 0, silicon.kgd_cost_usd(np.where(n_io > 0, io_area, 1.0), io_node.wafer_cost_usd,
                                                     io_node.defect_density_per_cm2,
                                                     io_node.clustering_alpha), 0.0)
    c_compute = n * kgd
    c_hbm = stacks * p["hbm_stack_capacity_bytes"] * h["cost_usd_per_byte"]
    chiplets = np.where(stacked, 0.0, n) + n_io + stacks + n_opt
    footprint = (np.where(stacked, 0.0, n * area) + n_io * io_area + stacks * h["footprint_mm2"]
                 + n_opt * oc["area_mm2"])
    chip_area = n * area + n_io * io_area + stacks * h["footprint_mm2"] + n_opt * oc["area_mm2"]
    asm = packaging.assemble(chiplets, footprint, chip_area, pk,
                             np.where(stacked, dk["bond_yield"] ** n, 1.0))
    loss = asm["chiplet_loss_factor"]
    nre_total = (packaging.die_nre_usd(area, node.nre_usd)
                 + np.where(n_io > 0, packaging.die_nre_usd(io_area, io_node.nre_usd), 0.0) + pk["nre_usd"])
    d2d_share = np.where(area > 0, phy / area, 0.0)
    cost = {"compute_dies": c_compute * loss * (1.0 - d2d_share),
            "io_dies": n_io * kgd_io * loss,
            "hbm": c_hbm * loss,
            "d2d": c_compute * loss * d2d_share,
            "offchip_io": n_opt * oc["cost_usd"] * loss,
            "package": asm["packaging_cost_usd"] + p["board_cost_usd"],
            "nre": packaging.nre_per_unit_usd(nre_total, p["nre_volume"])}
    unit_cost = sum(cost.values())

    # --- feasibility
    edge_n = np.where(n_io > 0, n_io, n)
    edge_area = np.where(n_io > 0, io_area, area)
    long_mm, short_mm = silicon.die_edges_mm(edge_area)
    perimeter = edge_n * 2.0 * (long_mm + short_mm)
    attach_per_mm = np.where(dk["bandwidth_bps_per_mm"] > 0, dk["bandwidth_bps_per_mm"],
                             attach["bandwidth_bps_per_mm"])
    edge_need = (stacks * h["shoreline_mm"]
                 + n * d2d.shoreline_mm(d2d_bw, np.where(stacked, 0.0, dk["bandwidth_bps_per_mm"]))
                 + p["io_bandwidth_bps"] / serdes["bandwidth_bps_per_mm"] + opt_bw / attach_per_mm)
    no_link = (dk["bandwidth_bps_per_mm"] <= 0) & (dk["bandwidth_bps_per_mm2"] <= 0)
    code = np.select(
        [silicon.over_reticle(area), (n_io > 0) & silicon.over_reticle(io_area), multi & no_link,
         stacks > hbm.max_stacks(edge_n * 2.0 * long_mm, h["shoreline_mm"]), edge_need > perimeter,
         asm["interposer_area_mm2"] > pk["max_interposer_area_mm2"], tdp > p["power_limit_w"]],
        [1, 2, 3, 4, 5, 6, 7], 0)

    out = {
        "peak_flops_bf16": peak_bf16,
        "peak_flops_fp16": peak_bf16,
        "peak_flops_fp8": peak_bf16 * node.fp8_ratio,
        "hbm_capacity_bytes": stacks * p["hbm_stack_capacity_bytes"],
        "hbm_bandwidth_bytes_per_s": hbm_eff,
        "hbm_raw_bandwidth_bytes_per_s": hbm_raw,
        "d2d_energy_per_memory_byte_j": d2d_j_per_byte,
        "d2d_latency_s": np.where(multi, dk["latency_s"], 0.0),
        "sram_bytes": n * compute_die.sram_bytes(area, node),
        "tdp_w": tdp,
        "idle_power_w": idle,
        "unit_cost_usd": unit_cost,
        "interposer_area_mm2": asm["interposer_area_mm2"],
        "assembly_yield": asm["assembly_yield"],
        "io_bandwidth_bps": io_bw,
        "invalid_code": code.astype(float),
        **{f"cost_usd_{k}": v for k, v in cost.items()},
        **{f"static_power_w_{k}": v for k, v in static.items()},
        **{f"dynamic_power_w_{k}": v for k, v in dynamic.items()},
    }
    shape = np.broadcast_shapes(*(np.shape(a) for a in p.values()))
    return {k: np.broadcast_to(a, shape) for k, a in out.items()}


def reconstruct(pid: str) -> dict[str, float]:
    """The parametric reconstruction of catalog accelerator ``pid`` (one design, floats)."""
    out = build(design_params(np.array([pid])))
    return {k: float(v[0]) for k, v in out.items()}
