"""Co-design frontier: what searching hardware, network and plan together buys over fixing
any one layer, for GPT-3 175B (300 B tokens) under a 100 M USD capex cap.

Every design of a grid over shipped platforms (accelerator with its own scale-up fabric
and domain size), cluster size, scale-out network and parallel plan is evaluated in one
call. The restricted searches are the subsets of that grid that keep one layer at the
reference design (H100 HGX, 1,024 devices; NDR fat-tree, 1 NIC per GPU, no
oversubscription; tp 8, pp 8, microbatch 1, selective recompute): "plan only" fixes the
hardware and the network, "network only" the hardware and the plan, "accelerator only"
the network and the plan.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

import explore
from explore import figures as fg
from studies.common import SCENARIOS, evaluate_grid, grid, num, pct, platform

TITLE = "Co-design frontier: what joint hardware x network x plan search buys"
BUDGET_USD = 1.0e8
PLATFORMS = [("a100-sxm-80gb", 8), ("h100-sxm-80gb", 8), ("h200-sxm-141gb", 8), ("b200", 8),
             ("b200", 72), ("mi300x", 8)]
REFERENCE = {"platform": "h100-sxm-80gb x8", "devices": 1024, "scale_out_link": "ib-ndr-400",
             "nics": 1.0, "oversub": 1.0, "optics": "pluggable", "tp": 8, "pp": 8,
             "microbatch": 1, "recompute": "selective"}
LAYERS = {"hardware": ("platform", "devices"),
          "network": ("scale_out_link", "nics", "oversub", "optics"),
          "plan": ("tp", "pp", "microbatch", "recompute")}
SEARCHES = {"plan only": ("plan",), "network only": ("network",),
            "accelerator only": ("hardware",), "joint co-design": ("hardware", "network", "plan")}


def _axes(quick: bool) -> dict:
    names = [f"{a} x{s}" for a, s in PLATFORMS]
    if quick:
        return dict(platform=names, devices=[1024, 2048], scale_out_link=["ib-ndr-400", "roce-400"],
                    nics=[0.5, 1.0], oversub=[1.0, 2.0], optics=["pluggable", "cpo"], tp=[4, 8],
                    pp=[8, 16], microbatch=[1], recompute=["selective", "full"])
    return dict(platform=names, devices=[512, 1024, 1536, 2048, 3072, 4096],
                scale_out_link=["ib-hdr-200", "ib-ndr-400", "roce-400"], nics=[0.5, 1.0, 2.0],
                oversub=[1.0, 2.0, 3.0], optics=["pluggable", "lpo", "cpo"], tp=[2, 4, 8],
                pp=[4, 8, 12, 16], microbatch=[1, 2], recompute=["selective", "full"])


def run(quick: bool = False) -> xr.Dataset:
    d = grid(**_axes(quick))
    acc = np.array([p.split(" x")[0] for p in d["platform"]])
    size = np.array([int(p.split(" x")[1]) for p in d["platform"]])
    link = np.array([platform(a)["link"] for a in acc])
    sc = explore.load_scenario(SCENARIOS / "gpt3-175b-1024-a100.toml")
    sc["name"] = "gpt3-175b, capex <= 100 M USD, shipped platforms"
    fields = {"system.accelerator": acc, "system.devices": d["devices"],
              "system.scale_up.size": size, "system.scale_up.link": link,
              "system.scale_out.link": d["scale_out_link"],
              "system.scale_out.nics_per_device": d["nics"],
              "system.scale_out.oversubscription": d["oversub"],
              "system.scale_out.optics": d["optics"],
              "parallelism.tp": d["tp"], "parallelism.pp": d["pp"],
              "parallelism.dp": d["devices"] // (d["tp"] * d["pp"]),
              "parallelism.microbatch": d["microbatch"], "parallelism.recompute": d["recompute"]}
    ds = evaluate_grid(sc, fields, {"platform": d["platform"]})
    ok = ds["valid"].values & (ds["capex_usd"].values <= BUDGET_USD) & \
        (d["devices"] % (d["tp"] * d["pp"]) == 0)
    ds["feasible"] = ("design", ok)
    for name, free in SEARCHES.items():
        m = np.ones(len(ok), bool)
        for layer, keys in LAYERS.items():
            if layer not in free:
                for k in keys:
                    m &= d[k] == REFERENCE[k]
        ds[f"in_{name.replace(' ', '_')}"] = ("design", m)
    ds.attrs["budget_usd"] = BUDGET_USD
    if not quick:      # the shipped co-design space, searched by NSGA-II (a wider space, not a grid)
        from studies.common import ROOT
        res = explore.search(ROOT / "spaces" / "codesign-gpt3-175b.toml", pop=48, gens=25, seed=1)
        c = res["cost_per_token_usd"].values
        ds.attrs.update(search_space="studies/spaces/codesign-gpt3-175b.toml",
                        search_evaluations=int(res.attrs.get("evaluations", 0)),
                        search_best_cost_usd=float(np.nanmin(c)) if len(c) else float("nan"),
                        search_front_size=int(res.sizes["design"]))
    return ds


def findings(ds: xr.Dataset) -> dict:
    ok = ds["feasible"].values
    c = ds["cost_per_token_usd"].values
    out = {}
    for name in SEARCHES:
        m = ok & ds[f"in_{name.replace(' ', '_')}"].values
        i = int(np.argmin(np.where(m, c, np.inf)))
        out[name] = {"designs": int(m.sum()), "best_cost": float(c[i]) if m.any() else float("nan"),
                     "best_days": float(ds["time_to_train_s"].values[i] / 86400),
                     "index": i}
    j = out["joint co-design"]["best_cost"]
    gains = {k: 1 - j / v["best_cost"] for k, v in out.items() if k != "joint co-design"}
    return {"searches": out, "gains": gains}


def summary(ds: xr.Dataset, f: dict) -> str:
    s = f["searches"]
    jb = s["joint co-design"]
    i = jb["index"]
    best = (f"{ds['platform'].values[i]} ({int(ds['devices'].values[i]):,} devices), "
            f"{ds['scale_out_link'].values[i]} x {num(ds['nics_per_device'].values[i])} NICs with "
            f"{ds['optics'].values[i]} optics at oversubscription {num(ds['oversubscription'].values[i])}, "
            f"tp {int(ds['tp'].values[i])} pp {int(ds['pp'].values[i])} "
            f"microbatch {int(ds['microbatch'].values[i])}, {ds['recompute'].values[i]} recompute")
    lines = [f"Budget: capex <= {num(BUDGET_USD / 1e6)} M USD. Lowest cost per token found by each "
             "search (same grid, restricted):", "",
             "| search | designs within budget | best USD per million tokens | days to train there | joint co-design saves |",
             "| --- | --- | --- | --- | --- |"]
    for k, v in s.items():
        g = f["gains"].get(k)
        lines.append(f"| {k} | {v['designs']:,} | {num(v['best_cost'] * 1e6)} | {num(v['best_days'])} | "
                     f"{pct(g) if g is not None else '-'} |")
    if "search_best_cost_usd" in ds.attrs:
        lines += ["", f"NSGA-II on the shipped co-design space ({ds.attrs['search_space']}, "
                  f"{ds.attrs['search_evaluations']:,} evaluations, {ds.attrs['search_front_size']} "
                  f"Pareto designs) reaches {num(ds.attrs['search_best_cost_usd'] * 1e6)} USD per million "
                  f"tokens at best, against {num(jb['best_cost'] * 1e6)} for the enumerated grid here "
                  "(a different space: it also searches the ZeRO stage and virtual pipeline stages, not the optics)."]
    lines += ["", f"Joint optimum: {best}.",
              "Accelerators are paired only with the scale-up fabric and domain sizes they ship with "
              "(explore/data/platforms.toml); no what-if designs."]
    return "\n".join(lines)


def figures(ds: xr.Dataset) -> dict:
    ok = ds["feasible"].values
    X, xl = fg.in_units("time_to_train_s", ds["time_to_train_s"].values)
    Y, yl = fg.in_units("cost_per_token_usd", ds["cost_per_token_usd"].values)
    idx = np.flatnonzero(ok)
    if len(idx) > fg.MAX_CLOUD:
        idx = idx[np.linspace(0, len(idx) - 1, fg.MAX_CLOUD).round().astype(int)]
    fronts = {}
    for name in SEARCHES:
        m = ok & ds[f"in_{name.replace(' ', '_')}"].values
        sel = np.flatnonzero(m & fg.front_mask(np.where(m, X, np.nan), np.where(m, Y, np.nan)))
        fronts[name] = sel[np.argsort(X[sel])]
    rows = np.unique(np.concatenate([idx, *fronts.values()]))
    hover = dict(zip(rows, fg.hover(ds, ["platform", "devices", "scale_out_link", "nics_per_device", "oversubscription",
                          "optics", "tp", "pp", "microbatch", "recompute", "capex_usd",
                          "time_to_train_s", "cost_per_token_usd", "energy_per_token_j"], rows)))
    p = fg.Panel(title="fronts of time to train and cost per token", xlabel=xl, ylabel=yl,
                 xlog=fg.should_log(X[ok]), ylog=fg.should_log(Y[ok]))
    p.series.append(fg.Series("designs within budget", X[idx], Y[idx], [hover[i] for i in idx], "cloud"))
    for k, (name, sel) in enumerate(fronts.items()):
        p.series.append(fg.Series(name, X[sel], Y[sel], [hover[i] for i in sel], "front",
                                  fg.PALETTE[k], k))
    q = fg.scatter_panel(ds, "time_to_train_s", "cost_per_token_usd", by="platform", mask=ok,
                         hover_fields=["platform", "devices", "scale_out_link", "optics", "tp", "pp"],
                         fronts="group", title="joint search: front per platform")
    q.series[0].name = "designs within budget"
    return {"codesign-frontier": fg.Figure(
        TITLE, f"GPT-3 175B, 300 B tokens, capex <= {num(BUDGET_USD / 1e6)} M USD, shipped platforms; "
        "restricted searches keep the other layers at the H100 reference", [p, q], legend="panel")}


if __name__ == "__main__":
    from studies.common import main
    raise SystemExit(main("codesign-frontier"))
