"""Every study in --quick mode: its finding holds on the dataset it wrote, the summary's
numbers are the dataset's (recomputed here from the file read back), and the figures exist."""
from __future__ import annotations

import numpy as np
import pytest

from studies import STUDIES
from studies.common import num, pct, read_dataset, run_study

FAST = ("png",)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    cache = {}

    def get(name, formats=FAST):
        if name not in cache:
            out = tmp_path_factory.mktemp(name)
            cache[name] = run_study(name, quick=True, out=out, formats=formats, progress=lambda s: None)
        return cache[name]
    return get


def _reloaded(r, name):
    import importlib
    from studies import module_name
    mod = importlib.import_module(module_name(name))
    ds = read_dataset(r["out"] / f"{name}.nc")
    return ds, mod.findings(ds), (r["out"] / "summary.md").read_text()


def test_energy_breakdown_all_formats_and_finding(runs):
    r = runs("energy-breakdown", ("png", "svg", "pdf", "html"))
    for ext in ("png", "svg", "pdf", "html"):
        f = r["out"] / f"energy-breakdown.{ext}"
        assert f.stat().st_size > 5000, f
    assert (r["out"] / "energy-breakdown.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (r["out"] / "energy-breakdown.pdf").read_bytes()[:5] == b"%PDF-"
    ds, f, text = _reloaded(r, "energy-breakdown")
    # the displayed components add up to the model's energy per token (nothing lost or doubled)
    np.testing.assert_allclose(f["stacked"], ds["energy_per_token_j"].values, rtol=1e-9)
    # CPO's optics draw less than pluggables' on the same cluster
    assert f["cpo_optics_j"] < f["pluggable_optics_j"]
    assert f"{num(f['pluggable_optics_j'])} to {num(f['cpo_optics_j'])} J/token" in text
    for i, lab in enumerate(f["labels"]):
        assert f"| {lab} | {num(f['total'][i])} |" in text


def test_optical_scale_out(runs):
    r = runs("optical-scale-out", ("png", "html"))
    ds, f, text = _reloaded(r, "optical-scale-out")
    assert len(f) == 3
    for job, q in f.items():
        assert q["paired"] > 0
        # CPO beats pluggables on energy per token on every identical design, and at the best
        assert q["cpo_wins"] == q["paired"]
        assert q["tech"]["cpo"]["best_energy_j"] < q["tech"]["pluggable"]["best_energy_j"]
        assert f"Energy ranking at each technology's best design: {' < '.join(q['ranking'])}." in text
        assert f"on {q['cpo_wins']} of {q['paired']} identical designs" in text
        for t, v in q["tech"].items():
            lo, hi = v["energy_band_j"]
            assert (f"| {t} | {num(v['best_energy_j'])} | {num(lo)} to {num(hi)} | "
                    f"{num(v['best_cost_usd'] * 1e6)} |") in text
    # the MoE job runs with expert parallelism, and its all-to-all costs time (it crosses servers)
    moe = np.array(["mixtral" in j for j in ds["job"].values])
    assert moe.any() and (ds["ep"].values[moe] > 1).all()
    assert np.nanmax(ds["time_s_moe_comm"].values[moe & ds["valid"].values.astype(bool)]) > 0


def test_optical_scale_out_bands(runs):
    """5-95 % bands over joint samples of the uncertain inputs, stored in the dataset for
    every design on a technology's front: they bracket the deterministic value, have a
    width, and the summary states whether the energy ranking survives, with the stored numbers."""
    from studies.optical_scale_out import BAND_METRICS, front_designs
    r = runs("optical-scale-out", ("png", "html"))
    for ext in ("png", "html"):
        assert (r["out"] / f"optical-scale-out.{ext}").stat().st_size > 5000
    ds, f, text = _reloaded(r, "optical-scale-out")
    n = int(ds.attrs["band_samples"])
    assert n >= 16 and ds.sizes["sample"] == n
    for job in f:
        sub = ds.isel(design=np.flatnonzero(ds["job"].values == job))
        rows = front_designs(sub)
        assert len(rows) >= len(f[job]["tech"])
        for m in BAND_METRICS:
            v = sub[m].values[rows]
            lo, mid, hi = (sub[f"{m}_{q}"].values[rows] for q in ("q05", "q50", "q95"))
            assert np.isfinite(lo).all() and np.isfinite(hi).all(), m
            assert np.all(lo <= v) and np.all(v <= hi), m
            assert np.all(lo <= mid) and np.all(mid <= hi), m
            assert np.all(hi - lo > 0.01 * v), m          # non-degenerate: wider than 1 %
        # the stored quantiles are those of the stored samples
        e = sub["energy_per_token_j_samples"].values[:, rows]
        np.testing.assert_allclose(np.quantile(e, 0.95, axis=0), sub["energy_per_token_j_q95"].values[rows])
        off = np.setdiff1d(np.arange(sub.sizes["design"]), rows)
        assert np.isnan(sub["energy_per_token_j_q05"].values[off]).all()
    for job, q in f.items():
        u, p, c = q["uncertainty"], q["tech"]["pluggable"], q["tech"]["cpo"]
        assert u["samples"] == n and 0 <= u["ranking_holds"] <= n
        assert u["bands_overlap"] == (max(p["energy_band_j"][0], c["energy_band_j"][0])
                                      <= min(p["energy_band_j"][1], c["energy_band_j"][1]))
        assert (f"is {num(p['energy_band_j'][0])} to {num(p['energy_band_j'][1])} J with pluggables and "
                f"{num(c['energy_band_j'][0])} to {num(c['energy_band_j'][1])} J with CPO: the bands "
                f"{'overlap' if u['bands_overlap'] else 'do not overlap'}.") in text
        assert f"in {u['cpo_wins']} of {n} samples (saving {pct(u['saving_q50'])}" in text
        assert f"the whole ranking above holds in {u['ranking_holds']} of {n} samples" in text
        assert u["ranking_holds"] <= min(k for *_, k in u["pairs"])   # all pairs hold => ranking holds
        assert ", ".join(f"{a} < {b} {k}" for a, b, k in u["pairs"]) in text
        # CPO's advantage is smaller than the band width, yet holds sample by sample
        assert u["bands_overlap"] and u["cpo_wins"] == n and u["saving_q05"] > 0


def test_reconfigurable_topology(runs):
    r = runs("reconfigurable-topology")
    ds, f, text = _reloaded(r, "reconfigurable-topology")
    for job, q in f.items():
        p = q["per-phase"]
        # cost grows with the reconfiguration time; fast switching beats every static network,
        # seconds-slow switching loses: a break-even time exists inside the range
        assert p["monotone"] and q["per-step"]["monotone"]
        assert p["cost_fastest"] < q["best_static_cost"] < p["cost_slowest"]
        assert p["t_min"] < p["break_even_s"] < p["t_max"]
        assert f"breaks even with the best static network at {num(p['break_even_s'] * 1e3)} ms" in text
        assert f"Best static network: {q['best_static']} at {num(q['best_static_cost'] * 1e6)}" in text


def test_break_even_interpolation():
    from studies.reconfigurable_topology import break_even
    t = np.array([1e-3, 1e-2, 1e-1, 1.0])
    y = np.array([1.0, 1.0, 2.0, 4.0])
    assert break_even(t, y, 1.5) == pytest.approx(10 ** -1.5)       # halfway in log t
    assert np.isnan(break_even(t, y, 0.5)) and break_even(t, y, 5.0) == np.inf


def test_scale_and_reliability(runs):
    r = runs("scale-and-reliability")
    ds, f, text = _reloaded(r, "scale-and-reliability")
    for (acct, o), q in f.items():
        assert q["goodput_monotone"], (acct, o)
        assert f"| {acct} | {o} | {q['best_devices']:,} | {num(q['best_days'])} |" in text
    # network failures cost goodput, pluggables (higher FIT) more than CPO, at every cluster size
    a, p, c = (f[("all but the network", "pluggable")], f[("all incl. network (BOM)", "pluggable")],
               f[("all incl. network (BOM)", "cpo")])
    n = min(len(p["goodput"]), len(c["goodput"]))
    assert np.all(p["goodput"][:n] <= c["goodput"][:n]) and np.all(c["goodput"][:n] <= a["goodput"][:n])
    # more failures never move the time-optimal cluster size up
    assert p["best_devices"] <= a["best_devices"]


def test_chiplet_granularity(runs):
    r = runs("chiplet-granularity")
    ds, f, text = _reloaded(r, "chiplet-granularity")
    ok = ds["valid"].values
    assert f["best_cost"] == pytest.approx(ds["cost_per_token_usd"].values[ok].min())
    # the marked optimum is on the (time, cost) front of the valid designs
    t, c = ds["time_to_train_s"].values, ds["cost_per_token_usd"].values
    i = f["best"]
    assert not np.any(ok & (t <= t[i]) & (c < c[i]))
    assert f["best_cost"] <= f["mono_cost"]
    assert f"{num(f['best_cost'] * 1e6)} USD per million tokens, {num(f['best_days'])} days" in text
    assert f"splitting saves {pct(f['multi_vs_mono'])}" in text


def test_codesign_frontier(runs):
    r = runs("codesign-frontier")
    ds, f, text = _reloaded(r, "codesign-frontier")
    s = f["searches"]
    joint = s["joint co-design"]["best_cost"]
    for k, v in s.items():
        assert v["designs"] > 0, k
        assert joint <= v["best_cost"], k       # the restricted grids are subsets of the joint one
        assert f"| {k} | {v['designs']:,} | {num(v['best_cost'] * 1e6)} |" in text
    # the joint optimum is within budget and valid, and a shipped platform pairing
    i = s["joint co-design"]["index"]
    assert ds["valid"].values[i] and ds["capex_usd"].values[i] <= ds.attrs["budget_usd"]
    from explore.figures import platform_whatif
    assert not platform_whatif(ds["accelerator"].values, ds["scale_up_link"].values,
                               ds["scale_up_size"].values).any()


def test_every_study_is_tested():
    names = {n.split("test_")[-1].replace("_", "-") for n in globals() if n.startswith("test_")}
    assert set(STUDIES) - {"energy-breakdown"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("name", STUDIES)
def test_study_full_mode(name, tmp_path):
    r = run_study(name, quick=False, out=tmp_path, progress=lambda s: None)
    assert "full mode" in r["summary"] and (tmp_path / "summary.md").read_text() == r["summary"]
    for ext in ("png", "svg", "pdf", "html"):
        assert list(tmp_path.glob(f"*.{ext}")), ext


def test_python_dash_m_entry_point(tmp_path):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "studies.energy_breakdown", "--quick", "--out",
                        str(tmp_path), "--formats", "png"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "# Energy breakdown" in r.stdout and (tmp_path / "energy-breakdown.png").exists()
