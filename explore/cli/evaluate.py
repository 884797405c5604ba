"""``lightpath evaluate``: one scenario (or a TOML list of designs) as a table or JSON."""
from __future__ import annotations

import argparse
import json

import numpy as np

from explore.cli.main import UserError, _si, register, with_path
from hwmodels.parts import CatalogError


def format_table(ds, i: int = 0) -> str:
    from explore.evaluate import HEADLINE, breakdown_of
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


def _evaluate_run(a) -> int:
    from explore.evaluate import evaluate, to_json_dict
    from explore.scenario import ScenarioError, load_scenario
    try:
        sc = load_scenario(a.scenario)
        # tables label invalid designs and show their raw figures (how much memory a design
        # lacks); JSON, for programs, has null for the metrics of invalid designs
        ds = evaluate(sc, keep_invalid=not a.json, inputs=False)
    except (ScenarioError, CatalogError) as e:
        msg = str(e)
        raise UserError(with_path(msg, a.scenario)) from None
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


register("evaluate", "evaluate one scenario and print its metrics", _evaluate_args, _evaluate_run)
