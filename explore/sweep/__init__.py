"""Full-grid sweeps of a design space.

``grid``: the grid, its chunk layout and a lazy dask-backed grid; ``store``: resumable
Zarr stores (``sweep``, ``open_sweep``), computed on a local process pool (``pool``) or a
dask.distributed cluster; ``accessor``:
the ``ds.lightpath`` accessor (Pareto front, feasible points) on any result.
"""
from explore.sweep.grid import (CHUNK_DEFAULT, Layout, SweepError, chunk_size, evaluate_chunk,
                                grid_coords, lazy_sweep)
from explore.sweep.pool import local_pool
from explore.sweep.store import (WORKER_ENV, SweepReport, compute_chunk, local_cluster, open_sweep,
                                 prepare_store, run_sweep, store_lock, sweep, verify_chunk)
from explore.sweep import accessor  # noqa: F401  registers the ``ds.lightpath`` accessor

__all__ = ["CHUNK_DEFAULT", "Layout", "SweepError", "chunk_size", "evaluate_chunk", "grid_coords",
           "lazy_sweep", "WORKER_ENV", "SweepReport", "compute_chunk", "local_cluster", "local_pool", "open_sweep",
           "prepare_store", "run_sweep", "store_lock", "sweep", "verify_chunk"]
