"""Scale and reliability: 1k to 131k H100 training Llama 3 405B on 15.6 T tokens, with
interruptions, checkpointing and restarts (Young/Daly optimum checkpoint interval).

Two failure accountings, both from the model's per-component interruption rates
(``explore.model.reliability``, anchored on Llama 3's Table 5): every class but the
network (accelerator, HBM, host, software, NIC), and all classes including the
network's interruptions from its bill of materials (FIT of every transceiver, cable
and OCS per optics technology, times interruptions per failure). The time-optimal cluster size is the
evaluated device count with the shortest time to train.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

import explore
from explore import figures as fg
from studies.common import SCENARIOS, evaluate_grid, grid, num, pct, platform, scenario_with

TITLE = "Scale and reliability: goodput and time to train from 1k to 131k accelerators"
OPTICS = ("pluggable", "lpo", "cpo")
ACCOUNTING = ("all but the network", "all incl. network (BOM)")


def run(quick: bool = False) -> xr.Dataset:
    # dp must divide the 2,048-sequence batch: device counts are 128 x powers of two
    # (the grid is small enough that quick and full mode evaluate the same one)
    devices = 128 * 2 ** np.arange(3, 11)
    d = grid(devices=devices, optics=list(OPTICS), accounting=list(ACCOUNTING))
    sc = explore.load_scenario(SCENARIOS / "gpt3-175b-1024-a100.toml")
    sc["model"] = {"preset": "llama3-405b"}
    sc["name"] = "llama3-405b on H100, 15.6 T tokens"
    pf = platform("h100-sxm-80gb")
    fields = {"system.accelerator": "h100-sxm-80gb", "system.devices": d["devices"],
              "system.scale_up.size": pf["size"], "system.scale_up.link": pf["link"],
              "system.scale_out.link": "ib-ndr-400", "system.scale_out.optics": d["optics"],
              "parallelism.tp": 8, "parallelism.pp": 16, "parallelism.dp": d["devices"] // 128,
              "parallelism.recompute": "full", "training.global_batch": 2048,
              "training.tokens": 15.6e12}
    first = explore.evaluate(scenario_with(sc, fields))
    # the model's rate per device-hour without the network's classes, and with them
    net_rate = first["interruptions_per_hour_network"].values / d["devices"]
    base_rate = first["interruptions_per_hour"].values / d["devices"] - net_rate
    rate = np.where(d["accounting"] == ACCOUNTING[1], base_rate + net_rate, base_rate)
    fields["datacenter.interruptions_per_device_hour"] = rate
    ds = evaluate_grid(sc, fields, {"accounting": d["accounting"],
                                    "optics_failures_per_hour": first["network_fit"].values * 1e-9})
    ds["optics_failures_per_hour"].attrs["units"] = "1/h"
    return ds


def findings(ds: xr.Dataset) -> dict:
    out = {}
    for acct in ACCOUNTING:
        for o in OPTICS:
            m = (ds["accounting"].values == acct) & (ds["optics"].values == o) & ds["valid"].values
            n = ds["devices"].values[m]
            order = np.argsort(n)
            gp = ds["goodput"].values[m][order]
            t = ds["time_to_train_s"].values[m][order] / 86400
            k = int(np.argmin(t))
            out[(acct, o)] = {"devices": n[order], "goodput": gp, "days": t,
                              "best_devices": int(n[order][k]), "best_days": float(t[k]),
                              "best_goodput": float(gp[k]),
                              "goodput_monotone": bool(np.all(np.diff(gp) <= 1e-12))}
    return out


def summary(ds: xr.Dataset, f: dict) -> str:
    lines = ["Goodput falls with cluster size in every case; the time to train stops improving "
             "where lost work and restarts eat the extra devices.", "",
             "| failures counted | optics | time-optimal devices | days to train there | goodput there | "
             "largest cluster with goodput > 0 | goodput there |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for (acct, o), r in f.items():
        lines.append(f"| {acct} | {o} | {r['best_devices']:,} | {num(r['best_days'])} | "
                     f"{pct(r['best_goodput'])} | {int(r['devices'][-1]):,} | {pct(r['goodput'][-1])} |")
    p = f[(ACCOUNTING[1], "pluggable")]
    c = f[(ACCOUNTING[1], "cpo")]
    a = f[(ACCOUNTING[0], "pluggable")]
    lines += ["", f"Counting network (optics) failures moves the pluggable optimum from {a['best_devices']:,} to "
              f"{p['best_devices']:,} devices; with CPO (lower FIT) it is {c['best_devices']:,} (device counts "
              "are 128 x powers of two, the data-parallel degrees that divide the 2,048-sequence "
              "batch, so the optimum is resolved to a factor of two)."]
    return "\n".join(lines)


def figures(ds: xr.Dataset) -> dict:
    f = findings(ds)
    pg = fg.Panel(title="goodput", xlabel="accelerators", ylabel="goodput [%]", xlog=True)
    pt = fg.Panel(title="time to train", xlabel="accelerators", ylabel="time to train [days]",
                  xlog=True, ylog=True)
    for k, ((acct, o), r) in enumerate(f.items()):
        if acct == ACCOUNTING[0] and o != OPTICS[0]:
            continue            # without optics failures the technologies coincide
        name = f"{o}, {acct}" if acct == ACCOUNTING[1] else "any optics, all classes but the network"
        col = fg.PALETTE[OPTICS.index(o)] if acct == ACCOUNTING[1] else "#555555"
        hollow = acct == ACCOUNTING[0]
        text = [f"{name}<br>{n:,} accelerators<br>goodput {fg.fmt(g * 100, '%')}<br>"
                f"time to train {fg.fmt(t, 'days')}" for n, g, t in zip(r["devices"], r["goodput"], r["days"])]
        sym = ACCOUNTING.index(acct)
        pg.series.append(fg.Series(name, r["devices"], r["goodput"] * 100, text, "line", col, sym))
        pt.series.append(fg.Series(name, r["devices"], r["days"], text, "line", col, sym))
        if not hollow:
            pt.marks.append((r["best_devices"], r["best_days"], ""))
    pt.marks = [(x, y, "optimum" if i == 0 else "") for i, (x, y, _) in enumerate(pt.marks)]
    return {"scale-and-reliability": fg.Figure(
        TITLE, "Llama 3 405B, 15.6 T tokens, H100 (tp 8, pp 16), 900 s restarts; stars: "
        "time-optimal size with network failures counted", [pg, pt])}


if __name__ == "__main__":
    from studies.common import main
    raise SystemExit(main("scale-and-reliability"))
