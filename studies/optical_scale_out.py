"""Optical scale-out: copper, pluggable, LPO, CPO, optical I/O and an OCS-reconfigurable
network for a 175B-class and a 405B-class job on H100 (shipped 8-GPU NVLink 4 servers).

For each job and link technology, the same plans and NIC provisioning are evaluated
(one ``explore.evaluate`` call per job), so technologies are compared design by design:
the summary states the energy ranking of the technologies at their best design and the
share of identical designs on which CPO needs less energy per token than pluggables.
The MoE job is left out: expert parallelism is not in the model yet (``parallelism.ep``
must be 1).
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from explore import figures as fg
from studies.common import SCENARIOS, evaluate_grid, grid, num, pct, platform

TITLE = "Optical scale-out: which link technology for the scale-out network"
TECHS = ("copper", "pluggable", "lpo", "cpo", "optical-io", "ocs-reconfigurable")
JOBS = {   # job -> (model preset, devices, global batch in sequences)
    "gpt3-175b on 4,096 H100": ("gpt3-175b", 4096, 1536),
    "llama3-405b on 16,384 H100": ("llama3-405b", 16384, 2048),
}


def _designs(quick: bool, devices: int) -> dict:
    tp = [8]
    pp = [8, 16] if quick else [4, 8, 16, 32]
    plans = grid(tp=tp, pp=pp, microbatch=[1] if quick else [1, 2],
                 nics=[1.0, 2.0] if quick else [0.5, 1.0, 2.0],
                 oversub=[1.0, 2.0] if quick else [1.0, 1.5, 2.0, 3.0],
                 recompute=["selective", "full"], zero=[1] if quick else [1, 3],
                 tech=list(TECHS))
    plans["dp"] = devices // (plans["tp"] * plans["pp"])
    return plans


def run(quick: bool = False) -> xr.Dataset:
    acc = "h100-sxm-80gb"
    pf = platform(acc)
    parts = []
    for job, (preset, devices, batch) in JOBS.items():
        d = _designs(quick, devices)
        tech = d["tech"]
        ocs = tech == "ocs-reconfigurable"
        fields = {
            "system.accelerator": acc, "system.devices": devices,
            "system.scale_up.size": pf["size"], "system.scale_up.link": pf["link"],
            "system.scale_out.topology": np.where(ocs, "ocs-reconfigurable", "fat-tree"),
            "system.scale_out.optics": np.where(ocs, "pluggable", tech),
            "system.scale_out.nics_per_device": d["nics"],
            "system.scale_out.oversubscription": d["oversub"],
            "parallelism.tp": d["tp"], "parallelism.pp": d["pp"], "parallelism.dp": d["dp"],
            "parallelism.microbatch": d["microbatch"],
            "parallelism.recompute": d["recompute"], "parallelism.zero": d["zero"],
            "training.global_batch": batch,
        }
        base = _base(preset)
        ds = evaluate_grid(base, fields, {"technology": tech, "job": np.full(len(tech), job)})
        parts.append(ds)
    ds = xr.concat(parts, dim="design", data_vars="all", coords="different", compat="equals",
                   combine_attrs="drop_conflicts")
    ds = ds.assign_coords(design=np.arange(ds.sizes["design"]))
    ds.attrs["moe_job"] = "skipped: expert parallelism is not in the model yet (parallelism.ep must be 1)"
    return ds


def _base(preset: str) -> dict:
    import explore
    sc = explore.load_scenario(SCENARIOS / "gpt3-175b-1024-a100.toml")
    sc["model"] = {"preset": preset}
    sc["name"] = f"{preset}: scale-out link technologies"
    return sc


def findings(ds: xr.Dataset) -> dict:
    """Per job: best energy / cost per token of each technology, its time to train, and the
    share of identical designs (same job, plan, NICs, oversubscription) where CPO uses less
    energy per token than pluggables."""
    out = {}
    for job in dict.fromkeys(ds["job"].values):
        j = ds["job"].values == job
        ok = j & ds["valid"].values
        row = {}
        for t in TECHS:
            m = ok & (ds["technology"].values == t)
            if not m.any():
                continue
            e = ds["energy_per_token_j"].values[m]
            c = ds["cost_per_token_usd"].values[m]
            i = np.flatnonzero(m)[np.argmin(e)]
            row[t] = {"best_energy_j": float(e.min()), "best_cost_usd": float(c.min()),
                      "days_at_best_energy": float(ds["time_to_train_s"].values[i] / 86400),
                      "valid_designs": int(m.sum())}
        key = ("parallelism", "tp", "pp", "microbatch", "recompute", "zero", "nics_per_device",
               "oversubscription")
        def energy_of(t):
            m = j & (ds["technology"].values == t)
            keys = [tuple(r) for r in np.stack([ds[k].values[m] for k in key[1:]], 1)]
            return dict(zip(keys, ds["energy_per_token_j"].values[m])), dict(zip(keys, ds["valid"].values[m]))
        ec, vc = energy_of("cpo")
        ep, vp = energy_of("pluggable")
        both = [k for k in ec if k in ep and vc[k] and vp[k]]
        wins = sum(ec[k] < ep[k] for k in both)
        ranking = sorted(row, key=lambda t: row[t]["best_energy_j"])
        out[job] = {"tech": row, "ranking": ranking, "paired": len(both),
                    "cpo_wins": wins, "cpo_win_share": wins / max(len(both), 1),
                    "cpo_saving": 1 - row["cpo"]["best_energy_j"] / row["pluggable"]["best_energy_j"]
                    if "cpo" in row and "pluggable" in row else float("nan")}
    return out


def summary(ds: xr.Dataset, f: dict) -> str:
    lines = ["Each technology is evaluated on the same plans, NIC counts and oversubscriptions "
             "(fat-tree; the OCS design re-points circuits once per job, with pluggables).", ""]
    for job, r in f.items():
        lines += [f"## {job}", "",
                  f"Energy ranking at each technology's best design: {' < '.join(r['ranking'])}.",
                  f"CPO uses less energy per token than pluggables on {r['cpo_wins']} of "
                  f"{r['paired']} identical designs ({pct(r['cpo_win_share'])}); at the best "
                  f"design it saves {pct(r['cpo_saving'])}.", "",
                  "| technology | best J/token | best USD per million tokens | days at best energy | valid designs |",
                  "| --- | --- | --- | --- | --- |"]
        for t, v in r["tech"].items():
            lines.append(f"| {t} | {num(v['best_energy_j'])} | {num(v['best_cost_usd'] * 1e6)} | "
                         f"{num(v['days_at_best_energy'])} | {v['valid_designs']} |")
        lines.append("")
    lines.append(f"MoE job: {ds.attrs.get('moe_job', '')}.")
    return "\n".join(lines)


def figures(ds: xr.Dataset) -> dict:
    hover = ["technology", "tp", "pp", "dp", "microbatch", "nics_per_device", "oversubscription",
             "time_to_train_s", "energy_per_token_j", "cost_per_token_usd", "power_w", "capex_usd"]
    fig = fg.Figure(TITLE, "H100 (8-GPU NVLink 4 servers), fat-tree scale-out; "
                         "Pareto front per technology over all evaluated designs (grey)", ncols=2)
    for job in dict.fromkeys(ds["job"].values):
        m = ds["job"].values == job
        sub = ds.isel(design=np.flatnonzero(m))
        fig.panels.append(fg.scatter_panel(sub, "time_to_train_s", "energy_per_token_j",
                                                by="technology", hover_fields=hover,
                                                title=f"{job}: energy", zoom=0.04))
        fig.panels.append(fg.scatter_panel(sub, "time_to_train_s", "cost_per_token_usd",
                                                by="technology", hover_fields=hover,
                                                title=f"{job}: cost", zoom=0.04))
    return {"optical-scale-out": fig}


if __name__ == "__main__":
    from studies.common import main
    raise SystemExit(main("optical-scale-out"))
