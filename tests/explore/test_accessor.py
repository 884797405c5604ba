"""``ds.lightpath``: Pareto fronts against brute force, on n-D grids and 1-D results."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings, strategies as st

import explore  # noqa: F401  (registers the accessor)
from explore.sweep.accessor import natural_sense, pareto_mask
from explore.scenario import ScenarioError


def brute_force(F: np.ndarray) -> np.ndarray:
    """Row i is kept iff no row j is <= in every column and < in one (O(n^2))."""
    le = (F[:, None, :] <= F[None, :, :]).all(axis=2)     # le[j, i]: j <= i everywhere
    lt = (F[:, None, :] < F[None, :, :]).any(axis=2)
    return ~(le & lt).any(axis=0)


@settings(max_examples=80, deadline=None)
@given(n=st.integers(0, 60), k=st.integers(1, 4), levels=st.integers(2, 6),
       seed=st.integers(0, 2**31 - 1))
def test_pareto_mask_equals_brute_force(n, k, levels, seed):
    F = np.random.default_rng(seed).integers(0, levels, size=(n, k)).astype(float)  # many ties
    np.testing.assert_array_equal(pareto_mask(F), brute_force(F))


def _grid(seed=0):
    rng = np.random.default_rng(seed)
    shape = (4, 3, 5)
    ds = xr.Dataset(
        {"time_to_train_s": (("a", "b", "c"), rng.uniform(1, 10, shape)),
         "cost_per_token_usd": (("a", "b", "c"), rng.uniform(1, 10, shape)),
         "mfu": (("a", "b", "c"), rng.uniform(0, 1, shape)),
         "valid": (("a", "b", "c"), rng.uniform(size=shape) < 0.7)},
        coords={"a": [1, 2, 4, 8], "b": ["x", "y", "z"], "c": np.linspace(0, 1, 5)})
    return ds


def test_pareto_on_a_grid_matches_brute_force():
    ds = _grid()
    front = ds.lightpath.pareto(["time_to_train_s", "cost_per_token_usd"])
    flat = ds.stack(p=("a", "b", "c"))
    ok = flat["valid"].values
    F = np.column_stack([flat["time_to_train_s"].values, flat["cost_per_token_usd"].values])[ok]
    want = set(map(tuple, F[brute_force(F)]))
    got = set(zip(front["time_to_train_s"].values, front["cost_per_token_usd"].values))
    assert got == want and len(want) > 0
    assert bool(front["valid"].all())
    assert np.all(np.diff(front["time_to_train_s"].values) >= 0)          # sorted
    # each selected point keeps its grid labels
    for i in range(front.sizes["design"]):
        row = front.isel(design=i)
        orig = ds.sel(a=row["a"].item(), b=row["b"].item(), c=row["c"].item())
        assert orig["time_to_train_s"].item() == row["time_to_train_s"].item()


def test_pareto_max_sense_and_one_dimensional_results():
    ds = _grid(1)
    flat = ds.stack(design=("a", "b", "c")).reset_index("design").drop_vars(["a", "b", "c"])
    flat = flat.assign_coords(design=np.arange(flat.sizes["design"]))
    assert natural_sense("mfu") == "max"
    f1 = flat.lightpath.pareto(["time_to_train_s", "mfu"])          # mfu: maximised
    fn = ds.lightpath.pareto(["time_to_train_s", "mfu"], senses=["min", "max"])
    np.testing.assert_array_equal(f1["mfu"].values, fn["mfu"].values)
    ok = flat["valid"].values
    F = np.column_stack([flat["time_to_train_s"].values, -flat["mfu"].values])
    want = np.flatnonzero(ok)[brute_force(F[ok])]
    assert set(f1["design"].values) == set(want)


def test_feasible_on_grid_and_design():
    ds = _grid(2)
    fe = ds.lightpath.feasible()
    assert fe.sizes["design"] == int(ds["valid"].sum()) and bool(fe["valid"].all())
    one = xr.Dataset({"valid": ("design", np.array([True, False, True]))},
                     coords={"design": [10, 11, 12]})
    assert list(one.lightpath.feasible()["design"].values) == [10, 12]


def test_pareto_uses_declared_objectives_and_rejects_unknowns():
    ds = _grid(3)
    ds.attrs["objectives"] = [["cost_per_token_usd", "min"], ["mfu", "max"]]
    a = ds.lightpath.pareto()
    b = ds.lightpath.pareto(["cost_per_token_usd", "mfu"], senses=["min", "max"])
    xr.testing.assert_identical(a, b)
    with pytest.raises(ScenarioError, match="did you mean 'mfu'"):
        ds.lightpath.pareto(["mfuu"])
    with pytest.raises(ScenarioError, match="senses"):
        ds.lightpath.pareto(["mfu", "cost_per_token_usd"], senses=["up", "min"])
    ds["params"] = ds["mfu"]
    with pytest.raises(ScenarioError, match="no known sense"):
        ds.lightpath.pareto(["params", "mfu"])


def test_nan_objectives_are_excluded():
    ds = xr.Dataset({"time_to_train_s": ("design", [1.0, np.nan, 3.0]),
                     "cost_per_token_usd": ("design", [3.0, 0.0, 1.0]),
                     "valid": ("design", [True, True, True])})
    assert list(ds.lightpath.pareto(["time_to_train_s", "cost_per_token_usd"])["design"].values) \
        == [0, 2]
