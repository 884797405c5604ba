"""Bad input: each case gives a ScenarioError naming the field (API) and, from the CLI,
exit status 2 with one line and no traceback."""
import copy
import subprocess
import sys

import numpy as np
import pytest

import explore
from explore.scenario import ScenarioError

BASE = explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml")


def with_(path, value):
    sc = copy.deepcopy(BASE)
    return explore.set_field(sc, path, value)


def without(path):
    sc = copy.deepcopy(BASE)
    *head, last = path.split(".")
    node = sc
    for h in head:
        node = node[h]
    del node[last]
    return sc


CASES = [  # (id, scenario, text the message must contain)
    ("unknown key suggests", with_("parallelism.tpp", 8), "did you mean 'tp'"),
    ("unknown table", with_("sytem", {}), "did you mean 'system'"),
    ("unknown scale_out key", with_("system.scale_out.oversubscriptoin", 2.0), "did you mean 'oversubscription'"),
    ("wrong type int", with_("parallelism.tp", "eight"), "parallelism.tp"),
    ("float for int", with_("parallelism.pp", 2.5), "is not an integer"),
    ("bool for int", with_("parallelism.dp", True), "parallelism.dp"),
    ("zero size", with_("system.devices", 0), "system.devices"),
    ("negative size", with_("parallelism.microbatch", -1), "parallelism.microbatch"),
    ("nan", with_("datacenter.pue", float("nan")), "is not finite"),
    ("inf", with_("training.tokens", float("inf")), "is not finite"),
    ("pue below 1", with_("datacenter.pue", 0.9), "datacenter.pue"),
    ("negative lifetime", with_("datacenter.lifetime_years", -4), "datacenter.lifetime_years"),
    ("negative price", with_("datacenter.electricity_usd_per_kwh", -0.1), "electricity_usd_per_kwh"),
    ("zero stage out of range", with_("parallelism.zero", 4), "parallelism.zero"),
    ("unknown precision", with_("training.precision", "bf61"), "did you mean 'bf16'"),
    ("unknown recompute", with_("parallelism.recompute", "partial"), "parallelism.recompute"),
    ("unknown accelerator", with_("system.accelerator", "h100-sxm"), "did you mean"),
    ("unknown link", with_("system.scale_up.link", "nvlink9"), "system.scale_up.link"),
    ("unknown preset", with_("model.preset", "gpt4"), "model.preset"),
    ("missing required", without("training.global_batch"), "training.global_batch: missing"),
    ("missing table", without("system"), "missing table [system]"),
    ("mismatched arrays", with_("parallelism.tp", np.array([1, 2, 4])) | {
        "training": {**BASE["training"], "global_batch": np.array([1536, 3072])}}, "share one length"),
    ("2-D array", with_("parallelism.tp", np.ones((2, 2))), "1-D"),
    ("empty array", with_("parallelism.tp", np.array([])), "empty"),
    ("oversubscription below 1", with_("system.scale_out.oversubscription", 0.5), "oversubscription"),
    ("nics zero", with_("system.scale_out.nics_per_device", 0), "nics_per_device"),
    ("global link fraction zero", with_("system.scale_out.global_link_fraction", 0.0),
     "system.scale_out.global_link_fraction: value 0 is out of range; allowed: a finite number > 0 and <= 1"),
    ("global link fraction above 1", with_("system.scale_out.global_link_fraction", 1.5),
     "system.scale_out.global_link_fraction: value 1.5 is out of range; allowed: a finite number > 0 and <= 1"),
    ("bool as string", with_("parallelism.sequence_parallel", "yes"), "sequence_parallel"),
    ("cp zero", with_("parallelism.cp", 0), "parallelism.cp: value 0"),
    ("ep zero", with_("parallelism.ep", 0), "parallelism.ep: value 0"),
    ("top_k above experts", with_("model.experts", 4) | {"model": {**BASE["model"], "experts": 4, "top_k": 6}},
     "model.top_k: value 6 is out of range; allowed: 1 ... model.experts (4)"),
    ("capacity factor below 1", with_("model.capacity_factor", 0.5), "model.capacity_factor: value 0.5"),
    ("unknown fp8 recipe", with_("training.fp8_recipe", "fp4"), "training.fp8_recipe"),
    ("table as value", with_("model", 3), "model: must be a table"),
]


@pytest.mark.parametrize("sc,needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_api_error_names_field_and_value(sc, needle):
    with pytest.raises(ScenarioError) as e:
        explore.evaluate(sc)
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


def test_at_least_twenty_cases():
    assert len(CASES) >= 20


def test_array_with_one_bad_element_is_an_error():
    with pytest.raises(ScenarioError, match="parallelism.tp: value 0"):
        explore.evaluate(with_("parallelism.tp", np.array([8, 0, 8])))


def test_rule_violation_in_batch_marks_invalid_not_raise():
    sc = with_("parallelism.dp", np.array([16, 15]))
    ds = explore.evaluate(sc)
    assert ds["valid"].values.tolist() == [True, False]
    assert "must equal system.devices" in str(ds["reason"].values[1])
    assert np.isnan(ds["step_time_s"].values[1])


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "explore.cli", *args], capture_output=True,
                          text=True, cwd=cwd)


CLI_FILES = {
    "syntax.toml": "name = 'x'\n[model\npreset = 'gpt3-175b'\n",
    "unknown.toml": open("studies/scenarios/gpt3-175b-1024-a100.toml").read().replace("tp = 8", "tpp = 8"),
    "nondividing.toml": open("studies/scenarios/gpt3-175b-1024-a100.toml").read().replace("dp = 16", "dp = 15"),
    "badid.toml": open("studies/scenarios/gpt3-175b-1024-a100.toml").read().replace("a100-sxm-80gb", "a100"),
    "heads.toml": open("studies/scenarios/gpt3-175b-1024-a100.toml").read().replace(
        "tp = 8", "tp = 7").replace("dp = 16", "dp = 1").replace("devices = 1024", "devices = 56"),
}


@pytest.mark.parametrize("name", sorted(CLI_FILES) + ["missing.toml"])
def test_cli_exits_2_with_one_line(tmp_path, name):
    if name in CLI_FILES:
        (tmp_path / name).write_text(CLI_FILES[name])
    r = _cli("evaluate", str(tmp_path / name))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert name in lines[0]


def test_cli_usage_error_is_one_line():
    r = _cli("evaluate")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
