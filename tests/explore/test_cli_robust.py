"""The lightpath command on hostile input (issue 13): no traceback, one error line, status 2;
plus ``lightpath export`` for evaluate outputs, search results and sweep stores."""
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import xarray as xr

import explore
from explore.cli.main import main

CANONICAL = "studies/scenarios/gpt3-175b-1024-a100.toml"
ENV = {**os.environ, "PYTHONPATH": os.getcwd()}


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "explore.cli", *args], capture_output=True,
                          text=True, env=ENV, timeout=120, **kw)


def one_error_line(r):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("lightpath: error:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


def test_no_command_prints_usage_and_one_error_to_stderr():
    r = cli()
    line = one_error_line(r)
    assert "usage: lightpath" in r.stderr and r.stdout == ""
    assert "evaluate" in line and "allowed" in line


def test_version():
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("lightpath ")


def test_catalog_into_a_closed_pipe_is_quiet():
    p = subprocess.Popen([sys.executable, "-m", "explore.cli", "catalog"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=ENV)
    p.stdout.readline()
    p.stdout.close()                       # like `| head -1`
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0
    assert "BrokenPipeError" not in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["evaluate", "search", "sweep"])
def test_overlong_file_name(tmp_path, command):
    name = str(tmp_path / ("x" * 300 + ".toml"))
    line = one_error_line(cli(command, name, *(["--out", str(tmp_path / "o.zarr")] if command == "sweep" else [])))
    assert "too long" in line and len(line) < 400


def test_search_evaluations_below_one_generation_is_refused(tmp_path):
    r = cli("search", "studies/spaces/plan-gpt3-175b-1024-a100.toml", "--evaluations", "1",
            "--pop", "8", "--out", str(tmp_path / "r.nc"), "--no-progress")
    line = one_error_line(r)
    assert "evaluations" in line and "value 1" in line and ">= 8" in line
    assert not (tmp_path / "r.nc").exists()


def test_derived_division_by_zero_in_a_space_file(tmp_path):
    sp = tmp_path / "sp.toml"
    sp.write_text(f'base = "{os.path.abspath(CANONICAL)}"\n[variables]\n'
                  f'tp = {{ field = "parallelism.tp", values = [1, 8] }}\n'
                  f'[couplings]\ncapex_budget_usd = 5e7\ndevice_multiple = "1/0"\n')
    line = one_error_line(cli("search", str(sp), "--out", str(tmp_path / "r.nc")))
    assert "couplings.device_multiple" in line and "'1/0'" in line and "allowed" in line


# ----------------------------------------------------------------------------- export

def check_table(df: pd.DataFrame, ds: xr.Dataset, dims=("design",)):
    assert len(df) == int(np.prod([ds.sizes[d] for d in dims]))
    for k in ("step_time_s", "valid", "reason"):
        want = ds[k].transpose(*dims).values.ravel()
        got = df[k].to_numpy()
        if want.dtype.kind in "UOS":
            assert [str(x) for x in got] == [str(x) for x in want]
        else:
            np.testing.assert_array_equal(got.astype(want.dtype), want)


def test_export_evaluate_output(tmp_path):
    sc = explore.load_scenario(CANONICAL)
    sc["parallelism"].update(tp=np.array([8, 8, 2]), pp=np.array([8, 16, 1]), dp=np.array([16, 8, 512]))
    ds = explore.evaluate(sc)
    src = tmp_path / "ev.nc"
    ds.to_netcdf(src)
    assert main(["export", str(src), "--csv", str(tmp_path / "ev.csv"),
                 "--parquet", str(tmp_path / "ev.parquet")]) == 0
    csv = pd.read_csv(tmp_path / "ev.csv", keep_default_na=False, na_values=[""])
    par = pd.read_parquet(tmp_path / "ev.parquet")
    for df in (par,):
        check_table(df, ds)
    assert np.isnan(csv["step_time_s"][2]) and csv["parallelism_tp"].tolist() == [8, 8, 2]
    assert (par["system_devices"] == 1024).all()           # fixed inputs as constant columns
    meta = pq.read_schema(tmp_path / "ev.parquet").field("step_time_s").metadata
    assert meta[b"units"] == b"s"


def test_export_search_result_and_sweep_store(tmp_path):
    res = explore.search("studies/spaces/small-llama3-70b.toml", pop=8, gens=2, seed=1)
    src = tmp_path / "s.nc"
    from explore.search.results import write_result
    write_result(res, src)
    assert main(["export", str(src), "--parquet", str(tmp_path / "s.parquet")]) == 0
    df = pd.read_parquet(tmp_path / "s.parquet")
    assert len(df) == res.sizes["design"] > 0
    np.testing.assert_allclose(df["time_to_train_s"], res["time_to_train_s"].values)

    from explore.sweep.grid import lazy_sweep
    from explore.search.space import load_space
    space = load_space("studies/spaces/small-llama3-70b.toml")
    grid = lazy_sweep(space, 4096)
    sub = {v.name: slice(0, 2) for v in space.variables}          # a small sub-grid store
    store = tmp_path / "g.zarr"
    part = grid.isel(sub).compute(scheduler="sync")
    part.to_zarr(store)
    assert main(["export", str(store), "--csv", str(tmp_path / "g.csv")]) == 0
    df = pd.read_csv(tmp_path / "g.csv", keep_default_na=False, na_values=[""])
    check_table(df, part, tuple(v.name for v in space.variables))


def test_export_refuses_to_overwrite_its_input(tmp_path):
    src = tmp_path / "ev.nc"
    explore.evaluate(explore.load_scenario(CANONICAL)).to_netcdf(src)
    before = src.read_bytes()
    line = one_error_line(cli("export", str(src), "--csv", str(src)))
    assert "input" in line and src.read_bytes() == before
    line = one_error_line(cli("export", str(tmp_path / "missing.nc"), "--csv", str(tmp_path / "x.csv")))
    assert "not found" in line


def test_sweep_of_a_huge_grid_is_refused_before_any_work(tmp_path):
    sp = tmp_path / "sp.toml"
    sp.write_text(f'base = "{os.path.abspath(CANONICAL)}"\n[variables]\n'
                  f'pue = {{ field = "datacenter.pue", low = 1.0, high = 2.0, points = 1000000000000 }}\n')
    line = one_error_line(cli("sweep", str(sp), "--out", str(tmp_path / "g.zarr")))
    assert "variables.pue.points" in line and "allowed" in line
    assert not (tmp_path / "g.zarr").exists()
