"""Interactive plots of a search's Pareto front (plotly).

Two objectives: a scatter with the attainment staircase; three or more: a scatter
matrix of every pair of objectives (readable without rotating a 3-D view). The
hover text of every point gives its decision variables and objectives in the
user's units and sign (the values stored in the result's ``objectives``).
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import xarray as xr


def _label(ds: xr.Dataset, metric: str) -> str:
    unit = ds[metric].attrs.get("units", "") if metric in ds else ""
    sense = dict(zip(ds.attrs.get("objective_names", []), ds.attrs.get("objective_senses", [])))
    s = sense.get(metric, "")
    return f"{metric} [{unit}] ({s})" if unit else f"{metric} ({s})"


def decision_names(ds: xr.Dataset) -> list[str]:
    return [k for k in ds.coords if ds[k].dims == ("design",) and k != "design"]


def hover_text(ds: xr.Dataset) -> list[str]:
    names = decision_names(ds)
    objs = [str(o) for o in ds["objective"].values]
    rows = []
    for i in range(ds.sizes["design"]):
        parts = [f"<b>design {i}</b>"]
        parts += [f"{n} = {ds[n].values[i]}" for n in names]
        parts += [f"{o} = {ds['objectives'].values[i, j]:.4g}" for j, o in enumerate(objs)]
        rows.append("<br>".join(parts))
    return rows


def pareto_figure(ds: xr.Dataset) -> go.Figure:
    """A plotly figure of the front in ``ds`` (a ``lightpath search`` result)."""
    objs = [str(o) for o in ds["objective"].values]
    F = ds["objectives"].values
    text = hover_text(ds)
    title = ds.attrs.get("title", "lightpath search")
    marker = dict(size=7, color=F[:, 0] if len(F) else [], colorscale="Viridis", showscale=False)
    if len(objs) == 1:
        fig = go.Figure(go.Scatter(x=np.arange(len(F)), y=F[:, 0], mode="markers", text=text,
                                   hoverinfo="text", marker=marker))
        fig.update_layout(xaxis_title="design", yaxis_title=_label(ds, objs[0]))
    elif len(objs) == 2:
        fig = go.Figure(go.Scatter(x=F[:, 0], y=F[:, 1], mode="markers+lines", text=text,
                                   hoverinfo="text", marker=marker, line=dict(shape="hv", width=1)))
        fig.update_layout(xaxis_title=_label(ds, objs[0]), yaxis_title=_label(ds, objs[1]))
    else:       # three or more: every pair of objectives (lower triangle of a scatter matrix)
        dims = [dict(label=_label(ds, o), values=F[:, j]) for j, o in enumerate(objs)]
        fig = go.Figure(go.Splom(dimensions=dims, text=text, hoverinfo="text", marker=marker,
                                 diagonal_visible=False, showupperhalf=False))
        fig.update_layout(width=None, font=dict(size=11))
    hv = ds["hypervolume"].values if "hypervolume" in ds else []
    sub = f"{ds.sizes['design']} Pareto designs, {ds.attrs.get('evaluations', '?')} evaluations, " \
          f"seed {ds.attrs.get('seed', '?')}, final hypervolume {hv[-1]:.4g}" if len(hv) else ""
    fig.update_layout(title=dict(text=f"{title}<br><sup>{sub}</sup>"), template="plotly_white",
                      height=720)
    return fig


def write_html(ds: xr.Dataset, path) -> None:
    """Self-contained HTML (plotly.js embedded: opens offline)."""
    pareto_figure(ds).write_html(str(path), include_plotlyjs=True, full_html=True)
