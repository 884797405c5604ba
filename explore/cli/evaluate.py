"""``lightpath evaluate``: one scenario (or a TOML list of designs) as a table or JSON."""
from __future__ import annotations

import argparse
import json

import numpy as np

from explore.cli.main import UserError, _si, register, with_path
from hwmodels.parts import CatalogError


def format_table(ds, i: int = 0) -> str:
    from explore.dataset import HEADLINE, breakdown_of
    row = ds.isel(design=i)
    lines = [f"lightpath evaluate: {ds.attrs.get('scenario_name', '')}".rstrip(": ")]
    if not bool(row["valid"]):
        lines.append(f"  INVALID: {row['reason'].item()}")
    w = 30
    for k in HEADLINE + ("hfu", "goodput", "capex_usd", "power_w", "params"):
        val = row[k].item()
        unit = ds[k].attrs.get("units", "")
        txt = str(bool(val)) if ds[k].dtype == bool else _si(val, unit)
        lines.append(f"  {k:<{w}} {txt}")
    groups: dict[str, list] = {}
    for k in ds.data_vars:
        bd = breakdown_of(k)
        if bd:
            groups.setdefault(bd[0], []).append((bd[1], row[k].item(), ds[k].attrs["units"]))
    for g, items in groups.items():
        total = sum(v for _, v, _ in items if v is not None and np.isfinite(v))
        lines.append(f"  breakdown {g}:")
        for name, val, unit in items:
            share = f"{100 * val / total:5.1f} %" if total and np.isfinite(val) else ""
            lines.append(f"    {name:<{w - 2}} {_si(val, unit):>14}  {share}")
    return "\n".join(lines)


ROW_COLUMNS = (("step_time_s", "step", "s"), ("mfu", "MFU", "1"),
               ("memory_per_device_bytes", "memory", "B"), ("time_to_train_s", "train", "s"),
               ("energy_per_token_j", "J/token", ""), ("cost_per_token_usd", "USD/Mtoken", ""))


def format_rows(ds) -> str:
    """Several designs: one line each with the headline metrics and, if invalid, the reason."""
    head = f"{'design':>6} " + "".join(f"{h:>14}" for _, h, _ in ROW_COLUMNS) + "  valid / reason"
    lines = [f"lightpath evaluate: {ds.attrs.get('scenario_name', '')} ({ds.sizes['design']} designs)", head]
    for i in range(ds.sizes["design"]):
        cells = []
        for k, _, unit in ROW_COLUMNS:
            x = float(ds[k].values[i])
            if k == "cost_per_token_usd":
                txt = f"{x * 1e6:.4g}" if np.isfinite(x) else "n/a"
            elif unit:
                txt = _si(x, unit)
            else:
                txt = f"{x:.4g}" if np.isfinite(x) else "n/a"
            cells.append(f"{txt:>14}")
        ok = bool(ds["valid"].values[i])
        lines.append(f"{i:>6} " + "".join(cells) + ("  yes" if ok else f"  no: {ds['reason'].values[i]}"))
    return "\n".join(lines)


def _evaluate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario TOML file")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--samples", type=int, default=None,
                   help="N joint draws of the uncertain catalog figures and calibration constants: "
                        "print the median and 5-95 %% band of each headline metric")
    p.add_argument("--seed", type=int, default=0, help="seed of the draws (with --samples)")


BAND_METRICS = ("step_time_s", "mfu", "time_to_train_s", "energy_per_token_j", "cost_per_token_usd",
                "carbon_per_token_kg", "capex_usd", "power_w", "embodied_carbon_share")


def format_bands(ds, b) -> str:
    """Median and 5-95 % band of each headline metric, one block per design."""
    lines = [f"lightpath evaluate: {ds.attrs.get('scenario_name', '')} ({ds.attrs['samples']} samples, "
             f"seed {ds.attrs['seed']}, {ds.attrs['uncertain_inputs']} uncertain inputs)",
             f"  {'metric':<24} {'median':>14} {'5 %':>14} {'95 %':>14}"]
    for i in range(ds.sizes["design"]):
        if ds.sizes["design"] > 1:
            lines.append(f"design {i}:")
        for k in BAND_METRICS:
            unit = ds[k].attrs.get("units", "")
            q = [float(b[k].sel(quantile=x).values[i]) for x in (0.5, 0.05, 0.95)]
            if k == "cost_per_token_usd":
                cells = [f"{x * 1e6:.4g} USD/Mtok" for x in q]
            elif k == "carbon_per_token_kg":
                cells = [f"{x * 1e9:.4g} mg/token" for x in q]
            else:
                cells = [_si(x, unit) for x in q]
            lines.append(f"  {k:<24} " + " ".join(f"{c:>14}" for c in cells))
        frac = float(ds["valid"].values[:, i].mean())
        if frac < 1:
            lines.append(f"  valid in {100 * frac:.1f} % of the samples")
    return "\n".join(lines)


def _evaluate_run(a) -> int:
    from explore.dataset import to_json_dict
    from explore.evaluate import evaluate
    from explore.scenario import ScenarioError, load_scenario
    from explore.uncertainty import UncertaintyError
    if a.samples is not None and a.samples < 1:
        raise UserError(f"evaluate --samples: value {a.samples} is not allowed; allowed: an integer >= 1")
    try:
        sc = load_scenario(a.scenario)
        # tables label invalid designs and show their raw figures (how much memory a design
        # lacks); JSON, for programs, has null for the metrics of invalid designs
        ds = evaluate(sc, samples=a.samples, seed=a.seed, keep_invalid=not a.json, inputs=False)
    except (ScenarioError, CatalogError, UncertaintyError) as e:
        msg = str(e)
        raise UserError(with_path(msg, a.scenario)) from None
    if a.samples is not None:
        from explore.uncertainty import bands
        b = bands(ds, list(BAND_METRICS))
        if a.json:
            print(json.dumps({"name": ds.attrs.get("scenario_name", ""), "samples": a.samples, "seed": a.seed,
                              "bands": [{k: {f"q{int(q * 100):02d}": _num(b[k].sel(quantile=q).values[i])
                                             for q in (0.05, 0.5, 0.95)} for k in BAND_METRICS}
                                        for i in range(ds.sizes["design"])]}, indent=2))
        else:
            print(format_bands(ds, b))
        return 0
    if ds.sizes["design"] != 1:  # TOML lists are arrays of designs: one row each
        if a.json:
            print(json.dumps([to_json_dict(ds, i) for i in range(ds.sizes["design"])], indent=2))
        else:
            print(format_rows(ds))
        return 0
    reason = str(ds["reason"].values[0])
    if reason and reason != "does not fit in accelerator memory":
        raise UserError(f"{a.scenario}: invalid design: {reason}")
    if a.json:
        print(json.dumps(to_json_dict(ds), indent=2))
    else:
        print(format_table(ds))
    return 0


def _num(x):
    x = float(x)
    return x if np.isfinite(x) else None


register("evaluate", "evaluate one scenario and print its metrics", _evaluate_args, _evaluate_run)
