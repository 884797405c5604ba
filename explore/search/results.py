"""Search results: the Pareto archive, hypervolume history, the result Dataset
(NetCDF) and the per-generation checkpoint used by ``--resume``.

The archive keeps every feasible, non-dominated design evaluated so far (all
its metrics), so the front reported is the best seen, not only the last
population's. Hypervolume is pymoo's exact indicator (``pymoo.indicators.hv``)
in the minimised objective space, against a reference point fixed at the first
generation with a feasible design (or given in the space file) and recorded.
"""
from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import xarray as xr
from pymoo.indicators.hv import HV

CHUNK = 2048


def nondominated(F: np.ndarray) -> np.ndarray:
    """Indices of the rows of F (minimised) that no other row dominates.

    a dominates b iff a <= b everywhere and a < b somewhere. Rows are visited in
    lexicographic order of (normalised sum, f1, f2, ...): a dominator always comes
    before the rows it dominates, so each block is checked against the front so
    far and against itself only -- O(n |front|) with numpy broadcasting."""
    F = np.asarray(F, dtype=float)
    n = F.shape[0]
    if n == 0:
        return np.zeros(0, dtype=int)
    lo, hi = F.min(axis=0), F.max(axis=0)
    norm = (F - lo) / np.where(hi > lo, hi - lo, 1.0)
    order = np.lexsort(tuple(F[:, ::-1].T) + (norm.sum(axis=1),))
    front: list[np.ndarray] = []
    P = np.zeros((0, F.shape[1]))
    for s in range(0, n, CHUNK):
        idx = order[s:s + CHUNK]
        C = F[idx]
        if len(P):
            dom = np.zeros(len(C), dtype=bool)
            for p in range(0, len(P), CHUNK):
                B = P[p:p + CHUNK]
                le = (B[:, None, :] <= C[None, :, :]).all(axis=2)
                lt = (B[:, None, :] < C[None, :, :]).any(axis=2)
                dom |= (le & lt).any(axis=0)
            idx, C = idx[~dom], C[~dom]
        le = (C[:, None, :] <= C[None, :, :]).all(axis=2)
        lt = (C[:, None, :] < C[None, :, :]).any(axis=2)
        keep = ~(le & lt).any(axis=0)
        front.append(idx[keep])
        P = np.vstack([P, C[keep]])
    return np.sort(np.concatenate(front))


def nondominated_rank(F: np.ndarray) -> np.ndarray:
    """Non-dominated sorting rank (0 = first front) of every row of F."""
    rank = np.full(len(F), -1)
    left = np.arange(len(F))
    r = 0
    while len(left):
        nd = nondominated(F[left])
        rank[left[nd]] = r
        left = np.delete(left, nd)
        r += 1
    return rank


def decision_keys(cols: dict[str, np.ndarray], names: list[str]) -> np.ndarray:
    """One string per design joining its decision values (for de-duplication)."""
    out = np.char.add(cols[names[0]].astype(str), "|")
    for n in names[1:]:
        out = np.char.add(out, np.char.add(cols[n].astype(str), "|"))
    return out


class Archive:
    """Feasible non-dominated designs seen so far: every ``design`` variable of their
    evaluation as numpy columns (plain arrays concatenate fast; the Dataset is built once)."""

    def __init__(self, names: list[str]):
        self.names = names
        self.cols: dict[str, np.ndarray] = {}
        self.meta: dict[str, tuple] = {}      # name -> (is coordinate, attrs)
        self.attrs: dict = {}
        self.F = np.zeros((0, 0))

    def add(self, ds: xr.Dataset, F: np.ndarray, G: np.ndarray) -> None:
        feas = np.flatnonzero((G <= 0).all(axis=1))
        if not len(feas):
            return
        new = {k: v.values[feas] for k, v in ds.variables.items()
               if v.dims == ("design",) and k != "design"}
        if not self.meta:
            self.meta = {k: (k in ds.coords, dict(ds.variables[k].attrs)) for k in new}
            self.attrs = dict(ds.attrs)
            cols, Fn = new, F[feas]
        else:
            cols = {k: np.concatenate([self.cols[k], new[k]]) for k in self.cols}
            Fn = np.vstack([self.F, F[feas]])
        _, first = np.unique(decision_keys(cols, self.names), return_index=True)
        first = np.sort(first)
        keep = first[nondominated(Fn[first])]
        self.cols = {k: c[keep] for k, c in cols.items()}
        self.F = Fn[keep]

    def dataset(self, order: np.ndarray) -> xr.Dataset:
        data = {k: ("design", self.cols[k][order], self.meta[k][1]) for k in self.cols
                if not self.meta[k][0]}
        coords = {k: ("design", self.cols[k][order], self.meta[k][1]) for k in self.cols
                  if self.meta[k][0]}
        coords["design"] = np.arange(len(order))
        return xr.Dataset(data, coords=coords, attrs=self.attrs)


def reference_point(F: np.ndarray) -> np.ndarray:
    """Nadir of F plus 10 % of the front's extent (or of |nadir| where the extent is 0)."""
    lo, hi = F.min(axis=0), F.max(axis=0)
    span = np.where(hi > lo, hi - lo, np.maximum(np.abs(hi), 1e-300))
    return hi + 0.1 * span


def hypervolume(F: np.ndarray, ref: np.ndarray | None) -> float:
    if ref is None or len(F) == 0:
        return 0.0
    inside = (F < ref).all(axis=1)
    return float(HV(ref_point=ref)(F[inside])) if inside.any() else 0.0


# ----------------------------------------------------------------------------- dataset

def result_dataset(space, settings, archive: Archive, history: dict, pop_X, pop_F, pop_CV,
                   evaluations: int) -> xr.Dataset:
    """The Pareto set with every metric, objectives with the user's sign, the
    hypervolume per generation, the final population and the run's provenance."""
    names = [m for m, _ in space.objectives]
    if not archive.meta:
        ds = xr.Dataset(coords={"design": np.arange(0)})
        obj = np.zeros((0, len(names)))
    else:
        order = np.lexsort(tuple(archive.F[:, ::-1].T))
        ds = archive.dataset(order)
        obj = archive.F[order] * space.signs
    ds = ds.assign_coords(objective=names, sense=("objective", [s for _, s in space.objectives]))
    ds["objectives"] = (("design", "objective"), obj)
    ds["objectives"].attrs["description"] = "objective values, in the user's sign and units"
    ds["rank"] = ("design", np.zeros(ds.sizes["design"], dtype=np.int64))
    ds["rank"].attrs["description"] = "non-dominated rank among all feasible designs evaluated"
    gens = np.asarray(history["generation"], dtype=np.int64)
    ds = ds.assign_coords(generation=gens)
    ds["hypervolume"] = ("generation", np.asarray(history["hypervolume"], float))
    ds["evaluations"] = ("generation", np.asarray(history["evaluations"], dtype=np.int64))
    ds["front_size"] = ("generation", np.asarray(history["front_size"], dtype=np.int64))
    ds["hypervolume"].attrs["description"] = "pymoo HV of the archive front (minimised space)"
    if pop_X is not None and len(pop_X):
        ds = ds.assign_coords(member=np.arange(len(pop_X)), variable=history["x_names"])
        ds["population_x"] = (("member", "variable"), np.asarray(pop_X, float))
        ds["population_x"].attrs["description"] = "final population, encoded (index for choices)"
        ds["population_objectives"] = (("member", "objective"), np.asarray(pop_F) * space.signs)
        ds["population_violation"] = ("member", np.asarray(pop_CV, float).ravel())
        ds["population_rank"] = ("member", _pop_rank(np.asarray(pop_F), np.asarray(pop_CV).ravel()))
    ref = history.get("reference")
    ds.attrs.update({
        "title": f"lightpath search: {space.name}",
        "space_name": space.name, "space_text": space.source_text,
        "space_fingerprint": space.fingerprint, "seed": int(settings.seed),
        "algorithm": settings.algorithm, "pop_size": int(settings.pop),
        "n_gen": int(len(gens)), "plan_mode": settings.plan, "evaluations": int(evaluations),
        "objective_names": names, "objective_senses": [s for _, s in space.objectives],
        "constraint_names": list(space.constraint_names),
        "hv_reference_point": [] if ref is None else [float(x) for x in ref],
        "hv_reference_space": "minimised objectives (max objectives negated)",
        "pymoo_version": _version("pymoo"), "lightpath_version": _version("lightpath"),
    })
    return ds


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"


def _pop_rank(F, cv) -> np.ndarray:
    rank = np.full(len(F), -1, dtype=np.int64)
    feas = cv <= 0
    if feas.any():
        rank[feas] = nondominated_rank(F[feas])
    return rank


def _netcdf_safe(ds: xr.Dataset) -> xr.Dataset:
    ds = ds.copy()
    for k in list(ds.variables):
        if ds[k].dtype == object or ds[k].dtype.kind == "U":
            ds[k] = ds[k].astype(str)
    return ds


def _engine() -> str:
    """netCDF4 (C library, fast) when installed, else h5netcdf (both write NetCDF-4)."""
    try:
        import netCDF4  # noqa: F401
        return "netcdf4"
    except ImportError:
        return "h5netcdf"


def write_result(ds: xr.Dataset, path) -> None:
    """Write NetCDF-4 atomically: a temporary file, then rename."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    _netcdf_safe(ds).to_netcdf(tmp, engine=_engine())
    os.replace(tmp, path)


def read_result(path) -> xr.Dataset:
    with xr.open_dataset(path, engine=_engine()) as ds:
        ds = ds.load()
    for k in ("objective_names", "objective_senses", "constraint_names", "hv_reference_point"):
        if k in ds.attrs and np.ndim(ds.attrs[k]) == 0:        # NetCDF stores 1-lists as scalars
            ds.attrs[k] = [ds.attrs[k]]
        elif k in ds.attrs:
            ds.attrs[k] = list(np.asarray(ds.attrs[k]).tolist())
    return ds


# ----------------------------------------------------------------------------- checkpoint

def checkpoint_path(out) -> Path:
    return Path(str(out) + ".ckpt")


def save_checkpoint(path: Path, state: dict) -> None:
    """Pickle the search state (pymoo algorithm with its RNG, archive, history) atomically."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(path: Path) -> dict:
    with open(path, "rb") as f:
        return pickle.load(f)
