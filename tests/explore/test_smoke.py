import explore


def test_canonical_scenario_evaluates(tmp_path):
    ds = explore.evaluate(explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml"))
    assert bool(ds["valid"].values[0])
    # 175B on 1024 A100 with Megatron-class settings: MFU between 30 and 65 %
    assert 0.3 < float(ds["mfu"].values[0]) < 0.65
