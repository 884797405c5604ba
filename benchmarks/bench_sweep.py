"""Sweep throughput and memory: points/s with 1 and 2 workers, peak RSS of a 1e7-point sweep.

    python benchmarks/bench_sweep.py            # ~1e6-point runs with 1 and 2 workers, then 1e7
    python benchmarks/bench_sweep.py --quick    # smaller grids (a smoke run)
    python benchmarks/bench_sweep.py --huge     # only the 1e8-point grid (oversubscription x 10)
    python benchmarks/bench_sweep.py --dask     # on a dask.distributed LocalCluster instead

Each run starts a fresh local process pool (``explore.sweep.local_pool``, the default of
``lightpath sweep`` on one machine; with ``--dask`` a ``LocalCluster``) and sweeps
``studies/spaces/sweep-gpt3-175b-1024.toml`` (9,953,280 points) or a sub-grid of it
into a temporary Zarr store; points/s excludes starting the workers (printed apart). Peak
resident memory is the largest sum of RSS over this process and all its children (each
worker is a child; Dask's scheduler runs in this process), sampled every 50 ms.
Also printed: ``Space.evaluate`` alone on one chunk in this process, and the
time to write that chunk to Zarr, to show where a chunk's time goes.
"""
from __future__ import annotations

import argparse
import copy
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explore.search.space import load_space  # noqa: E402
import explore.sweep  # noqa: E402,F401
S = sys.modules["explore.sweep"]
S.grid = sys.modules["explore.sweep.grid"]

SPACE = ROOT / "studies" / "spaces" / "sweep-gpt3-175b-1024.toml"


class PeakRSS(threading.Thread):
    """Largest total RSS of this process tree, sampled every ``dt`` seconds."""

    def __init__(self, dt: float = 0.05):
        super().__init__(daemon=True)
        self.dt, self.peak, self.stop = dt, 0, threading.Event()

    def run(self):
        me = psutil.Process()
        while not self.stop.is_set():
            total = 0
            for p in [me] + me.children(recursive=True):
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            time.sleep(self.dt)


def sub_space(space, points: float):
    """The space with leading variables thinned (last values dropped) to <= ``points``."""
    s = copy.copy(space)
    s.variables = list(space.variables)
    while s.grid_size() > points:
        i = next(i for i, v in enumerate(s.variables) if v.size > 1)
        v = s.variables[i]
        if v.values:
            s.variables[i] = replace(v, values=v.values[:-1])
        elif v.kind == "int":
            s.variables[i] = replace(v, high=v.high - 1)
        else:
            s.variables[i] = replace(v, points=v.points - 1)
    s.fingerprint = f"{space.fingerprint}-sub{s.grid_size()}"
    return s


def huge_space(space):
    """The shipped space with 10x the oversubscription points: 99,532,800 points."""
    s = copy.copy(space)
    s.variables = [replace(v, points=v.points * 10) if v.name == "oversubscription" else v
                   for v in space.variables]
    s.fingerprint = f"{space.fingerprint}-huge{s.grid_size()}"
    return s


def sweep_once(space, workers: int, chunk: int, dask: bool = False) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    mon = PeakRSS()
    mon.start()
    try:
        t0 = time.perf_counter()
        if dask:
            from distributed import Client
            with S.local_cluster(workers) as cluster, Client(cluster) as client:
                client.run(lambda: __import__("explore.sweep"))        # warm the workers' imports
                start = time.perf_counter() - t0
                rep = S.run_sweep(space, tmp / "s.zarr", client, chunk)
        else:
            with S.local_pool(workers, wait=True) as ex:
                start = time.perf_counter() - t0
                rep = S.run_sweep(space, tmp / "s.zarr", ex, chunk)
        disk = sum(f.stat().st_size for f in (tmp / "s.zarr").rglob("*") if f.is_file())
    finally:
        mon.stop.set()
        mon.join()
        shutil.rmtree(tmp, ignore_errors=True)
    return {"points": rep.points, "s": rep.elapsed_s, "pps": rep.points_per_s, "start_s": start,
            "peak_rss_gb": mon.peak / 1e9, "feasible": rep.feasible / rep.points,
            "store_gb": disk / 1e9, "chunks": rep.chunks}


def chunk_profile(space, chunk: int) -> None:
    lay = S.Layout.for_grid([v.size for v in space.variables], chunk)
    names = list(S.grid._probe(space, reason_codes=True).data_vars)
    t_eval = np.inf
    for _ in range(3):
        t = time.perf_counter()
        ds = S.evaluate_chunk(space, lay, 0, names, reason_codes=True)
        t_eval = min(t_eval, time.perf_counter() - t)
    n = ds["valid"].size
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    try:
        S.prepare_store(space, tmp / "s.zarr", chunk)
        t_all = np.inf
        for _ in range(3):
            t = time.perf_counter()
            S.compute_chunk(0, space, str(tmp / "s.zarr"), lay, 1, names)
            t_all = min(t_all, time.perf_counter() - t)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"one chunk of {n:,} points, {len(names)} stored variables, in this process (best of 3): "
          f"Space.evaluate {t_eval:.2f} s "
          f"({n / t_eval:,.0f} points/s); evaluate + Zarr write {t_all:.2f} s "
          f"({n / t_all:,.0f} points/s)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--huge", action="store_true")
    ap.add_argument("--chunk", type=int, default=S.CHUNK_DEFAULT)
    ap.add_argument("--dask", action="store_true", help="a dask.distributed LocalCluster")
    a = ap.parse_args()
    space = load_space(SPACE)
    print(f"space {SPACE.name}: {space.grid_size():,} points; chunk {a.chunk:,} points; "
          f"{psutil.cpu_count()} cores; load average {psutil.getloadavg()[0]:.1f}")
    if a.huge:
        big = huge_space(space)
        r = sweep_once(big, 2, a.chunk, a.dask)
        print(f"1e8 sweep, 2 workers: {r['points']:,} points in {r['chunks']} chunks, {r['s']:.1f} s = "
              f"{r['pps']:,.0f} points/s; peak RSS {r['peak_rss_gb']:.2f} GB (target < 2 GB); "
              f"store {r['store_gb']:.2f} GB on disk; load average now {psutil.getloadavg()[0]:.1f}")
        return
    chunk_profile(space, a.chunk)
    mid = sub_space(space, 2e5 if a.quick else 1.2e6)
    for w in (1, 2):
        r = sweep_once(mid, w, a.chunk, a.dask)
        print(f"{w} worker{'s' if w > 1 else ' '}: {r['points']:>10,} points in {r['s']:6.1f} s = "
              f"{r['pps']:>9,.0f} points/s; peak RSS {r['peak_rss_gb']:.2f} GB")
    big = sub_space(space, 1e6) if a.quick else space
    r = sweep_once(big, 2, a.chunk, a.dask)
    print(f"full sweep, 2 workers ({'Dask LocalCluster' if a.dask else 'process pool'}, "
          f"started in {r['start_s']:.1f} s): {r['points']:,} points in {r['chunks']} chunks, {r['s']:.1f} s = "
          f"{r['pps']:,.0f} points/s; peak RSS {r['peak_rss_gb']:.2f} GB (target < 2 GB); "
          f"store {r['store_gb']:.2f} GB on disk; feasible {100 * r['feasible']:.1f} %")


if __name__ == "__main__":
    main()
