"""What every study shares: cartesian design grids, shipped platforms, output files.

``grid(**axes)`` gives the cartesian product of the axes as flat arrays (one design per
row), ``scenario_with(base, fields)`` sets them into a scenario so one
``explore.evaluate`` call evaluates every design, and ``main`` runs a study module and
writes its dataset (NetCDF), figures and ``summary.md``. The summary is written from the
dataset *read back from disk*, so every number in it is a number of the stored dataset.
"""
from __future__ import annotations

import argparse
import copy
import importlib
import time
from pathlib import Path

import numpy as np
import xarray as xr

import explore
from explore import figures

ROOT = Path(__file__).parent
SCENARIOS = ROOT / "scenarios"
OUT = ROOT / "out"


def grid(**axes) -> dict[str, np.ndarray]:
    """Cartesian product of the axes (name -> list of values), flattened (C order)."""
    names = list(axes)
    vals = [np.asarray(axes[n]) for n in names]
    idx = np.meshgrid(*[np.arange(len(v)) for v in vals], indexing="ij")
    return {n: v[i.ravel()] for n, v, i in zip(names, vals, idx)}


def concat(*grids: dict) -> dict[str, np.ndarray]:
    """Rows of several grids with the same keys, one after the other."""
    keys = list(grids[0])
    return {k: np.concatenate([np.asarray(g[k]) for g in grids]) for k in keys}


def scenario_with(base, fields: dict) -> dict:
    """A copy of ``base`` (scenario dict or file) with each field path set to its array."""
    sc = copy.deepcopy(explore.load_scenario(base) if isinstance(base, (str, Path)) else base)
    for path, v in fields.items():
        explore.set_field(sc, path, v)
    return sc


def evaluate_grid(base, fields: dict, labels: dict | None = None) -> xr.Dataset:
    """``explore.evaluate`` of the designs in ``fields``; ``labels`` (and the fields) become
    coordinates along ``design`` so the dataset says which design is which."""
    ds = explore.evaluate(scenario_with(base, fields))
    coords = {}
    for path, v in {**fields, **(labels or {})}.items():
        a = np.broadcast_to(np.asarray(v), (ds.sizes["design"],))
        coords[coord_name(path)] = ("design", np.array(a))
    return ds.assign_coords(coords)


def coord_name(path: str) -> str:
    """'system.scale_out.optics' -> 'optics'; scale-up fields and the scale-out link keep
    their section ('scale_up_link', 'scale_out_link') so names never collide."""
    parts = path.split(".")
    if parts[0] not in ("system", "parallelism", "model", "training", "datacenter"):
        return path
    if len(parts) == 3 and parts[1] == "scale_up":
        return "scale_up_" + parts[2]
    if parts[1:] == ["scale_out", "link"]:
        return "scale_out_link"
    return parts[-1]


def platform(acc: str) -> dict:
    """The shipped scale-up platform of an accelerator (its first link and largest size)."""
    p = figures.platforms()[acc]
    return {"link": p["links"][0], "size": max(p["sizes"]), "sizes": p["sizes"],
            "bandwidth_bps": p.get("bandwidth_bps")}


def write_dataset(ds: xr.Dataset, path: Path) -> xr.Dataset:
    """Write NetCDF (attrs made serialisable) and return the dataset read back."""
    ds = ds.copy()
    for k in list(ds.attrs):
        if isinstance(ds.attrs[k], (dict, list, tuple)) and not all(
                isinstance(x, (int, float, str)) for x in ds.attrs[k]):
            ds.attrs[k] = str(ds.attrs[k])
    for k in list(ds.variables):
        if ds[k].dtype == bool:
            ds[k] = ds[k].astype("u1")
            ds[k].attrs["lightpath_bool"] = 1
        elif ds[k].dtype.kind == "U":
            ds[k] = ds[k].astype(object)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.nc")
    enc = {k: {"zlib": True, "complevel": 4} for k in ds.variables
           if ds[k].dtype.kind in "fiub" and ds[k].ndim > 0}
    ds.to_netcdf(tmp, encoding=enc)
    tmp.replace(path)
    return read_dataset(path)


def read_dataset(path) -> xr.Dataset:
    ds = xr.open_dataset(path).load()
    ds.close()
    for k in list(ds.variables):
        if ds[k].attrs.get("lightpath_bool"):
            attrs = {a: v for a, v in ds[k].attrs.items() if a != "lightpath_bool"}
            ds[k] = ds[k].astype(bool)
            ds[k].attrs.update(attrs)
        elif ds[k].dtype == object:
            ds[k] = ds[k].astype(str)
    return ds


def num(x: float, digits: int = 3) -> str:
    """How a number is written in a summary (the tests look for exactly this text)."""
    x = float(x)
    if not np.isfinite(x):
        return "n/a"
    a = abs(x)
    if a >= 1e5 or (0 < a < 1e-3):
        return f"{x:.{digits - 1}e}"
    if a >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def pct(x: float) -> str:
    return f"{100 * float(x):.1f} %"


def run_study(name: str, quick: bool = False, out: Path | None = None,
              formats=("png", "svg", "pdf", "html"), progress=print) -> dict:
    """Run study ``name`` and write its outputs; returns {'dataset', 'findings', 'files', ...}."""
    from studies import module_name
    mod = importlib.import_module(module_name(name))
    out = Path(out) if out is not None else OUT / name
    t0 = time.perf_counter()
    ds = mod.run(quick)
    ds.attrs.update(study=name, mode="quick" if quick else "full")
    ds = write_dataset(ds, out / f"{name}.nc")
    t_run = time.perf_counter() - t0
    f = mod.findings(ds)
    text = (f"# {mod.TITLE}\n\n"
            f"`python -m {module_name(name)}{' --quick' if quick else ''}` "
            f"({'quick' if quick else 'full'} mode, {ds.sizes['design']:,} designs evaluated; "
            f"dataset `{name}.nc`). Every number below is read from that dataset.\n\n"
            + mod.summary(ds, f).strip() + "\n")
    (out / "summary.md").write_text(text)
    files = [out / f"{name}.nc", out / "summary.md"]
    for stem, fig in mod.figures(ds).items():
        files += figures.save(fig, out, stem, formats)
    progress(f"{name}: {ds.sizes['design']:,} designs, {time.perf_counter() - t0:.1f} s "
             f"(evaluation {t_run:.1f} s); wrote {out}/")
    return {"dataset": ds, "findings": f, "summary": text, "files": files, "out": out}


def main(name: str, argv=None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m studies.{name.replace('-', '_')}")
    add_arguments(p)
    a = p.parse_args(argv)
    return run_from_args(name, a)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="small grid (about a minute or less)")
    p.add_argument("--out", help="output directory (default: studies/out/NAME)")
    p.add_argument("--formats", default="png,svg,pdf,html",
                   help="figure formats, comma-separated (png, svg, pdf, html)")


def run_from_args(name: str, a) -> int:
    formats = tuple(x.strip() for x in a.formats.split(",") if x.strip())
    bad = [x for x in formats if x not in ("png", "svg", "pdf", "html")]
    if bad:
        raise SystemExit(f"--formats: value {bad[0]!r} is not allowed; allowed: png, svg, pdf, html")
    r = run_study(name, a.quick, Path(a.out) if a.out else None, formats)
    print(r["summary"])
    return 0
