"""The ``lightpath`` command line.

Every user error (bad file, bad field, unknown id) exits with status 2 and one
readable line naming the file, the field, the value and what is allowed; never
a traceback. Subcommands register in ``COMMANDS`` (name -> (add_arguments, run)).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

import numpy as np

from hwmodels.parts import CatalogError


class UserError(Exception):
    """An error to report as one line and exit status 2."""


# ----------------------------------------------------------------------------- formatting

def _si(x: float, unit: str) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "n/a"
    if unit == "s":
        if x >= 86400 * 2:
            return f"{x / 86400:.1f} days"
        if x >= 3600:
            return f"{x / 3600:.2f} h"
        if x >= 1:
            return f"{x:.3f} s"
        return f"{x * 1e3:.3f} ms"
    if unit == "B":
        return f"{x / 1e9:.2f} GB"
    if unit in ("1",) and 0 <= x <= 1.5:
        return f"{x * 100:.1f} %"
    for p, pre in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= p:
            return f"{x / p:.3f} {pre}{unit}"
    if abs(x) < 1e-3 and x != 0:
        return f"{x:.4g} {unit}"
    return f"{x:.4g} {unit}".strip()


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
        txt = str(bool(val)) if unit == "bool" else _si(val, unit)
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


# ----------------------------------------------------------------------------- commands

def _evaluate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="scenario TOML file")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _evaluate_run(a) -> int:
    from explore.evaluate import evaluate, to_json_dict
    from explore.scenario import ScenarioError, load_scenario
    try:
        sc = load_scenario(a.scenario)
        ds = evaluate(sc)
    except (ScenarioError, CatalogError) as e:
        msg = str(e)
        raise UserError(msg if msg.startswith(a.scenario) else f"{a.scenario}: {msg}") from None
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


def _catalog_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", default="list", choices=("list", "show"))
    p.add_argument("id", nargs="?", help="part id (for show)")


def _catalog_run(a) -> int:
    from hwmodels.parts import load_catalog
    cat = load_catalog()
    if a.action == "list":
        for kind, parts in cat.items():
            print(f"{kind}:")
            for pid, e in sorted(parts.items()):
                print(f"  {pid:<32} {e.get('name', '')}")
        return 0
    if not a.id:
        raise UserError("catalog show: give a part id (see 'lightpath catalog list')")
    hits = [(k, p[a.id]) for k, p in cat.items() if a.id in p]
    if not hits:
        import difflib
        ids = [pid for p in cat.values() for pid in p]
        near = difflib.get_close_matches(a.id, ids, n=1)
        raise UserError(f"catalog: unknown part id {a.id!r}"
                        + (f" (did you mean {near[0]!r}?)" if near else ""))
    for kind, e in hits:
        print(f"{a.id} ({kind}): {e.get('name', '')}")
        src = e.get("source", {})
        for k, v in e.items():
            if k in ("source", "name"):
                continue
            s = src if isinstance(src, str) else src.get(k, "")
            print(f"  {k:<28} {v!s:<14} {s}")
    return 0


COMMANDS: dict[str, tuple[str, Callable, Callable]] = {
    "evaluate": ("evaluate one scenario and print its metrics", _evaluate_args, _evaluate_run),
    "catalog": ("list catalog parts, or show one with its sources", _catalog_args, _catalog_run),
}


def register(name: str, help_: str, add_args: Callable, run: Callable) -> None:
    COMMANDS[name] = (help_, add_args, run)


def _load_plugins() -> None:
    """Subcommands defined in other modules (search, sweep, ...) register on import."""
    import importlib
    for mod in ("explore.search_cli", "explore.sweep_cli"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, status 2
        raise UserError(f"{self.prog}: {message}")


def main(argv=None) -> int:
    _load_plugins()
    parser = _Parser(prog="lightpath", description="co-design LLM training clusters")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for name, (help_, add_args, _) in COMMANDS.items():
        add_args(sub.add_parser(name, help=help_))
    try:
        a = parser.parse_args(argv)
        if not a.command:
            parser.print_help()
            return 2
        return COMMANDS[a.command][2](a) or 0
    except UserError as e:
        print(f"lightpath: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("lightpath: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # plugins register on the importable module `explore.cli`, not on `__main__`: run that one
    from explore.cli import main as _main
    sys.exit(_main())
