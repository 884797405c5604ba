"""``lightpath search`` and ``lightpath pareto`` (registered in ``explore.cli``)."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from explore.cli.main import UserError, _si, register


def _search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("space", help="design-space TOML file (see studies/spaces/)")
    p.add_argument("--out", help="result NetCDF file (default: SPACE name + .nc)")
    p.add_argument("--seed", type=int, help="random seed (default: the file's, else 1)")
    p.add_argument("--pop", type=int, help="population size")
    p.add_argument("--gens", type=int, help="generations")
    p.add_argument("--evaluations", type=int, help="stop after this many designs evaluated")
    p.add_argument("--algorithm", help="nsga2 (default), nsga3, unsga3, smsemoa, agemoea")
    p.add_argument("--plan", choices=("search", "enumerate"), help="how the parallel plan is chosen")
    p.add_argument("--resume", action="store_true", help="continue from OUT.ckpt's last generation")
    p.add_argument("--html", help="also write the Pareto plot to this HTML file")
    p.add_argument("--figure", action="append", default=[],
                   help="also write the plot to this PNG, SVG or PDF file (repeatable)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _user_errors(fn, *args, **kw):
    from explore.scenario import ScenarioError
    from hwmodels.parts import CatalogError
    try:
        return fn(*args, **kw)
    except (ScenarioError, CatalogError) as e:
        raise UserError(str(e)) from None


def _search_run(a) -> int:
    from explore.search.checkpoint import checkpoint_settings
    from explore.search.problem import run_search, settings_for
    from explore.search.space import load_space
    from explore.search.results import check_outputs
    _check_figures(a)
    space = _user_errors(load_space, a.space)
    out = Path(a.out) if a.out else Path(Path(a.space).stem + ".nc")
    _user_errors(check_outputs, [a.space], out, a.html)          # before any work
    ckpt = Path(str(out) + ".ckpt")
    base = None
    if a.resume and not ckpt.exists():
        print(f"lightpath: no checkpoint {ckpt}; starting a new search")
    elif a.resume:
        base = checkpoint_settings(ckpt)      # resume with the interrupted run's settings
    settings = _user_errors(settings_for, space, base, seed=a.seed, pop=a.pop, gens=a.gens,
                            evaluations=a.evaluations, algorithm=a.algorithm, plan=a.plan)
    try:
        ds = _user_errors(run_search, space, settings, out=out, resume=a.resume,
                          progress=not a.no_progress)
    except KeyboardInterrupt:
        import sys
        print(f"lightpath: interrupted; continue with: lightpath search {a.space} --out {out} "
              f"--resume", file=sys.stderr)
        return 130
    print(front_table(ds))
    print(f"wrote {out}")
    _figures(ds, a)
    return 0


def _check_figures(a) -> None:
    for f in getattr(a, "figure", []):
        if Path(f).suffix.lower() not in (".png", ".svg", ".pdf"):
            raise UserError(f"--figure: value {f!r} is not allowed; allowed: a file ending in "
                            f".png, .svg or .pdf")
        if not Path(f).parent.exists():
            raise UserError(f"--figure: directory {Path(f).parent} does not exist")


def _figures(ds, a) -> None:
    from explore.search.plot import write_html, write_static
    if a.html:
        write_html(ds, a.html)
        print(f"wrote {a.html}")
    for f in a.figure:
        write_static(ds, f)
        print(f"wrote {f}")


def _value(x) -> str:
    return f"{x:.4g}" if isinstance(x, (float, np.floating)) else str(x)


def _human(metric: str, x: float, ds) -> str:
    """A metric in the unit a reader expects (days, J/token, USD per million tokens)."""
    from explore import figures
    if metric in figures._HUMAN or metric.endswith(("_j", "_usd", "_w")):
        _, unit, scale = figures.human(metric, ds[metric].values if metric in ds else [x])
        return figures.fmt(x * scale, unit)
    return _si(x, ds[metric].attrs.get("units", "") if metric in ds else "")


def front_table(ds, rows: int = 15) -> str:
    """The front as a table: objectives (user's sign and units) and decision variables."""
    from explore.search.plot import decision_names
    n = ds.sizes["design"]
    if "hypervolume" in ds:
        hv = ds["hypervolume"].values
        hvn = ds["hypervolume_normalised"].values if "hypervolume_normalised" in ds else []
        head = (f"lightpath search: {ds.attrs.get('space_name', '')}: {n} Pareto designs after "
                f"{ds.attrs.get('n_gen')} generations, {ds.attrs.get('evaluations')} evaluations, "
                f"hypervolume {hv[-1] if len(hv) else 0:.4g}"
                + (f" ({hvn[-1]:.4f} of the reference box)" if len(hvn) else "")
                + f" (seed {ds.attrs.get('seed')})")
    else:
        head = (f"lightpath sweep: {ds.attrs.get('space_name', '')}: {n} Pareto designs of "
                f"{ds.attrs.get('sweep_points', '?')} grid points")
    if n == 0:
        return head + "\n  no feasible design found"
    objs = [str(o) for o in ds["objective"].values]
    names = decision_names(ds)
    pick = np.unique(np.linspace(0, n - 1, min(rows, n)).round().astype(int))
    robust = "p_nondominated" in ds   # issue 14: robust search results
    cols = [f"{o} ({s})" for o, s in zip(objs, ds["sense"].values)] + (["P(nondom)"] if robust else []) + names
    table = []
    for i in pick:
        cells = [_human(o, float(ds["objectives"].values[i, j]), ds) for j, o in enumerate(objs)]
        cells += [f"{float(ds['p_nondominated'].values[i]):.2f}"] if robust else []
        cells += [_value(ds[nm].values[i]) for nm in names]
        table.append(cells)
    w = [max(len(c), *(len(r[k]) for r in table)) for k, c in enumerate(cols)]
    lines = [head, "  " + "  ".join(c.rjust(w[k]) for k, c in enumerate(cols))]
    lines += ["  " + "  ".join(c.rjust(w[k]) for k, c in enumerate(r)) for r in table]
    if len(pick) < n:
        lines.append(f"  ({len(pick)} of {n} designs shown, spread along {objs[0]})")
    return "\n".join(lines)


def _pareto_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", help="result of 'lightpath search' (NetCDF) or 'lightpath sweep' "
                                  "(Zarr store)")
    p.add_argument("--html", help="write an interactive plotly plot of the front to this file")
    p.add_argument("--figure", action="append", default=[],
                   help="write the plot to this PNG, SVG or PDF file (repeatable)")


def front_of(ds):
    """The Pareto front of a search or sweep result (both declare ``objective_names`` and
    ``objective_senses``) as a 1-D ``design`` Dataset with ``objectives`` in the user's sign."""
    from explore.sweep.accessor import declared_objectives
    if "objectives" in ds and ds.sizes.get("design", 0) == 0:
        return ds                          # a search that found no feasible design: nothing to filter
    declared = declared_objectives(ds)
    if not declared:
        raise UserError("no objectives declared (attributes objective_names and "
                        "objective_senses); allowed: a result of lightpath search or sweep")
    missing = [m for m in declared if m not in ds.data_vars]
    if missing:
        raise UserError(f"objective {missing[0]!r} is not a variable of the result")
    front = ds.drop_vars([k for k in ("objectives", "objective", "sense") if k in ds.variables])
    front = front.lightpath.pareto(list(declared), list(declared.values()))
    front = front.assign_coords(objective=list(declared), sense=("objective", list(declared.values())))
    front["objectives"] = (("design", "objective"),
                           np.column_stack([front[m].values.astype(float) for m in declared]))
    if "hypervolume" in ds:
        front["hypervolume"] = ds["hypervolume"]
    return front


def _read_any(p: Path):
    """A search result (NetCDF file) or a sweep store (Zarr directory), or a UserError."""
    if p.is_dir():
        from explore.sweep import open_sweep
        try:
            return open_sweep(p)
        except Exception as e:  # not a store: one line
            raise UserError(f"{p}: not a lightpath sweep store ({type(e).__name__})") from None
    if not p.is_file():
        raise UserError(f"{p}: file not found")
    from explore.search.results import read_result
    try:
        return read_result(p)
    except Exception as e:  # not a NetCDF file: a user error, one line
        raise UserError(f"{p}: not a lightpath search result ({type(e).__name__})") from None


def _pareto_run(a) -> int:
    from explore.scenario import ScenarioError
    from explore.search.results import check_outputs
    _check_figures(a)
    p = Path(a.result)
    _user_errors(check_outputs, [p], None, a.html)
    ds = _read_any(p)
    try:
        ds = front_of(ds)
    except (UserError, ScenarioError) as e:
        raise UserError(f"{p}: not a lightpath result: {e}") from None
    print(front_table(ds))
    _figures(ds, a)
    return 0


register("search", "multi-objective search over a design space (pymoo)", _search_args, _search_run)
register("pareto", "show a search result's Pareto front, optionally as an HTML plot",
         _pareto_args, _pareto_run)
