"""Where a sweep's chunks run: a local process pool on one machine, or a Dask cluster.

One machine does not need a distributed scheduler: ``local_pool`` is a
``concurrent.futures.ProcessPoolExecutor`` of ``workers`` processes (spawned, each
loading the evaluation stack once, ``explore.sweep.warmup``, with the malloc settings of
``explore.allocator.keep_freed_memory``). Measured on the shipped 1e7-point space (2 cores):
the chunk work of two plain processes reaches ~1e6 points/s, while two Dask workers of a
``LocalCluster`` spent ~10 % more CPU and their scheduler another ~2.5 CPU-s (README
"Sweeps"). A ``dask.distributed`` client (``--scheduler``, or any current client) is used
when one machine is not enough; ``run_sweep`` takes either, through the four calls below.
"""
from __future__ import annotations

import os
from concurrent.futures import Executor


def _init_worker() -> None:
    """Runs once in each pool process: malloc settings, then the evaluation stack."""
    from explore.allocator import keep_freed_memory
    from explore.sweep.warmup import dask_setup
    keep_freed_memory()
    dask_setup()


def _noop() -> None:
    return None


def local_pool(workers: int | None = None, wait: bool = False) -> Executor:
    """A process pool of ``workers`` processes (default: all cores), spawned (no fork of a
    process that may hold threads). The workers start at once and warm up in the
    background (one no-op task each is queued), so their start-up overlaps whatever the
    caller does next instead of the first chunks; ``wait``: return once every worker is up
    (as a ``LocalCluster`` does), so a sweep's reported rate excludes the start-up."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    n = workers or os.cpu_count() or 1
    ex = ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_init_worker)
    ready = [ex.submit(_noop) for _ in range(n)]
    if wait:
        for f in ready:
            f.result()
    return ex


def is_pool(client) -> bool:
    return isinstance(client, Executor)


def submit_all(client, fn, items, **kwargs) -> list:
    """``fn(item, **kwargs)`` for every item, as futures of ``client`` (pool or Dask)."""
    if is_pool(client):
        return [client.submit(fn, i, **kwargs) for i in items]
    return client.map(fn, items, pure=False, **kwargs)


def gather(client, futures) -> list:
    if is_pool(client):
        return [f.result() for f in futures]
    return client.gather(futures)


def completed(client, futures):
    """The futures as they finish (each released once read, on Dask)."""
    if is_pool(client):
        from concurrent.futures import as_completed
        yield from as_completed(futures)
        return
    from distributed import as_completed
    for fut in as_completed(futures):
        yield fut
        fut.release()


def cancel(client, futures) -> None:
    if is_pool(client):
        for f in futures:
            f.cancel()
    else:
        client.cancel(futures)
