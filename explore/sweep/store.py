"""Resumable sweeps into a Zarr store, on a local process pool or a dask.distributed cluster.

A Zarr store holds the data variables plus three bookkeeping arrays over
``sweep_chunk``: ``sweep_chunk_valid`` (feasible points of the chunk),
``sweep_chunk_digest`` (a BLAKE2b digest of the chunk's data) and
``sweep_chunk_run`` (the run that computed it; 0 = not done). A worker writes a
chunk's data, then its valid count and digest, then its run number: the run number
is the completion marker. A rerun recomputes every chunk whose marker is 0 or
unreadable and every chunk marked done that does not read back to its digest
(truncated or deleted chunk files); a store missing an array it was made with is
made again. One writer at a time: ``STORE.lock`` is held with ``fcntl.flock``. A
store made from another space (sha256 fingerprint) is refused. Writes use zarr's
public API; finished stores carry consolidated metadata.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr

from explore.sweep import pool
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
    ds["sweep_chunk_digest"] = ("sweep_chunk", da.zeros(n, dtype=np.int64, chunks=-1))
    return ds, strings


def _store_path(store) -> str:
    s = str(store)
    return s if "://" in s else os.path.abspath(s)


def _open_group(store, mode: str = "r"):
    """The store's root group read from its own metadata (consolidated metadata is a
    summary for readers; checks must see what is really there), or None."""
    import zarr
    try:
        return zarr.open_group(store, mode=mode, use_consolidated=False)
    except Exception:      # not a zarr group (zarr raises several types)
        return None


# ----------------------------------------------------------------------------- lock

_HELD: dict[str, list] = {}      # store -> [open lock file, depth] held by this process


@contextlib.contextmanager
def store_lock(store):
    """Hold ``STORE.lock`` (an ``fcntl.flock`` exclusive lock) while writing ``store``; a
    second writer is refused with a SweepError. The kernel releases the lock when the
    holder exits, even on ``kill -9``, so a lock is never stale: the file left behind
    is harmless and reused. Re-entrant within a process. Stores given as URLs
    (``s3://...``) are not locked. On a network filesystem without ``flock`` support
    the lock only excludes writers on the same machine."""
    store = _store_path(store)
    if "://" in store or store in _HELD:
        if store in _HELD:
            _HELD[store][1] += 1
        try:
            yield
        finally:
            if store in _HELD:
                _HELD[store][1] -= 1
        return
    path = Path(store + ".lock")
    if not path.parent.is_dir():
        raise SweepError(f"{store}: folder {path.parent} does not exist; allowed: a store path "
                         f"in an existing folder")
    f = open(path, "a+")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise SweepError(f"{store}: is being written by another sweep ({holder}, lock "
                         f"{path}); allowed: one writer per store (wait for it, or use "
                         f"another --out)") from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    f.flush()
    _HELD[store] = [f, 1]
    try:
        yield
    finally:
        _HELD[store][1] -= 1
        if _HELD[store][1] == 0:
            del _HELD[store]
            f.close()                           # closing the file releases the lock


# ----------------------------------------------------------------------------- integrity

def chunk_digest(values: dict[str, np.ndarray]) -> int:
    """64-bit BLAKE2b digest of a chunk's data (every array, by name; strings by their
    text, numbers by their bytes), recorded when the chunk is written and compared
    when a rerun verifies it."""
    h = hashlib.blake2b(digest_size=8)
    for k in sorted(values):
        a = np.asarray(values[k])
        h.update(k.encode() + b"\0")
        if a.dtype.kind in "OUT":
            h.update("\x1f".join(str(x) for x in a.ravel().tolist()).encode())
        else:
            h.update(a.dtype.str.encode() + np.ascontiguousarray(a).tobytes())
    return int.from_bytes(h.digest(), "little") & ((1 << 63) - 1)    # fits int64


def _data_names(arrays: dict, dims) -> list[str]:
    return sorted(k for k, a in arrays.items() if tuple(a.metadata.dimension_names or ()) == dims)


def _read_marker(arr, i: int) -> int:
    """One chunk's marker (0 when missing, truncated or unreadable)."""
    try:
        return int(np.asarray(arr[i:i + 1])[0])
    except Exception:          # a damaged marker file: the chunk counts as not done
        return 0


def _markers(g, n: int) -> np.ndarray:
    arr = g["sweep_chunk_run"]
    try:
        return np.asarray(arr[:], dtype=np.int64)
    except Exception:          # some marker file is damaged: read them one by one
        return np.array([_read_marker(arr, i) for i in range(n)], dtype=np.int64)


def verify_chunk(i: int, store: str, layout: Layout, dims: tuple) -> bool:
    """Does chunk ``i`` read back exactly as written (recorded digest and valid count)?"""
    try:
        arrays = _arrays(store)
        one = slice(i, i + 1)
        want = int(np.asarray(arrays["sweep_chunk_digest"][one])[0])
        n_valid = int(np.asarray(arrays["sweep_chunk_valid"][one])[0])
        region = layout.region(i)
        names = _data_names(arrays, dims)
        values = dict(zip(names, _pool().map(lambda k: np.asarray(arrays[k][region]), names)))
    except Exception:          # a damaged or missing file: recompute the chunk
        return False
    return chunk_digest(values) == want and int(np.count_nonzero(values["valid"])) == n_valid


# ----------------------------------------------------------------------------- store

def prepare_store(space, store, chunk: int | None = None) -> tuple[Layout, int, list[int]]:
    """Create the store or check it belongs to ``space``: (layout, run number, chunks to do).

    An existing store must hold every array it was made with (``sweep_arrays``);
    otherwise its skeleton is made again and every chunk recomputed. Chunks whose
    marker is missing or unreadable are to do; chunks marked done are verified
    against their digest by ``run_sweep`` (``verify_chunk``)."""
    store = _store_path(store)
    if "://" not in store and Path(store).is_file():
        raise SweepError(f"{store}: exists and is a file; allowed: a new path or a store "
                         f"written by 'lightpath sweep'")
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
    if g is not None and attrs.get("sweep_ready") and _complete(g, attrs):
        layout = Layout.for_grid(shape, int(attrs["sweep_chunk_points"]))
        runs = _markers(g, layout.n_chunks)
        todo = [int(i) for i in np.flatnonzero(runs <= 0)]
        return layout, int(runs.max(initial=0)) + 1, todo
    if chunk is None and isinstance(attrs.get("sweep_chunk_points"), int):
        chunk = attrs["sweep_chunk_points"]           # a damaged store is made again alike
    return _create(space, store, Layout.for_grid(shape, chunk_size(space, chunk)))


def _complete(g, attrs) -> bool:
    """Every array the store was made with is there and its metadata opens."""
    want = attrs.get("sweep_arrays")
    if not isinstance(want, list):
        return False
    try:
        have = {k for k, _ in g.arrays()}
    except Exception:
        return False
    return set(want) <= have


def _create(space, store: str, layout: Layout) -> tuple[Layout, int, list[int]]:
    import zarr
    ds, strings = _template(space, layout)
    dims = tuple(v.name for v in space.variables)
    enc = {k: {"chunks": layout.zarr_chunks} for k, v in ds.variables.items() if v.dims == dims}
    enc.update({k: {"chunks": (1,)} for k in BOOKKEEPING})     # one file per chunk marker
    ds.to_zarr(store, mode="w", compute=False, consolidated=False, encoding=enc)
    g = zarr.open_group(store, mode="r+", use_consolidated=False)
    for k, (vdims, shp, chunks, values, attrs) in strings.items():
        arr = g.create_array(k, shape=shp, chunks=chunks, dtype=str, fill_value="",
                             dimension_names=vdims, attributes=attrs)
        if values is not None:
            arr[...] = np.asarray(values, dtype=object)
    g.attrs["sweep_arrays"] = sorted(k for k, _ in g.arrays())
    g.attrs["sweep_store_id"] = uuid.uuid4().hex      # a new skeleton: workers reopen it
    g.attrs["sweep_ready"] = True                 # last: the skeleton is complete
    return layout, 1, list(range(layout.n_chunks))


def compute_chunk(i: int, space, store: str, layout: Layout, run: int,
                  names=None) -> tuple[int, int, int]:
    """Evaluate chunk ``i`` and make it durable: data, then valid count and digest, then
    the marker (the run number). ``names``: the metrics the store holds (default: those
    ``[sweep] store`` selects); ``reason`` is stored as integer codes."""
    if names is None:
        names = list(_probe(space, reason_codes=True).data_vars)
    ds = evaluate_chunk(space, layout, i, names, reason_codes=True)
    n_valid = int(np.count_nonzero(ds["valid"].values))
    one = (slice(i, i + 1),)
    arrays = _arrays(store)
    values = {k: np.asarray(v.values, dtype=arrays[k].dtype) if v.dtype.kind not in "OUT"
              else v.values for k, v in ds.variables.items()}
    _write(arrays, [(layout.region(i), values),
                    (one, {"sweep_chunk_valid": np.array([n_valid]),
                           "sweep_chunk_digest": np.array([chunk_digest(values)])}),
                    (one, {"sweep_chunk_run": np.array([run], dtype=np.int32)})])
    return i, int(ds["valid"].size), n_valid


_ARRAYS: dict = {}     # per process: (store, store id) -> {name: zarr.Array}
_POOL = None


def _arrays(store: str) -> dict:
    """The store's arrays, opened once per process and skeleton."""
    g = _open_group(store, mode="r+")
    if g is None:
        raise SweepError(f"{store}: cannot be opened for writing")
    key = (store, g.attrs.get("sweep_store_id"))
    if key not in _ARRAYS:
        _ARRAYS.clear()
        _ARRAYS[key] = dict(g.arrays())
    return _ARRAYS[key]


def _pool():
    """Threads for concurrent reads and writes of many arrays (zarr's synchronous API)."""
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor
        _POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="zarr-io")
    return _POOL


def _write(arrays: dict, steps) -> None:
    """Each step ``(region, {name: value})`` in order; within a step, arrays concurrently
    (zarr's public synchronous API from a thread pool)."""
    def put(item):
        k, v = item
        arrays[k][region] = v
    for region, values in steps:
        list(_pool().map(put, values.items()))


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
    """Compute the missing chunks of ``store`` on ``client``: a ``dask.distributed`` client or
    a local process pool (``explore.sweep.pool.local_pool``).

    Holds the store's lock for the whole run; first verifies every chunk marked done
    (on the cluster: each reads back and compares its digest), then computes the
    missing and damaged ones, then writes consolidated metadata."""
    from tqdm.auto import tqdm   # a widget in Jupyter, text on a terminal
    import zarr
    space = _space(space)
    store = _store_path(store)
    t0 = time.perf_counter()
    with store_lock(store):
        layout, run, todo = prepare_store(space, store, chunk)
        dims = tuple(v.name for v in space.variables)
        done = sorted(set(range(layout.n_chunks)) - set(todo))
        if done:
            checks = pool.submit_all(client, verify_chunk, done, store=store, layout=layout,
                                     dims=dims)
            ok = pool.gather(client, checks)
            todo = sorted(todo + [i for i, good in zip(done, ok) if not good])
        before = layout.n_chunks - len(todo)
        names = list(_probe(space, reason_codes=True).data_vars)
        futures = pool.submit_all(client, compute_chunk, todo, space=space, store=store,
                                  layout=layout, run=run, names=names)
        points = 0
        bar = tqdm(total=layout.n_chunks, initial=before, unit="chunk", disable=not progress,
                   desc="sweep", dynamic_ncols=True)
        try:
            for fut in pool.completed(client, futures):
                _, n, _ = fut.result()
                points += n
                bar.update(1)
        except BaseException:
            pool.cancel(client, futures)
            raise
        finally:
            bar.close()
        g = zarr.open_group(store, mode="r", use_consolidated=False)
        valid = int(np.asarray(g["sweep_chunk_valid"][:]).sum())
        _consolidate(store)
    return SweepReport(store, layout.points, layout.n_chunks, before, len(todo), points, valid,
                       time.perf_counter() - t0)


def _consolidate(store: str) -> None:
    """Consolidated metadata (one read to open the store) once every chunk is written."""
    import warnings
    import zarr
    with warnings.catch_warnings():      # zarr: consolidated metadata is not in the v3 spec yet
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(store)


def open_sweep(store) -> xr.Dataset:
    """A finished (or partial) sweep store as a lazy Dataset, bookkeeping dropped."""
    store = _store_path(store)
    if _open_group(store) is None:
        raise SweepError(f"{store}: not a Zarr store")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # zarr: consolidated metadata not in the v3 spec yet
        ds = xr.open_zarr(store, consolidated=None, drop_variables=list(BOOKKEEPING))
    for k in ("sweep_ready", "sweep_arrays", "sweep_store_id"):
        ds.attrs.pop(k, None)
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
    """A ``LocalCluster`` of ``workers`` processes (default: all cores), one thread each; each
    worker loads the evaluation stack as it starts (``explore.sweep.warmup``)."""
    import dask
    from distributed import LocalCluster
    env = {f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in WORKER_ENV.items()}
    kwargs.setdefault("preload", ["explore.sweep.warmup"])
    with dask.config.set(env):
        return LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                            processes=True, dashboard_address=None, **kwargs)


def sweep(space, store=None, *, chunk: int | None = None, client=None, workers: int | None = None,
          progress: bool = False) -> xr.Dataset:
    """The full grid of ``space`` (a Space, a space file or its dict) as an xarray Dataset.

    Without ``store``: lazily dask-backed (compute with any dask scheduler). With
    ``store``: computed into that Zarr store (resuming it if it holds part of the same
    space) on ``client`` (a ``dask.distributed`` client or a process pool), else the
    current ``dask.distributed`` client, else a local process pool of ``workers``
    processes (``explore.sweep.pool``); returns the store opened lazily.
    """
    space = _space(space)
    if store is None:
        return lazy_sweep(space, chunk)
    if client is None:
        from distributed import get_client
        try:
            client = get_client()
        except ValueError:
            with pool.local_pool(workers) as ex:
                run_sweep(space, store, ex, chunk, progress)
            return open_sweep(store)
    run_sweep(space, store, client, chunk, progress)
    return open_sweep(store)
