"""A generated corpus of malformed inputs (issue 13): every schema field x bad values, model
shapes, physical absurdities, expressions, design spaces and API misuse.

Each case must end in exactly one of two ways:
* a ``ScenarioError`` whose message is one line naming the field, the value and what is
  allowed; or
* a result in which every valid design has finite, positive time, energy and cost, and
  every invalid design a reason (no silent nonsense).
No other exception (traceback) and no hang: every case runs under a wall-clock alarm.
``test_corpus_size`` keeps the corpus at >= 300 generated cases.
"""
from __future__ import annotations

import copy
import math
import signal
import warnings

import numpy as np
import pytest

import explore
from explore.scenario import ACCEL_EXTRA_FIELDS, ACCEL_FIELDS, SCHEMA, ScenarioError, field_spec
from explore.search.space import load_space

BASE = explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml")
ALARM_S = 20          # a case slower than this is a hang
METRICS_POSITIVE = ("step_time_s", "time_to_train_s", "energy_per_token_j", "cost_per_token_usd")


@pytest.fixture(autouse=True)
def bounded():
    """Every case runs under an alarm (a hang fails the test instead of stalling the suite) and
    with RuntimeWarnings as errors (an overflow inside the model is not a clean result)."""
    def on_alarm(signum, frame):
        raise TimeoutError(f"case did not finish within {ALARM_S} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(ALARM_S)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def value_texts(value) -> list[str]:
    """Ways an error message may spell ``value``."""
    out = [str(value), repr(value)] if not (isinstance(value, int) and value > 1e300) else []
    if isinstance(value, int) and not isinstance(value, bool) and value > 1e300:
        out.append(f"~1e{int(value.bit_length() * 0.30103)}")
        return out
    try:
        x = float(value)
        out += [f"{x:g}", repr(x), f"{x:.4g}", f"{x:.3e}", str(int(x)) if math.isfinite(x) else ""]
    except (TypeError, ValueError, OverflowError):
        pass
    return [t for t in out if t]


def assert_clean_error(err: Exception, field: str, value=None) -> None:
    msg = str(err)
    assert "\n" not in msg, f"multi-line error: {msg!r}"
    assert field in msg, f"error does not name {field}: {msg}"
    assert "allowed" in msg, f"error does not say what is allowed: {msg}"
    if value is not None:
        assert any(t in msg for t in value_texts(value)), f"error does not give the value {value!r}: {msg}"


def assert_sane(ds) -> None:
    valid = ds["valid"].values.astype(bool)
    reason = ds["reason"].values.astype(str)
    assert (reason[~valid] != "").all(), "an invalid design without a reason"
    for k in METRICS_POSITIVE:
        a = ds[k].values[valid]
        assert np.isfinite(a).all() and (a > 0).all(), f"valid design with {k} = {a}"
        assert np.isnan(ds[k].values[~valid]).all(), f"invalid design with a finite {k}"


def run_case(sc: dict, field: str, value) -> str:
    """'error' or 'result', after checking whichever it was."""
    try:
        ds = explore.evaluate(sc)
    except ScenarioError as e:
        assert_clean_error(e, field, value)
        return "error"
    assert_sane(ds)
    return "result"


# ----------------------------------------------------------------------------- generation

def numeric_fields() -> list[str]:
    out = [f"{t}.{k}" for t, fs in SCHEMA.items() for k, f in fs.items() if f.kind in ("int", "float")]
    out += [f"system.accelerator.{k}" for k in ACCEL_FIELDS]
    out += [f"system.accelerator.{k}" for k, f in ACCEL_EXTRA_FIELDS.items() if f.kind in ("int", "float")]
    return out


BAD_NUMBERS = {
    "2**63": 2**63, "10**30": 10**30, "uint64max": np.uint64(2**64 - 1), "10**400": 10**400,
    "-1": -1, "0": 0, "nan": float("nan"), "inf": float("inf"), "1e300": 1e300, "-1e300": -1e300,
}
BAD_TYPES = {"str": "many", "bool": True, "dict": {"a": 1}, "nested": [[1, 2]], "empty": [],
             "complex": 1j}


def put(sc: dict, path: str, value) -> dict:
    sc = copy.deepcopy(sc)
    if path.startswith("system.accelerator."):
        sc["system"]["accelerator"] = {"base": "a100-sxm-80gb", path.rpartition(".")[2]: value}
    else:
        explore.set_field(sc, path, value)
    return sc


NUMERIC_CASES = [(f, k) for f in numeric_fields() for k in BAD_NUMBERS]
TYPE_CASES = [(f, k) for f in numeric_fields()[::3] for k in BAD_TYPES]


@pytest.mark.parametrize("field, bad", NUMERIC_CASES)
def test_bad_numbers(field, bad):
    value = BAD_NUMBERS[bad]
    shown = None if bad in ("uint64max",) else value
    outcome = run_case(put(BASE, field, value), field, shown)
    if bad not in ("0",):   # every field is bounded and non-negative: these are always refused
        assert outcome == "error", f"{field} = {bad} was accepted"


@pytest.mark.parametrize("field, bad", TYPE_CASES)
def test_bad_types(field, bad):
    assert run_case(put(BASE, field, BAD_TYPES[bad]), field, None) == "error"


def test_int_overflow_through_numpy_arrays():
    """np.uint64 max and 2**63 inside arrays (the API path) never wrap into negative times."""
    for field in ("training.global_batch", "model.seq_len", "model.hidden", "parallelism.virtual_stages"):
        for arr in (np.array([8, 2**64 - 1], dtype=np.uint64), np.array([8, 2**63], dtype=object)):
            with pytest.raises(ScenarioError) as e:
                explore.evaluate(put(BASE, field, arr))
            assert_clean_error(e.value, field)


# model shapes no transformer has: (field, value from the preset's heads/experts)
MODEL_RULES = {
    "kv_heads>heads": lambda m: {"kv_heads": 2 * m["heads"]},
    "kv_heads!|heads": lambda m: {"kv_heads": m["heads"] - 1 if m["heads"] > 2 else 3, "heads": max(m["heads"], 4)},
    "hidden!%heads": lambda m: {"hidden": m["heads"] * 64 + 1},
    "top_k>experts": lambda m: {"experts": 4, "top_k": 5},
}


@pytest.mark.parametrize("preset", sorted(explore.scenario.model_presets()))
@pytest.mark.parametrize("rule", sorted(MODEL_RULES))
def test_nonsense_models(preset, rule):
    m = dict(explore.scenario.model_presets()[preset])
    change = MODEL_RULES[rule](m)
    sc = copy.deepcopy(BASE)
    sc["model"] = {"preset": preset, **change}
    field = "model." + ("top_k" if "top_k" in change else "kv_heads" if "kv_heads" in change else "hidden")
    with pytest.raises(ScenarioError) as e:
        explore.evaluate(sc)
    assert_clean_error(e.value, field, change[field.rpartition(".")[2]])


@pytest.mark.parametrize("ratio", [1.01, 1.5, 2.0, 10.0])
@pytest.mark.parametrize("base", ["a100-sxm-80gb", "h100-sxm-80gb"])
def test_idle_power_above_tdp_is_invalid_with_a_reason(base, ratio):
    from hwmodels.parts import lookup
    tdp = float(lookup("accelerators", np.array([base]), "tdp_w")[0])
    sc = copy.deepcopy(BASE)
    sc["system"]["accelerator"] = {"base": base, "idle_power_w": tdp * ratio}
    ds = explore.evaluate(sc)
    assert not ds["valid"].values[0]
    r = str(ds["reason"].values[0])
    assert "system.accelerator.idle_power_w" in r and "allowed" in r
    assert_sane(ds)


# ----------------------------------------------------------------------------- design spaces

def space(**kw) -> dict:
    doc = {"base": copy.deepcopy(BASE),
           "variables": {"tp": {"field": "parallelism.tp", "values": [1, 2, 4, 8]},
                         "pp": {"field": "parallelism.pp", "values": [4, 8, 16]}},
           "derived": {"parallelism.dp": "system.devices / (parallelism.tp * parallelism.pp)"}}
    for k, v in kw.items():
        doc[k] = v
    return doc


BAD_EXPRESSIONS = {
    "1/0": "1/0", "1%0": "1 % 0", "0**-1": "0 ** -1", "2**10000": "2 ** 10000",
    "10**10**10": "10 ** 10 ** 10", "9**9**9": "9 ** 9 ** 9", "min1": "min(1)",
    "min0": "min()", "floor2": "floor(1, 2)", "round2": "round(1, 2)", "sqrt0": "sqrt()",
    "chain100k": "+".join(["1"] * 100_000), "nest300": "(" * 300 + "1" + ")" * 300,
    "unary5k": "-" * 5000 + "1", "1e400": "1e400", "bigint": "1" + "0" * 400,
    "field/0": "parallelism.tp / 0", "field%0": "parallelism.tp % 0",
    "field**big": "parallelism.tp ** 10000", "0**-field": "0 ** -parallelism.tp",
    "log0": "log(parallelism.tp - parallelism.tp)", "call": "__import__('os')",
    "attr": "parallelism.tp.__class__", "lambda": "lambda: 1", "str": "'abc'", "list": [1, 2],
    "bool": True, "empty": "", "syntax": "1 +",
}


def run_space(doc, field: str) -> str:
    try:
        s = load_space(doc)
    except ScenarioError as e:
        assert_clean_error(e, field)
        return "error"
    cols = {v.name: np.asarray(v.grid_values()) for v in s.variables}
    n = max(len(c) for c in cols.values())
    ds = s.evaluate({k: np.resize(c, n) for k, c in cols.items()})
    assert_sane(ds)
    return "result"


@pytest.mark.parametrize("bad", sorted(BAD_EXPRESSIONS))
def test_bad_derived_expressions(bad):
    run_space(space(derived={"parallelism.dp": BAD_EXPRESSIONS[bad]}), "derived.parallelism.dp")


@pytest.mark.parametrize("bad", sorted(BAD_EXPRESSIONS))
def test_bad_device_multiple(bad):
    doc = space(couplings={"capex_budget_usd": 5e7, "device_multiple": BAD_EXPRESSIONS[bad]})
    doc["derived"] = {"parallelism.dp": "system.devices / (parallelism.tp * parallelism.pp)"}
    run_space(doc, "couplings.device_multiple")


BAD_DEVICES = {"10**30": 10**30, "2**63": 2**63, "0": 0, "-1": -1, "1.5": 1.5, "str": "x",
               "bool": True, "nan": float("nan")}


@pytest.mark.parametrize("bad", sorted(BAD_DEVICES))
def test_bad_coupled_devices(bad):
    with pytest.raises(ScenarioError) as e:
        load_space(space(couplings={"devices": BAD_DEVICES[bad]}))
    assert_clean_error(e.value, "couplings.devices")


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), 1e300, 10**30, "x", True])
def test_bad_capex_budget(bad):
    with pytest.raises(ScenarioError) as e:
        load_space(space(couplings={"capex_budget_usd": bad}))
    assert_clean_error(e.value, "couplings.capex_budget_usd")


METRIC_NAMES = ("mfu", "step_time_s", "power_w", "capex_usd", "valid", "reason", "goodput",
                "time_to_train_s", "energy_per_token_j", "cost_per_token_usd")


@pytest.mark.parametrize("name", METRIC_NAMES)
def test_variable_named_like_a_metric(name):
    doc = space()
    doc["variables"][name] = doc["variables"].pop("tp")
    with pytest.raises(ScenarioError) as e:
        load_space(doc)
    assert_clean_error(e.value, f"variables.{name}")


CYCLES = {
    "self": {"parallelism.dp": "parallelism.dp * 1"},
    "self-late": {"parallelism.dp": "system.devices / (parallelism.tp * parallelism.pp)",
                  "training.global_batch": "training.global_batch + 1"},
    "two": {"parallelism.dp": "training.global_batch / 16", "training.global_batch": "parallelism.dp * 16"},
    "three": {"parallelism.dp": "parallelism.microbatch * 8", "parallelism.microbatch": "model.layers / 96",
              "model.layers": "parallelism.dp * 12"},
}


@pytest.mark.parametrize("kind", sorted(CYCLES))
def test_derived_cycles_refused(kind):
    with pytest.raises(ScenarioError) as e:
        load_space(space(derived=CYCLES[kind]))
    msg = str(e.value)
    assert "\n" not in msg and "derived." in msg and ("cycle" in msg or "itself" in msg)


def test_derived_fields_are_ordered_by_dependency():
    """A derived field may use one defined later in the file (no cycle): it is computed first."""
    s = load_space(space(derived={"training.global_batch": "parallelism.dp * 4",
                                  "parallelism.dp": "system.devices / (parallelism.tp * parallelism.pp)"}))
    assert list(s.derived) == ["parallelism.dp", "training.global_batch"]
    ds = s.evaluate({"tp": np.array([8]), "pp": np.array([8])})
    assert int(ds["training_global_batch"].values[0]) == 4 * 1024 // 64


@pytest.mark.parametrize("spec", [
    {"field": "parallelism.pp", "low": 1, "high": 10**12},
    {"field": "datacenter.pue", "low": 1.0, "high": 2.0, "points": 10**12},
    {"field": "system.devices", "low": 1, "high": 2**53},
])
def test_huge_ranges_are_not_allocated(spec):
    doc = space()
    doc["variables"] = {"x": spec}
    doc.pop("derived")
    s = load_space(doc)                      # probing the space does not build the range
    with pytest.raises(ScenarioError) as e:  # a sweep or enumeration over it is refused
        s.variables[0].grid_values()
    assert_clean_error(e.value, "variables.x")


# ----------------------------------------------------------------------------- API misuse

TABLES = ("scenario", "model", "training", "parallelism", "system", "system.scale_up",
          "system.scale_out", "datacenter")


@pytest.mark.parametrize("key", [1, 2.5, None, (1, 2), b"tp"])
@pytest.mark.parametrize("table", TABLES)
def test_non_string_keys(table, key):
    sc = copy.deepcopy(BASE)
    node = sc if table == "scenario" else explore.get_field(sc, table)
    if node is None:
        node = explore.set_field(sc, table, {}) and explore.get_field(sc, table)
    node[key] = 1
    with pytest.raises(ScenarioError) as e:
        explore.evaluate(sc)
    assert "not a string" in str(e.value) and "allowed" in str(e.value)


@pytest.mark.parametrize("field", ["parallelism.tp", "training.global_batch", "datacenter.pue",
                                   "system.scale_out.nics_per_device", "system.accelerator"])
def test_masked_arrays(field):
    vals = np.array(["a100-sxm-80gb", "h100-sxm-80gb"]) if field == "system.accelerator" \
        else np.array([8, 16]) if field != "datacenter.pue" and "nics" not in field else np.array([1.1, 1.2])
    sc = put(BASE, field, np.ma.masked_array(vals, mask=[False, True]))
    with pytest.raises(ScenarioError) as e:
        explore.evaluate(sc)
    assert_clean_error(e.value, field)
    ok = explore.evaluate(put(BASE, field, np.ma.masked_array(vals, mask=[False, False])))
    assert ok.sizes["design"] == 2


def test_corpus_size():
    """The corpus is generated, and large: >= 300 cases of malformed input."""
    n = (len(NUMERIC_CASES) + len(TYPE_CASES) + len(MODEL_RULES) * len(explore.scenario.model_presets())
         + 2 * len(BAD_EXPRESSIONS) + len(BAD_DEVICES) + 8 + len(METRIC_NAMES) + len(CYCLES)
         + 3 + 5 * len(TABLES) + 5 + 8 + 3 * len(SPACE_SECTIONS))
    assert n >= 300, n
    assert all(field_spec(f) for f in numeric_fields())


SPACE_SECTIONS = ("space", "variables", "variables.tp", "derived", "couplings", "constraints",
                  "objectives", "search")


@pytest.mark.parametrize("key", [1, None, (1, 2)])
@pytest.mark.parametrize("section", SPACE_SECTIONS)
def test_space_non_string_keys(section, key):
    doc = space()
    node = doc
    if section != "space":
        for part in section.split("."):
            node = node.setdefault(part, {})
    node[key] = 2
    with pytest.raises(ScenarioError) as e:
        load_space(doc)
    assert "not a string" in str(e.value) and "allowed" in str(e.value)
