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


# ----------------------------------------------------------------------------- integrity

def _chunk_file(out: Path, name: str, lay: Layout, i: int) -> Path:
    key = "/".join(str(s.start // c) for s, c in zip(lay.region(i), lay.zarr_chunks))
    return out / name / "c" / key


@pytest.mark.parametrize("damage", ["truncated data chunk", "deleted string chunk",
                                    "deleted array metadata", "marker truncated to 3 bytes",
                                    "deleted digest chunk"])
def test_damaged_store_is_detected_and_recomputed(damage, space, reference, cluster, tmp_path):
    import shutil
    out = tmp_path / "damaged.zarr"
    shutil.copytree(reference[0], out)
    lay = Layout.for_grid([v.size for v in space.variables], CHUNK)
    if damage == "truncated data chunk":
        f = _chunk_file(out, "step_time_s", lay, 3)
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    elif damage == "deleted string chunk":
        # Zarr writes no chunk that equals the fill value (all designs valid: every reason ""),
        # so damage a chunk that holds some invalid design's reason
        files = [f for f in (_chunk_file(out, "reason", lay, i) for i in range(lay.n_chunks)) if f.exists()]
        assert files, "the reference sweep has no invalid design"
        files[0].unlink()
    elif damage == "deleted array metadata":
        (out / "mfu" / "zarr.json").unlink()
    elif damage == "marker truncated to 3 bytes":
        f = out / "sweep_chunk_run" / "c" / "5"
        f.write_bytes(f.read_bytes()[:3])
    elif damage == "deleted digest chunk":
        (out / "sweep_chunk_digest" / "c" / "2").unlink()
    rep = run_sweep(space, out, cluster[1])
    want = {"truncated data chunk": 1, "deleted string chunk": 1, "marker truncated to 3 bytes": 1,
            "deleted digest chunk": 1, "deleted array metadata": lay.n_chunks}[damage]
    assert rep.chunks_computed == want
    xr.testing.assert_identical(open_sweep(out).load(), reference[1])
    assert run_sweep(space, out, cluster[1]).chunks_computed == 0     # and now it is whole


def test_a_second_writer_is_refused(space_file, space, tmp_path, capsys):
    out = tmp_path / "locked.zarr"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from explore.sweep import store_lock\n"
         f"with store_lock({str(out)!r}):\n    print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == b"held"
        rc = main(["sweep", str(space_file), "--out", str(out), "--workers", "1", "--no-progress"])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and len(err.splitlines()) == 1, err
        assert "being written by another sweep" in err and f"pid {holder.pid}" in err
        assert not out.exists()                                 # refused before any work
        with pytest.raises(SweepError, match="another sweep"):
            run_sweep(space, out, client=None)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    from explore.sweep import store_lock                        # released when the holder ends
    with store_lock(out):
        pass


@pytest.mark.slow          # two CLI processes, each with its own cluster (~40 s)
def test_two_sweeps_started_together_one_wins(space_file, reference, tmp_path):
    out = tmp_path / "race.zarr"
    cmd = [sys.executable, "-m", "explore.cli", "sweep", str(space_file), "--out", str(out),
           "--chunk", str(CHUNK), "--workers", "1", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for _ in range(2)]
    res = [(p.wait(timeout=300), p.stderr.read().decode()) for p in procs]
    codes = sorted(rc for rc, _ in res)
    assert codes == [0, 2], res
    loser = next(err for rc, err in res if rc == 2).strip()
    assert "being written by another sweep" in loser and "Traceback" not in loser
    xr.testing.assert_identical(open_sweep(out).load(), reference[1])


def test_out_that_is_a_file_is_refused_before_the_work(space_file, tmp_path, capsys):
    f = tmp_path / "result.zarr"
    f.write_text("precious")
    for out in (f, space_file):
        rc = main(["sweep", str(space_file), "--out", str(out), "--no-progress"])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and len(err.splitlines()) == 1 and "is a file" in err
    assert f.read_text() == "precious" and space_file.read_text() == SPACE


def test_finished_store_has_consolidated_metadata_and_no_private_zarr_api(reference):
    import json
    meta = json.loads((reference[0] / "zarr.json").read_text())
    assert "step_time_s" in meta["consolidated_metadata"]["metadata"]
    assert meta["attributes"]["objective_names"] == ["time_to_train_s", "energy_per_token_j",
                                                     "cost_per_token_usd"]
    for src in (ROOT / "explore").rglob("*.py"):
        assert "zarr.core" not in src.read_text(), src


def test_pareto_of_a_sweep_store_on_the_command_line(reference, capsys):
    out, ds = reference
    front = ds.lightpath.pareto()
    assert main(["pareto", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"{front.sizes['design']} Pareto designs of 240 grid points" in text


def test_local_cluster_workers_start_with_the_compiled_kernels_loaded(cluster):
    """explore.sweep.warmup is preloaded: each worker has numba and the select and column-scan
    kernels before its first chunk (not loaded in it)."""
    def loaded():
        import sys
        card = sys.modules.get("explore.model.cardinality")
        sel = sys.modules.get("hwmodels.select")
        return ("numba" in sys.modules and sel is not None and sel._kernel is not None
                and card is not None and card._scan is not None)
    got = cluster[1].run(loaded)
    assert len(got) == 2 and all(got.values())


# ----------------------------------------------------------------------------- local process pool

def test_local_pool_store_equals_the_cluster_store_and_resumes(space, reference, tmp_path):
    """The default on one machine (no Dask client): the same store, bit for bit, as the Dask
    cluster's, and a rerun after chunks are lost recomputes exactly those."""
    import zarr
    from explore.sweep import local_pool
    out = tmp_path / "pool.zarr"
    ds = sweep(space, out, chunk=CHUNK, workers=2)          # no client: a local process pool
    xr.testing.assert_identical(ds.load(), reference[1])
    g = zarr.open_group(str(out), mode="r+", use_consolidated=False)
    runs = np.asarray(g["sweep_chunk_run"][:])
    runs[:2] = 0                                            # two chunks 'never finished'
    g["sweep_chunk_run"][:] = runs
    with local_pool(2) as ex:
        rep = run_sweep(space, out, ex)
    assert rep.chunks_computed == 2 and rep.chunks_before == rep.chunks - 2
    xr.testing.assert_identical(open_sweep(out).load(), reference[1])
