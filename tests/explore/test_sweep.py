"""Sweeps: chunk layout, lazy grid = direct evaluation, Zarr store on a real 2-process
LocalCluster, resume after SIGKILL without recomputing finished chunks, refusals."""
from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings, strategies as st

import explore  # noqa: F401  (registers the accessor)
from explore.cli.main import main
from explore.search.space import load_space
from explore.sweep import (Layout, SweepError, evaluate_chunk, lazy_sweep, local_cluster,
                           open_sweep, prepare_store, run_sweep, sweep)

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "studies" / "scenarios" / "gpt3-175b-1024-a100.toml"
SPACE = f"""name = "test sweep"
base = "{BASE}"
[variables]
tp = {{ field = "parallelism.tp", values = [2, 4, 8] }}
pp = {{ field = "parallelism.pp", values = [4, 8, 16, 32] }}
acc = {{ field = "system.accelerator", choices = ["a100-sxm-80gb", "h100-sxm-80gb"] }}
mb = {{ field = "parallelism.microbatch", low = 1, high = 2 }}
pue = {{ field = "datacenter.pue", low = 1.05, high = 1.4, points = 5 }}
[derived]
"parallelism.dp" = "system.devices / (parallelism.tp * parallelism.pp)"
"""
CHUNK = 20       # 240 points -> 12 chunks of shape (1, 1, 2, 2, 5)


@pytest.fixture(scope="module")
def space_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("space") / "space.toml"
    p.write_text(SPACE)
    return p


@pytest.fixture(scope="module")
def space(space_file):
    return load_space(space_file)


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client
    with local_cluster(2) as c, Client(c) as client:       # a real LocalCluster, 2 processes
        yield c, client


@pytest.fixture(scope="module")
def reference(space, cluster, tmp_path_factory):
    """An uninterrupted sweep into a store (computed once for the module)."""
    out = tmp_path_factory.mktemp("ref") / "ref.zarr"
    ds = sweep(space, out, chunk=CHUNK, client=cluster[1])
    return out, ds.load()


# ----------------------------------------------------------------------------- layout

@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 7), min_size=1, max_size=4),
       chunk=st.integers(1, 400))
def test_layout_chunks_partition_the_flat_index(shape, chunk):
    lay = Layout.for_grid(shape, chunk)
    pos = 0
    for i in range(lay.n_chunks):
        start, stop = lay.flat_range(i)
        assert start == pos and stop > start
        assert stop - start <= chunk
        reg = lay.region(i)
        block = np.arange(math.prod(shape)).reshape(shape)[reg]
        np.testing.assert_array_equal(block.ravel(), np.arange(start, stop))
        pos = stop
    assert pos == math.prod(shape)
    assert tuple(map(sum, lay.dask_chunks)) == tuple(shape)


def test_layout_uses_the_largest_contiguous_block():
    lay = Layout.for_grid((10, 6, 5), 64)
    assert lay.zarr_chunks == (2, 6, 5) and lay.chunk_points == 60 and lay.n_chunks == 5
    lay = Layout.for_grid((10, 6, 5), 12)
    assert lay.zarr_chunks == (1, 2, 5) and lay.chunk_points == 10 and lay.n_chunks == 30
    assert Layout.for_grid((10, 6, 5), 10_000).zarr_chunks == (10, 6, 5)
    assert Layout.for_grid((3, 100), 7).zarr_chunks == (1, 7)


# ----------------------------------------------------------------------------- lazy grid

def test_lazy_sweep_equals_direct_evaluation(space):
    ds = lazy_sweep(space, CHUNK)
    assert ds["mfu"].chunks is not None                     # dask-backed, nothing computed yet
    got = ds.compute(scheduler="sync")
    dims = [v.name for v in space.variables]
    assert list(got["mfu"].dims) == dims
    assert list(got["acc"].values) == ["a100-sxm-80gb", "h100-sxm-80gb"]
    mesh = np.meshgrid(*[v.grid_values() for v in space.variables], indexing="ij")
    direct = space.evaluate({v.name: m.ravel() for v, m in zip(space.variables, mesh)})
    shape = got["mfu"].shape
    for k in ("step_time_s", "mfu", "cost_per_token_usd", "valid", "parallelism_dp"):
        np.testing.assert_array_equal(got[k].values, direct[k].values.reshape(shape))
    np.testing.assert_array_equal(got["reason"].values.astype(str),
                                  direct["reason"].values.astype(str).reshape(shape))
    assert 0 < int(got["valid"].sum()) < got["valid"].size
    assert got["time_to_train_s"].attrs["units"] == "s"
    assert got["pue"].attrs["field"] == "datacenter.pue"
    assert got.attrs["space_source"] == space.source_text
    assert got.attrs["space_fingerprint"] == space.fingerprint


def test_memory_is_bounded_by_the_chunk(space):
    """No evaluate call ever sees more than one chunk of points."""
    sizes = []

    class Recording:
        def __init__(self, s):
            self._s = s

        def __getattr__(self, k):
            return getattr(self._s, k)

        def evaluate(self, cols):
            sizes.append(max(np.asarray(c).size for c in cols.values()))
            return self._s.evaluate(cols)

    rec = Recording(space)
    lay = Layout.for_grid([v.size for v in space.variables], 7)
    for i in range(lay.n_chunks):
        evaluate_chunk(rec, lay, i)
    assert max(sizes) <= 7 and sum(sizes) == lay.points


# ----------------------------------------------------------------------------- store

def test_store_on_local_cluster_equals_lazy_sweep(space, reference):
    out, ds = reference
    lazy = lazy_sweep(space, CHUNK).compute(scheduler="sync")
    xr.testing.assert_identical(ds, lazy)
    assert ds.attrs["space_fingerprint"] == space.fingerprint


def test_rerun_of_a_finished_store_computes_nothing(space, reference, cluster):
    out, ds = reference
    rep = run_sweep(space, out, cluster[1])
    assert rep.chunks_computed == 0 and rep.chunks_before == rep.chunks
    assert rep.feasible == int(ds["valid"].sum())
    xr.testing.assert_identical(open_sweep(out).load(), ds)


def test_store_of_another_space_is_refused(space_file, reference, tmp_path, capsys):
    out, _ = reference
    other = tmp_path / "other.toml"
    other.write_text(SPACE.replace("points = 5", "points = 6"))
    with pytest.raises(SweepError, match="another space"):
        prepare_store(load_space(other), out)
    assert main(["sweep", str(other), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "another space" in err and len(err.splitlines()) == 1


def test_non_sweep_paths_are_refused(space, tmp_path):
    d = tmp_path / "notzarr"
    d.mkdir()
    (d / "x.txt").write_text("hello")
    with pytest.raises(SweepError, match="not a Zarr store"):
        prepare_store(space, d)
    plain = tmp_path / "plain.zarr"
    xr.Dataset({"a": ("x", np.arange(3))}).to_zarr(plain, consolidated=False)
    with pytest.raises(SweepError, match="not a lightpath sweep"):
        prepare_store(space, plain)
    with pytest.raises(SweepError, match="sweep.chunk"):
        prepare_store(space, tmp_path / "new.zarr", chunk=0)


def _runs(out: Path):
    import zarr
    try:
        return np.asarray(zarr.open_group(str(out), mode="r")["sweep_chunk_run"][:])
    except Exception:       # store not created yet, or a marker being written right now
        return None


def test_sigkill_mid_sweep_then_resume(space_file, space, reference, cluster, tmp_path, capsys):
    out = tmp_path / "killed.zarr"
    cmd = [sys.executable, "-c", "import sys; from explore.cli.main import main; sys.exit(main(sys.argv[1:]))",
           "sweep", str(space_file), "--out", str(out),
           "--chunk", str(CHUNK), "--workers", "2", "--no-progress"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=ROOT)
    deadline = time.monotonic() + 120
    runs = None
    while time.monotonic() < deadline:
        runs = _runs(out)
        if runs is not None and (runs > 0).sum() >= 3:
            break
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)          # the CLI and its cluster's processes
    proc.wait()
    for _ in range(200):                          # wait until the whole group is gone
        try:
            os.killpg(proc.pid, 0)
            time.sleep(0.05)
        except ProcessLookupError:
            break
    runs1 = _runs(out)
    done1 = runs1 > 0
    assert 3 <= done1.sum() < done1.size, "the sweep should be killed mid-way"
    lay = Layout.for_grid([v.size for v in space.variables], CHUNK)

    def chunk_file(i):
        # zarr writes no file for a chunk that is all fill value: step_time_s is all NaN when
        # every point is invalid, reason all "" when every point is valid; one of them exists
        key = "/".join(str(s.start // c) for s, c in zip(lay.region(i), lay.zarr_chunks))
        f = out / "step_time_s" / "c" / key
        return f if f.exists() else out / "reason" / "c" / key
    stamps = {i: chunk_file(i).stat().st_mtime_ns for i in np.flatnonzero(done1)}

    rc = main(["sweep", str(space_file), "--out", str(out), "--scheduler",   # same command,
               cluster[0].scheduler_address, "--no-progress"])                # existing cluster
    assert rc == 0
    text = capsys.readouterr().out
    assert f"{int(done1.sum())} done before" in text and "240 points" in text
    assert "feasible" in text and "points/s" in text
    runs2 = _runs(out)
    assert (runs2[done1] == 1).all()              # finished chunks were not recomputed
    assert (runs2[~done1] == 2).all()             # every missing chunk was, by the rerun
    assert {i: chunk_file(i).stat().st_mtime_ns for i in stamps} == stamps
    xr.testing.assert_identical(open_sweep(out).load(), reference[1])


def test_local_cluster_workers_get_the_malloc_settings(cluster):
    from explore.sweep import WORKER_ENV
    got = cluster[1].run(lambda: os.environ.get("MALLOC_MMAP_THRESHOLD_"))   # worker's environ
    assert len(got) == 2 and set(got.values()) == {WORKER_ENV["MALLOC_MMAP_THRESHOLD_"]}


def test_store_killed_while_being_created_is_made_again(space, tmp_path):
    import zarr
    out = tmp_path / "half.zarr"
    lay, run, todo = prepare_store(space, out, CHUNK)
    g = zarr.open_group(str(out), mode="r+")
    del g.attrs["sweep_ready"]                   # as if killed before the skeleton was complete
    del g["sweep_chunk_run"]
    lay2, run2, todo2 = prepare_store(space, out, CHUNK)
    assert (lay2, run2, todo2) == (lay, 1, list(range(lay.n_chunks)))
    assert zarr.open_group(str(out), mode="r").attrs["sweep_ready"] is True
