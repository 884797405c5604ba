"""Sobol sensitivity (issue 14): known answers on a fixed design."""
import numpy as np

from explore.cli.main import main
from explore.uncertainty.sobol import ranking, sobol_indices, study

SCENARIO = "studies/scenarios/gpt3-175b-1024-a100.toml"


def test_indices_known_answers():
    st = study(SCENARIO)
    ds = sobol_indices(st, n=128, seed=1)
    ST = ds["ST"]
    # a fat-tree design never uses the OCS: its figures get indices near zero for every objective
    ocs = [n for n in st.names if n.startswith("ocs.")]
    assert ocs and float(abs(ST.sel(input=ocs)).max()) < 0.02
    # accelerator TDP: no effect on time, an effect on energy per token
    tdp = "accelerators.a100-sxm-80gb.tdp_w"
    assert abs(float(ST.sel(objective="time_to_train_s", input=tdp))) < 0.02
    # (small, as a datasheet TDP carries a 3 % spread, but clearly above the OCS figures' noise)
    assert float(ST.sel(objective="energy_per_token_j", input=tdp)) > max(1e-3, 5 * float(abs(ST.sel(input=ocs)).max()))
    # time to train depends on the GEMM rate first (the fitted efficiency, or the measured
    # achievable matmul fraction it multiplies): no price, no power figure
    top = ranking(ds, 1)["time_to_train_s"][0][0]
    assert top.startswith("calibration.") or top.endswith(".matmul_peak_fraction"), top
    # the grid intensity acts on carbon only
    g = "grid.usa.kg_per_kwh"
    assert float(ST.sel(objective="carbon_per_token_kg", input=g)) > 1e-3
    for m in ("time_to_train_s", "energy_per_token_j", "cost_per_token_usd"):
        assert abs(float(ST.sel(objective=m, input=g))) < 0.02


def test_cli_sensitivity_on_space(tmp_path, capsys):
    png = tmp_path / "s.png"
    rc = main(["sensitivity", "studies/spaces/small-llama3-70b.toml", "--n", "32", "--plot", str(png)])
    out = capsys.readouterr().out
    assert rc == 0 and png.stat().st_size > 1000
    assert "S1" in out and "var:" in out


def test_cli_sensitivity_bad_n(capsys):
    assert main(["sensitivity", SCENARIO, "--n", "100"]) == 2
    assert "power of two" in capsys.readouterr().err


def test_space_uncertainty_table_is_used(tmp_path):
    """A space's [uncertainty] table (samples/seed for robust search, plus input overrides)
    feeds the sensitivity inputs: a widened switch price shows up for cost only."""
    import tomllib
    doc = tomllib.loads(open("studies/spaces/small-llama3-70b.toml").read())
    name = "switches.quantum-2-qm9700.cost_usd"
    doc["uncertainty"] = {"samples": 8, name: {"dist": "uniform", "low": 1e4, "high": 2e5, "source": "test"}}
    st = study(doc, objectives=["time_to_train_s", "cost_per_token_usd"])
    i = next(x for x in st.inputs if x.name == name)
    assert (i.low, i.high) == (1e4, 2e5)
    ds = sobol_indices(st, n=64, seed=0)
    assert abs(float(ds["ST"].sel(objective="time_to_train_s", input=name))) < 0.02
    assert float(ds["ST"].sel(objective="cost_per_token_usd", input=name)) > 0.005
