"""Issue 11: interruption rates per component class, the network's through its bill of materials.

The class rates are derived from the Llama 3 405B run's Table 5 (explore/data/failures.toml),
so reproducing its 419 interruptions is an in-sample consistency check of the exposure, the
device/NIC counts and the modelled network BOM, not an out-of-sample prediction."""
import numpy as np
import pytest

import explore
from explore.model.reliability import failure_data

LLAMA3 = {"model": {"preset": "llama3-405b"}, "training": {"global_batch": 2048},
          "parallelism": {"tp": 8, "pp": 16, "dp": 128},
          "system": {"accelerator": "h100-sxm-80gb", "devices": 16384, "scale_up": {"size": 8},
                     "scale_out": {"topology": "fat-tree", "link": "ib-ndr-400", "optics": "pluggable"}}}
HOURS = 54 * 24


def test_llama3_405b_system_expects_419_interruptions_in_54_days_with_the_table5_split():
    ds = explore.evaluate(LLAMA3)
    total = float(ds["interruptions_per_hour"][0]) * HOURS
    assert total == pytest.approx(419, rel=0.25)
    split = {k: float(ds[f"interruptions_per_hour_{k}"][0]) * HOURS
             for k in ("accelerator", "hbm", "host", "nic", "software", "network")}
    table5 = {k: c["count"] for k, c in failure_data()["classes"].items()}
    assert sum(table5.values()) == 419                      # the classes cover Table 5 exactly
    for k, n in table5.items():
        assert split[k] == pytest.approx(n, rel=0.02), (k, split[k], n)


def test_derived_network_constant_matches_the_modelled_anchor_bom():
    ds = explore.evaluate(LLAMA3)
    net = failure_data()["network"]
    assert float(ds["network_fit"][0]) == pytest.approx(net["anchor_network_fit"], rel=1e-6)
    assert net["interruptions_per_failure"] == pytest.approx(35 / (net["anchor_network_fit"] * 1e-9 * HOURS),
                                                             rel=1e-3)


def test_optics_type_moves_the_rate_through_the_bom_and_goodput_follows():
    sc = {**LLAMA3, "system": {**LLAMA3["system"], "scale_out": {
        **LLAMA3["system"]["scale_out"], "optics": np.array(["pluggable", "lpo", "cpo"])}}}
    ds = explore.evaluate(sc)
    net = ds["interruptions_per_hour_network"].values
    assert net[0] > net[1] > net[2] > 0
    # catalog FIT ratios 2000 : 1500 : 200 carry over (same link-end count)
    assert net[1] / net[0] == pytest.approx(1500 / 2000, rel=1e-6)
    assert net[2] / net[0] == pytest.approx(200 / 2000, rel=1e-6)
    gp = ds["goodput"].values
    assert gp[2] > gp[0]
    assert ds["checkpoint_interval_s"].values[2] > ds["checkpoint_interval_s"].values[0]


def test_an_explicit_all_cause_rate_replaces_the_component_model():
    sc = {**LLAMA3, "datacenter": {"interruptions_per_device_hour": 1e-5}}
    ds = explore.evaluate(sc)
    assert float(ds["interruptions_per_hour"][0]) == pytest.approx(16384 * 1e-5)
    assert float(ds["mtbi_s"][0]) == pytest.approx(3600 / (16384 * 1e-5))
