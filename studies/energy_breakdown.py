"""Energy breakdown: where the joules of one trained token go, for reference designs.

Reference designs are shipped platforms (8-GPU NVLink servers, GB200 NVL72) running the
plans of published runs. The model splits energy into accelerators (busy: compute and
HBM together; idle), hosts, scale-up fabric, NICs, switches, optics (transceivers,
cables, fibre), OCS and facility overhead (cooling and power delivery, from the PUE).
"""
from __future__ import annotations

import numpy as np
import xarray as xr

import explore
from explore import figures as fg
from studies.common import SCENARIOS, num, pct, platform, scenario_with

TITLE = "Energy breakdown: where the joules of one trained token go"
# label -> (model preset, accelerator, devices, scale-up size, scale-out link, optics, topology, tp, pp, recompute, batch)
DESIGNS = {
    "GPT-3 175B, 1,024 A100, pluggable": ("gpt3-175b", "a100-sxm-80gb", 1024, 8, "ib-hdr-200", "pluggable", "fat-tree", 8, 8, "selective", 1536),
    "GPT-3 175B, 4,096 H100, pluggable": ("gpt3-175b", "h100-sxm-80gb", 4096, 8, "ib-ndr-400", "pluggable", "fat-tree", 8, 8, "selective", 1536),
    "GPT-3 175B, 4,096 H100, CPO": ("gpt3-175b", "h100-sxm-80gb", 4096, 8, "ib-ndr-400", "cpo", "fat-tree", 8, 8, "selective", 1536),
    "GPT-3 175B, 4,096 H100, OCS per job": ("gpt3-175b", "h100-sxm-80gb", 4096, 8, "ib-ndr-400", "pluggable", "ocs-reconfigurable", 8, 8, "selective", 1536),
    "GPT-3 175B, 4,032 B200, NVL72": ("gpt3-175b", "b200", 4032, 72, "ib-ndr-400", "pluggable", "fat-tree", 8, 8, "selective", 1512),
    "Llama 3 405B, 16,384 H100, pluggable": ("llama3-405b", "h100-sxm-80gb", 16384, 8, "ib-ndr-400", "pluggable", "fat-tree", 8, 16, "full", 2048),
}
# displayed component -> model breakdown components (energy_j_*)
COMPONENTS = {
    "accelerators busy (compute + HBM)": ("accelerators_busy",),
    "accelerators idle": ("accelerators_idle",),
    "accelerators waiting (communication, bubbles)": ("accelerators_waiting",),
    "hosts": ("hosts",),
    "scale-up fabric": ("scale_up",),
    "NICs": ("nics",),
    "switches": ("switches",),
    "optics (transceivers, cables, fibre)": ("transceivers", "cables", "fibre"),
    "OCS": ("ocs",),
    "cooling and power delivery (PUE)": ("facility_overhead",),
}
NETWORK = ("NICs", "switches", "optics (transceivers, cables, fibre)", "OCS")


def run(quick: bool = False) -> xr.Dataset:
    parts = []
    for label, (preset, acc, n, su, link, optics, topo, tp, pp, rc, batch) in DESIGNS.items():
        sc = explore.load_scenario(SCENARIOS / "gpt3-175b-1024-a100.toml")
        sc["model"] = {"preset": preset}
        pf = platform(acc)
        sc = scenario_with(sc, {
            "system.accelerator": acc, "system.devices": n, "system.scale_up.size": su,
            "system.scale_up.link": pf["link"], "system.scale_out.link": link,
            "system.scale_out.optics": optics, "system.scale_out.topology": topo,
            "parallelism.tp": tp, "parallelism.pp": pp, "parallelism.dp": n // (tp * pp),
            "parallelism.recompute": rc, "training.global_batch": batch})
        if pf.get("bandwidth_bps"):
            sc["system"]["scale_up"]["bandwidth_bps"] = pf["bandwidth_bps"]
        parts.append(explore.evaluate(sc).assign_coords(label=("design", [label])))
    ds = xr.concat(parts, dim="design", data_vars="all", coords="different", compat="equals",
                   join="outer", combine_attrs="drop_conflicts")   # the current defaults, stated
    ds = ds.assign_coords(design=np.arange(ds.sizes["design"]))
    tokens = ds["energy_per_step_j"] / ds["energy_per_token_j"]
    for name, comps in COMPONENTS.items():
        key = "jpt_" + comps[0]
        ds[key] = sum(ds[f"energy_j_{c}"] for c in comps) / tokens
        ds[key].attrs.update(units="J/token", component=name)
    return ds


def _components(ds):
    return {ds[k].attrs["component"]: ds[k].values for k in ds.data_vars if k.startswith("jpt_")}


def findings(ds: xr.Dataset) -> dict:
    comps = _components(ds)
    total = ds["energy_per_token_j"].values
    stacked = sum(comps.values())
    shares = {c: v / total for c, v in comps.items()}
    labels = list(ds["label"].values)
    largest = [max(comps, key=lambda c: comps[c][i]) for i in range(len(labels))]
    net = sum(shares[c] for c in NETWORK)
    i_p = labels.index("GPT-3 175B, 4,096 H100, pluggable")
    i_c = labels.index("GPT-3 175B, 4,096 H100, CPO")
    optics = comps["optics (transceivers, cables, fibre)"]
    return {"labels": labels, "total": total, "stacked": stacked, "shares": shares,
            "largest": largest, "network_share": net,
            "cpo_optics_j": float(optics[i_c]), "pluggable_optics_j": float(optics[i_p]),
            "cpo_total_saving": float(1 - total[i_c] / total[i_p])}


def summary(ds: xr.Dataset, f: dict) -> str:
    acc = "accelerators busy (compute + HBM)"
    lines = [f"In every reference design the largest share is: {', '.join(sorted(set(f['largest'])))}.",
             f"CPO cuts the optics' energy from {num(f['pluggable_optics_j'])} to "
             f"{num(f['cpo_optics_j'])} J/token on 4,096 H100 (GPT-3 175B), "
             f"{pct(f['cpo_total_saving'])} of the total.",
             "The model does not split the accelerators' energy into compute, HBM and "
             "die-to-die; they are one bar.", "",
             "| design | J/token | accelerators busy | network (NICs, switches, optics, OCS) | "
             "cooling and power delivery |", "| --- | --- | --- | --- | --- |"]
    for i, lab in enumerate(f["labels"]):
        lines.append(f"| {lab} | {num(f['total'][i])} | {pct(f['shares'][acc][i])} | "
                     f"{pct(f['network_share'][i])} | "
                     f"{pct(f['shares']['cooling and power delivery (PUE)'][i])} |")
    return "\n".join(lines)


def figures(ds: xr.Dataset) -> dict:
    comps = _components(ds)
    p = fg.Panel(title="energy per trained token by component", ylabel="energy per token [J/token]",
                 bars={"categories": list(ds["label"].values), "stacks": comps})
    return {"energy-breakdown": fg.Figure(TITLE, "reference designs on shipped platforms; "
                                          "bars stack to the model's energy per token", [p])}


if __name__ == "__main__":
    from studies.common import main
    raise SystemExit(main("energy-breakdown"))
