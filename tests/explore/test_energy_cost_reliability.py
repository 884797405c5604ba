"""Energy, cost and reliability: exact relations."""
import copy

import numpy as np
import pytest

import explore
from explore.model.reliability import goodput

BASE = explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml")


def test_young_daly_optimum():
    """tau* = sqrt(2 delta M) minimises waste = delta/tau + (tau/2 + R)/M (Young 1974)."""
    gp, tau, delta, mtbi = goodput(1024, 2e-5, 175e9, 8e9, 600.0)
    assert tau == pytest.approx(np.sqrt(2 * delta * mtbi))
    assert mtbi == pytest.approx(3600 / (1024 * 2e-5))
    waste = lambda t: delta / t + (t / 2 + 600.0) / mtbi
    assert 1 - gp == pytest.approx(waste(tau))
    assert waste(tau) < waste(0.8 * tau) and waste(tau) < waste(1.25 * tau)


def test_more_devices_more_interruptions_less_goodput():
    gp = goodput(np.array([1e3, 1e4, 1e5]), 2e-5, 175e9, 8e9, 600.0)[0]
    assert np.all(np.diff(gp) < 0)


def test_energy_scales_with_pue_and_cost_with_electricity_price():
    sc = copy.deepcopy(BASE)
    sc["datacenter"]["pue"] = np.array([1.0, 1.5])
    sc["datacenter"]["electricity_usd_per_kwh"] = np.array([0.0, 0.0])
    ds = explore.evaluate(sc)
    e = ds["energy_per_token_j"].values
    assert e[1] == pytest.approx(1.5 * e[0])
    # with free electricity, cost per token is pure amortised capex: capex/lifetime * step / tokens
    amort = ds["capex_usd"].values[0] / (4 * 365.25 * 86400) * ds["step_time_s"].values[0]
    per_token = amort / (1536 * 2048 * ds["goodput"].values[0])
    assert ds["cost_per_token_usd"].values[0] == pytest.approx(per_token)


def test_time_to_train_is_tokens_over_throughput_over_goodput():
    ds = explore.evaluate(BASE)
    expect = 300e9 / ds["tokens_per_s"].values[0] / ds["goodput"].values[0]
    assert ds["time_to_train_s"].values[0] == pytest.approx(expect)


def test_breakdowns_add_up():
    ds = explore.evaluate(BASE)
    capex = sum(ds[k].values[0] for k in ds.data_vars if k.startswith("capex_usd_"))
    assert capex == pytest.approx(ds["capex_usd"].values[0])
    energy = sum(ds[k].values[0] for k in ds.data_vars if k.startswith("energy_j_"))
    assert energy == pytest.approx(ds["energy_per_step_j"].values[0])


def test_busy_power_between_idle_and_tdp():
    ds = explore.evaluate(BASE)
    acc = ds["power_w_accelerators_busy"].values[0] + ds["power_w_accelerators_idle"].values[0]
    assert 1024 * 90 < acc < 1024 * 400  # A100: idle 90 W, TDP 400 W
