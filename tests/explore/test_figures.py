"""explore.figures: units, log axes, the Pareto front against brute force, what-if flags,
and the CLI's figures (search --figure, pareto --html, study errors)."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from explore import figures as fg


def test_human_units():
    assert fg.in_units("time_to_train_s", [86400 * 2])[0][0] == pytest.approx(2.0)
    assert fg.in_units("time_to_train_s", [1.0])[1] == "time to train [days]"
    assert fg.in_units("cost_per_token_usd", [1.5e-6])[0][0] == pytest.approx(1.5)
    assert "USD per million tokens" in fg.axis_label("cost_per_token_usd")
    assert fg.human("power_w", [2e7])[1] == "MW" and fg.human("power_w", [3e4])[1] == "kW"
    assert fg.fmt(0.012345, "J/token") == "0.0123 J/token"
    assert fg.should_log([1, 1000]) and not fg.should_log([1, 5])


def test_front_mask_matches_brute_force():
    rng = np.random.default_rng(3)
    x, y = rng.random(300), rng.random(300)
    x[5] = np.nan
    m = fg.front_mask(x, y)
    brute = np.array([np.isfinite(x[i]) and not np.any((x <= x[i]) & (y <= y[i]) &
                                                       ((x < x[i]) | (y < y[i])))
                      for i in range(300)])
    assert np.array_equal(m, brute)


def test_platform_whatif():
    w = fg.platform_whatif(["mi300x", "b200", "b200", "h100-sxm-80gb", "custom"],
                           ["nvlink5", "nvlink5", "nvlink5", "nvlink4", "nvlink5"], [72, 72, 16, 8, 72])
    assert w.tolist() == [True, False, True, False, False]


def test_scatter_panel_groups_and_static_export(tmp_path):
    n = 40
    rng = np.random.default_rng(0)
    ds = xr.Dataset({"time_to_train_s": ("design", rng.uniform(1e5, 1e7, n)),
                     "cost_per_token_usd": ("design", rng.uniform(1e-7, 1e-6, n)),
                     "valid": ("design", np.arange(n) % 7 != 0)},
                    coords={"tech": ("design", np.where(np.arange(n) % 2, "cpo", "pluggable"))})
    p = fg.scatter_panel(ds, "time_to_train_s", "cost_per_token_usd", by="tech", hover_fields=["tech"])
    assert p.xlog and p.xlabel == "time to train [days]"
    cloud = p.series[0]
    assert cloud.kind == "cloud" and len(cloud.x) == int(ds["valid"].sum())
    assert {s.name for s in p.series[1:]} == {"cpo", "pluggable"}
    files = fg.save(fg.Figure("t", "s", [p]), tmp_path, "f")
    assert [f.suffix for f in files] == [".png", ".svg", ".pdf", ".html"]
    assert "<svg" in (tmp_path / "f.svg").read_text()[:500]
    assert {t.type for t in fg.to_plotly(fg.Figure("t", "s", [p])).data} == {"scatter"}   # no WebGL


def test_error_bars_span_the_bands_in_both_renderers(tmp_path):
    """bands= gives the front points error bars from the lower to the upper value (human
    units), NaN rows none; matplotlib draws them as line collections, plotly as segments."""
    n = 12
    t = np.linspace(1, 2, n) * 86400
    c = np.linspace(2, 1, n) * 1e-6           # every design on the front
    ds = xr.Dataset({"time_to_train_s": ("design", t), "cost_per_token_usd": ("design", c),
                     "valid": ("design", np.ones(n, bool))})
    lo, hi = c * 0.9, c * 1.2
    lo[3] = hi[3] = np.nan
    p = fg.scatter_panel(ds, "time_to_train_s", "cost_per_token_usd", fronts="all", zoom=0.01,
                         bands={"cost_per_token_usd": (lo, hi), "time_to_train_s": (t * 0.95, t * 1.1)})
    front = p.series[1]
    order = np.argsort(t)
    np.testing.assert_allclose(front.yband[0], lo[order] * 1e6)
    np.testing.assert_allclose(front.xband[1], t[order] * 1.1 / 86400)
    assert p.ylim[1] >= np.nanmax(hi) * 1e6 and p.xlim[0] <= t.min() * 0.95 / 86400   # bars inside
    assert "band: 1.8 to 2.4 USD per million tokens" in front.text[0]
    m = fg.to_matplotlib(fg.Figure("t", "", [p]))
    from matplotlib.collections import LineCollection
    segs = [seg for col in m.axes[0].collections if isinstance(col, LineCollection)
            for seg in col.get_segments()]
    ybars = sorted((float(sg[0, 1]), float(sg[1, 1])) for sg in segs if sg[0, 0] == sg[1, 0])
    np.testing.assert_allclose(ybars, sorted(zip(np.delete(lo, 3) * 1e6, np.delete(hi, 3) * 1e6)))
    assert len(segs) == 2 * n - 1                     # one y bar per finite band, one x bar each
    import matplotlib.pyplot as plt
    plt.close(m)
    bars = [tr for tr in fg.to_plotly(fg.Figure("t", "", [p])).data if tr.mode == "lines"]
    assert sum(v is not None for tr in bars for v in tr.y) == 2 * (2 * n - 1)
    assert {tr.type for tr in bars} == {"scatter"}


def test_cli_search_and_pareto_figures(tmp_path, capsys):
    from explore.cli.main import main
    space = "studies/spaces/codesign-gpt3-175b.toml"
    out = tmp_path / "r.nc"
    assert main(["search", space, "--pop", "12", "--gens", "4", "--out", str(out), "--no-progress",
                 "--figure", str(tmp_path / "f.png"), "--figure", str(tmp_path / "f.svg")]) == 0
    assert (tmp_path / "f.png").stat().st_size > 5000 and (tmp_path / "f.svg").exists()
    assert main(["pareto", str(out), "--html", str(tmp_path / "p.html"), "--figure",
                 str(tmp_path / "p.pdf")]) == 0
    html = (tmp_path / "p.html").read_text()
    assert "time to train [days]" in html and "USD per million tokens" in html
    assert main(["pareto", str(out), "--figure", str(tmp_path / "p.jpg")]) == 2
    assert "--figure" in capsys.readouterr().err


def test_cli_study_errors(capsys):
    from explore.cli.main import main
    assert main(["study", "no-such-study"]) == 2
    err = capsys.readouterr().err
    assert "no-such-study" in err and "optical-scale-out" in err
    assert main(["study", "--list"]) == 0
    assert "codesign-frontier" in capsys.readouterr().out


def test_cli_study_runs_and_writes(tmp_path, capsys):
    from explore.cli.main import main
    assert main(["study", "energy-breakdown", "--quick", "--out", str(tmp_path), "--formats", "png"]) == 0
    assert (tmp_path / "energy-breakdown.png").exists() and (tmp_path / "summary.md").exists()
    assert "J/token" in capsys.readouterr().out
    assert main(["study", "energy-breakdown", "--quick", "--out", str(tmp_path), "--formats", "gif"]) == 2
    assert "gif" in capsys.readouterr().err


def test_colour_bar_panel_renders(tmp_path):
    n = 30
    ds = xr.Dataset({"time_to_train_s": ("design", np.linspace(1e5, 1e6, n)),
                     "energy_per_token_j": ("design", np.linspace(5, 2, n)),
                     "valid": ("design", np.ones(n, bool))},
                    coords={"devices": ("design", np.arange(n) * 128 + 128)})
    p = fg.scatter_panel(ds, "time_to_train_s", "energy_per_token_j", color="devices", fronts="none")
    assert p.clabel == "accelerators" and p.series[1].cvalues is not None
    fg.save(fg.Figure("colour", "", [p]), tmp_path, "c", formats=("png", "html"))
    assert (tmp_path / "c.png").stat().st_size > 5000
    assert "colorbar" in (tmp_path / "c.html").read_text()
