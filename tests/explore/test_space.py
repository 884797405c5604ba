"""Design-space files: parsing, errors, batches, constraints and objectives."""
import copy
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings as hsettings, strategies as st

import explore
from explore.scenario import ScenarioError
from explore.search.space import Space, SpaceError, Variable, load_space

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "studies" / "scenarios" / "gpt3-175b-1024-a100.toml"
SPACES = sorted((ROOT / "studies" / "spaces").glob("*.toml"))


def small(**over) -> dict:
    doc = {
        "base": str(SCENARIO),
        "variables": {"tp": {"field": "parallelism.tp", "values": [1, 2, 4, 8]},
                      "pp": {"field": "parallelism.pp", "values": [4, 8, 16]}},
        "derived": {"parallelism.dp": "system.devices / (parallelism.tp * parallelism.pp)"},
    }
    for k, v in over.items():
        if v is None:
            doc.pop(k, None)
        else:
            doc[k] = v
    return doc


@pytest.mark.parametrize("path", SPACES, ids=lambda p: p.name)
def test_shipped_spaces_load_and_evaluate(path):
    s = load_space(path)
    cols = {v.name: v.grid_values()[:1] for v in s.variables}
    ds = s.evaluate(cols)
    assert ds.sizes["design"] == 1
    assert s.violation(ds).shape == (1, len(s.constraint_names))
    assert len(s.fingerprint) == 64 and s.source_text == path.read_text()


def test_variable_kinds_and_grids():
    s = load_space(small(variables={
        "tp": {"field": "parallelism.tp", "values": [8, 2, 4]},
        "pp": {"field": "parallelism.pp", "low": 2, "high": 5},
        "acc": {"field": "system.accelerator", "choices": ["a100-sxm-80gb", "h100-sxm-80gb"]},
        "nics": {"field": "system.scale_out.nics_per_device", "low": 0.5, "high": 4.0,
                 "log": True, "points": 4}}, derived=None))
    tp, pp, acc, nics = s.variables
    assert (tp.kind, tp.values, tp.low, tp.high) == ("int", (2, 4, 8), 2.0, 8.0)
    assert list(pp.grid_values()) == [2, 3, 4, 5] and pp.kind == "int"
    assert acc.kind == "choice" and list(acc.grid_values()) == ["a100-sxm-80gb", "h100-sxm-80gb"]
    g = nics.grid_values()
    assert nics.kind == "real" and len(g) == 4 and g[0] == pytest.approx(0.5) and g[-1] == pytest.approx(4)
    assert np.allclose(np.diff(np.log(g)), np.log(2))          # log-spaced: ratio 2 each step
    with pytest.raises(Exception):
        tp.name = "x"                                           # frozen
    assert s.grid_size() == 3 * 4 * 2 * 4


def test_batch_matches_one_at_a_time():
    s = load_space(small())
    cols = {"tp": np.array([1, 2, 4, 8, 8]), "pp": np.array([4, 8, 16, 8, 16])}
    ds = s.evaluate(cols)
    sc = s.scenario_batch(cols)
    assert list(sc["parallelism"]["dp"]) == [256, 64, 16, 16, 8]
    for i in range(5):
        one = copy.deepcopy(s.base)
        one["parallelism"].update(tp=int(cols["tp"][i]), pp=int(cols["pp"][i]),
                                  dp=int(1024 // (cols["tp"][i] * cols["pp"][i])))
        ref = explore.evaluate(one)
        for m in ("step_time_s", "cost_per_token_usd", "memory_per_device_bytes"):
            assert ds[m].values[i] == pytest.approx(ref[m].values[0], rel=1e-12, nan_ok=True)
        assert bool(ds.valid.values[i]) == bool(ref.valid.values[0])
    assert list(ds["tp"].values) == [1, 2, 4, 8, 8]             # decision variables as coords


def test_derived_non_integer_marks_design_invalid_not_error():
    s = load_space(small(variables={"tp": {"field": "parallelism.tp", "values": [8]},
                                    "pp": {"field": "parallelism.pp", "values": [3, 8]}}))
    ds = s.evaluate({"tp": np.array([8, 8]), "pp": np.array([3, 8])})
    assert not ds.valid.values[0] and "derived parallelism.dp" in str(ds.reason.values[0])
    assert ds.valid.values[1]
    g = s.violation(ds)
    assert g[0, 0] > 0 and g[1, 0] <= 0


def test_objective_signs_and_constraints():
    s = load_space(small(objectives={"mfu": "max", "cost_per_token_usd": "min"},
                         constraints={"power_w": {"max": 1.0}}))
    ds = s.evaluate({"tp": np.array([8]), "pp": np.array([8])})
    f = s.objective_values(ds)
    assert f[0, 0] == pytest.approx(ds.mfu.values[0]) and f[0, 0] > 0   # the user's sign
    assert list(s.signs) == [-1.0, 1.0]
    g = s.violation(ds)
    assert s.constraint_names == ["valid", "power_w"]
    assert g[0, 0] <= 0 and g[0, 1] == pytest.approx(ds.power_w.values[0] - 1.0)


def test_capex_budget_sets_devices():
    budget = 1.5e8
    s = load_space(small(couplings={"capex_budget_usd": budget,
                                    "device_multiple": "parallelism.tp * parallelism.pp * 8"},
                         derived={"parallelism.dp": "system.devices / (parallelism.tp * parallelism.pp)",
                                  "training.global_batch": "parallelism.dp * 4"}))
    cols = {"tp": np.array([8, 4, 2]), "pp": np.array([8, 8, 16])}
    ds = s.evaluate(cols)
    dev = ds["system_devices"].values
    assert (dev % (cols["tp"] * cols["pp"] * 8) == 0).all()
    assert ds.valid.values.all()
    assert (ds["training_global_batch"].values == 4 * dev // (cols["tp"] * cols["pp"])).all()
    cap = ds.capex_usd.values
    assert (cap <= budget * 1.0001).all()
    # one more multiple of devices would break the budget (the count is the largest that fits)
    per_dev = cap / dev
    assert ((dev + cols["tp"] * cols["pp"] * 8) * per_dev > budget * 0.98).all()
    assert "capex_usd" in s.constraint_names


def test_expressions_are_safe():
    for bad in ("__import__('os').system('true')", "system.devices.__class__", "[1, 2]",
                "lambda: 1", "system.devices if 1 else 2"):
        with pytest.raises(SpaceError, match="not allowed|not a valid"):
            load_space(small(derived={"parallelism.dp": bad}))
    with pytest.raises(SpaceError, match="has no value"):
        load_space(small(derived={"parallelism.dp": "system.devies / 64"}))


@pytest.mark.parametrize("doc, pattern", [
    (small(variables={"tp": {"field": "parallelism.tpp", "values": [1]}}),
     r"variables.tp.field: unknown scenario field 'parallelism.tpp' \(did you mean 'parallelism.tp'\?\)"),
    (small(variables={"acc": {"field": "system.accelerator", "choices": []}}),
     r"variables.acc.choices: value \[\] is an empty"),
    (small(variables={"pp": {"field": "parallelism.pp", "low": 8, "high": 2}}),
     r"variables.pp: low = 8 > high = 2"),
    (small(objectives={"cost_per_tokn_usd": "min"}),
     r"objectives.cost_per_tokn_usd: not a numeric metric \(did you mean 'cost_per_token_usd'\?\)"),
    (small(objectives={"mfu": "maximise"}), r"objectives.mfu: value 'maximise' is not allowed"),
    (small(constraints={"power_w": {"min": 5e7, "max": 1e7}}), r"can never be met"),
    (small(constraints={"mfu": {"min": 1.5}}), r"can never be met"),
    (small(constraints={"cost_per_token_usd": {"max": -1}}), r"can never be met"),
    (small(variables={"acc": {"field": "system.accelerator", "choices": ["a100"]}}),
     r"variables.acc: system.accelerator"),
    (small(variables={"z": {"field": "parallelism.zero", "low": 0, "high": 7}}),
     r"parallelism.zero: value 7 is out of range"),
    (small(varibles={}), r"varibles: unknown key \(did you mean 'variables'\?\)"),
    (small(base=None), r"base: missing"),
])
def test_bad_spaces_are_one_line_errors(doc, pattern):
    with pytest.raises(SpaceError, match=pattern) as e:
        load_space(doc)
    assert isinstance(e.value, ScenarioError) and "\n" not in str(e.value)


def test_file_errors(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text("variables = [")
    with pytest.raises(SpaceError, match="TOML syntax error"):
        load_space(p)
    with pytest.raises(SpaceError, match="file not found"):
        load_space(tmp_path / "missing.toml")
    p.write_text(f'base = "{SCENARIO}"\n[variables.tp]\nfield = "parallelism.tp"\nvalues = [1, 8]\n')
    s = load_space(p)
    assert isinstance(s, Space) and isinstance(s.variables[0], Variable)
    assert s.objectives == [("time_to_train_s", "min"), ("energy_per_token_j", "min"),
                            ("cost_per_token_usd", "min")]


def test_constraint_on_a_derived_field():
    s = load_space(small(constraints={"parallelism.dp": {"max": 32}}))
    ds = s.evaluate({"tp": np.array([8, 1]), "pp": np.array([8, 4])})   # dp = 16, 256
    g = s.violation(ds)
    assert s.constraint_names == ["valid", "parallelism_dp"]
    assert g[0, 1] <= 0 < g[1, 1]
    assert g[1, 1] == pytest.approx((256 - 32) / 32)


def test_variables_over_inline_accelerator_fields():
    from explore.scenario import field_paths
    if "system.accelerator.hbm_stacks" not in field_paths():
        pytest.skip("parametric accelerator fields not registered")
    s = load_space(small(variables={
        "stacks": {"field": "system.accelerator.hbm_stacks", "values": [4, 6]},
        "acc": {"field": "system.accelerator", "choices": ["h100-sxm-80gb", "b200"]}}, derived=None))
    cols = {"stacks": np.array([4, 6, 4, 6]), "acc": np.array(["h100-sxm-80gb"] * 2 + ["b200"] * 2)}
    sc = s.scenario_batch(cols)
    assert sc["system"]["accelerator"]["base"].tolist() == cols["acc"].tolist()   # id -> inline table
    assert isinstance(s.base["system"]["accelerator"], str)                        # base untouched
    ds = s.evaluate(cols)
    assert ds.sizes["design"] == 4 and np.isfinite(ds["step_time_s"].values).all()


@hsettings(max_examples=8, deadline=None)
@given(st.lists(st.integers(0, 10 ** 6), min_size=2, max_size=4))
def test_random_batches_equal_one_at_a_time(seeds):
    s = load_space(ROOT / "studies" / "spaces" / "small-llama3-70b.toml")
    picks = [{v.name: v.grid_values()[sd % v.size] for v in s.variables} for sd in
             (np.random.default_rng(x).integers(0, 10 ** 6) for x in seeds)]
    batch = s.evaluate({k: np.array([p[k] for p in picks]) for k in picks[0]})
    for i, p in enumerate(picks):
        one = s.evaluate({k: np.array([v]) for k, v in p.items()})
        assert bool(one.valid.values[0]) == bool(batch.valid.values[i])
        for m in ("time_to_train_s", "cost_per_token_usd", "memory_per_device_bytes"):
            a, b = one[m].values[0], batch[m].values[i]
            assert (np.isnan(a) and np.isnan(b)) or a == pytest.approx(b, rel=1e-12)


def test_fingerprint_is_stable_and_tracks_the_base():
    a, b = load_space(small()), load_space(small())
    assert a.fingerprint == b.fingerprint
    doc = small()
    doc["base"] = explore.load_scenario(SCENARIO)
    doc["base"]["datacenter"]["pue"] = 1.3
    assert load_space(doc).fingerprint != a.fingerprint
