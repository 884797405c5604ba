"""SystemSpec: the accelerator, the scale-up domain and the scale-out fabric as arrays.

Built from the catalog (``hwmodels/catalog``) and the scenario's overrides.
Catalog ids may differ per design: unique ids are looked up once and
broadcast (``hwmodels.parts.lookup``), so no Python loop runs per design.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explore.scenario import ACCEL_FIELDS
from hwmodels.parts import lookup


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


def accelerator_arrays(r) -> dict[str, np.ndarray]:
    """Accelerator fields: catalog entry of ``system.accelerator`` then inline overrides."""
    v = r.values
    out: dict[str, np.ndarray] = {}
    ids = v.get("system.accelerator")
    for f in ACCEL_FIELDS:
        key = f"system.accelerator.{f}"
        if key in v:
            out[f] = np.broadcast_to(v[key].astype(float), (r.n,))
        elif ids is not None:
            out[f] = np.broadcast_to(lookup("accelerators", ids, f), (r.n,))
    return out


def _link(r, table: str):
    v = r.values
    ids = v[f"{table}.link"]
    bw = v.get(f"{table}.bandwidth_bps")
    lat = v.get(f"{table}.latency_s")
    bw = lookup("links", ids, "bandwidth_bps") if bw is None else bw
    lat = lookup("links", ids, "latency_s") if lat is None else lat
    return (bw.astype(float), lat.astype(float), lookup("links", ids, "power_w"),
            lookup("links", ids, "cost_usd"))


def build_system(r) -> SystemSpec:
    v = r.values
    n = r.n
    acc = accelerator_arrays(r)
    prec = np.asarray(v["training.precision"])
    peak = np.where(prec == "fp8", acc["peak_flops_fp8"],
                    np.where(prec == "fp16", acc["peak_flops_fp16"], acc["peak_flops_bf16"]))
    su_bw, su_lat, su_pw, su_cost = _link(r, "system.scale_up")
    nic_bw, so_lat, nic_pw, nic_cost = _link(r, "system.scale_out")
    nics = v["system.scale_out.nics_per_device"].astype(float)
    sw = v["system.scale_out.switch"]
    tr = v["system.scale_out.transceiver"]
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
        transceiver_power_w=lookup("switches", tr, "power_w"),
        transceiver_cost_usd=lookup("switches", tr, "cost_usd"),
    )
    return SystemSpec(**{k: np.broadcast_to(np.asarray(a, dtype=float), (n,)) for k, a in kw.items()})
