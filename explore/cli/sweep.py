"""``lightpath sweep SPACE.toml --out RESULT.zarr``: a full grid, resumable, on this machine or a Dask cluster.

By default a local process pool of ``--workers`` processes (``explore.sweep.pool``) runs
the chunks; ``--scheduler tcp://HOST:8786`` uses an existing Dask cluster instead (the
store path must then be reachable by every worker).
Rerunning the same command on the same ``--out`` computes only missing or damaged chunks;
a second sweep on a store being written is refused (``OUT.lock``, see ``store_lock``).
"""
from __future__ import annotations

import argparse
import logging
import sys
import warnings

from explore.cli.main import UserError, register, show_progress, with_path


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("space", help="design-space TOML file")
    p.add_argument("--out", required=True, help="Zarr store to write (or resume)")
    p.add_argument("--chunk", type=int, default=None,
                   help="points per chunk (default: [sweep] chunk of the space, else 131072)")
    p.add_argument("--workers", type=int, default=None,
                   help="worker processes on this machine (default: all cores)")
    p.add_argument("--scheduler", default=None,
                   help="address of an existing Dask scheduler, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _run(a) -> int:
    from explore.search.space import load_space
    from explore.sweep import SweepError
    from explore.sweep.store import store_lock
    from explore.scenario import ScenarioError
    from hwmodels.parts import CatalogError
    if a.workers is not None and a.workers < 1:
        raise UserError(f"sweep --workers: value {a.workers} is not allowed; allowed: an integer >= 1")
    if a.workers is not None and a.scheduler:
        raise UserError("sweep: give --workers (this machine) or --scheduler, not both")
    try:
        space = load_space(a.space)
    except (ScenarioError, CatalogError) as e:
        msg = str(e)
        raise UserError(with_path(msg, a.space)) from None
    try:
        with store_lock(a.out):      # one writer per store, for the whole run
            return _locked(a, space)
    except SweepError as e:
        raise UserError(str(e)) from None


def _locked(a, space) -> int:
    from explore.scenario import ScenarioError
    from explore.sweep import Layout, SweepError, local_pool, prepare_store, run_sweep
    try:                       # refuse a foreign store or a file before starting any cluster
        layout, run, todo = prepare_store(space, a.out, a.chunk)
    except SweepError as e:
        raise UserError(str(e)) from None
    except ScenarioError as e:   # e.g. a variable whose grid is too large to sweep
        raise UserError(with_path(str(e), a.space)) from None
    if a.chunk is not None and Layout.for_grid(layout.shape, a.chunk) != layout:
        print(f"sweep: {a.out} was started with {layout.chunk_points} points per chunk; "
              f"keeping that (--chunk {a.chunk} ignored)", file=sys.stderr)
    if a.scheduler:
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        logging.getLogger("distributed").setLevel(logging.ERROR)
        from distributed import Client
        try:
            client = Client(a.scheduler, timeout="10s")
        except (OSError, TimeoutError, ValueError) as e:
            raise UserError(f"sweep --scheduler: cannot connect to {a.scheduler!r}: {e}") from None
    else:
        client = local_pool(a.workers, wait=True)     # started like a cluster: not in the rate
    try:
        report = run_sweep(space, a.out, client, a.chunk, progress=show_progress(a.no_progress))
    except SweepError as e:
        raise UserError(str(e)) from None
    finally:
        if a.scheduler:
            client.close()
        else:
            client.shutdown(wait=True, cancel_futures=True)
    print(report.summary())
    sys.stdout.flush()
    return 0


register("sweep", "evaluate the full grid of a design space into a Zarr store (resumable)", _args, _run)
