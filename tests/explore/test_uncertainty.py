"""Uncertainty propagation (issue 14): exact reduction to the deterministic model, and
widening one input widens exactly the metrics that depend on it."""
import copy

import numpy as np
import pytest

import explore
from explore.scenario import resolve
from explore.uncertainty import Input, UncertaintyError, bands, evaluate_samples, evaluate_values
from explore.uncertainty.robust import nondominated_mask, robust_front

SCENARIO = "studies/scenarios/gpt3-175b-1024-a100.toml"


def _designs():
    sc = explore.load_scenario(SCENARIO)
    sc["parallelism"]["tp"] = np.array([4, 8, 8])
    sc["parallelism"]["pp"] = np.array([16, 8, 16])
    sc["parallelism"]["dp"] = np.array([16, 16, 8])
    return sc


def test_zero_spread_equals_deterministic():
    sc = _designs()
    det = explore.evaluate(sc)
    ds = evaluate_samples(sc, samples=4, seed=3, spread=0.0)
    assert ds.sizes == {"sample": 4, "design": 3}
    for k in det.data_vars:
        a, b = det[k].values, ds[k].values
        if a.dtype.kind == "f":
            np.testing.assert_array_equal(b, np.broadcast_to(a, b.shape))
        else:
            assert (b == a[None]).all(), k


def test_zero_spread_equals_deterministic_on_split_domains():
    """Torus and OCS designs evaluate their calls on the splits of their domain too, on their rows
    only (explore.model.fabric): with the samples' rows (calibration arrays per design) the same."""
    sc = _designs()
    sc["system"]["scale_out"]["topology"] = np.array(["torus", "ocs-reconfigurable", "fat-tree"])
    det = explore.evaluate(sc)
    ds = evaluate_samples(sc, samples=3, seed=1, spread=0.0)
    for k in ("step_time_s", "cost_per_token_usd", "energy_per_token_j"):
        np.testing.assert_array_equal(ds[k].values, np.broadcast_to(det[k].values, ds[k].shape))
    wide = evaluate_samples(sc, samples=3, seed=1)          # calibration constants drawn per row
    t = wide["step_time_s"].values
    assert np.isfinite(t).all() and (t > 0).all() and np.ptp(t[:, 1]) > 0


def _spread_metrics(sc, name, nominal, low, high):
    """Metrics whose 5-95 % band has non-zero width when only input ``name`` varies."""
    r = resolve(sc)
    inp = Input(name, nominal, dist="uniform", low=low, high=high)
    ds = evaluate_values(r, {name: inp.ppf(np.linspace(0.01, 0.99, 9))}, 9)
    b = bands(ds)
    width = (b.sel(quantile=0.95) - b.sel(quantile=0.05))
    return {k for k in width.data_vars if np.nanmax(np.abs(width[k].values)) > 0}, width


def test_widening_one_estimate_widens_exactly_its_dependents():
    sc = explore.load_scenario(SCENARIO)
    # the scale-out switch price: capex and cost only (not time, energy or carbon)
    name = "switches.quantum-2-qm9700.cost_usd"
    narrow, w1 = _spread_metrics(sc, name, 40000.0, 38000.0, 42000.0)
    wide, w2 = _spread_metrics(sc, name, 40000.0, 25000.0, 55000.0)
    expected = {"capex_usd", "capex_usd_switches", "cost_per_token_usd", "cost_per_step_usd"}
    assert narrow == wide == expected
    for k in expected:
        assert float(w2[k].max()) > 5 * float(w1[k].max())
    # the accelerator TDP: energy, power, the electricity part of cost, operational carbon; not time
    tdp, _ = _spread_metrics(sc, "accelerators.a100-sxm-80gb.tdp_w", 400.0, 300.0, 500.0)
    assert {"energy_per_token_j", "power_w", "cost_per_token_usd", "carbon_per_token_kg",
            "energy_j_accelerators_busy", "carbon_kg_operational"} <= tdp
    assert not {"step_time_s", "time_to_train_s", "capex_usd", "mfu", "embodied_carbon_kg"} & tdp


def test_calibration_constant_sampled_by_name():
    sc = explore.load_scenario(SCENARIO)
    r = resolve(sc)
    from explore.model.calibration import DEFAULT
    g = DEFAULT.gemm_efficiency     # the fitted value: the middle sample must reproduce evaluate()
    ds = evaluate_values(r, {"calibration.gemm_efficiency": np.array([0.6, g, 0.99])}, 3)
    t = ds["step_time_s"].values[:, 0]
    assert t[0] > t[1] > t[2]
    assert t[1] == pytest.approx(float(explore.evaluate(sc)["step_time_s"][0]), rel=1e-12)


def test_samples_are_seeded_and_bands_ordered():
    sc = explore.load_scenario(SCENARIO)
    a = explore.evaluate(sc, samples=16, seed=5)
    b = explore.evaluate(sc, samples=16, seed=5)
    np.testing.assert_array_equal(a["cost_per_token_usd"].values, b["cost_per_token_usd"].values)
    q = bands(a, ["cost_per_token_usd"])["cost_per_token_usd"].values[:, 0]
    assert q[0] < q[1] < q[2]


def test_scenario_uncertainty_override_and_errors():
    sc = explore.load_scenario(SCENARIO)
    sc["uncertainty"] = {"datacenter.pue": {"dist": "uniform", "low": 1.1, "high": 1.5, "source": "test"}}
    ds = evaluate_samples(sc, samples=32, seed=1)
    assert "input:scenario.datacenter.pue" in ds
    assert float(ds["input:scenario.datacenter.pue"].min()) >= 1.1
    e = ds["energy_per_token_j"].values[:, 0] / ds["input:scenario.datacenter.pue"].values
    bad = copy.deepcopy(sc)
    bad["uncertainty"] = {"switches.no-such-switch.cost_usd": {"rel": 0.1}}
    with pytest.raises(UncertaintyError, match="no-such-switch"):
        evaluate_samples(bad, samples=2)
    bad["uncertainty"] = {"datacenter.pue": {"dist": "gauss"}}
    with pytest.raises(UncertaintyError, match="dist"):
        evaluate_samples(bad, samples=2)
    assert np.all(np.isfinite(e))


def test_nondominated_mask_against_brute_force():
    rng = np.random.default_rng(0)
    F = rng.random((5, 12, 2))
    m = nondominated_mask(F)
    for s in range(5):
        for i in range(12):
            dominated = any((F[s, j] <= F[s, i]).all() and (F[s, j] < F[s, i]).any() for j in range(12) if j != i)
            assert m[s, i] == (not dominated)


def test_robust_front_probabilities():
    sc = _designs()
    out = robust_front(sc, {"time_to_train_s": "min", "cost_per_token_usd": "min"}, samples=16, seed=2)
    p = out["p_nondominated"].values
    assert p.shape == (3,) and ((p >= 0) & (p <= 1)).all() and p.max() > 0
    assert (out["cost_per_token_usd_q90"] >= out["cost_per_token_usd_median"]).all()


def test_robust_search_quantile_objective_and_nondominance(tmp_path, capsys):
    import tomllib

    from explore.search import load_space, read_result, search
    from explore.search.variables import SpaceError
    doc = tomllib.loads(open("studies/spaces/small-llama3-70b.toml").read())
    doc["objectives"] = {"time_to_train_s": "min", "cost_per_token_usd": {"sense": "min", "quantile": 0.9}}
    doc["uncertainty"] = {"samples": 8, "seed": 1}
    sp = load_space(doc)
    assert sp.objectives[1] == ("cost_per_token_usd_q90", "min")
    out = tmp_path / "r.nc"
    ds = search(sp, out=str(out), pop=16, gens=3, seed=1)
    p = ds["p_nondominated"].values
    assert ds.sizes["design"] >= 1 and ((p >= 0) & (p <= 1)).all() and p.max() > 0
    # the 90th percentile objective is at least the nominal metric's median over the same draws
    assert (ds["cost_per_token_usd_q90"].values > 0).all()
    assert "p_nondominated" in read_result(str(out))
    from explore.cli.main import main
    assert main(["pareto", str(out)]) == 0
    assert "P(nondom)" in capsys.readouterr().out
    bad = dict(doc, objectives={"time_to_train_s": {"sense": "min", "quantile": 1.5}})
    with pytest.raises(SpaceError, match="quantile"):
        load_space(bad)
    bad = dict(doc, uncertainty={"samples": 0})
    with pytest.raises(SpaceError, match="samples"):
        load_space(bad)


def test_cli_evaluate_samples_prints_bands(capsys):
    from explore.cli.main import main
    assert main(["evaluate", SCENARIO, "--samples", "16", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "16 samples" in out and "5 %" in out and "95 %" in out and "carbon_per_token_kg" in out
    assert main(["evaluate", SCENARIO, "--samples", "8", "--json"]) == 0
    import json
    obj = json.loads(capsys.readouterr().out)
    c = obj["bands"][0]["cost_per_token_usd"]
    assert c["q05"] <= c["q50"] <= c["q95"]
    assert main(["evaluate", SCENARIO, "--samples", "0"]) == 2
    assert main(["sensitivity", "no/such/file.toml"]) == 2
    assert "file not found" in capsys.readouterr().err


def test_widening_an_override_through_the_uncertainty_table():
    """The same relation through the [uncertainty] machinery: only one input varies, its cited
    range is widened, and exactly its dependents widen."""
    from explore.uncertainty import error_bars
    sc = explore.load_scenario(SCENARIO)
    name = "switches.quantum-2-qm9700.cost_usd"
    out = []
    for lo, hi in ((38000.0, 42000.0), (25000.0, 55000.0)):
        s = copy.deepcopy(sc)
        s["uncertainty"] = {name: {"dist": "uniform", "low": lo, "high": hi, "source": "test"}}
        ds = evaluate_samples(s, samples=64, seed=0, only=[name])
        b = bands(ds)
        w = b.sel(quantile=0.95) - b.sel(quantile=0.05)
        out.append({k: float(np.nanmax(np.abs(w[k].values))) for k in w.data_vars})
    dependents = {k for k, v in out[1].items() if v > 0}
    assert dependents == {"capex_usd", "capex_usd_switches", "cost_per_token_usd", "cost_per_step_usd"}
    assert all(out[1][k] > 5 * out[0][k] for k in dependents)
    med, minus, plus = error_bars(ds, "cost_per_token_usd")
    assert (minus > 0).all() and (plus > 0).all()
    with pytest.raises(UncertaintyError, match="not used"):
        evaluate_samples(sc, samples=2, only=["ocs.no-such.cost_usd"])
