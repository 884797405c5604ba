"""Figures of a search result (``lightpath search --html/--figure``, ``lightpath pareto``).

Built on ``explore.figures``: for each pair of objectives, the feasible members of the
final population as a grey cloud and the Pareto set on top, in human units (days,
J/token, USD per million tokens), coloured by the accelerator (or the first choice
variable); pairings of accelerator and scale-up fabric that no vendor ships
(``explore/data/platforms.toml``) are drawn hollow and labelled "what-if". Hover text
gives every decision variable and objective in units.
"""
from __future__ import annotations

import tomllib
from itertools import combinations

import numpy as np
import xarray as xr

from explore import figures


def decision_names(ds: xr.Dataset) -> list[str]:
    return [k for k in ds.coords if ds[k].dims == ("design",) and k != "design"]


def variable_fields(ds: xr.Dataset) -> dict[str, str]:
    """Decision-variable name -> scenario field path, read from the stored space file."""
    try:
        space = tomllib.loads(ds.attrs.get("space_text", ""))
    except tomllib.TOMLDecodeError:
        return {}
    return {k: v.get("field", "") for k, v in space.get("variables", {}).items() if isinstance(v, dict)}


def _by_field(ds: xr.Dataset, path: str):
    for name, f in variable_fields(ds).items():
        if f == path and name in ds.coords:
            return name
    return path if path in ds.coords else None


def whatif(ds: xr.Dataset) -> np.ndarray:
    """Per Pareto design: True if its accelerator / scale-up pairing is not a shipped platform."""
    acc = _by_field(ds, "system.accelerator")
    if acc is None:
        return np.zeros(ds.sizes["design"], bool)
    link, size = _by_field(ds, "system.scale_up.link"), _by_field(ds, "system.scale_up.size")
    return figures.platform_whatif(ds[acc].values, None if link is None else ds[link].values,
                                   None if size is None else ds[size].values)


def _group(ds: xr.Dataset):
    acc = _by_field(ds, "system.accelerator")
    if acc is not None:
        return acc
    for n in decision_names(ds):
        if ds[n].dtype.kind in "US" and ds[n].dims == ("design",):
            return n
    return None


def search_figure(ds: xr.Dataset) -> figures.Figure:
    """The result's front for each pair of objectives over its final population."""
    objs = [str(o) for o in ds["objective"].values]
    n = ds.sizes["design"]
    hv = ds["hypervolume"].values if "hypervolume" in ds else []
    sub = (f"{n} Pareto designs (coloured), feasible final population (grey); "
           f"{ds.attrs.get('evaluations', '?')} evaluations, seed {ds.attrs.get('seed', '?')}"
           + (f", hypervolume {hv[-1]:.4g}" if len(hv) else ""))
    title = ds.attrs.get("space_name") or ds.attrs.get("title", "lightpath search")
    fig = figures.Figure(f"lightpath search: {title}", sub)
    wi = whatif(ds)
    if wi.any():
        fig.note = ("hollow markers: what-if designs (accelerator with a scale-up fabric or domain "
                    "size it does not ship with, explore/data/platforms.toml)")
    pairs = list(combinations(range(len(objs)), 2)) or [(0, 0)]
    F = ds["objectives"].values
    pop = None
    if "population_objectives" in ds:
        feas = ds["population_violation"].values <= 0
        pop = ds["population_objectives"].values[feas]
    hover_fields = decision_names(ds)
    group = _group(ds)
    for i, j in pairs:
        x, y = objs[i], objs[j]
        # the Pareto designs of all objectives, drawn as points (not the 2-D front of the pair)
        cloud = xr.Dataset({x: ("design", pop[:, i]), y: ("design", pop[:, j]),
                            "valid": ("design", np.ones(len(pop), bool))}) if pop is not None else None
        p = figures.scatter_panel(ds.assign(valid=("design", np.ones(n, bool)), **{
            x: ("design", F[:, i]), y: ("design", F[:, j])}) if i != j else ds,
            x, y, by=group, whatif=wi, hover_fields=hover_fields, fronts="none")
        if cloud is not None and len(pop):
            X, _ = figures.in_units(x, cloud[x].values)
            Y, _ = figures.in_units(y, cloud[y].values)
            p.series[0] = figures.Series("feasible final population", X, Y, None, "cloud")
            p.xlog = figures.should_log(X, p.series[-1].x) if len(p.series) > 1 else p.xlog
            p.ylog = figures.should_log(Y, p.series[-1].y) if len(p.series) > 1 else p.ylog
        else:
            p.series = p.series[1:]
        fig.panels.append(p)
    return fig


def pareto_figure(ds: xr.Dataset):
    """The plotly figure of ``search_figure`` (interactive)."""
    return figures.to_plotly(search_figure(ds))


def write_html(ds: xr.Dataset, path) -> None:
    """Self-contained HTML (plotly.js embedded: opens offline)."""
    pareto_figure(ds).write_html(str(path), include_plotlyjs=True, full_html=True)


def write_static(ds: xr.Dataset, path) -> None:
    """PNG, SVG or PDF (by suffix) through matplotlib: no browser needed."""
    import matplotlib.pyplot as plt
    m = figures.to_matplotlib(search_figure(ds))
    m.savefig(str(path), dpi=150)
    plt.close(m)
