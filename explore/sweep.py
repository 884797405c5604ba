"""Full-grid sweeps of a design space: chunked, lazily dask-backed or resumable in Zarr.

The grid is the Cartesian product of the space's variables (``Variable.grid_values()``),
one dimension per variable in file order, choices labelled. It is cut into chunks
that are contiguous ranges of the flat (C-order) index *and* rectangular blocks of
the grid: chunk shape ``(1, ..., 1, step, n_{k+1}, ..., n_d)`` with at most
``chunk`` points. A chunk's inputs are made from its flat range with
``np.unravel_index`` and evaluated in one vectorised ``Space.evaluate`` call, so
memory scales with the chunk, never with the grid.

A Zarr store holds the data variables plus two bookkeeping arrays over
``sweep_chunk``: ``sweep_chunk_valid`` (feasible points of the chunk) and
``sweep_chunk_run`` (the run that computed it; 0 = not done). A worker writes a
chunk's data, then its valid count, then its run number: the run number is the
completion marker, so a chunk counts as done only once its data is on disk.
Rerunning on the same store computes only the chunks whose marker is 0; a store
made from another space (sha256 fingerprint) is refused.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr

from explore.scenario import ScenarioError

CHUNK_DEFAULT = 1 << 17          # points per chunk: ~70 MB of results, ~0.3 GB peak per worker
BOOKKEEPING = ("sweep_chunk_run", "sweep_chunk_valid")
SWEEP_KEYS = ("chunk",)


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
        from explore.space import load_space
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


def evaluate_chunk(space, layout: Layout, i: int) -> xr.Dataset:
    """Evaluate chunk ``i``: a Dataset over the chunk's block (no index coordinates)."""
    start, stop = layout.flat_range(i)
    idx = np.unravel_index(np.arange(start, stop, dtype=np.int64), layout.shape)
    cols = {v.name: np.asarray(v.grid_values())[ix] for v, ix in zip(space.variables, idx)}
    ds = space.evaluate(cols)
    dims = tuple(cols)
    shp = layout.region_shape(i)
    data, coords = {}, {}
    for k, var in ds.variables.items():
        if k in cols or k == "design":
            continue
        a = var.values.reshape(shp)
        if a.dtype.kind in "UOT":
            a = a.astype(object)
        (coords if k in ds.coords else data)[k] = (dims, a, dict(var.attrs))
    return xr.Dataset(data, coords=coords)


def _probe(space) -> xr.Dataset:
    """One grid point evaluated: the names, dtypes and attrs of every output."""
    return evaluate_chunk(space, Layout.for_grid((1,) * len(space.variables), 1), 0)


def _attrs(space, layout: Layout) -> dict:
    return {
        "space_name": space.name, "space_fingerprint": space.fingerprint,
        "space_source": space.source_text,
        "space_base": json.dumps(space.base, sort_keys=True, default=str),
        "objectives": [list(o) for o in space.objectives],
        "sweep_points": layout.points, "sweep_chunk_points": layout.chunk_points,
    }


def _grid_dataset(space, layout: Layout, arrays: dict, probe: xr.Dataset) -> xr.Dataset:
    """Assemble data arrays (name -> (dims, array, attrs)) with labelled grid coordinates."""
    coords = {}
    for v, (name, g) in zip(space.variables, grid_coords(space).items()):
        coords[name] = (name, g, {"field": v.field, "kind": v.kind, "log": int(v.log)})
    data = {k: arrays[k] for k in probe.data_vars}
    ds = xr.Dataset(data, coords=coords)
    ds = ds.assign_coords({k: arrays[k] for k in probe.coords})
    ds.attrs.update(_attrs(space, layout))
    return ds


def _chunk_arrays(space, layout: Layout, i: int) -> dict[str, np.ndarray]:
    ds = evaluate_chunk(space, layout, i)
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
    layers = {cname: {(cname, i): (_chunk_arrays, space, layout, i)
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


# ----------------------------------------------------------------------------- store

def _template(space, layout: Layout) -> tuple[xr.Dataset, dict]:
    """The store's skeleton: lazy placeholders (never computed) plus bookkeeping arrays.

    String variables (``reason``, choice labels) come back separately as
    ``name -> (dims, shape, chunks, values or None, attrs)``: they are created as
    zarr variable-length strings directly (xarray would store fixed-width UTF-32)."""
    import dask.array as da
    probe = _probe(space)
    dims = tuple(v.name for v in space.variables)
    arrays = {k: (dims, da.zeros(layout.shape, dtype=var.dtype, chunks=-1), dict(var.attrs))
              for k, var in probe.variables.items() if k not in dims}    # one lazy block each
    ds = _grid_dataset(space, layout, arrays, probe)
    strings = {}
    for k, var in list(ds.variables.items()):
        if var.dtype.kind in "UO":
            values = var.values if k in dims else None
            chunks = var.shape if k in dims else layout.zarr_chunks
            strings[k] = (var.dims, var.shape, chunks, values, dict(var.attrs))
            ds = ds.drop_vars(k)
    n = layout.n_chunks
    ds["sweep_chunk_run"] = ("sweep_chunk", da.zeros(n, dtype=np.int32, chunks=-1))
    ds["sweep_chunk_valid"] = ("sweep_chunk", da.zeros(n, dtype=np.int64, chunks=-1))
    return ds, strings


def _store_path(store) -> str:
    s = str(store)
    return s if "://" in s else os.path.abspath(s)


def _open_group(store):
    import zarr
    try:
        return zarr.open_group(store, mode="r")
    except Exception:      # not a zarr group (zarr raises several types)
        return None


def prepare_store(space, store, chunk: int | None = None) -> tuple[Layout, int, list[int]]:
    """Create the store or check it belongs to ``space``: (layout, run number, chunks to do)."""
    import zarr
    store = _store_path(store)
    exists = "://" in store or (Path(store).exists() and any(Path(store).iterdir()))
    g = _open_group(store) if exists else None
    if exists and g is None and "://" not in store:
        raise SweepError(f"{store}: exists and is not a Zarr store; allowed: a new path or a "
                         f"store written by 'lightpath sweep'")
    attrs = dict(g.attrs) if g is not None else {}
    if g is not None and "space_fingerprint" not in attrs:
        raise SweepError(f"{store}: is a Zarr store but not a lightpath sweep; allowed: a new "
                         f"path or a store written by 'lightpath sweep'")
    if g is not None and attrs["space_fingerprint"] != space.fingerprint:
        raise SweepError(f"{store}: holds a sweep of another space ({attrs.get('space_name')!r}, "
                         f"fingerprint {attrs['space_fingerprint'][:12]}), not of "
                         f"{space.name!r} (fingerprint {space.fingerprint[:12]}); allowed: the "
                         f"same space file, or a new --out path")
    shape = tuple(v.size for v in space.variables)
    if g is not None and attrs.get("sweep_ready"):
        layout = Layout.for_grid(shape, int(attrs["sweep_chunk_points"]))
        runs = np.asarray(g["sweep_chunk_run"][:])
        todo = [int(i) for i in np.flatnonzero(runs == 0)]
        return layout, int(runs.max(initial=0)) + 1, todo
    layout = Layout.for_grid(shape, chunk_size(space, chunk))
    ds, strings = _template(space, layout)
    dims = tuple(v.name for v in space.variables)
    enc = {k: {"chunks": layout.zarr_chunks} for k, v in ds.variables.items() if v.dims == dims}
    enc.update({k: {"chunks": (1,)} for k in BOOKKEEPING})     # one file per chunk marker
    ds.to_zarr(store, mode="w", compute=False, consolidated=False, encoding=enc)
    g = zarr.open_group(store, mode="r+")
    for k, (vdims, shp, chunks, values, attrs) in strings.items():
        arr = g.create_array(k, shape=shp, chunks=chunks, dtype=str, fill_value="",
                             dimension_names=vdims, attributes=attrs)
        if values is not None:
            arr[...] = np.asarray(values, dtype=object)
    g.attrs["sweep_ready"] = True                 # last: the skeleton is complete
    return layout, 1, list(range(layout.n_chunks))


def compute_chunk(i: int, space, store: str, layout: Layout, run: int) -> tuple[int, int, int]:
    """Evaluate chunk ``i`` and make it durable: data, then valid count, then the marker."""
    ds = evaluate_chunk(space, layout, i)
    n_valid = int(np.count_nonzero(ds["valid"].values))
    one = (slice(i, i + 1),)
    _write(store, (space.fingerprint, layout),
           [(layout.region(i), {k: v.values for k, v in ds.variables.items()}),
            (one, {"sweep_chunk_valid": np.array([n_valid])}),
            (one, {"sweep_chunk_run": np.array([run], dtype=np.int32)})])
    return i, int(ds["valid"].size), n_valid


_ARRAYS: dict = {}     # per process: (store, fingerprint, layout) -> {name: AsyncArray}


def _write(store: str, key, steps) -> None:
    """Each step ``(region, {name: value})`` in order; within a step, arrays concurrently."""
    import zarr.api.asynchronous as za
    from zarr.core.sync import sync

    async def write_all():
        arrays = _ARRAYS.get((store, key))
        if arrays is None:
            g = await za.open_group(store, mode="r+")
            arrays = {k: a async for k, a in g.arrays()}
            _ARRAYS.clear()
            _ARRAYS[(store, key)] = arrays
        for region, values in steps:
            await asyncio.gather(*(arrays[k].setitem(region, v) for k, v in values.items()))
    sync(write_all())


@dataclass(frozen=True)
class SweepReport:
    store: str
    points: int
    chunks: int
    chunks_before: int         # already done when this run started
    chunks_computed: int       # computed by this run
    points_computed: int
    feasible: int
    elapsed_s: float

    @property
    def points_per_s(self) -> float:
        return self.points_computed / self.elapsed_s if self.elapsed_s > 0 else float("nan")

    def summary(self) -> str:
        rate = (f"{self.points_per_s:,.0f} points/s" if self.points_computed
                else "nothing left to compute, 0 points/s")
        return (f"sweep {self.store}: {self.points:,} points in {self.chunks} chunks "
                f"({self.chunks_computed} computed now, {self.chunks_before} done before); "
                f"feasible {100 * self.feasible / max(self.points, 1):.2f} %; "
                f"{self.elapsed_s:.1f} s; {rate}")


def run_sweep(space, store, client, chunk: int | None = None, progress: bool = False) -> SweepReport:
    """Compute the missing chunks of ``store`` on a ``dask.distributed`` client."""
    from distributed import as_completed
    from tqdm import tqdm
    space = _space(space)
    store = _store_path(store)
    t0 = time.perf_counter()
    layout, run, todo = prepare_store(space, store, chunk)
    before = layout.n_chunks - len(todo)
    futures = client.map(compute_chunk, todo, space=space, store=store, layout=layout, run=run,
                         pure=False)
    points = 0
    bar = tqdm(total=layout.n_chunks, initial=before, unit="chunk", disable=not progress,
               desc="sweep", dynamic_ncols=True)
    try:
        for fut in as_completed(futures):
            _, n, _ = fut.result()
            points += n
            bar.update(1)
            fut.release()
    except BaseException:
        client.cancel(futures)
        raise
    finally:
        bar.close()
    import zarr
    valid = int(np.asarray(zarr.open_group(store, mode="r")["sweep_chunk_valid"][:]).sum())
    return SweepReport(store, layout.points, layout.n_chunks, before, len(todo), points, valid,
                       time.perf_counter() - t0)


def open_sweep(store) -> xr.Dataset:
    """A finished (or partial) sweep store as a lazy Dataset, bookkeeping dropped."""
    store = _store_path(store)
    if _open_group(store) is None:
        raise SweepError(f"{store}: not a Zarr store")
    ds = xr.open_zarr(store, consolidated=False, drop_variables=list(BOOKKEEPING))
    ds.attrs.pop("sweep_ready", None)
    for k, var in ds.variables.items():            # strings as in memory: <U labels, object data
        if var.dtype.kind in "TUO":
            if k in ds.indexes:
                ds = ds.assign_coords({k: (var.dims, np.asarray(var.values.tolist()), var.attrs)})
            else:
                ds[k] = var.copy(data=var.data.astype(object))
    return ds


# glibc malloc for workers: dask sets MALLOC_TRIM_THRESHOLD_=65536, which disables the dynamic
# mmap threshold, so every array > 128 kB is mmap'ed and unmapped again; measured on a 110k-point
# chunk: 10x the system time. Keep arrays up to 32 MB on the heap and trim above 256 MB instead.
WORKER_ENV = {"MALLOC_TRIM_THRESHOLD_": str(1 << 28), "MALLOC_MMAP_THRESHOLD_": str(1 << 25)}


def local_cluster(workers: int | None = None, **kwargs):
    """A ``LocalCluster`` of ``workers`` processes (default: all cores), one thread each."""
    import dask
    from distributed import LocalCluster
    env = {f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in WORKER_ENV.items()}
    with dask.config.set(env):
        return LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                            processes=True, dashboard_address=None, **kwargs)


def sweep(space, store=None, *, chunk: int | None = None, client=None, workers: int | None = None,
          progress: bool = False) -> xr.Dataset:
    """The full grid of ``space`` (a Space, a space file or its dict) as an xarray Dataset.

    Without ``store``: lazily dask-backed (compute with any dask scheduler). With
    ``store``: computed into that Zarr store (resuming it if it holds part of the same
    space) on ``client``, else the current ``dask.distributed`` client, else a temporary
    ``LocalCluster`` of ``workers`` processes; returns the store opened lazily.
    """
    space = _space(space)
    if store is None:
        return lazy_sweep(space, chunk)
    if client is None:
        from distributed import Client, get_client
        try:
            client = get_client()
        except ValueError:
            with local_cluster(workers) as cluster, Client(cluster) as c:
                run_sweep(space, store, c, chunk, progress)
            return open_sweep(store)
    run_sweep(space, store, client, chunk, progress)
    return open_sweep(store)
