"""Carbon per token (issue 14) against cited life-cycle figures.

Reference design: BLOOM-176B's final run (384 A100 80GB, Jean Zay, French grid 57 g/kWh,
PUE 1.2), as in tests/validation/energy_runs.csv. Cited figures:
- Luccioni, Viguier, Ligozat 2023 (JMLR 24(253), arXiv:2211.02001): embodied 11.2 t of a
  50.5 t life-cycle total (22.2 %); ~150 kg CO2e per A100 card and 2,500 kg per HPE Apollo
  6500 server without its GPUs (the figure Boavizta e-footprint's GPUServer also takes from
  the paper), amortised over a 6-year replacement rate at 85 % utilisation.
  Per accelerator: 150 + 2,500 / 8 = 462.5 kg. lightpath's host figure is this server
  figure (hwmodels/catalog/carbon.toml), its accelerator figure its own (ACT, ~144 kg).
- Chien et al., HotCarbon 2023 (as quoted by the Scope3 methodology): 318 kg CO2e per A100
  GPU as 1/8 of an 8-GPU cloud instance (CPU, DRAM, SSD, packaging included).
"""
import numpy as np
import pytest

import explore
from explore.model.carbon import logic_die_kg
from explore.validation_energy import load_rows, scenario


def _bloom():
    row = next(r for r in load_rows() if r["run_id"] == "bloom_176b")
    sc = scenario(row)
    sc["datacenter"] = {"grid": "france", "lifetime_years": 6.0, "pue": 1.2}
    return sc


def test_embodied_per_accelerator_within_cited_range():
    """Servers + GPUs per accelerator (the boundary of both cited figures; the network's
    NICs, switches and transceivers, ~27 kg per GPU here, are outside it) lies between
    Chien et al.'s 318 kg and Luccioni et al.'s 462.5 kg."""
    ds = explore.evaluate(_bloom())
    per_step = {k[len("carbon_kg_embodied_"):]: float(ds[k][0]) for k in ds.data_vars
                if k.startswith("carbon_kg_embodied_")}          # each component's total x step / lifetime
    servers = (per_step["accelerators"] + per_step["hosts"]) / sum(per_step.values())
    per_acc = servers * float(ds["embodied_carbon_kg"][0]) / 384
    assert 318.0 <= per_acc <= 462.5


# Luccioni et al. 2023 (arXiv:2211.02001; figures also in tests/validation/energy_runs.csv):
# 1,082,990 GPU-hours; operational 24.69 t (dynamic: GPU-h x 400 W TDP = 433,196 kWh x 57 g)
# + 14.6 t (idle / infrastructure: 256,646 kWh x 57 g); embodied amortised over a 6-year
# replacement rate at 85 % use, per GPU 150 kg (card) + 2,500 kg / 8 (server without GPUs).
BLOOM_GPU_HOURS = 1_082_990
BLOOM_OPERATIONAL_KG = 24_690.0 + 14_600.0
IN_USE_HOURS = 6 * 8760 * 0.85
PER_GPU_KG = {"Chien et al. 2023": 318.0, "Luccioni et al. 2023": 150.0 + 2500.0 / 8}


def cited_share_range() -> tuple[float, float]:
    """Embodied share of BLOOM's training under Luccioni et al.'s accounting (their
    operational emissions, their amortisation) with each cited per-GPU embodied figure
    (servers + GPUs, no network or building): 16.4 % (Chien's 318 kg) to 22.2 % (Luccioni's
    462.5 kg, which reproduces their 11.2 t of embodied emissions)."""
    emb = {k: v * BLOOM_GPU_HOURS / IN_USE_HOURS for k, v in PER_GPU_KG.items()}
    assert emb["Luccioni et al. 2023"] == pytest.approx(11_200, rel=0.01)      # their 11.2 t
    shares = sorted(e / (e + BLOOM_OPERATIONAL_KG) for e in emb.values())
    assert shares[-1] == pytest.approx(0.222, abs=0.001)                       # their 22.2 %
    return shares[0], shares[-1]


def test_embodied_share_like_for_like_with_bloom_study():
    """The acceptance test (issue 14): BLOOM's reference design evaluated under Luccioni et
    al.'s conditions (French grid 57 g/kWh, PUE 1.2, embodied amortised over 6 years at 85 %
    use, i.e. over 5.1 in-use years; embodied boundary servers + GPUs, as theirs) lies in
    the range the cited per-GPU figures give for this system (``cited_share_range``).

    At the time of writing 16.43 % against 16.40-22.20 %: near the lower end, because
    lightpath's facility power (911 W per GPU: accelerators as modelled, hosts at the measured
    75 % of their rated share, NVSwitch, NIC and network at rated power, PUE 1.2) is above
    the study's ~637 W (400 W TDP plus its idle and infrastructure estimate). Until the hosts'
    rated maximum was replaced by the measured draw and the CPU/DRAM/SSD-only host embodied
    figure (170 kg) by the study's whole-server one (312.5 kg), it was 10.8 %."""
    sc = _bloom()
    sc["datacenter"]["lifetime_years"] = 6.0 * 0.85
    ds = explore.evaluate(sc)
    emb = float(ds["carbon_kg_embodied_accelerators"][0]) + float(ds["carbon_kg_embodied_hosts"][0])
    share = emb / (emb + float(ds["carbon_kg_operational"][0]))
    lo, hi = cited_share_range()
    assert lo <= share <= hi, f"embodied share {share:.3f} outside {lo:.3f}-{hi:.3f}"


def test_embodied_share_of_reference_design():
    """Coarse sanity bound on the default accounting (the like-for-like test above is the
    acceptance test): with calendar-lifetime amortisation (as capex), modelled facility power
    and the network's embodied carbon included, the share is between a third and 1.5x of the
    22.2 % Luccioni et al. report."""
    ds = explore.evaluate(_bloom())
    share = float(ds["embodied_carbon_share"][0])
    assert 0.222 / 3 <= share <= 0.222 * 1.5


def test_operational_carbon_is_energy_times_grid():
    sc = _bloom()
    ds = explore.evaluate(sc)
    e_kwh = float(ds["energy_per_step_j"][0]) / 3.6e6
    assert float(ds["carbon_kg_operational"][0]) == pytest.approx(e_kwh * 0.057, rel=1e-12)
    sc["datacenter"]["grid_kg_per_kwh"] = 0.0
    ds0 = explore.evaluate(sc)
    assert float(ds0["carbon_kg_operational"][0]) == 0.0
    assert float(ds0["embodied_carbon_share"][0]) == pytest.approx(1.0)


def test_logic_die_matches_act_worked_example():
    """ACT (Gupta et al. 2022) 5 nm CPA at the Taiwan grid: (0.642 x 2.75 + 0.43 + 0.50) kg/cm2
    = 2.6955 kg/cm2 before yield; a tiny die has yield ~1."""
    kg = logic_die_kg(np.array([1e-3]), np.array(["n5"]), 0.642)
    assert kg[0] / 1e-5 == pytest.approx(2.6955, rel=1e-4)


def test_carbon_breakdown_sums_and_objective():
    ds = explore.evaluate(explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml"))
    parts = sum(float(ds[k][0]) for k in ds.data_vars if k.startswith("carbon_kg_"))
    assert parts == pytest.approx(float(ds["carbon_per_step_kg"][0]), rel=1e-12)
    assert ds["carbon_per_token_kg"].attrs["units"] == "kgCO2e/token"


def test_hourly_profile_mean():
    from explore.model.carbon import profile_mean_kg_per_kwh
    day = np.where(np.arange(24) < 12, 0.1, 0.5)     # clean half-day, dirty half-day
    # whole days average to the profile mean, whatever the start
    assert profile_mean_kg_per_kwh(day, np.array([0.0, 7.3]), 3 * 86400.0) == pytest.approx([0.3, 0.3])
    # a 6-hour run inside the clean half, one straddling the switch at hour 12
    assert profile_mean_kg_per_kwh(day, 2.0, 6 * 3600.0) == pytest.approx(0.1)
    assert profile_mean_kg_per_kwh(day, 10.0, 4 * 3600.0) == pytest.approx(0.3)
    assert profile_mean_kg_per_kwh(day, 23.5, 3600.0) == pytest.approx(0.3)   # wraps to the next day
