"""``lightpath sensitivity SPACE_OR_SCENARIO``: Sobol indices of each objective (SALib).

Inputs are the design variables of a space file (none for a scenario) and every
uncertain catalog figure and calibration constant the designs touch
(``hwmodels/uncertainty.toml``). Prints the top inputs per objective by total
index and writes a bar plot (``--plot FILE.png`` or ``.svg``) and optionally the
indices (``--out FILE.nc``).
"""
from __future__ import annotations

import argparse
import time

from explore.cli.main import UserError, register


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="design-space or scenario TOML file")
    p.add_argument("--n", type=int, default=256, help="SALib base samples N (N (D + 2) evaluations; default 256)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--top", type=int, default=5, help="inputs listed per objective (default 5)")
    p.add_argument("--objective", action="append", default=None,
                   help="metric to analyse (repeatable; default: the space's objectives, or time, energy, "
                        "cost and carbon per token)")
    p.add_argument("--plot", default=None, help="bar plot of S1 and ST (.png or .svg)")
    p.add_argument("--out", default=None, help="write the indices as NetCDF")


def _run(a) -> int:
    from explore.scenario import ScenarioError
    from explore.uncertainty import UncertaintyError
    from explore.uncertainty.sobol import ranking, sobol_indices, study
    from hwmodels.parts import CatalogError
    if a.n < 2 or a.n & (a.n - 1):
        raise UserError(f"sensitivity --n: value {a.n} is not allowed; allowed: a power of two >= 2")
    if a.plot and not a.plot.endswith((".png", ".svg")):
        raise UserError(f"sensitivity --plot: value {a.plot!r} is not allowed; allowed: a .png or .svg file")
    t0 = time.perf_counter()
    try:
        st = study(a.path, objectives=a.objective, seed=a.seed)
        from explore.dataset import UNITS
        for m in st.objectives:
            if m not in UNITS:
                raise UserError(f"sensitivity --objective: value {m!r} is not allowed; allowed: a metric such "
                                f"as time_to_train_s, energy_per_token_j, cost_per_token_usd, carbon_per_token_kg")
        ds = sobol_indices(st, a.n, a.seed)
    except (ScenarioError, CatalogError, UncertaintyError) as e:
        msg = str(e)
        raise UserError(msg if msg.startswith(a.path) else f"{a.path}: {msg}") from None
    dt = time.perf_counter() - t0
    print(f"lightpath sensitivity: {a.path}: {len(st.names)} inputs ({len(st.variables)} design variables, "
          f"{len(st.inputs)} uncertain figures), {ds.attrs['evaluations']:,} evaluations "
          f"({100 * ds.attrs['valid_fraction']:.0f} % valid designs), {dt:.1f} s")
    unc = ranking(ds, a.top, "uncertain")
    for m, rows in ranking(ds, a.top).items():
        print(f"  {m}:")
        for name, s1, st_ in rows:
            print(f"    {name:<58} S1 {s1:6.3f}  ST {st_:6.3f}")
        if st.variables and unc[m]:
            print("    top uncertain figures:")
            for name, s1, st_ in unc[m]:
                print(f"      {name:<56} S1 {s1:6.3f}  ST {st_:6.3f}")
    if a.plot:
        from explore.uncertainty.sobol import plot
        plot(ds, a.plot)
        print(f"plot: {a.plot}")
    if a.out:
        ds.to_netcdf(a.out)
        print(f"indices: {a.out}")
    return 0


register("sensitivity", "rank design variables and uncertain inputs by Sobol indices per objective",
         _args, _run)
