"""Search results: the Pareto archive, hypervolume history, the result Dataset
(NetCDF) and the per-generation checkpoint used by ``--resume``.

The archive keeps every feasible, non-dominated design evaluated so far (all
its metrics), so the front reported is the best seen, not only the last
population's. Hypervolume is pymoo's exact indicator (``pymoo.indicators.hv``)
in the minimised objective space, against a reference point fixed at the first
generation with a feasible design (or given in the space file) and recorded; it is
also reported normalised to the reference box (from the best value seen per
objective to the reference point), so it lies in [0, 1]. Non-dominated filtering
and sorting use moocore. The checkpoint is an ``.npz`` archive of plain arrays plus a
JSON record and a sha256 digest: loading it never unpickles, so never runs code.
"""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import moocore
import numpy as np
import xarray as xr
from pymoo.indicators.hv import HV

def nondominated(F: np.ndarray) -> np.ndarray:
    """Indices of the rows of F (minimised) that no other row dominates (a dominates b iff
    a <= b everywhere and a < b somewhere; equal rows are all kept). moocore's
    dimension sweep (Kung, Luccio & Preparata 1975): O(n log n) for up to 3 objectives."""
    F = np.asarray(F, dtype=float)
    if F.shape[0] == 0:
        return np.zeros(0, dtype=int)
    return np.flatnonzero(moocore.is_nondominated(F, keep_weakly=True))


def nondominated_rank(F: np.ndarray) -> np.ndarray:
    """Non-dominated sorting rank (0 = first front) of every row of F (moocore)."""
    F = np.asarray(F, dtype=float)
    if F.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    return np.asarray(moocore.pareto_rank(F), dtype=np.int64)


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

    def state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """(JSON record, plain arrays) of the archive, for a checkpoint."""
        arrays, columns = {"archive_F": np.asarray(self.F, float)}, []
        for j, (k, c) in enumerate(self.cols.items()):
            arrays[f"archive_col_{j}"], kind = _plain(c)
            columns.append([k, bool(self.meta[k][0]), self.meta[k][1], kind])
        return {"names": list(self.names), "columns": columns, "attrs": self.attrs}, arrays

    @classmethod
    def from_state(cls, record: dict, arrays: dict[str, np.ndarray]) -> "Archive":
        a = cls(list(record["names"]))
        a.attrs = dict(record["attrs"])
        for j, (k, is_coord, attrs, kind) in enumerate(record["columns"]):
            c = arrays[f"archive_col_{j}"]
            a.cols[k] = c.astype(object) if kind == "O" else c
            a.meta[k] = (bool(is_coord), dict(attrs))
        a.F = arrays["archive_F"]
        if a.cols and any(len(c) != len(a.F) for c in a.cols.values()):
            raise CheckpointError("archive columns and objectives differ in length")
        return a

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
    ref = history.get("reference")
    ideal, box = None, 0.0
    if ref is not None and len(archive.F):
        ideal = archive.F.min(axis=0)          # best value seen per objective: below every front
        box = float(np.prod(np.maximum(np.asarray(ref, float) - ideal, 0.0)))
    hv = ds["hypervolume"].values
    ds["hypervolume_normalised"] = ("generation", hv / box if box > 0 else np.zeros_like(hv))
    ds["hypervolume_normalised"].attrs["description"] = (
        "hypervolume / volume of the reference box [hv_ideal_point, hv_reference_point] "
        "(minimised space): 1 = a single design at the ideal point dominates the whole box")
    if pop_X is not None and len(pop_X):
        ds = ds.assign_coords(member=np.arange(len(pop_X)), variable=history["x_names"])
        ds["population_x"] = (("member", "variable"), np.asarray(pop_X, float))
        ds["population_x"].attrs["description"] = "final population, encoded (index for choices)"
        ds["population_objectives"] = (("member", "objective"), np.asarray(pop_F) * space.signs)
        ds["population_violation"] = ("member", np.asarray(pop_CV, float).ravel())
        ds["population_rank"] = ("member", _pop_rank(np.asarray(pop_F), np.asarray(pop_CV).ravel()))
    ds.attrs.update({
        "title": f"lightpath search: {space.name}",
        "space_name": space.name, "space_text": space.source_text,
        "space_fingerprint": space.fingerprint, "seed": int(settings.seed),
        "algorithm": settings.algorithm, "pop_size": int(settings.pop),
        "n_gen": int(len(gens)), "plan_mode": settings.plan, "evaluations": int(evaluations),
        "objective_names": names, "objective_senses": [s for _, s in space.objectives],
        "constraint_names": list(space.constraint_names),
        "hv_reference_point": [] if ref is None else [float(x) for x in ref],
        "hv_ideal_point": [] if ideal is None else [float(x) for x in ideal],
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


def check_outputs(inputs, out=None, html=None) -> None:
    """Refuse, before any work, outputs that cannot be written or would overwrite an
    input: ``out`` (result file) and ``html`` (plot) must be files in existing folders,
    distinct from each other and from every path in ``inputs`` (the space file)."""
    from explore.search.variables import SpaceError
    given = [(flag, Path(p)) for flag, p in (("--out", out), ("--html", html)) if p is not None]
    if out is not None:
        given.append(("--out (its checkpoint)", checkpoint_path(out)))
    for flag, p in given:
        if p.is_dir():
            raise SpaceError(f"{flag}: {p} is a directory; allowed: a file path")
        if not p.parent.is_dir():
            raise SpaceError(f"{flag}: folder {p.parent} does not exist; allowed: a file in an "
                             f"existing folder")
        for src in inputs:
            if src is not None and Path(src).exists() and p.exists() and \
                    os.path.samefile(src, p):
                raise SpaceError(f"{flag}: {p} is the input file {src}; refusing to overwrite "
                                 f"it; allowed: another path")
    if out is not None and html is not None and Path(html).resolve() == Path(out).resolve():
        raise SpaceError(f"--html: {html} is also --out; allowed: another path")


def write_result(ds: xr.Dataset, path) -> None:
    """Write NetCDF-4 atomically: a temporary file, then rename."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    _netcdf_safe(ds).to_netcdf(tmp, engine=_engine())
    os.replace(tmp, path)


def read_result(path) -> xr.Dataset:
    with xr.open_dataset(path, engine=_engine()) as ds:
        ds = ds.load()
    for k in ("objective_names", "objective_senses", "constraint_names", "hv_reference_point",
              "hv_ideal_point"):
        if k in ds.attrs and np.ndim(ds.attrs[k]) == 0:        # NetCDF stores 1-lists as scalars
            ds.attrs[k] = [ds.attrs[k]]
        elif k in ds.attrs:
            ds.attrs[k] = list(np.asarray(ds.attrs[k]).tolist())
    return ds


# ----------------------------------------------------------------------------- checkpoint

def checkpoint_path(out) -> Path:
    return Path(str(out) + ".ckpt")


CHECKPOINT_FORMAT = "lightpath-search-checkpoint"
CHECKPOINT_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: unreadable, damaged or not a lightpath checkpoint."""


def _digest(meta_text: str, arrays: dict[str, np.ndarray]) -> str:
    """sha256 over the metadata and every array's name, dtype, shape and bytes."""
    h = hashlib.sha256(meta_text.encode())
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"\0{k}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _plain(a: np.ndarray) -> tuple[np.ndarray, str]:
    """An array numpy can store without pickle (object strings -> unicode), and its kind."""
    a = np.asarray(a)
    if a.dtype == object:
        return a.astype(str), "O"
    return a, a.dtype.kind


def save_checkpoint(path: Path, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write a checkpoint atomically: an ``.npz`` archive of plain arrays (never pickle)
    plus a JSON ``meta`` record and a sha256 ``digest`` of both."""
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    for k, v in arrays.items():
        if v.dtype == object:
            raise TypeError(f"checkpoint array {k!r} has dtype object")
    meta = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, **meta}
    text = json.dumps(meta, sort_keys=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, meta=np.array(text), digest=np.array(_digest(text, arrays)), **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(meta, arrays) of a checkpoint, verified against its digest. Loading never runs code:
    ``allow_pickle=False`` refuses object arrays, and ``meta`` is JSON."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise CheckpointError("not an .npz archive")
            arrays = {k: z[k] for k in z.files}
    except CheckpointError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise CheckpointError(f"unreadable ({type(e).__name__}: {str(e)[:80]})") from None
    if "meta" not in arrays or "digest" not in arrays:
        raise CheckpointError("no 'meta' and 'digest' records; allowed: a checkpoint written "
                              "by lightpath search")
    text, digest = str(arrays.pop("meta")), str(arrays.pop("digest"))
    if _digest(text, arrays) != digest:
        raise CheckpointError("digest mismatch (the file was modified or damaged)")
    try:
        meta = json.loads(text)
    except ValueError:
        raise CheckpointError("'meta' is not JSON") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"'meta' is a {type(meta).__name__}; allowed: a JSON object")
    if meta.get("format") != CHECKPOINT_FORMAT or meta.get("version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"format {meta.get('format')!r} version {meta.get('version')!r}; "
                              f"allowed: {CHECKPOINT_FORMAT!r} version {CHECKPOINT_VERSION}")
    return meta, arrays
