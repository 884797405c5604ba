"""The full grid of a design space, cut into chunks; a lazy dask-backed grid.

The grid is the Cartesian product of the space's variables (``Variable.grid_values()``),
one dimension per variable in file order, choices labelled. It is cut into chunks
that are contiguous ranges of the flat (C-order) index *and* rectangular blocks of
the grid: chunk shape ``(1, ..., 1, step, n_{k+1}, ..., n_d)`` with at most
``chunk`` points. A chunk's inputs are made from its flat range with
``np.unravel_index`` and evaluated in one vectorised ``Space.evaluate`` call, so
memory scales with the chunk, never with the grid. Stores: ``explore.sweep.store``.
"""
from __future__ import annotations

import difflib
import json
import math
import os
from dataclasses import dataclass

import numpy as np
import xarray as xr

from explore.scenario import ScenarioError

CHUNK_DEFAULT = 1 << 17          # points per chunk: ~70 MB of results, ~0.3 GB peak per worker
BOOKKEEPING = ("sweep_chunk_run", "sweep_chunk_valid", "sweep_chunk_digest")
SWEEP_KEYS = ("chunk", "store")
DEFAULT_STORE = ("step_time_s", "tokens_per_s", "mfu", "memory_per_device_bytes", "time_to_train_s",
                 "energy_per_token_j", "cost_per_token_usd", "capex_usd", "power_w", "goodput")
"""Metrics a sweep stores unless ``[sweep] store`` says otherwise (plus ``valid``, ``reason``,
the space's objectives and constrained metrics); ``store = ["all"]`` keeps every metric."""


class SweepError(ScenarioError):
    """A sweep cannot start: bad chunk size, or a store that belongs to another space."""


# ----------------------------------------------------------------------------- layout

@dataclass(frozen=True)
class Layout:
    """Chunking of a grid of ``shape``: chunks are blocks ``(1,..,1, step, n_{axis+1},..)``."""
    shape: tuple[int, ...]
    axis: int
    step: int

    @classmethod
    def for_grid(cls, shape, chunk: int) -> "Layout":
        """Largest blocks of at most ``chunk`` points that are contiguous in C order."""
        shape = tuple(int(s) for s in shape)
        chunk = int(chunk)
        axis = 0
        while math.prod(shape[axis + 1:]) > chunk:
            axis += 1
        step = max(1, min(shape[axis], chunk // math.prod(shape[axis + 1:])))
        return cls(shape, axis, step)

    @property
    def points(self) -> int:
        return math.prod(self.shape)

    @property
    def blocks(self) -> tuple[int, ...]:
        """Number of chunks along each of the dimensions ``0..axis``."""
        return self.shape[:self.axis] + (-(-self.shape[self.axis] // self.step),)

    @property
    def n_chunks(self) -> int:
        return math.prod(self.blocks)

    @property
    def chunk_points(self) -> int:
        return self.step * math.prod(self.shape[self.axis + 1:])

    @property
    def zarr_chunks(self) -> tuple[int, ...]:
        return (1,) * self.axis + (self.step,) + self.shape[self.axis + 1:]

    @property
    def dask_chunks(self) -> tuple[tuple[int, ...], ...]:
        n, s = self.shape[self.axis], self.step
        along = tuple(min(s, n - j) for j in range(0, n, s))
        return (tuple((1,) * m for m in self.shape[:self.axis]) + (along,)
                + tuple((m,) for m in self.shape[self.axis + 1:]))

    def region(self, i: int) -> tuple[slice, ...]:
        """The block of chunk ``i`` (chunks numbered in C order of ``blocks``)."""
        b = np.unravel_index(i, self.blocks)
        lead = tuple(slice(int(x), int(x) + 1) for x in b[:-1])
        j = int(b[-1]) * self.step
        own = slice(j, min(j + self.step, self.shape[self.axis]))
        return lead + (own,) + tuple(slice(0, m) for m in self.shape[self.axis + 1:])

    def region_shape(self, i: int) -> tuple[int, ...]:
        return tuple(s.stop - s.start for s in self.region(i))

    def flat_range(self, i: int) -> tuple[int, int]:
        """``[start, stop)`` of chunk ``i`` in the flat C-order index of the grid."""
        reg = self.region(i)
        start = int(np.ravel_multi_index(tuple(s.start for s in reg), self.shape))
        return start, start + math.prod(self.region_shape(i))


# ----------------------------------------------------------------------------- chunks

def _space(space):
    if isinstance(space, (str, os.PathLike, dict)):
        from explore.search.space import load_space
        return load_space(space)
    return space


def grid_coords(space) -> dict[str, np.ndarray]:
    """Each variable's grid values (choice labels as ``<U`` strings), in file order."""
    return {v.name: np.asarray(v.grid_values()) for v in space.variables}


def chunk_size(space, chunk: int | None) -> int:
    """``chunk`` if given, else ``[sweep] chunk`` of the space file, else CHUNK_DEFAULT."""
    table = getattr(space, "sweep", {}) or {}
    for k in table:
        if k not in SWEEP_KEYS:
            raise SweepError(f"sweep.{k}: unknown key; allowed: {', '.join(SWEEP_KEYS)}")
    c = chunk if chunk is not None else table.get("chunk", CHUNK_DEFAULT)
    if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 1:
        raise SweepError(f"sweep.chunk: value {c!r} is not allowed; allowed: an integer >= 1 "
                         f"(points per chunk)")
    return int(c)


def store_names(space, metrics) -> list[str] | None:
    """The metrics ``[sweep] store`` selects from ``metrics`` (all names an evaluation returns):
    names or shell patterns (``"time_s_*"``), ``"all"`` for every one; default DEFAULT_STORE.
    ``valid``, ``reason``, objectives and constrained metrics are always kept. None = all."""
    import fnmatch
    want = (getattr(space, "sweep", {}) or {}).get("store", list(DEFAULT_STORE))
    if isinstance(want, str):
        want = [want]
    if not isinstance(want, (list, tuple)) or not all(isinstance(w, str) for w in want):
        raise SweepError(f"sweep.store: value {want!r} is not allowed; allowed: a list of metric "
                         f"names or patterns, or [\"all\"]")
    if "all" in want:
        return None
    metrics = list(metrics)
    keep = {"valid", "reason"} | {m for m, _ in space.objectives}
    keep |= {c.metric for c in getattr(space, "constraints", [])}
    for w in want:
        hit = fnmatch.filter(metrics, w)
        if not hit:
            near = difflib.get_close_matches(w, metrics, n=1)
            raise SweepError(f"sweep.store: {w!r} is not a metric{f' (did you mean {near[0]!r}?)' if near else ''}; "
                             f"allowed: metric names or patterns such as 'time_s_*', or 'all'")
        keep.update(hit)
    return [m for m in metrics if m in keep]


def evaluate_chunk(space, layout: Layout, i: int, names=None, reason_codes: bool = False) -> xr.Dataset:
    """Evaluate chunk ``i``: a Dataset over the chunk's block (no index coordinates); only the
    metrics ``names`` (None: all), ``reason`` as integer codes with ``reason_codes``."""
    shp = layout.region_shape(i)
    cols = {}
    for d, (v, part) in enumerate(zip(space.variables, layout.region(i))):
        vals = np.asarray(v.grid_values())[part]
        # the block in C order: each value repeated for the points of the later dimensions,
        # the whole run tiled over the earlier ones; one value (a leading dimension) stays one
        cols[v.name] = vals if vals.size == 1 else np.tile(np.repeat(vals, math.prod(shp[d + 1:])),
                                                           math.prod(shp[:d]))
    kw = {"reason_codes": True} if reason_codes else {}
    if names is not None:
        kw.update(metrics=names, variable_coords=False)   # the grid's own coordinates label them
    ds = space.evaluate(cols, **kw)
    dims = tuple(cols)
    data, coords = {}, {}
    for k, var in ds.variables.items():
        if k in cols or k == "design" or (names is not None and k in ds.data_vars and k not in names):
            continue
        a = var.values.reshape(shp)
        if a.dtype.kind in "UOT":
            a = a.astype(object)
        (coords if k in ds.coords else data)[k] = (dims, a, dict(var.attrs))
    return xr.Dataset(data, coords=coords)


def _probe(space, reason_codes: bool = False) -> xr.Dataset:
    """One grid point evaluated: the names, dtypes and attrs of every output ``[sweep] store`` keeps."""
    one = Layout.for_grid((1,) * len(space.variables), 1)
    ds = evaluate_chunk(space, one, 0, reason_codes=reason_codes)
    names = store_names(space, ds.data_vars)
    return ds if names is None else ds[names]


def _attrs(space, layout: Layout) -> dict:
    return {
        "space_name": space.name, "space_fingerprint": space.fingerprint,
        "space_source": space.source_text,
        "space_base": json.dumps(space.base, sort_keys=True, default=str),
        "objective_names": [m for m, _ in space.objectives],      # as in search results
        "objective_senses": [sense for _, sense in space.objectives],
        "sweep_points": layout.points, "sweep_chunk_points": layout.chunk_points,
    }


def _grid_dataset(space, layout: Layout, arrays: dict, probe: xr.Dataset) -> xr.Dataset:
    """Assemble data arrays (name -> (dims, array, attrs)) with labelled grid coordinates."""
    from explore.evaluate import input_attrs
    coords = {}
    for v, (name, g) in zip(space.variables, grid_coords(space).items()):
        coords[name] = (name, g, {**input_attrs(v.field), "kind": v.kind, "log": int(v.log)})
    data = {k: arrays[k] for k in probe.data_vars}
    ds = xr.Dataset(data, coords=coords)
    ds = ds.assign_coords({k: arrays[k] for k in probe.coords})
    ds.attrs.update(_attrs(space, layout))
    return ds


def _chunk_arrays(space, layout: Layout, i: int, names=None) -> dict[str, np.ndarray]:
    ds = evaluate_chunk(space, layout, i, names)
    return {k: v.values for k, v in ds.variables.items()}


def lazy_sweep(space, chunk: int | None = None) -> xr.Dataset:
    """The whole grid as a dask-backed Dataset; each chunk is one ``evaluate`` call.

    One graph layer evaluates the chunks; each output variable is a layer of
    ``getitem`` tasks on them (a hand-built HighLevelGraph: ~80 layers however many
    chunks, where one ``from_delayed`` per block would make culling quadratic)."""
    import operator
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph
    space = _space(space)
    layout = Layout.for_grid([v.size for v in space.variables], chunk_size(space, chunk))
    probe = _probe(space)
    dims = tuple(v.name for v in space.variables)
    tok = tokenize(space.fingerprint, layout)
    cname = f"sweep-chunk-{tok}"
    keep = list(probe.data_vars)
    layers = {cname: {(cname, i): (_chunk_arrays, space, layout, i, keep)
                      for i in range(layout.n_chunks)}}
    deps = {cname: set()}
    pad = (0,) * (len(dims) - layout.axis - 1)
    blocks = [tuple(int(b) for b in np.unravel_index(i, layout.blocks)) + pad
              for i in range(layout.n_chunks)]
    names = {}
    for k in probe.variables:
        if k in dims:
            continue
        names[k] = f"sweep-{k}-{tok}"
        layers[names[k]] = {(names[k],) + b: (operator.getitem, (cname, i), k)
                            for i, b in enumerate(blocks)}
        deps[names[k]] = {cname}
    graph = HighLevelGraph(layers, deps)
    arrays = {k: (dims, da.Array(graph, names[k], layout.dask_chunks, dtype=probe[k].dtype),
                  dict(probe[k].attrs)) for k in names}
    return _grid_dataset(space, layout, arrays, probe)
