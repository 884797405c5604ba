"""Optical scale-out: copper, pluggable, LPO, CPO, optical I/O and an OCS-reconfigurable
network for a 175B-class, a 405B-class and a mixture-of-experts job (Mixtral 8x7B with
expert parallelism, whose all-to-all crosses the scale-out network) on H100 (shipped 8-GPU
NVLink 4 servers).

For each job and link technology, the same plans and NIC provisioning are evaluated
(one ``explore.evaluate`` call per job), so technologies are compared design by design:
the summary states the energy ranking of the technologies at their best design and the
share of identical designs on which CPO needs less energy per token than pluggables.

Uncertainty: the designs on each technology's fronts (time against energy, time
against cost) are evaluated again under ``BAND_SAMPLES`` joint draws of every
uncertain catalog figure and calibration constant
(``explore.uncertainty.evaluate_samples``, one call per job, seeded; one draw is
shared by all designs of a sample). The dataset keeps their 5th, 50th and 95th
percentiles (``METRIC_q05`` ...) and the sampled energies per token; the figure
draws the 5-95 % bands as error bars on both axes, and the summary says whether the
energy ranking of the technologies survives the uncertainty.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from explore import figures as fg
from studies.common import SCENARIOS, evaluate_grid, grid, num, pct, platform, scenario_with

TITLE = "Optical scale-out: which link technology for the scale-out network"
BAND_SAMPLES = {False: 64, True: 16}     # joint samples of the uncertain inputs (full, quick)
BAND_SEED = 0
BAND_METRICS = ("time_to_train_s", "energy_per_token_j", "cost_per_token_usd")
QUANTILES = {"q05": 0.05, "q50": 0.5, "q95": 0.95}
TECHS = ("copper", "pluggable", "lpo", "cpo", "optical-io", "ocs-reconfigurable")
JOBS = {   # job -> (model preset and overrides, devices, global batch in sequences)
    "gpt3-175b on 4,096 H100": ({"preset": "gpt3-175b"}, 4096, 1536),
    "llama3-405b on 16,384 H100": ({"preset": "llama3-405b"}, 16384, 2048),
    "mixtral-8x7b (MoE, 4k context) on 1,024 H100": ({"preset": "mixtral-8x7b", "seq_len": 4096},
                                                     1024, 1024),
}


def _designs(quick: bool, devices: int, moe: bool) -> dict:
    """Dense jobs: tp 8 and pipeline depths; the MoE job: 8 experts over ep 8 ranks (the
    expert all-to-all leaves an 8-GPU server when ep x tp > 8), tp 1-2, shallow pipelines."""
    if moe:
        tp, pp, ep = ([2], [2, 4], [8]) if quick else ([1, 2], [1, 2, 4], [4, 8])
    else:
        tp, pp, ep = [8], ([8, 16] if quick else [4, 8, 16, 32]), [1]
    plans = grid(tp=tp, pp=pp, ep=ep, microbatch=[1] if quick else [1, 2],
                 nics=[1.0, 2.0] if quick else [0.5, 1.0, 2.0],
                 oversub=[1.0, 2.0] if quick else [1.0, 1.5, 2.0, 3.0],
                 recompute=["selective", "full"], zero=[1] if quick else [1, 3],
                 tech=list(TECHS))
    plans["dp"] = devices // (plans["tp"] * plans["pp"])
    return plans


def run(quick: bool = False) -> xr.Dataset:
    acc = "h100-sxm-80gb"
    pf = platform(acc)
    parts, sampled = [], []
    for job, (model, devices, batch) in JOBS.items():
        d = _designs(quick, devices, moe="mixtral" in model["preset"])
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
            "parallelism.ep": d["ep"],
            "parallelism.microbatch": d["microbatch"],
            "parallelism.recompute": d["recompute"], "parallelism.zero": d["zero"],
            "training.global_batch": batch,
        }
        base = _base(model)
        ds = evaluate_grid(base, fields, {"technology": tech, "job": np.full(len(tech), job)})
        parts.append(ds)
        sampled.append(_sampled(base, fields, ds, BAND_SAMPLES[quick]))
    ds = xr.concat(parts, dim="design", data_vars="all", coords="different", compat="equals",
                   combine_attrs="drop_conflicts")
    ds = ds.assign_coords(design=np.arange(ds.sizes["design"]))
    ds = _with_bands(ds, sampled, BAND_SAMPLES[quick])
    return ds


def front_designs(ds: xr.Dataset) -> np.ndarray:
    """Valid designs on a technology's front of time against energy or against cost
    (the points the figure draws in colour)."""
    ok = ds["valid"].values.astype(bool)
    tech = ds["technology"].values
    t = ds["time_to_train_s"].values
    on = np.zeros(len(t), bool)
    for g in np.unique(tech):
        m = ok & (tech == g)
        for y in ("energy_per_token_j", "cost_per_token_usd"):
            on |= m & fg.front_mask(np.where(m, t, np.nan), np.where(m, ds[y].values, np.nan))
    return np.flatnonzero(on)


def _sampled(base: dict, fields: dict, ds: xr.Dataset, samples: int):
    """(rows, samples dataset): the front designs of one job under ``samples`` joint draws
    of the uncertain inputs, in one vectorised call."""
    from explore.uncertainty import evaluate_samples
    rows = front_designs(ds)
    sub = {k: (np.asarray(v)[rows] if np.ndim(v) else v) for k, v in fields.items()}
    s = evaluate_samples(scenario_with(base, sub), samples=samples, seed=BAND_SEED)
    return rows, s[list(BAND_METRICS)], int(s.attrs["uncertain_inputs"])


def _with_bands(ds: xr.Dataset, sampled: list, samples: int) -> xr.Dataset:
    """Per design (NaN where not sampled): ``METRIC_q05/_q50/_q95`` over the samples, and
    ``energy_per_token_j_samples`` (sample, design) for per-sample comparisons."""
    from explore.uncertainty import bands
    n = ds.sizes["design"]
    q = {f"{m}_{k}": np.full(n, np.nan) for m in BAND_METRICS for k in QUANTILES}
    e = np.full((samples, n), np.nan)
    offset, inputs = 0, []
    for part, (rows, s, k) in zip(dict.fromkeys(ds["job"].values), sampled):
        idx = offset + rows
        b = bands(s, list(BAND_METRICS), tuple(QUANTILES.values()))
        for m in BAND_METRICS:
            for name, qv in QUANTILES.items():
                q[f"{m}_{name}"][idx] = b[m].sel(quantile=qv).values
        e[:, idx] = s["energy_per_token_j"].values
        offset += int(np.sum(ds["job"].values == part))
        inputs.append(k)
    out = ds.assign({k: ("design", v, {"units": ds[k.rsplit("_", 1)[0]].attrs.get("units", ""),
                                      "long_name": f"{k.rsplit('_', 1)[1]} over {samples} samples"})
                     for k, v in q.items()})
    out["energy_per_token_j_samples"] = (("sample", "design"), e)
    out.attrs.update(band_samples=samples, band_seed=BAND_SEED, band_uncertain_inputs=inputs)
    return out


def _base(model: dict) -> dict:
    import explore
    sc = explore.load_scenario(SCENARIOS / "gpt3-175b-1024-a100.toml")
    sc["model"] = dict(model)
    sc["name"] = f"{model['preset']}: scale-out link technologies"
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
                      "valid_designs": int(m.sum()), "best_design": int(i),
                      "energy_band_j": tuple(float(ds[f"energy_per_token_j_{k}"].values[i])
                                             for k in ("q05", "q95"))}
        key = ("parallelism", "tp", "pp", "ep", "microbatch", "recompute", "zero", "nics_per_device",
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
                    "uncertainty": _uncertainty(ds, j, row, ranking),
                    "cpo_wins": wins, "cpo_win_share": wins / max(len(both), 1),
                    "cpo_saving": 1 - row["cpo"]["best_energy_j"] / row["pluggable"]["best_energy_j"]
                    if "cpo" in row and "pluggable" in row else float("nan")}
    return out


def _uncertainty(ds: xr.Dataset, j: np.ndarray, row: dict, ranking: list) -> dict:
    """Does the energy ranking survive the uncertain inputs? Band overlap of CPO's and
    pluggables' best designs, and per sample (draws shared by all designs) each
    technology's lowest energy over its sampled front designs: how often CPO beats
    pluggables, CPO's saving, and how often the whole ranking is the deterministic one."""
    e = ds["energy_per_token_j_samples"].values                # (sample, design)
    tech = ds["technology"].values
    best = {}
    for t in ranking:
        cols = np.flatnonzero(j & (tech == t) & np.isfinite(e).all(axis=0))
        best[t] = e[:, cols].min(axis=1)
    n = e.shape[0]
    order = np.argsort(np.stack([best[t] for t in ranking], 1), axis=1, kind="stable")
    same = int(np.sum(np.all(order == np.arange(len(ranking)), axis=1)))
    r = {"samples": n, "ranking_holds": same, "ranking_holds_share": same / n,
         "pairs": [(a, b, int(np.sum(best[a] < best[b]))) for a, b in zip(ranking, ranking[1:])]}
    if "cpo" in best and "pluggable" in best:
        saving = 1 - best["cpo"] / best["pluggable"]
        (pl, ph), (cl, ch) = row["pluggable"]["energy_band_j"], row["cpo"]["energy_band_j"]
        r.update(cpo_wins=int(np.sum(saving > 0)), cpo_win_share=float(np.mean(saving > 0)),
                 saving_q05=float(np.quantile(saving, 0.05)), saving_q50=float(np.median(saving)),
                 saving_q95=float(np.quantile(saving, 0.95)),
                 bands_overlap=bool(max(pl, cl) <= min(ph, ch)))
    return r


def summary(ds: xr.Dataset, f: dict) -> str:
    lines = ["Each technology is evaluated on the same plans, NIC counts and oversubscriptions "
             "(fat-tree; the OCS design re-points circuits once per job, with pluggables).", ""]
    for job, r in f.items():
        lines += [f"## {job}", "",
                  f"Energy ranking at each technology's best design: {' < '.join(r['ranking'])}.",
                  f"CPO uses less energy per token than pluggables on {r['cpo_wins']} of "
                  f"{r['paired']} identical designs ({pct(r['cpo_win_share'])}); at the best "
                  f"design it saves {pct(r['cpo_saving'])}.", ""]
        u = r["uncertainty"]
        if "bands_overlap" in u:
            pb, cb = r["tech"]["pluggable"]["energy_band_j"], r["tech"]["cpo"]["energy_band_j"]
            lines += [f"Under uncertainty ({u['samples']} joint samples, 5-95 %), energy per token at "
                      f"the best design is {num(pb[0])} to {num(pb[1])} J with pluggables and "
                      f"{num(cb[0])} to {num(cb[1])} J with CPO: the bands "
                      f"{'overlap' if u['bands_overlap'] else 'do not overlap'}. "
                      f"Compared within each sample (one draw shared by all designs), CPO's best "
                      f"design uses less energy than pluggables' in {u['cpo_wins']} of {u['samples']} "
                      f"samples (saving {pct(u['saving_q50'])}, 5-95 %: {pct(u['saving_q05'])} to "
                      f"{pct(u['saving_q95'])}), and the whole ranking above holds in "
                      f"{u['ranking_holds']} of {u['samples']} samples. Samples keeping each "
                      f"neighbouring pair in order: "
                      + ", ".join(f"{a} < {b} {k}" for a, b, k in u["pairs"]) + ".", ""]
        lines += ["| technology | best J/token | 5-95 % J/token | best USD per million tokens | days at best energy | valid designs |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for t, v in r["tech"].items():
            lo, hi = v["energy_band_j"]
            lines.append(f"| {t} | {num(v['best_energy_j'])} | {num(lo)} to {num(hi)} | "
                         f"{num(v['best_cost_usd'] * 1e6)} | "
                         f"{num(v['days_at_best_energy'])} | {v['valid_designs']} |")
        lines.append("")
    return "\n".join(lines)


def figures(ds: xr.Dataset) -> dict:
    hover = ["technology", "tp", "pp", "dp", "ep", "microbatch", "nics_per_device", "oversubscription",
             "time_to_train_s", "energy_per_token_j", "cost_per_token_usd", "power_w", "capex_usd"]
    n = int(ds.attrs.get("band_samples", 0))
    fig = fg.Figure(TITLE, "H100 (8-GPU NVLink 4 servers), fat-tree scale-out; "
                         "Pareto front per technology over all evaluated designs (grey)", ncols=2,
                    note=f"Bars: 5-95 % over {n} joint samples of the uncertain catalog figures and "
                         "calibration constants (hwmodels/uncertainty.toml), both axes." if n else "")
    for job in dict.fromkeys(ds["job"].values):
        m = ds["job"].values == job
        sub = ds.isel(design=np.flatnonzero(m))
        bands = {k: (sub[f"{k}_q05"].values, sub[f"{k}_q95"].values) for k in BAND_METRICS
                 if f"{k}_q05" in sub}
        fig.panels.append(fg.scatter_panel(sub, "time_to_train_s", "energy_per_token_j",
                                                by="technology", hover_fields=hover,
                                                title=f"{job}: energy", zoom=0.04, bands=bands))
        fig.panels.append(fg.scatter_panel(sub, "time_to_train_s", "cost_per_token_usd",
                                                by="technology", hover_fields=hover,
                                                title=f"{job}: cost", zoom=0.04, bands=bands))
    return {"optical-scale-out": fig}


if __name__ == "__main__":
    from studies.common import main
    raise SystemExit(main("optical-scale-out"))
