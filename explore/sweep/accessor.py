"""``ds.lightpath``: analysis helpers on sweep (n-D grid) and search (1-D ``design``) results.

``ds.lightpath.feasible()`` and ``ds.lightpath.pareto([...])`` return the selected
points as a 1-D Dataset along ``design``; for a grid, each point keeps its grid
labels as coordinates along ``design`` (pointwise selection, no MultiIndex).
Only the objective columns and ``valid`` are loaded to select; the rest of a
lazily (dask/Zarr) backed result is read for the selected points only.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from explore.scenario import ScenarioError

# Natural sense of a metric, read from the unit in its name (docs/architecture.md: units in names).
_MAX = ("tokens_per_s", "model_flops_per_s_per_device", "mfu", "hfu", "goodput")
_MIN_SUFFIXES = ("_s", "_j", "_usd", "_bytes", "_w", "_fraction")


def natural_sense(metric: str) -> str | None:
    """'max' for throughput and utilisation, 'min' for time, energy, cost, memory, power."""
    if metric in _MAX:
        return "max"
    if metric.endswith(_MIN_SUFFIXES):
        return "min"
    return None


def pareto_mask(F: np.ndarray) -> np.ndarray:
    """Non-dominated rows of ``F`` (n, k), all minimised; equal rows are all kept.

    Row a dominates b when a <= b in every column and a < b in one;
    moocore's dimension sweep (O(n log n) for up to three objectives).
    """
    import moocore
    F = np.asarray(F, dtype=float)
    if F.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    return np.asarray(moocore.is_nondominated(F, keep_weakly=True), dtype=bool)


def _str_list(value) -> list[str]:
    """An attribute as a list of strings (NetCDF stores a one-element list as a scalar)."""
    return [str(x) for x in np.atleast_1d(np.asarray(value, dtype=object)).tolist()]


def declared_objectives(ds: xr.Dataset) -> dict[str, str]:
    """{metric: 'min' | 'max'} from the ``objective_names`` and ``objective_senses``
    attributes that search and sweep results share ({} when absent)."""
    names = _str_list(ds.attrs.get("objective_names", []))
    senses = _str_list(ds.attrs.get("objective_senses", []))
    if not names and "objectives" in ds.attrs:           # stores written before the convention
        pairs = ds.attrs["objectives"]
        names, senses = [str(p[0]) for p in pairs], [str(p[1]) for p in pairs]
    if len(names) != len(senses) or any(s not in ("min", "max") for s in senses):
        raise ScenarioError(f"pareto: attributes objective_names {names!r} and objective_senses "
                            f"{senses!r} do not match; allowed: one 'min' or 'max' per objective")
    return dict(zip(names, senses))


@xr.register_dataset_accessor("lightpath")
class LightpathAccessor:
    """Registered on import of ``explore``: ``ds.lightpath.pareto``, ``.feasible``."""

    def __init__(self, ds: xr.Dataset):
        self._ds = ds

    # -- helpers -------------------------------------------------------------------
    def _dims(self, names) -> tuple[str, ...]:
        ds = self._ds
        ref = ds["valid"] if "valid" in ds else ds[names[0]]
        return tuple(ref.dims)

    def _column(self, name: str, dims) -> np.ndarray:
        return np.asarray(self._ds[name].transpose(*dims).values).reshape(-1)

    def valid_mask(self) -> np.ndarray:
        """Flat (C order over the point dimensions) boolean mask of valid points."""
        dims = self._dims([])
        if "valid" not in self._ds:
            return np.ones(int(np.prod([self._ds.sizes[d] for d in dims])), dtype=bool)
        return self._column("valid", dims).astype(bool)

    def points(self, flat_index) -> xr.Dataset:
        """The points at these flat indices (C order over the point dimensions) along ``design``."""
        ds = self._ds
        dims = self._dims([])
        idx = np.asarray(flat_index, dtype=np.int64)
        if dims == ("design",):
            if "design" not in ds.coords:                 # keep the original positions
                ds = ds.assign_coords(design=np.arange(ds.sizes["design"]))
            return ds.isel(design=idx)
        sub = np.unravel_index(idx, tuple(ds.sizes[d] for d in dims))
        out = ds.isel({d: xr.DataArray(s, dims="design") for d, s in zip(dims, sub)})
        return out.assign_coords(design=np.arange(idx.size))

    # -- public ----------------------------------------------------------------------
    def feasible(self) -> xr.Dataset:
        """The valid designs along ``design`` (all of them when there is no ``valid``)."""
        return self.points(np.flatnonzero(self.valid_mask()))

    def pareto(self, objectives=None, senses=None) -> xr.Dataset:
        """Non-dominated feasible designs along ``design``, sorted by the first objective.

        ``objectives``: metric names (default: the dataset's ``objective_names`` attribute,
        which search and sweep results both carry).
        ``senses``: 'min'/'max' per objective (default: from ``objective_senses``, else the metric's natural sense from its unit; otherwise an error).
        Designs with ``valid == False`` or a non-finite objective are excluded.
        """
        ds = self._ds
        declared = declared_objectives(ds)
        if objectives is None:
            objectives = list(declared)
        if isinstance(objectives, str):
            objectives = [objectives]
        if not objectives:
            raise ScenarioError("pareto: objectives: none given and the dataset declares none; "
                                "allowed: a list of metric names")
        for m in objectives:
            if m not in ds.data_vars:
                import difflib
                near = difflib.get_close_matches(m, list(ds.data_vars), n=1)
                raise ScenarioError(f"pareto: objective {m!r} is not a variable of the dataset"
                                    + (f" (did you mean {near[0]!r}?)" if near else ""))
        if senses is None:
            senses = [declared.get(m) or natural_sense(m) for m in objectives]
            for m, s in zip(objectives, senses):
                if s is None:
                    raise ScenarioError(f"pareto: objective {m!r} has no known sense; allowed: "
                                        f"give senses=['min' or 'max', ...]")
        if isinstance(senses, str):
            senses = [senses]
        if len(senses) != len(objectives) or any(s not in ("min", "max") for s in senses):
            raise ScenarioError(f"pareto: senses {list(senses)!r} are not allowed; allowed: one "
                                f"of 'min' or 'max' per objective ({len(objectives)})")
        dims = self._dims(objectives)
        sign = np.array([1.0 if s == "min" else -1.0 for s in senses])
        F = np.column_stack([self._column(m, dims).astype(float) for m in objectives]) * sign
        ok = self.valid_mask() & np.isfinite(F).all(axis=1)
        cand = np.flatnonzero(ok)
        front = cand[pareto_mask(F[cand])]
        order = np.lexsort(F[front].T[::-1])
        return self.points(front[order])
