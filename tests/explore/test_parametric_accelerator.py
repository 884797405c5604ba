"""Scenario integration of the parametric accelerator (issue 3)."""
import copy

import numpy as np
import pytest

import explore
from explore.scenario import ScenarioError
from hwmodels import package
from hwmodels.parts import get_part

EXAMPLE = "studies/scenarios/parametric-accelerator.toml"
CANON = "studies/scenarios/gpt3-175b-1024-a100.toml"


def canon(**accel):
    sc = explore.load_scenario(CANON)
    sc["system"]["accelerator"] = {"base": "a100-sxm-80gb", **accel}
    return sc


def test_example_scenario_evaluates_with_component_breakdowns():
    ds = explore.evaluate(explore.load_scenario(EXAMPLE))
    assert bool(ds.valid[0]), ds.reason.values
    for c in package.COMPONENTS:
        assert f"capex_usd_{c}" in ds
    for c in ("compute_dies", "hbm", "d2d", "package"):
        assert float(ds[f"energy_j_{c}"][0]) > 0, c
        assert f"power_w_{c}" in ds
    assert "capex_usd_accelerators" not in ds and "energy_j_accelerators_busy" not in ds
    parts = sum(float(ds[k][0]) for k in ds.data_vars if k.startswith("capex_usd_"))
    assert parts == pytest.approx(float(ds.capex_usd[0]))


def test_reconstructed_base_matches_catalog_part():
    a = explore.evaluate(explore.load_scenario(CANON))
    b = explore.evaluate(canon(compute_dies=1))
    for k in ("step_time_s", "mfu", "capex_usd"):
        assert float(b[k][0]) == pytest.approx(float(a[k][0]), rel=1e-3), k
    # idle power is derived, so energy differs a little
    assert float(b.energy_per_token_j[0]) == pytest.approx(float(a.energy_per_token_j[0]), rel=0.05)


def test_arrays_of_parameters_are_one_batch():
    dies = np.array([1, 2, 4, 8])
    sc = canon(compute_dies=dies, die_area_mm2=826.0 / dies, d2d="ucie-advanced")
    batch = explore.evaluate(sc)
    assert batch.sizes["design"] == 4
    for i in (0, 3):
        one = explore.evaluate(canon(compute_dies=int(dies[i]), die_area_mm2=826.0 / dies[i], d2d="ucie-advanced"))
        for k in ("step_time_s", "cost_per_token_usd", "capex_usd_hbm", "energy_j_d2d"):
            assert float(batch[k][i]) == pytest.approx(float(one[k][0]), rel=1e-12), k


@pytest.mark.parametrize("accel, reason", [
    (dict(die_area_mm2=900.0), "reticle"),
    (dict(compute_dies=2, die_area_mm2=413.0), "die-to-die"),
    (dict(hbm_stacks=7), "HBM stacks"),
    (dict(compute_dies=4, die_area_mm2=800.0, d2d="ucie-advanced", hbm_stacks=8), "interposer"),
    (dict(power_limit_w=300.0), "power"),
    (dict(io_bandwidth_bps=1e12), "I/O bandwidth"),
])
def test_infeasible_hardware_is_a_result(accel, reason):
    ds = explore.evaluate(canon(**accel), keep_invalid=True)
    assert not bool(ds.valid[0])
    assert reason in str(ds.reason.values[0])
    assert np.isfinite(float(ds.capex_usd[0]))   # raw metrics stay available on request
    assert np.isnan(float(explore.evaluate(canon(**accel)).capex_usd[0]))   # NaN by default


def test_more_dies_pay_for_crossing_dies():
    sc = canon(compute_dies=[2, 16], die_area_mm2=[413.0, 51.625], d2d="ucie-advanced",
               d2d_bandwidth_bps=2e12)
    ds = explore.evaluate(sc)
    assert float(ds.energy_j_d2d[1]) > float(ds.energy_j_d2d[0]) > 0
    assert float(ds.time_s_compute[1]) > float(ds.time_s_compute[0])   # capped memory bandwidth


def test_hbm_generation_sets_stack_figures_and_price_scales_with_cost():
    a = explore.evaluate(canon(hbm="hbm2e"), keep_invalid=True)
    b = explore.evaluate(canon(hbm="hbm4"), keep_invalid=True)
    assert float(b.capex_usd_hbm[0]) > float(a.capex_usd_hbm[0])
    assert float(b.step_time_s[0]) <= float(a.step_time_s[0])
    sc = copy.deepcopy(canon(price_markup=1.0))
    one = explore.evaluate(sc)
    r = package.reconstruct("a100-sxm-80gb")
    assert float(one.capex_usd_compute_dies[0]) == pytest.approx(1024 * r["cost_usd_compute_dies"], rel=1e-9)
    assert get_part("accelerators", "a100-sxm-80gb")["price_usd"] > r["unit_cost_usd"]


@pytest.mark.parametrize("accel, field", [
    (dict(node="n9"), "system.accelerator.node"),
    (dict(compute_dies=0), "system.accelerator.compute_dies"),
    (dict(matrix_fraction=1.5), "system.accelerator.matrix_fraction"),
    (dict(hbm_stack=4), "system.accelerator.hbm_stack"),
])
def test_bad_parameters_are_scenario_errors(accel, field):
    with pytest.raises(ScenarioError, match=field.replace(".", r"\.")):
        explore.evaluate(canon(**accel))


def test_inline_parametric_without_base_uses_default_design():
    sc = explore.load_scenario(CANON)
    sc["system"]["accelerator"] = {"compute_dies": 1}
    sc["system"]["scale_up"]["link"] = "nvlink4"
    ds = explore.evaluate(sc)
    assert float(ds.mfu[0]) > 0 and bool(ds.valid[0]), ds.reason.values


def test_base_without_reconstruction_keeps_its_catalog_host_figures():
    sc = canon(compute_dies=1)
    sc["system"]["accelerator"]["base"] = "tpu-v4"
    sc["system"]["scale_up"]["link"] = "tpu-v4-ici"
    ds = explore.evaluate(sc)
    host = get_part("accelerators", "tpu-v4")["host_price_usd"]
    assert float(ds.capex_usd_hosts[0]) == pytest.approx(1024 * host)


def test_mixed_base_ids_and_choices_in_one_batch():
    bases = ["a100-sxm-80gb", "h100-sxm-80gb", "b200", "mi300x", "h200-sxm-141gb"]
    hbms = ["hbm2e", "hbm3", "hbm3e", "hbm4", "hbm3e"]
    sc = canon(hbm=hbms, hbm_stacks=[5, 5, 8, 8, 6])
    sc["system"]["accelerator"]["base"] = bases
    sc["system"]["scale_up"]["link"] = "nvlink3"
    batch = explore.evaluate(sc)
    for i in (0, 2, 3):
        one = canon(hbm=hbms[i], hbm_stacks=[5, 5, 8, 8, 6][i])
        one["system"]["accelerator"]["base"] = bases[i]
        one["system"]["scale_up"]["link"] = "nvlink3"
        ds = explore.evaluate(one)
        assert str(ds.reason.values[0]) == str(batch.reason.values[i])
        for k in ("step_time_s", "capex_usd", "energy_per_token_j", "capex_usd_hbm"):
            assert float(batch[k][i]) == pytest.approx(float(ds[k][0]), rel=1e-12, nan_ok=True), (i, k)
