"""Sobol sensitivity of the objectives to design variables and uncertain inputs (SALib).

Every input is a coordinate ``u`` in [0, 1]: a design variable maps it onto its
choices / integer range / real range, an uncertain figure through its inverse
CDF (``Input.ppf``). SALib's Saltelli-Sobol' design (``SALib.sample.sobol``,
N (D + 2) rows without second-order terms) is evaluated in ONE vectorised call
(each row is its own design and its own draw), and ``SALib.analyze.sobol`` gives
first-order S1 and total ST indices (Saltelli et al. 2010, Jansen estimator) of
``log10(objective)`` per objective. Rows that are not valid designs (plan rules,
memory) get the mean of the valid rows (no variance); the valid fraction is
reported, and indices then describe the variance over valid designs only
approximately.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import xarray as xr

from explore.model import calibration as cal
from explore.scenario import resolve
from explore.uncertainty.propagate import _model_of, _strip, evaluate_elementwise, traced_inputs

DEFAULT_OBJECTIVES = ("time_to_train_s", "energy_per_token_j", "cost_per_token_usd", "carbon_per_token_kg")


def _decode(v, u: np.ndarray) -> np.ndarray:
    """A design variable's values at coordinates u in [0, 1)."""
    u = np.clip(u, 0.0, 1.0 - 1e-12)
    if v.values:
        vals = np.asarray(v.values)
        return vals[np.floor(u * len(vals)).astype(int)]
    if v.kind == "int":
        return (int(v.low) + np.floor(u * (int(v.high) - int(v.low) + 1))).astype(np.int64)
    if v.log:
        return np.exp(np.log(v.low) + u * (np.log(v.high) - np.log(v.low)))
    return v.low + u * (v.high - v.low)


@dataclass
class Study:
    """What a sensitivity run varies: a base scenario or a design space, plus uncertain inputs."""
    space: object | None
    scenario: dict
    inputs: list
    objectives: tuple

    @property
    def variables(self) -> list:
        return list(self.space.variables) if self.space is not None else []

    @property
    def names(self) -> list[str]:
        return [f"var:{v.name}" for v in self.variables] + [i.name for i in self.inputs]

    def batch(self, U: np.ndarray):
        """(resolved scenario, bad mask, input values) for the coordinate matrix U (rows x D)."""
        nv = len(self.variables)
        if self.space is not None:
            cols = {v.name: _decode(v, U[:, j]) for j, v in enumerate(self.variables)}
            sc, bad, _ = self.space._batch(cols)
        else:
            sc = copy.deepcopy(self.scenario)
            bad = np.zeros(len(U), bool)
            sc["training"] = dict(sc["training"])
            sc["training"]["tokens"] = np.broadcast_to(
                np.asarray(sc["training"].get("tokens", 300e9), float), (len(U),)).copy()
        r = resolve(_strip(sc))
        values = {i.name: i.ppf(U[:, nv + j]) for j, i in enumerate(self.inputs)}
        return r, bad, values

    def evaluate(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Y: rows x objectives, valid mask)."""
        r, bad, values = self.batch(U)
        ds = evaluate_elementwise(r, values)
        valid = ds["valid"].values & ~bad
        Y = np.column_stack([ds[m].values.astype(float) for m in self.objectives])
        return Y, valid & np.isfinite(Y).all(axis=1) & (Y > 0).all(axis=1)


def study(path_or_dict, objectives=None, uncertainty=None, spread: float = 1.0, seed: int = 0,
          trace_designs: int = 2000) -> Study:
    """A Study of a design-space file (``variables`` table) or a scenario file/dict."""
    from explore.scenario import load_scenario
    from explore.search.space import load_space
    raw = path_or_dict
    if not isinstance(raw, dict):
        from explore.scenario import read_toml_text
        raw = read_toml_text(path_or_dict)[0]
    is_space = "variables" in raw
    space = load_space(path_or_dict) if is_space else None
    scenario = space.base if is_space else (raw if isinstance(path_or_dict, dict) else load_scenario(path_or_dict))
    extra = ({k: v for k, v in raw.get("uncertainty", {}).items() if k not in ("samples", "seed")}
             if is_space else {})
    model = _model_of(scenario, {**extra, **(uncertainty or {})}, spread)
    objs = tuple(objectives or ([m for m, _ in space.objectives] if is_space else DEFAULT_OBJECTIVES))
    st = Study(space, scenario, [], objs)
    # uncertain inputs: catalog figures looked up by a random batch of designs (all choices seen)
    rng = np.random.default_rng(seed)
    n = trace_designs if is_space else 1
    U = rng.random((n, len(st.variables)))
    if is_space:
        cols = {v.name: _decode(v, U[:, j]) for j, v in enumerate(st.variables)}
        sc = space._batch(cols)[0]
    else:
        sc = scenario
    r = resolve(_strip(sc))
    st.inputs = [i for i in traced_inputs(r, model, cal.DEFAULT) if not i.zero_width]
    return st


def sobol_indices(st: Study, n: int = 256, seed: int = 0) -> xr.Dataset:
    """First-order and total Sobol indices of log10(objective), dims (objective, input)."""
    from SALib.analyze import sobol as sobol_analyze
    from SALib.sample import sobol as sobol_sample
    names = st.names
    problem = {"num_vars": len(names), "names": names, "bounds": [[0.0, 1.0]] * len(names)}
    X = sobol_sample.sample(problem, n, calc_second_order=False, seed=seed)
    Y, valid = st.evaluate(X)
    out = {k: np.zeros((len(st.objectives), len(names))) for k in ("S1", "ST", "S1_conf", "ST_conf")}
    for j, m in enumerate(st.objectives):
        y = np.full(len(X), np.nan)
        y[valid] = np.log10(Y[valid, j])
        y[~valid] = np.nanmean(y) if valid.any() else 0.0
        res = sobol_analyze.analyze(problem, y, calc_second_order=False, seed=seed)
        for k in out:
            out[k][j] = res[k]
    ds = xr.Dataset({k: (("objective", "input"), v) for k, v in out.items()},
                    coords={"objective": list(st.objectives), "input": names})
    ds.attrs.update(evaluations=len(X), valid_fraction=float(valid.mean()), base_samples=n, seed=seed)
    return ds


def ranking(ds: xr.Dataset, top: int = 5, kind: str = "all") -> dict[str, list[tuple[str, float, float]]]:
    """Per objective: the top inputs by total index, as (input, S1, ST). ``kind``: "all",
    "variables" (design variables, ``var:*``) or "uncertain" (catalog figures, constants)."""
    names = ds["input"].values.astype(str)
    keep = np.ones(len(names), bool) if kind == "all" else (np.char.startswith(names, "var:") == (kind == "variables"))
    out = {}
    for m in ds["objective"].values:
        st = np.where(keep, ds["ST"].sel(objective=m).values, -np.inf)
        s1 = ds["S1"].sel(objective=m).values
        order = [i for i in np.argsort(-st)[:top] if keep[i]]
        out[str(m)] = [(str(names[i]), float(s1[i]), float(st[i])) for i in order]
    return out


def plot(ds: xr.Dataset, path, top: int = 10) -> None:
    """Horizontal bars of S1 and ST for the top inputs of each objective (PNG/SVG by suffix)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    objs = [str(m) for m in ds["objective"].values]
    fig, axes = plt.subplots(1, len(objs), figsize=(4.2 * len(objs), 0.35 * top + 1.5), squeeze=False)
    for ax, (m, rows) in zip(axes[0], ranking(ds, top).items()):
        names = [r[0] for r in rows][::-1]
        y = np.arange(len(names))
        ax.barh(y - 0.2, [r[2] for r in rows][::-1], height=0.4, label="total (ST)")
        ax.barh(y + 0.2, [r[1] for r in rows][::-1], height=0.4, label="first order (S1)")
        ax.set_yticks(y, [n.replace("var:", "") for n in names], fontsize=7)
        ax.set_title(m, fontsize=9)
        ax.set_xlim(0, max(1.0, max((r[2] for r in rows), default=0)))
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
