"""Results a user can compute on (issue 13): NaN for invalid designs, inputs as coordinates,
pint-parseable units, long names, no dotted names."""
import numpy as np
import pytest

import explore
from explore.search.space import load_space
from explore.units import registry

CANONICAL = "studies/scenarios/gpt3-175b-1024-a100.toml"


def three_plans():
    sc = explore.load_scenario(CANONICAL)
    sc["parallelism"].update(tp=np.array([8, 8, 2]), pp=np.array([8, 16, 1]), dp=np.array([16, 8, 512]))
    return sc


def test_invalid_designs_are_nan_by_default_and_raw_on_request():
    ds = explore.evaluate(three_plans())
    assert ds["valid"].values.tolist() == [True, True, False]   # tp = 2, pp = 1: 175B does not fit
    assert "memory" in str(ds["reason"].values[2])
    floats = [k for k in ds.data_vars if ds[k].dtype.kind == "f"]
    assert len(floats) > 50
    assert all(np.isnan(ds[k].values[2]) for k in floats)
    # so a plain reduction picks a valid design, without a mask
    assert float(ds["time_to_train_s"].min()) == float(ds["time_to_train_s"][:2].min())
    raw = explore.evaluate(three_plans(), keep_invalid=True)
    assert float(raw["memory_per_device_bytes"][2]) > 80e9          # what the design would need
    np.testing.assert_array_equal(raw["step_time_s"].values[:2], ds["step_time_s"].values[:2])


def test_inputs_are_coordinates():
    ds = explore.evaluate(three_plans())
    assert ds["parallelism_tp"].dims == ("design",)
    assert ds["parallelism_tp"].values.tolist() == [8, 8, 2]
    assert ds["parallelism_tp"].attrs["field"] == "parallelism.tp"
    assert ds["system_devices"].ndim == 0 and int(ds["system_devices"]) == 1024   # fixed: scalar
    assert str(ds["system_accelerator"].values) == "a100-sxm-80gb"
    assert ds["system_scale_out_bandwidth_bps"].attrs.get("units") == "bit/s" \
        if "system_scale_out_bandwidth_bps" in ds.coords else True
    assert ds["datacenter_pue"].attrs["units"] == "1"
    assert ds["training_tokens"].attrs["units"] == "token"
    # selecting by an input works like any coordinate
    assert ds.where(ds["parallelism_pp"] == 16, drop=True).sizes["design"] == 1


def every_units_attr(ds):
    return {k: ds[k].attrs["units"] for k in ds.variables if "units" in ds[k].attrs}


@pytest.mark.parametrize("accelerator", ["a100-sxm-80gb", {"base": "h100-sxm-80gb", "hbm_stacks": 6}])
def test_every_units_attribute_parses_with_pint(accelerator):
    sc = three_plans()
    sc["system"]["accelerator"] = accelerator
    ds = explore.evaluate(sc)
    units = every_units_attr(ds)
    assert len(units) > 80
    ureg = registry()
    for k, u in units.items():
        ureg.parse_units(u)   # raises on an unknown unit
    for k in ds.data_vars:
        assert "long_name" in ds[k].attrs, k
        assert "." not in k, k
    for k in ds.variables:
        assert "." not in k, k
    # the registry's custom units convert as documented
    assert (1 * ureg.FIT).to("1/hour").magnitude == pytest.approx(1e-9)
    q = float(ds["energy_per_token_j"][0]) * ureg.parse_units(ds["energy_per_token_j"].attrs["units"])
    assert q.to("kWh/token").magnitude == pytest.approx(float(ds["energy_per_token_j"][0]) / 3.6e6)


def test_space_results_nan_invalid_undotted_and_with_units():
    s = load_space("studies/spaces/plan-gpt3-175b-1024-a100.toml")
    mesh = np.meshgrid(*[np.asarray(v.grid_values()) for v in s.variables], indexing="ij")
    take = np.linspace(0, mesh[0].size - 1, 400).astype(int)
    cols = {v.name: m.ravel()[take] for v, m in zip(s.variables, mesh)}
    ds = s.evaluate(cols)
    bad = ~ds["valid"].values
    assert bad.any() and not bad.all()
    assert np.isnan(ds["time_to_train_s"].values[bad]).all()
    assert np.isfinite(ds["time_to_train_s"].values[~bad]).all()
    assert all("." not in k for k in ds.variables)
    ureg = registry()
    for u in every_units_attr(ds).values():
        ureg.parse_units(u)
    assert all("units" in ds[v.name].attrs for v in s.variables if v.kind != "choice")


def test_idle_power_and_unsupported_precision_name_the_field():
    sc = explore.load_scenario(CANONICAL)
    sc["training"]["precision"] = "fp8"                    # A100: no FP8
    r = str(explore.evaluate(sc)["reason"].values[0])
    assert "system.accelerator.peak_flops_fp8" in r and "'fp8'" in r and "allowed" in r


def test_sweep_grid_coordinates_have_units():
    from explore.sweep.grid import lazy_sweep
    s = load_space("studies/spaces/small-llama3-70b.toml")
    ds = lazy_sweep(s, 4096)
    ureg = registry()
    for v in s.variables:
        attrs = ds[v.name].attrs
        assert attrs["field"] == v.field and "long_name" in attrs
        if v.kind != "choice":
            ureg.parse_units(attrs["units"])
    for u in every_units_attr(ds).values():
        ureg.parse_units(u)
    assert all("." not in k for k in ds.variables)


@pytest.mark.parametrize("internal", [True, False])
@pytest.mark.parametrize("reason_codes", [False, True])
def test_result_built_directly_is_the_one_xarray_constructor_builds(monkeypatch, reason_codes, internal):
    """explore.evaluate builds its Dataset from its variables directly (``_dataset``): the same
    Dataset, variable for variable (values, dtypes, attrs, order, index), as ``xr.Dataset`` gives
    for the same data variables and input coordinates; also through the public constructor, which
    ``_dataset`` falls back on should an xarray release drop its internal one."""
    import importlib

    import xarray as xr
    ev = importlib.import_module("explore.evaluate")
    monkeypatch.setattr(importlib.import_module("explore.dataset"), "DIRECT_DATASET", internal)
    got = {}
    build = ev._dataset

    def spy(data, coords, n):
        got["args"] = (data, coords, n)
        return build(data, coords, n)
    monkeypatch.setattr(ev, "_dataset", spy)
    sc = three_plans()
    sc["training"]["precision"] = np.array(["bf16", "bf16", "fp8"])     # a string coordinate along design
    ds = explore.evaluate(sc, reason_codes=reason_codes)
    data, coords, n = got["args"]
    want = xr.Dataset(data, coords={"design": np.arange(n), **coords})
    want.attrs["scenario_name"] = ds.attrs["scenario_name"]
    assert ds.identical(want)
    assert list(ds.variables) == list(want.variables) and list(ds.coords) == list(want.coords)
    assert ds.indexes["design"].equals(want.indexes["design"])
    for k, var in want.variables.items():
        assert ds.variables[k].dtype == var.dtype and type(ds.variables[k].data) is type(var.data), k
    assert ds["training_precision"].dims == ("design",) and ds["system_devices"].ndim == 0
