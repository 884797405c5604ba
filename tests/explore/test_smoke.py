import json
import subprocess
import sys

import explore

CANONICAL = "studies/scenarios/gpt3-175b-1024-a100.toml"
KEYS = ["step_time_s", "tokens_per_s", "model_flops_per_s_per_device", "mfu",
        "memory_per_device_bytes", "fits_memory", "time_to_train_s", "energy_per_token_j",
        "cost_per_token_usd", "breakdown"]


def test_canonical_scenario_evaluates():
    ds = explore.evaluate(explore.load_scenario(CANONICAL))
    assert bool(ds["valid"].values[0])
    # 175B on 1024 A100 with Megatron-class settings: MFU between 30 and 65 %
    assert 0.3 < float(ds["mfu"].values[0]) < 0.65
    assert ds["step_time_s"].attrs["units"] == "s"


def test_cli_json_has_design_md_keys():
    r = subprocess.run([sys.executable, "-m", "explore.cli", "evaluate", CANONICAL, "--json"],
                       capture_output=True, text=True, check=True)
    obj = json.loads(r.stdout)
    for k in KEYS:
        assert k in obj, k
    for b in ("time_s", "energy_j", "capex_usd", "power_w"):
        assert obj["breakdown"][b], b
    assert obj["tokens_per_s"] == __import__("pytest").approx(1536 * 2048 / obj["step_time_s"])
    # breakdown of time adds up to the step (no hidden terms)
    assert sum(obj["breakdown"]["time_s"].values()) >= 0.99 * obj["step_time_s"]


def test_cli_table_is_readable():
    r = subprocess.run([sys.executable, "-m", "explore.cli", "evaluate", CANONICAL],
                       capture_output=True, text=True, check=True)
    assert "step_time_s" in r.stdout and "breakdown time_s" in r.stdout


def test_cli_evaluates_toml_lists_as_designs(tmp_path):
    text = open(CANONICAL).read().replace("tp = 8", "tp = [8, 8, 4]").replace(
        "pp = 8", "pp = [8, 16, 16]").replace("dp = 16", "dp = [16, 8, 15]")
    p = tmp_path / "arrays.toml"
    p.write_text(text)
    r = subprocess.run([sys.executable, "-m", "explore.cli", "evaluate", str(p), "--json"],
                       capture_output=True, text=True, check=True)
    objs = json.loads(r.stdout)
    assert [o["valid"] for o in objs] == [True, True, False]
    r = subprocess.run([sys.executable, "-m", "explore.cli", "evaluate", str(p)],
                       capture_output=True, text=True, check=True)
    assert "must equal system.devices" in r.stdout and "3 designs" in r.stdout
