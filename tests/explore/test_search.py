"""Search: analytic front, determinism, resume, feasibility, signs, CLI errors."""
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings as hsettings, strategies as st

from explore.cli.main import main
from explore.search.problem import Encoding, SearchSettings, run_search, settings_for
from explore.search.results import hypervolume, nondominated, read_result
from explore.search.space import SpaceError, load_space
from explore.search.variables import Variable

ROOT = Path(__file__).resolve().parents[2]
SPACES = ROOT / "studies" / "spaces"
SMALL = SPACES / "small-llama3-70b.toml"
BUDGET = SPACES / "codesign-gpt3-175b-budget.toml"


class AnalyticSpace:
    """x in {0..40}, y in [0, 1]; minimise f1 = x/40, maximise g = sqrt(x/40) - 1 - y;
    subject to x >= 4. The true front is y = 0, x = 4..40 (37 points)."""
    name = path = "analytic"
    source_text = "analytic"
    fingerprint = "analytic"
    search: dict = {}
    couplings: dict = {}
    variables = [Variable("x", "x", "int", 0.0, 40.0), Variable("y", "y", "real", 0.0, 1.0)]
    objectives = [("f1", "min"), ("g", "max")]
    constraint_names = ["valid", "x_min"]
    signs = np.array([1.0, -1.0])

    def evaluate(self, cols):
        x, y = np.asarray(cols["x"], float), np.asarray(cols["y"], float)
        ds = xr.Dataset({"f1": ("design", x / 40), "g": ("design", np.sqrt(x / 40) - 1 - y),
                         "valid": ("design", x >= 4), "reason": ("design", np.where(x >= 4, "", "x < 4"))},
                        coords={"design": np.arange(len(x))})
        return ds.assign_coords(x=("design", np.asarray(cols["x"])), y=("design", y))

    def violation(self, ds):
        x = ds["x"].values.astype(float)
        return np.column_stack([np.zeros(len(x)), (4 - x) / 4])

    def objective_values(self, ds):
        return np.column_stack([ds["f1"].values, ds["g"].values])


def _dominated_pairs(F):
    le = (F[:, None, :] <= F[None, :, :]).all(axis=2)
    lt = (F[:, None, :] < F[None, :, :]).any(axis=2)
    return le & lt


def test_analytic_front_is_found_with_the_users_signs():
    sp = AnalyticSpace()
    ds = run_search(sp, SearchSettings(pop=40, gens=60, seed=3))
    x, y = ds["x"].values, ds["y"].values
    F = ds["objectives"].values
    assert (x >= 4).all()                                     # the constraint holds
    assert (F[:, 1] <= 0).all()                               # g comes back as the user wrote it
    assert np.allclose(F[:, 1], np.sqrt(x / 40) - 1 - y)
    assert np.allclose(F[:, 0], x / 40)
    true = np.column_stack([np.arange(4, 41) / 40, -(np.sqrt(np.arange(4, 41) / 40) - 1)])
    ref = np.array([1.1, 1.0])
    ratio = hypervolume(F * sp.signs, ref) / hypervolume(true, ref)
    assert 0.97 <= ratio <= 1.0 + 1e-12
    assert y.max() < 0.05
    hv = ds["hypervolume"].values
    assert (np.diff(hv) >= -1e-12).all()                      # archive HV never decreases
    assert ds.attrs["hv_reference_point"] and ds.attrs["seed"] == 3


@hsettings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.integers(2, 4), st.integers(0, 10 ** 6))
def test_nondominated_matches_brute_force(n, k, seed):
    rng = np.random.default_rng(seed)
    F = rng.integers(0, 6, size=(n, k)).astype(float)         # many ties on purpose
    got = nondominated(F)
    want = np.flatnonzero(~_dominated_pairs(F).any(axis=0))
    assert list(got) == list(want)


def test_encoding_round_trip():
    s = load_space(SMALL)
    enc = Encoding(tuple(s.variables))
    rng = np.random.default_rng(0)
    cols = {v.name: v.grid_values()[rng.integers(0, v.size, 50)] for v in s.variables}
    back = enc.decode(enc.encode(cols))
    for v in s.variables:
        assert list(back[v.name]) == list(cols[v.name])


def _quick(space, **kw):
    return settings_for(space, **({"pop": 16, "gens": 4, "evaluations": 0} | kw))


def test_fixed_seed_is_deterministic_and_seeds_differ():
    s = load_space(SMALL)
    a = run_search(s, _quick(s, seed=7))
    b = run_search(s, _quick(s, seed=7))
    xr.testing.assert_identical(a, b)
    c = run_search(s, _quick(s, seed=8))
    assert not np.array_equal(a["population_x"].values, c["population_x"].values)


def test_resume_equals_uninterrupted(tmp_path):
    s = load_space(SMALL)
    full = run_search(s, _quick(s, gens=6, seed=5), out=tmp_path / "full.nc")

    def stop(gen):
        if gen == 3:
            raise KeyboardInterrupt

    out = tmp_path / "cut.nc"
    with pytest.raises(KeyboardInterrupt):
        run_search(s, _quick(s, gens=6, seed=5), out=out, on_generation=stop)
    assert Path(str(out) + ".ckpt").exists() and not out.exists()
    resumed = run_search(s, _quick(s, gens=6, seed=5), out=out, resume=True)
    xr.testing.assert_identical(full, resumed)
    assert list(resumed["generation"].values) == [1, 2, 3, 4, 5, 6]
    xr.testing.assert_identical(read_result(out), read_result(tmp_path / "full.nc"))
    assert not list(tmp_path.glob("*.tmp"))
    with pytest.raises(SpaceError, match="cannot resume: seed was 5, now 6"):
        run_search(s, _quick(s, gens=6, seed=6), out=out, resume=True)


@pytest.mark.parametrize("path, plan", [(BUDGET, "search"), (SMALL, "enumerate")])
def test_returned_designs_are_feasible_and_nondominated(path, plan):
    s = load_space(path)
    ds = run_search(s, settings_for(s, pop=8, gens=3, plan=plan, evaluations=0))
    assert ds.sizes["design"] >= 1
    assert ds["valid"].values.all()
    assert (s.violation(ds) <= 0).all()
    if "capex_usd" in s.constraint_names:
        assert (ds["capex_usd"].values <= 5e7 * (1 + 1e-9)).all()
    F = ds["objectives"].values * s.signs
    assert not _dominated_pairs(F).any()
    assert np.allclose(ds["objectives"].values, s.objective_values(ds))
    if plan == "enumerate":                                   # every plan of each candidate
        n_plans = np.prod([v.size for v in s.variables if v.field.startswith("parallelism.")])
        assert ds.attrs["evaluations"] == 3 * 8 * n_plans


def test_max_objective_keeps_its_sign():
    doc = {"base": str(ROOT / "studies" / "scenarios" / "gpt3-175b-1024-a100.toml"),
           "variables": {"tp": {"field": "parallelism.tp", "values": [1, 2, 4, 8]},
                         "pp": {"field": "parallelism.pp", "values": [4, 8, 16, 32]},
                         "mb": {"field": "parallelism.microbatch", "values": [1, 2]}},
           "derived": {"parallelism.dp": "system.devices / (parallelism.tp * parallelism.pp)"},
           "objectives": {"mfu": "max", "memory_per_device_bytes": "min"}}
    s = load_space(doc)
    ds = run_search(s, settings_for(s, pop=12, gens=5))
    mfu = ds["objectives"].sel(objective="mfu").values
    assert (mfu > 0).all() and np.allclose(mfu, ds["mfu"].values)
    # exhaustive check: the best mfu of the grid is on the front
    from explore.search.problem import _grid
    every = s.evaluate(_grid(s.variables))
    best = np.nanmax(np.where(every["valid"].values, every["mfu"].values, np.nan))
    assert mfu.max() == pytest.approx(best)


# ----------------------------------------------------------------------------- CLI

BAD = {
    "unknown field": ('[variables.tp]\nfield = "parallelism.tpp"\nvalues = [1, 2]\n', "did you mean"),
    "empty choices": ('[variables.acc]\nfield = "system.accelerator"\nchoices = []\n', "empty"),
    "low > high": ('[variables.pp]\nfield = "parallelism.pp"\nlow = 9\nhigh = 2\n', "low = 9 > high = 2"),
    "objective": ('[variables.tp]\nfield = "parallelism.tp"\nvalues = [8]\n[objectives]\nspeed = "max"\n',
                  "objectives.speed: not a numeric metric"),
    "constraint": ('[variables.tp]\nfield = "parallelism.tp"\nvalues = [8]\n'
                   '[constraints]\npower_w = { min = 2e7, max = 1e7 }\n', "can never be met"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_cli_bad_space_exits_2_with_one_line(case, tmp_path, capsys):
    body, needle = BAD[case]
    p = tmp_path / "bad.toml"
    p.write_text(f'base = "{ROOT / "studies" / "scenarios" / "gpt3-175b-1024-a100.toml"}"\n' + body)
    assert main(["search", str(p), "--out", str(tmp_path / "r.nc")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err


def test_cli_search_and_pareto(tmp_path, capsys):
    out, html = tmp_path / "r.nc", tmp_path / "front.html"
    rc = main(["search", str(SMALL), "--out", str(out), "--pop", "12", "--gens", "3",
               "--no-progress", "--seed", "2"])
    assert rc == 0 and out.exists()
    text = capsys.readouterr().out
    assert "Pareto designs" in text and "time_to_train_s (min)" in text
    assert main(["pareto", str(out), "--html", str(html)]) == 0
    page = html.read_text()
    assert "plotly" in page.lower() and "accelerator = " in page    # hover shows the design
    assert main(["pareto", str(SMALL)]) == 2                         # not a result file
    assert main(["search", str(SMALL), "--algorithm", "nsga9"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'nsga2'" in err or "nsga3" in err


@pytest.mark.parametrize("algorithm", ["nsga3", "smsemoa"])
def test_other_algorithms_run_and_return_feasible_fronts(algorithm):
    s = load_space(SMALL)
    ds = run_search(s, settings_for(s, algorithm=algorithm, pop=12, gens=3, evaluations=0))
    assert ds.attrs["algorithm"] == algorithm and ds.sizes["design"] >= 1
    assert ds["valid"].values.all()
    assert not _dominated_pairs(ds["objectives"].values * s.signs).any()


def test_cli_resume_after_interrupt_uses_the_runs_settings(tmp_path, capsys, monkeypatch):
    from explore.search import problem as search
    out = tmp_path / "r.nc"
    real = search.run_search

    def interrupted(*args, **kw):
        def stop(gen):
            if gen == 2:
                raise KeyboardInterrupt
        return real(*args, **kw, on_generation=stop)

    monkeypatch.setattr(search, "run_search", interrupted)
    args = ["search", str(SMALL), "--out", str(out), "--pop", "10", "--gens", "4", "--seed", "3",
            "--no-progress"]
    assert main(args) == 130
    assert "--resume" in capsys.readouterr().err
    monkeypatch.setattr(search, "run_search", real)
    assert main(["search", str(SMALL), "--out", str(out), "--resume", "--no-progress"]) == 0
    resumed = read_result(out)
    s = load_space(SMALL)
    full = run_search(s, settings_for(s, pop=10, gens=4, seed=3))
    assert list(resumed["generation"].values) == [1, 2, 3, 4]
    assert np.array_equal(resumed["objectives"].values, full["objectives"].values)
    assert np.array_equal(resumed["hypervolume"].values, full["hypervolume"].values)


def test_enumerate_without_hardware_variables_is_the_exhaustive_front():
    from explore.search.problem import _grid
    s = load_space(SPACES / "plan-gpt3-175b-1024-a100.toml")
    ds = run_search(s, settings_for(s, plan="enumerate"))
    every = s.evaluate(_grid(s.variables))
    F = s.signs * s.objective_values(every)
    feas = (s.violation(every) <= 0).all(axis=1)
    front = F[feas][nondominated(F[feas])]
    got = ds["objectives"].values * s.signs
    assert ds.attrs["n_gen"] == 1 and ds.attrs["evaluations"] < every.sizes["design"]   # pruned
    assert sorted(map(tuple, got)) == sorted(map(tuple, front))


def test_pareto_figures_show_the_design_on_hover():
    from explore.search.plot import pareto_figure, whatif
    s3 = load_space(SPACES / "codesign-gpt3-175b.toml")
    ds3 = run_search(s3, settings_for(s3, pop=24, gens=3))
    assert ds3.sizes["design"] > 0
    fig3 = pareto_figure(ds3)
    # three objectives: one panel per pair, every Pareto design drawn (and hovered) in each
    front = [t for t in fig3.data if t.name not in ("feasible final population",)]
    assert sum(len(t.x) for t in front) == 3 * ds3.sizes["design"]
    assert all(t.type == "scatter" for t in fig3.data)
    assert "accelerator = " in front[0].text[0] and "devices = " in front[0].text[0]
    assert "time to train [days]" in fig3.layout.xaxis.title.text
    assert not whatif(ds3).any()          # the shipped space holds shipped platforms only
    s2 = load_space(SMALL)
    ds2 = run_search(s2, settings_for(s2, pop=12, gens=2))
    fig2 = pareto_figure(ds2)
    pts = [t for t in fig2.data if t.name != "feasible final population"]
    F = ds2["objectives"].values
    days = sorted(F[:, 0] / 86400) if ds2["objective"].values[0] == "time_to_train_s" else sorted(F[:, 0])
    assert np.allclose(sorted(x for t in pts for x in t.x), days)
    assert ds2.attrs["pymoo_version"] != "unknown"


def test_shipped_platforms_coupling():
    s = load_space(SPACES / "codesign-gpt3-175b.toml")
    cols = {v.name: np.repeat(v.grid_values()[:1], 3) for v in s.variables}
    cols["accelerator"] = np.array(["mi300x", "b200", "b200"])
    cols["scale_up_link"] = np.array(["nvlink5", "nvlink5", "nvlink5"])
    cols["scale_up_size"] = np.array([72, 72, 8])
    ds = s.evaluate(cols)
    assert ds["reason"].values[0].startswith("what-if platform: mi300x")
    assert not ds["reason"].values[1].startswith("what-if") and not ds["reason"].values[2].startswith("what-if")
    with pytest.raises(SpaceError, match="couplings.platforms"):
        load_space({"base": str(SPACES / "../scenarios/gpt3-175b-1024-a100.toml"),
                    "variables": {"tp": {"field": "parallelism.tp", "values": [1, 2]}},
                    "couplings": {"platforms": "any"}})


def test_chunked_evaluation_gives_the_same_result(monkeypatch):
    from explore.search import problem as search
    s = load_space(SMALL)
    flags = dict(plan="enumerate", pop=6, gens=2, evaluations=0, seed=4)
    whole = run_search(s, settings_for(s, **flags))
    monkeypatch.setattr(search, "MAX_BATCH", 1000)           # one candidate (720 plans) a call
    chunked = run_search(s, settings_for(s, **flags))
    xr.testing.assert_identical(whole, chunked)


def test_resume_can_extend_a_finished_run(tmp_path):
    s = load_space(SMALL)
    out = tmp_path / "r.nc"
    run_search(s, _quick(s, gens=2, seed=9), out=out)
    longer = run_search(s, _quick(s, gens=4, seed=9), out=out, resume=True)
    straight = run_search(s, _quick(s, gens=4, seed=9))
    xr.testing.assert_identical(longer, straight)
