"""Chiplet granularity: how to split the silicon of an accelerator (the ChipLight question).

A parametric accelerator (``hwmodels.package``; H100 price markup, host and reliability)
varies the number of compute dies, the area of each, the node, the HBM generation and
stack count, the package and the die-to-die link, and whether optical I/O chiplets are
on the package; 1,024 of them train GPT-3 175B (tp 8, pp 8, dp 16, NDR fat-tree).
Yield enters through the known-good-die cost; designs that break the reticle, the HBM
shoreline, the interposer or the power limit are invalid (grey, not drawn). The
yield-driven optimum is the valid design with the lowest cost per token.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

import explore
from explore import figures as fg
from studies.common import SCENARIOS, evaluate_grid, grid, num, pct

TITLE = "Chiplet granularity: cost per token vs time to train for split silicon"


def run(quick: bool = False) -> xr.Dataset:
    if quick:
        d = grid(dies=[1, 2, 4, 8], area=[150.0, 300.0, 600.0, 800.0], node=["n4", "n3"],
                 hbm=["hbm3e"], stacks=[4, 8], package=["cowos-l"], d2d=["ucie-advanced"],
                 optical_io=[0, 4])
    else:
        d = grid(dies=[1, 2, 3, 4, 6, 8], area=[100.0, 150.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0],
                 node=["n5", "n4", "n3", "n2"], hbm=["hbm3", "hbm3e", "hbm4"], stacks=[4, 6, 8, 12],
                 package=["cowos-s", "cowos-l"], d2d=["ucie-standard", "ucie-advanced", "hybrid-bond-3d"],
                 optical_io=[0, 4])
    sc = explore.load_scenario(SCENARIOS / "parametric-accelerator.toml")
    sc["system"]["accelerator"].pop("d2d_bandwidth_bps", None)
    fields = {"system.accelerator.compute_dies": d["dies"], "system.accelerator.die_area_mm2": d["area"],
              "system.accelerator.node": d["node"], "system.accelerator.hbm": d["hbm"],
              "system.accelerator.hbm_stacks": d["stacks"], "system.accelerator.package": d["package"],
              "system.accelerator.d2d": d["d2d"], "system.accelerator.optical_io": d["optical_io"]}
    ds = evaluate_grid(sc, fields, {"silicon_mm2": d["dies"] * d["area"]})
    ds["silicon_mm2"].attrs["units"] = "mm2"
    return ds


def findings(ds: xr.Dataset) -> dict:
    ok = ds["valid"].values
    c = np.where(ok, ds["cost_per_token_usd"].values, np.inf)
    i = int(np.argmin(c))
    mono = ok & (ds["compute_dies"].values == 1)
    j = int(np.argmin(np.where(mono, c, np.inf))) if mono.any() else None
    oio = {}
    for k in (0, 1):
        m = ok & ((ds["optical_io"].values > 0) == bool(k))
        oio[k] = float(np.min(np.where(m, c, np.inf))) if m.any() else float("nan")
    return {"n_valid": int(ok.sum()), "n": int(len(ok)), "best": i,
            "best_cost": float(c[i]), "best_days": float(ds["time_to_train_s"].values[i] / 86400),
            "best_dies": int(ds["compute_dies"].values[i]),
            "best_area": float(ds["die_area_mm2"].values[i]),
            "best_node": str(ds["node"].values[i]), "best_stacks": int(ds["hbm_stacks"].values[i]),
            "best_oio": int(ds["optical_io"].values[i]),
            "mono_cost": float(c[j]) if j is not None else float("nan"),
            "mono_area": float(ds["die_area_mm2"].values[j]) if j is not None else float("nan"),
            "multi_vs_mono": float(1 - c[i] / c[j]) if j is not None else float("nan"),
            "oio_cost": oio[1], "no_oio_cost": oio[0]}


def summary(ds: xr.Dataset, f: dict) -> str:
    reasons = {}
    for r in ds["reason"].values[~ds["valid"].values]:
        key = str(r).split(":")[0]
        reasons[key] = reasons.get(key, 0) + 1
    why = "; ".join(f"{k}: {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])[:4])
    return "\n".join([
        f"{f['n_valid']:,} of {f['n']:,} designs are buildable (invalid, by reason: {why}).",
        f"Yield-driven optimum (lowest cost per token): {f['best_dies']} x "
        f"{num(f['best_area'])} mm2 compute dies on {f['best_node']}, {f['best_stacks']} HBM stacks, "
        f"{f['best_oio']} optical I/O chiplets: {num(f['best_cost'] * 1e6)} USD per million tokens, "
        f"{num(f['best_days'])} days.",
        f"Best monolithic design (1 die of {num(f['mono_area'])} mm2): {num(f['mono_cost'] * 1e6)} USD "
        f"per million tokens; splitting saves {pct(f['multi_vs_mono'])}.",
        f"Best with optical I/O chiplets: {num(f['oio_cost'] * 1e6)} USD per million tokens; without: "
        f"{num(f['no_oio_cost'] * 1e6)} (on this job's scale-out, which already has NICs, optical I/O "
        f"{'pays' if f['oio_cost'] < f['no_oio_cost'] else 'does not pay'}).",
    ])


def figures(ds: xr.Dataset) -> dict:
    f = findings(ds)
    dies = ds["compute_dies"].values.astype(str)
    ds = ds.assign_coords(dies_label=("design", np.where(dies == "1", "1 die", np.char.add(dies, " dies"))))
    hover = ["compute_dies", "die_area_mm2", "node", "hbm", "hbm_stacks", "package", "d2d",
             "optical_io", "silicon_mm2", "capex_usd"]
    p = fg.scatter_panel(ds, "time_to_train_s", "cost_per_token_usd", by="dies_label",
                         hover_fields=hover, title="1,024 accelerators, GPT-3 175B", zoom=0.25)
    i = f["best"]
    p.marks.append((float(ds["time_to_train_s"].values[i] / 86400), f["best_cost"] * 1e6,
                    f"optimum: {f['best_dies']} x {num(f['best_area'])} mm2 {f['best_node']}"))
    q = fg.Panel(title="cheapest design per die size and count", xlabel="compute die area [mm2]",
                 ylabel="cost [USD per million tokens]", ylog=True)
    ok = ds["valid"].values
    for k, n in enumerate(np.unique(ds["compute_dies"].values)):
        m = ok & (ds["compute_dies"].values == n)
        areas = np.unique(ds["die_area_mm2"].values[m])
        best = np.array([ds["cost_per_token_usd"].values[m & (ds["die_area_mm2"].values == a)].min()
                         for a in areas]) * 1e6
        text = [f"{n} x {a:g} mm2: {fg.fmt(b, 'USD per million tokens')}" for a, b in zip(areas, best)]
        q.series.append(fg.Series(f"{n} {'die' if n == 1 else 'dies'}", areas, best, text, "line",
                                  fg.PALETTE[k % len(fg.PALETTE)], k))
    q.marks.append((f["best_area"], f["best_cost"] * 1e6, "optimum"))
    return {"chiplet-granularity": fg.Figure(TITLE, "parametric accelerators (hwmodels.package), "
                                             "front per die count; star: yield-driven optimum", [p, q])}


if __name__ == "__main__":
    from studies.common import main
    raise SystemExit(main("chiplet-granularity"))
