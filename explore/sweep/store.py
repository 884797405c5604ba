"""Resumable sweeps into a Zarr store on a dask.distributed cluster.

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
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr

from explore.sweep.grid import (BOOKKEEPING, Layout, SweepError, _grid_dataset, _probe, _space,
                                chunk_size, evaluate_chunk, lazy_sweep)


# ----------------------------------------------------------------------------- store

def _template(space, layout: Layout) -> tuple[xr.Dataset, dict]:
    """The store's skeleton: lazy placeholders (never computed) plus bookkeeping arrays.

    String variables (``reason``, choice labels) come back separately as
    ``name -> (dims, shape, chunks, values or None, attrs)``: they are created as
    zarr variable-length strings directly (xarray would store fixed-width UTF-32)."""
    import dask.array as da
    probe = _probe(space, reason_codes=True)
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


def compute_chunk(i: int, space, store: str, layout: Layout, run: int,
                  names=None) -> tuple[int, int, int]:
    """Evaluate chunk ``i`` and make it durable: data, then valid count, then the marker.
    ``names``: the metrics the store holds (default: those ``[sweep] store`` selects)."""
    if names is None:
        names = list(_probe(space, reason_codes=True).data_vars)
    ds = evaluate_chunk(space, layout, i, names, reason_codes=True)
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
    names = list(_probe(space, reason_codes=True).data_vars)
    futures = client.map(compute_chunk, todo, space=space, store=store, layout=layout, run=run,
                         names=names, pure=False)
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
    r = ds.variables.get("reason")
    if r is not None and r.dtype.kind in "iu" and "codes" in r.attrs:    # codes -> strings, lazily
        table = np.asarray(list(r.attrs["codes"]), dtype=object)
        ds["reason"] = xr.Variable(r.dims, r.data.map_blocks(table.__getitem__, dtype=object),
                                   {k: a for k, a in r.attrs.items() if k != "codes"})
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
