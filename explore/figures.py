"""Publication figures for results of ``explore.evaluate``, ``explore.search`` and the studies.

One description of a figure (``Figure``: panels of scatter clouds, Pareto fronts, lines,
stacked bars and marks, all already in human units) is drawn two ways: static through
matplotlib (``to_matplotlib``: PNG, SVG, PDF; no browser) and interactive through plotly
(``to_plotly``: self-contained HTML, SVG markers, no WebGL). ``save`` writes all four.
A series may carry intervals per point (``xband``, ``yband``: lower and upper value,
e.g. the 5-95 % band of ``explore.uncertainty.bands``), drawn as error bars from the
lower to the upper value in both renderers.

Units: ``explore.display`` (re-exported here): ``human(metric)`` maps an SI metric to the
unit a reader expects (days, MW, USD per million tokens, J/token, %); an axis whose
positive values span more than ``LOG_SPAN`` is drawn on a log scale.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MAX_CLOUD = 4000
"""At most this many points per cloud or group are drawn (an even subsample): SVG, PDF and
plotly's SVG markers stay light; no WebGL needed."""

from explore.display import (  # noqa: F401  (re-exported: figures.human, figures.fmt, ...)
    LOG_SPAN, _ENERGY, _HUMAN, _POWER, axis_label, fmt, human, in_units, should_log)


def front_mask(x, y) -> np.ndarray:
    """Points no other point beats in both x and y (both minimised); NaNs never on the front."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    mask = np.zeros(len(x), bool)
    idx = np.flatnonzero(ok)
    if len(idx) == 0:
        return mask
    order = idx[np.lexsort((y[idx], x[idx]))]
    best = np.minimum.accumulate(y[order])
    prev = np.concatenate(([np.inf], best[:-1]))
    mask[order[y[order] < prev]] = True
    return mask


def hover(ds, fields, i_rows=None) -> list[str]:
    """Hover text per design (or per row of ``i_rows``): each field in human units."""
    n = ds.sizes["design"]
    rows = np.arange(n) if i_rows is None else np.asarray(i_rows, int)
    cols = []
    for f in fields:
        if f not in ds.variables:
            continue
        v = ds[f].values[rows]
        if v.dtype.kind in "fiu" and v.dtype != bool:
            label, unit, scale = human(f, v)
            if f == "devices" or not (f in _HUMAN or f.endswith(("_s", "_j", "_usd", "_w", "_bytes"))):
                label = f           # a design field: its own name; a metric: its readable label
            cols.append([f"{label} = {fmt(float(x) * scale, unit)}" for x in v])
        else:
            cols.append([f"{f} = {x}" for x in v])
    return ["<br>".join(c[i] for c in cols) for i in range(len(rows))]


# ----------------------------------------------------------------------------- figure description

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22")
SYMBOLS = (("o", "circle"), ("s", "square"), ("^", "triangle-up"), ("D", "diamond"),
           ("v", "triangle-down"), ("P", "cross"), ("X", "x"), ("*", "star"))


@dataclass
class Series:
    """Points (and optionally a line) of one group, in human units."""
    name: str
    x: np.ndarray
    y: np.ndarray
    text: list[str] | None = None
    kind: str = "points"            # points | line | front | cloud
    color: str | None = None
    symbol: int = 0
    hollow: bool = False            # what-if designs
    cvalues: np.ndarray | None = None   # continuous colour (colour bar)
    xband: tuple | None = None      # (lower, upper) per point: an error bar along x (NaN: none)
    yband: tuple | None = None      # (lower, upper) per point: an error bar along y


@dataclass
class Panel:
    title: str = ""
    xlabel: str = ""
    ylabel: str = ""
    xlog: bool = False
    ylog: bool = False
    series: list[Series] = field(default_factory=list)
    hlines: list[tuple[float, str, str]] = field(default_factory=list)   # (y, label, colour)
    vlines: list[tuple[float, str, str]] = field(default_factory=list)
    marks: list[tuple[float, float, str]] = field(default_factory=list)  # (x, y, label)
    bars: dict | None = None        # {"categories": [...], "stacks": {component: values}}
    clabel: str = ""                # colour-bar label
    xlim: tuple | None = None       # axis ranges (human units); None: the data's
    ylim: tuple | None = None


@dataclass
class Figure:
    title: str
    subtitle: str = ""
    panels: list[Panel] = field(default_factory=list)
    note: str = ""
    ncols: int | None = None
    legend: str = "figure"          # "figure": one shared legend below; "panel": one per panel


def scatter_panel(ds, x: str, y: str, *, by: str | None = None, color: str | None = None,
                  mask=None, whatif=None, hover_fields=(), fronts: str = "group",
                  title: str = "", zoom: float | None = None, bands: dict | None = None) -> Panel:
    """Evaluated designs of ``ds`` as a grey cloud, the Pareto front of ``x`` and ``y`` on top.

    ``by``: a categorical field (one colour and symbol per value, legend) for the
    front points; ``color``: a numeric field (colour bar) instead. ``fronts='group'``
    draws the front of each group, ``'all'`` the overall front, ``'none'`` every design
    (coloured by group, no front). ``whatif``: boolean per
    design, drawn hollow. ``mask``: the designs to draw (default: ``valid``).
    ``bands``: metric -> (lower, upper) per design in SI units (NaN: no bar), e.g. the
    5th and 95th percentiles over samples; the front (or group) points of ``x`` and
    ``y`` get error bars spanning them, and a zoom keeps the bars inside the axes."""
    ok = np.asarray(ds["valid"].values if mask is None else mask, bool)
    X, xl = in_units(x, ds[x].values)
    Y, yl = in_units(y, ds[y].values)
    ok &= np.isfinite(X) & np.isfinite(Y)
    p = Panel(title=title, xlabel=xl, ylabel=yl, xlog=should_log(X[ok]), ylog=should_log(Y[ok]))
    wi = np.zeros(len(X), bool) if whatif is None else np.asarray(whatif, bool)
    idx = np.flatnonzero(ok)
    if len(idx) > MAX_CLOUD:        # an even subsample of the cloud; fronts are always complete
        idx = idx[np.linspace(0, len(idx) - 1, MAX_CLOUD).round().astype(int)]
    groups = [(None, ok)]
    if by is not None:
        labels = np.asarray(ds[by].values).astype(str)
        groups = [(g, ok & (labels == g)) for g in dict.fromkeys(labels[ok])]
    picks = []
    for k, (g, gm) in enumerate(groups):
        if fronts == "none":
            on = gm
        elif fronts == "group":
            on = gm & front_mask(np.where(gm, X, np.nan), np.where(gm, Y, np.nan))
        else:
            on = gm & front_mask(np.where(ok, X, np.nan), np.where(ok, Y, np.nan))
        for hollow in (False, True):
            sel = np.flatnonzero(on & (wi == hollow))
            if len(sel) > MAX_CLOUD:
                sel = sel[np.linspace(0, len(sel) - 1, MAX_CLOUD).round().astype(int)]
            if len(sel):
                picks.append((k, g, hollow, sel[np.argsort(X[sel], kind="stable")]))
    rows = np.unique(np.concatenate([idx] + [s for *_, s in picks]))
    text = dict(zip(rows, hover(ds, list(hover_fields) + [x, y], rows)))
    for m in dict.fromkeys((x, y)):        # the band of each drawn metric in the hover text
        if bands and m in bands:
            lo, hi = (np.asarray(v, float)[rows] for v in bands[m])
            lab, unit, sc = human(m, ds[m].values)
            for i, a_, b_ in zip(rows, lo, hi):
                if np.isfinite(a_) and np.isfinite(b_):
                    text[i] += f"<br>{lab} band: {fmt(a_ * sc)} to {fmt(b_ * sc, unit)}"
    p.series.append(Series("evaluated designs", X[idx], Y[idx], [text[i] for i in idx], "cloud"))
    for k, g, hollow, sel in picks:
        name = ("Pareto front" if g is None else str(g)) + (" (what-if)" if hollow else "")
        cv = np.asarray(ds[color].values, float)[sel] * human(color)[2] if color else None
        p.series.append(Series(name, X[sel], Y[sel], [text[i] for i in sel],
                               "points" if fronts == "none" else "front",
                               PALETTE[k % len(PALETTE)], k % len(SYMBOLS), hollow, cv,
                               _band(bands, x, sel, ds[x].values), _band(bands, y, sel, ds[y].values)))
    if color:
        lab, unit, _ = human(color)
        p.clabel = f"{lab} [{unit}]" if unit else lab
    if zoom is not None and picks:
        fs = [s for s in p.series if s.kind != "cloud"]
        fx = np.concatenate([s.x for s in fs] + [np.ravel(s.xband) for s in fs if s.xband is not None])
        fy = np.concatenate([s.y for s in fs] + [np.ravel(s.yband) for s in fs if s.yband is not None])
        fx, fy = fx[np.isfinite(fx)], fy[np.isfinite(fy)]
        p.xlim = (fx.min() / (1 + zoom), fx.max() * (1 + zoom))
        p.ylim = (fy.min() / (1 + zoom), fy.max() * (1 + zoom))
        p.xlog = p.ylog = False
        out = int(np.sum(ok & ((X > p.xlim[1]) | (Y > p.ylim[1]))))
        if out:
            p.title = (p.title + "\n" if p.title else "") + f"({out:,} slower or costlier designs off axes)"
    return p


def _band(bands: dict | None, metric: str, rows, values=None) -> tuple | None:
    """(lower, upper) of ``metric`` at ``rows`` in the metric's human unit, or None."""
    if not bands or metric not in bands:
        return None
    scale = human(metric, values)[2]       # the scale in_units gives the metric's values
    lo, hi = (np.asarray(b, float)[rows] * scale for b in bands[metric])
    return lo, hi


def _segments(x, y, band, along: str):
    """Error-bar segments from band[0] to band[1] at each point with a finite band:
    (xs, ys) with None between segments (plotly); along 'x' or 'y'."""
    lo, hi = band
    ok = np.flatnonzero(np.isfinite(lo) & np.isfinite(hi))
    xs, ys = [], []
    for i in ok:
        if along == "y":
            xs += [float(x[i]), float(x[i]), None]
            ys += [float(lo[i]), float(hi[i]), None]
        else:
            xs += [float(lo[i]), float(hi[i]), None]
            ys += [float(y[i]), float(y[i]), None]
    return xs, ys


# ----------------------------------------------------------------------------- matplotlib

def to_matplotlib(fig: Figure, ncols: int | None = None):
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    n = len(fig.panels)
    ncols = ncols or fig.ncols or min(n, 3)
    nrows = -(-n // ncols)
    width = max(5.2 * ncols, 10.0 if any(p.bars for p in fig.panels) else 7.0)
    mfig, axes = plt.subplots(nrows, ncols, figsize=(width, 4.3 * nrows + 1.2), squeeze=False)
    handles: dict[str, object] = {}
    for ax, p in zip(axes.ravel(), fig.panels):
        if fig.legend == "panel":
            own: dict[str, object] = {}
            _mpl_panel(ax, p, own, mfig)
            ax.legend(list(own.values()), list(own.keys()), fontsize=7, loc="best", framealpha=0.85)
        else:
            _mpl_panel(ax, p, handles, mfig)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    sup = fig.title + (f"\n{fig.subtitle}" if fig.subtitle else "")
    mfig.suptitle(sup, fontsize=11)
    if handles:
        mfig.legend(list(handles.values()), list(handles.keys()), loc="lower center",
                    bbox_to_anchor=(0.5, 0.025 if fig.note else 0.0),
                    ncol=min(len(handles), 5 if max(map(len, handles)) < 24 else 3),
                    fontsize=8, frameon=False, markerscale=1.5)
    bottom = 0.06 + 0.035 * (-(-len(handles) // 5)) if handles else 0.05
    if fig.note:
        mfig.text(0.01, 0.005, fig.note, fontsize=7, color="#555555", ha="left", va="bottom")
        bottom += 0.02
    mfig.tight_layout(rect=(0, bottom, 1, 0.96 if not fig.subtitle else 0.93))
    return mfig


def _mpl_panel(ax, p: Panel, handles: dict, mfig) -> None:
    if p.bars is not None:
        cats = p.bars["categories"]
        bottom = np.zeros(len(cats))
        for k, (comp, vals) in enumerate(p.bars["stacks"].items()):
            vals = np.asarray(vals, float)
            h = ax.bar(range(len(cats)), vals, bottom=bottom, color=PALETTE[k % len(PALETTE)]
                       if k < len(PALETTE) else None, label=comp, edgecolor="white", linewidth=0.5)
            handles.setdefault(comp, h)
            bottom += vals
        for i, t in enumerate(bottom):
            ax.text(i, t, fmt(t), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels(cats, rotation=20, ha="right", fontsize=8)
    sc = None
    for s in p.series:
        if s.kind == "cloud":
            h = ax.scatter(s.x, s.y, s=9, c="#b0b0b0", alpha=0.55, linewidths=0, zorder=1)
            handles.setdefault(s.name, h)
            continue
        m = SYMBOLS[s.symbol % len(SYMBOLS)][0]
        if s.kind == "line":
            h, = ax.plot(s.x, s.y, marker=m, ms=4, lw=1.6, color=s.color, zorder=3)
        else:
            if s.kind == "front" and s.cvalues is None:
                ax.step(s.x, s.y, where="post", color=s.color, lw=0.8, alpha=0.7, zorder=2)
            kw = dict(facecolors="none", edgecolors=s.color) if s.hollow else dict(c=s.color)
            if s.cvalues is not None:
                kw = dict(c=s.cvalues, cmap="viridis")
                if s.hollow:
                    kw["alpha"] = 0.5
            h = ax.scatter(s.x, s.y, s=26, marker=m, linewidths=0.8, zorder=3, **kw)
            ebar = dict(color=s.color or "#555555", lw=0.8, alpha=0.6, zorder=2)
            if s.yband is not None:
                f = np.isfinite(s.yband[0]) & np.isfinite(s.yband[1])
                ax.vlines(s.x[f], s.yband[0][f], s.yband[1][f], **ebar)
            if s.xband is not None:
                f = np.isfinite(s.xband[0]) & np.isfinite(s.xband[1])
                ax.hlines(s.y[f], s.xband[0][f], s.xband[1][f], **ebar)
            if s.cvalues is not None:
                sc = h
        handles.setdefault(s.name, h)
    for y, label, c in p.hlines:
        h = ax.axhline(y, color=c, ls="--", lw=1.2)
        handles.setdefault(label, h)
    for x, label, c in p.vlines:
        h = ax.axvline(x, color=c, ls=":", lw=1.2)
        handles.setdefault(label, h)
    for x, y, label in p.marks:
        ax.scatter([x], [y], s=160, marker="*", c="gold", edgecolors="black", zorder=5)
        ax.annotate(label, (x, y), xytext=(8, 8), textcoords="offset points", fontsize=8,
                    bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="#888888", alpha=0.9))
    if sc is not None:
        mfig.colorbar(sc, ax=ax, label=p.clabel)
    if p.bars is None:          # set_xscale resets the category tick labels
        ax.set_xscale("log" if p.xlog else "linear")
    ax.set_yscale("log" if p.ylog else "linear")
    if p.xlim:
        ax.set_xlim(*p.xlim)
    if p.ylim:
        ax.set_ylim(*p.ylim)
    _plain_log_ticks(ax, p)
    ax.set_xlabel(p.xlabel)
    ax.set_ylabel(p.ylabel)
    ax.set_title(p.title, fontsize=10)
    ax.grid(True, which="major", color="#eeeeee", lw=0.6)


def _plain_log_ticks(ax, p: Panel) -> None:
    """Log axes labelled 0.5, 2, 300 rather than 5x10^-1 (and minor labels only within a decade)."""
    from matplotlib import ticker
    for on, axis, lim in ((p.xlog and p.bars is None, ax.xaxis, ax.get_xlim()),
                          (p.ylog, ax.yaxis, ax.get_ylim())):
        if not on:
            continue
        lo, hi = sorted(lim)
        if lo > 0 and hi / lo < 300:    # few decades: label 1, 2, 5 of each
            axis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        if lo > 0 and hi / lo < 10:
            axis.set_minor_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        else:
            axis.set_minor_formatter(ticker.NullFormatter())


# ----------------------------------------------------------------------------- plotly

def to_plotly(fig: Figure, ncols: int | None = None):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots
    n = len(fig.panels)
    ncols = ncols or fig.ncols or min(n, 3)
    nrows = -(-n // ncols)
    pf = make_subplots(rows=nrows, cols=ncols, subplot_titles=[p.title for p in fig.panels],
                       horizontal_spacing=0.08, vertical_spacing=0.14)
    shown: set[str] = set()
    for k, p in enumerate(fig.panels):
        r, c = k // ncols + 1, k % ncols + 1
        _plotly_panel(pf, go, p, r, c, shown)
        pf.update_xaxes(title_text=p.xlabel, type="log" if p.xlog else "linear", row=r, col=c,
                        range=_range(p.xlim, p.xlog))
        pf.update_yaxes(title_text=p.ylabel, type="log" if p.ylog else "linear", row=r, col=c,
                        range=_range(p.ylim, p.ylog))
    title = fig.title + (f"<br><sup>{fig.subtitle}</sup>" if fig.subtitle else "")
    pf.update_layout(title=dict(text=title), template="plotly_white",
                     height=430 * nrows + 120, width=None, hovermode="closest",
                     legend=dict(orientation="h", yanchor="top", y=-0.12))
    if fig.note:
        pf.add_annotation(text=fig.note, xref="paper", yref="paper", x=0, y=-0.25,
                          showarrow=False, font=dict(size=10, color="#555555"), align="left")
    return pf


def _range(lim, log: bool):
    if lim is None:
        return None
    return [float(np.log10(v)) for v in lim] if log else [float(v) for v in lim]


def _plotly_panel(pf, go, p: Panel, r: int, c: int, shown: set) -> None:
    def first(name):
        new = name not in shown
        shown.add(name)
        return new
    if p.bars is not None:
        for k, (comp, vals) in enumerate(p.bars["stacks"].items()):
            pf.add_trace(go.Bar(x=list(p.bars["categories"]), y=list(np.asarray(vals, float)),
                                name=comp, legendgroup=comp, showlegend=first(comp),
                                marker_color=PALETTE[k % len(PALETTE)],
                                hovertemplate=f"{comp}: %{{y:.3g}}<extra>%{{x}}</extra>"),
                         row=r, col=c)
        pf.update_layout(barmode="stack")
    for s in p.series:
        text = s.text if s.text is not None else None
        common = dict(x=list(s.x), y=list(s.y), name=s.name, legendgroup=s.name,
                      showlegend=first(s.name), text=text,
                      hoverinfo="text" if text is not None else "x+y+name")
        if s.kind == "cloud":
            pf.add_trace(go.Scatter(mode="markers", marker=dict(size=4, color="#c8c8c8", opacity=0.6),
                                    **common), row=r, col=c)
            continue
        sym = SYMBOLS[s.symbol % len(SYMBOLS)][1] + ("-open" if s.hollow else "")
        marker = dict(size=8, symbol=sym, color=s.color)
        if s.cvalues is not None:
            marker.update(color=list(s.cvalues), colorscale="Viridis", showscale=True,
                          colorbar=dict(title=p.clabel))
        mode = "lines+markers" if s.kind in ("line", "front") else "markers"
        line = dict(shape="hv", width=1, color=s.color) if s.kind == "front" else dict(color=s.color)
        if s.cvalues is not None:
            mode, line = "markers", None
        pf.add_trace(go.Scatter(mode=mode, marker=marker, line=line, **common), row=r, col=c)
        for band, along in ((s.yband, "y"), (s.xband, "x")):
            if band is not None:
                bx, by = _segments(s.x, s.y, band, along)
                pf.add_trace(go.Scatter(x=bx, y=by, mode="lines", legendgroup=s.name, showlegend=False,
                                        hoverinfo="skip", opacity=0.6,
                                        line=dict(color=s.color or "#555555", width=1)), row=r, col=c)
    for y, label, col in p.hlines:
        pf.add_hline(y=y, line=dict(color=col, dash="dash"), annotation_text=label,
                     annotation_font_size=9, row=r, col=c)
    for x, label, col in p.vlines:
        pf.add_vline(x=x, line=dict(color=col, dash="dot"), annotation_text=label,
                     annotation_font_size=9, row=r, col=c)
    for x, y, label in p.marks:
        pf.add_trace(go.Scatter(x=[x], y=[y], mode="markers+text", text=[label],
                                textposition="top right", name=label, showlegend=False,
                                marker=dict(size=16, symbol="star", color="gold",
                                            line=dict(color="black", width=1))), row=r, col=c)


def save(fig: Figure, outdir, stem: str, formats=("png", "svg", "pdf", "html"),
         ncols: int | None = None) -> list[Path]:
    """Write ``stem.png/.svg/.pdf`` (matplotlib) and ``stem.html`` (plotly, offline)."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    static = [f for f in formats if f != "html"]
    if static:
        import matplotlib.pyplot as plt
        m = to_matplotlib(fig, ncols)
        for f in static:
            path = outdir / f"{stem}.{f}"
            m.savefig(path, dpi=150 if f == "png" else None, metadata=_metadata(f))
            written.append(path)
        plt.close(m)
    if "html" in formats:
        path = outdir / f"{stem}.html"
        to_plotly(fig, ncols).write_html(str(path), include_plotlyjs=True, full_html=True)
        written.append(path)
    return written


def _metadata(fmt_: str) -> dict | None:
    """No timestamps in vector files, so regenerated figures only change when the data does."""
    if fmt_ == "svg":
        return {"Date": None}
    if fmt_ == "pdf":
        return {"CreationDate": None}
    return None


# ----------------------------------------------------------------------------- shipped platforms

def platforms() -> dict:
    """explore/data/platforms.toml (``explore.platforms.platforms``)."""
    from explore.platforms import platforms as table
    return table()


def platform_whatif(accelerator, link=None, size=None) -> np.ndarray:
    """True for accelerator / scale-up pairings no vendor ships (``explore.platforms.whatif``)."""
    from explore.platforms import whatif
    return whatif(accelerator, link, size)
