"""Reconfigurable topology: static fat-tree, torus and OCS networks against circuits re-set
per pipeline/gradient phase or per step, across OCS reconfiguration times from 1 us to 10 s.

The reconfiguration time is a what-if knob (the OCS part stays a Palomar-class MEMS
switch); the break-even time is where the reconfigured network's cost per token meets the
best static network's (log-linear interpolation between evaluated times), per job.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

import explore
from explore import figures as fg
from studies.common import SCENARIOS, concat, evaluate_grid, grid, num, platform

TITLE = "Reconfigurable topology: when does re-pointing optical circuits pay?"
STATIC = ("fat-tree", "torus", "ocs-torus", "ocs-reconfigurable")
JOBS = {"gpt3-175b on 4,096 H100": ("gpt3-175b", 4096, 1536, 8, "selective"),
        "llama3-405b on 16,384 H100": ("llama3-405b", 16384, 2048, 16, "full")}
METRIC = "cost_per_token_usd"


def run(quick: bool = False) -> xr.Dataset:
    times = np.logspace(-6, 1, 8 if quick else 29)
    parts = []
    for job, (preset, n, batch, pp, rc) in JOBS.items():
        static = {"topology": np.array(STATIC), "policy": np.array(["per-job"] * len(STATIC)),
                  "reconfig": np.full(len(STATIC), np.nan)}
        dyn = grid(policy=["per-phase", "per-step"], reconfig=times)
        dyn["topology"] = np.full(len(dyn["policy"]), "ocs-reconfigurable")
        d = concat(static, {k: dyn[k] for k in static})
        sc = explore.load_scenario(SCENARIOS / "network-comparison-175b-4096.toml")
        sc["model"] = {"preset": preset}
        for k in ("topology", "optics", "ocs", "ocs_reconfig_s", "reconfiguration", "torus_x",
                  "torus_y", "torus_z"):
            sc["system"]["scale_out"].pop(k, None)
        pf = platform("h100-sxm-80gb")
        fields = {"system.devices": n, "system.scale_up.link": pf["link"],
                  "system.scale_out.topology": d["topology"],
                  "system.scale_out.reconfiguration": d["policy"],
                  "system.scale_out.ocs": "palomar-136",
                  "system.scale_out.ocs_reconfig_s": np.where(np.isnan(d["reconfig"]), 0.01, d["reconfig"]),
                  "parallelism.pp": pp, "parallelism.dp": n // (8 * pp),
                  "parallelism.recompute": rc, "training.global_batch": batch}
        ds = evaluate_grid(sc, fields, {"job": np.full(len(d["policy"]), job),
                                        "network": np.where(d["policy"] == "per-job",
                                                            np.where(d["topology"] == "ocs-reconfigurable",
                                                                     "OCS circuits set per job", d["topology"]),
                                                            "OCS " + d["policy"]),
                                        "ocs_reconfig_time_s": d["reconfig"]})
        parts.append(ds)
    ds = xr.concat(parts, dim="design", data_vars="all", coords="different", compat="equals",
                   join="outer", combine_attrs="drop_conflicts")   # the current defaults, stated
    return ds.assign_coords(design=np.arange(ds.sizes["design"]))


def break_even(t, y, ref) -> float:
    """Largest reconfiguration time at which y(t) <= ref (log-linear between samples);
    nan if y > ref at every t, inf if y <= ref at every t."""
    o = np.argsort(t)
    t, y = np.asarray(t)[o], np.asarray(y)[o]
    below = y <= ref
    if not below.any():
        return float("nan")
    if below.all():
        return float("inf")
    k = np.flatnonzero(below)[-1]
    if k + 1 >= len(t):
        return float(t[k])
    lt = np.interp(ref, [y[k], y[k + 1]], np.log10([t[k], t[k + 1]]))
    return float(10 ** lt)


def findings(ds: xr.Dataset) -> dict:
    out = {}
    for job in dict.fromkeys(ds["job"].values):
        j = (ds["job"].values == job) & ds["valid"].values
        st = j & (ds["reconfiguration"].values == "per-job")
        y = ds[METRIC].values
        i_best = np.flatnonzero(st)[np.argmin(y[st])]
        best = float(y[i_best])
        r = {"best_static": str(ds["network"].values[i_best]), "best_static_cost": best,
             "best_static_days": float(ds["time_to_train_s"].values[i_best] / 86400)}
        for pol in ("per-phase", "per-step"):
            m = j & (ds["reconfiguration"].values == pol)
            t = ds["ocs_reconfig_time_s"].values[m]
            o = np.argsort(t)
            yc = y[m][o]
            r[pol] = {"break_even_s": break_even(t, y[m], best), "cost_fastest": float(yc[0]),
                      "cost_slowest": float(yc[-1]), "t_min": float(t[o][0]), "t_max": float(t[o][-1]),
                      "monotone": bool(np.all(np.diff(yc) >= -1e-12 * yc[:-1]))}
        out[job] = r
    return out


def _t(s: float) -> str:
    if np.isnan(s):
        return "does not beat the best static network at any reconfiguration time evaluated"
    if not np.isfinite(s):
        return "beats the best static network at every reconfiguration time evaluated"
    return f"breaks even with the best static network at {num(s * 1e3)} ms (cheaper below)"


def summary(ds: xr.Dataset, f: dict) -> str:
    lines = ["Metric: cost per token (USD per million tokens). Static networks set circuits once "
             "per job; 'OCS per-phase' re-points circuits between the pipeline and gradient "
             "phases, 'OCS per-step' once per step.", ""]
    for job, r in f.items():
        lines += [f"## {job}", "",
                  f"Best static network: {r['best_static']} at {num(r['best_static_cost'] * 1e6)} "
                  f"USD per million tokens ({num(r['best_static_days'])} days)."]
        for pol in ("per-phase", "per-step"):
            q = r[pol]
            lines.append(f"- OCS {pol}: {num(q['cost_fastest'] * 1e6)} USD per million tokens at "
                         f"{num(q['t_min'] * 1e3)} ms reconfiguration, {num(q['cost_slowest'] * 1e6)} at "
                         f"{num(q['t_max'] * 1e3)} ms; {_t(q['break_even_s'])}.")
        lines.append("")
    return "\n".join(lines)


def figures(ds: xr.Dataset) -> dict:
    fig = fg.Figure(TITLE, "H100, 8-GPU NVLink 4 servers; OCS reconfiguration time is a what-if "
                    "(Palomar-class MEMS part); dashed: static networks", ncols=2)
    f = findings(ds)
    for job in dict.fromkeys(ds["job"].values):
        j = ds["job"].values == job
        p = fg.Panel(title=job, xlabel="OCS reconfiguration time [s]",
                     ylabel="cost [USD per million tokens]", xlog=True, ylog=True)
        for k, pol in enumerate(("per-phase", "per-step")):
            m = j & (ds["reconfiguration"].values == pol)
            t = ds["ocs_reconfig_time_s"].values[m]
            o = np.argsort(t)
            y = ds[METRIC].values[m][o] * 1e6
            days = ds["time_to_train_s"].values[m][o] / 86400
            text = [f"OCS {pol}<br>reconfiguration {fg.fmt(a * 1e3, 'ms')}<br>"
                    f"cost {fg.fmt(b, 'USD per million tokens')}<br>time to train {fg.fmt(c, 'days')}"
                    for a, b, c in zip(t[o], y, days)]
            p.series.append(fg.Series(f"OCS {pol}", t[o], y, text, "line", fg.PALETTE[k], k))
            be = f[job][pol]["break_even_s"]
            if np.isfinite(be):
                p.marks.append((be, float(np.interp(np.log10(be), np.log10(t[o]), y)),
                                f"{pol} break-even {fg.fmt(be * 1e3, 'ms')}"))
        st = j & (ds["reconfiguration"].values == "per-job")
        colours = ("#555555", "#8c564b", "#e377c2", "#2ca02c")
        for c, i in zip(colours, np.flatnonzero(st)):
            p.hlines.append((float(ds[METRIC].values[i] * 1e6), f"static {ds['network'].values[i]}", c))
        fig.panels.append(p)
    return {"reconfigurable-topology": fig}


if __name__ == "__main__":
    from studies.common import main
    raise SystemExit(main("reconfigurable-topology"))
