"""Every shipped scenario evaluates, and every study script runs (pymoo's test_examples spirit)."""
import subprocess
import sys
from pathlib import Path

import pytest

import explore

SCENARIOS = sorted(Path("studies/scenarios").glob("*.toml"))
# stand-alone scripts (the studies package's modules run as `python -m studies.NAME`,
# tested in tests/studies/)
STUDIES = sorted(p for p in Path("studies").glob("*.py")
                 if "from studies" not in p.read_text() and p.name != "__init__.py")


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_shipped_scenario_evaluates(path):
    ds = explore.evaluate(explore.load_scenario(path))
    assert ds.sizes["design"] >= 1
    assert bool(ds["valid"].any()), f"{path}: no valid design: {set(ds['reason'].values)}"


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.name)
def test_study_script_runs(path, tmp_path):
    r = subprocess.run([sys.executable, str(path.resolve())], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]


# one notebook per major study re-runs that study's --quick mode (already asserted in
# tests/studies/): slow-marked to keep the default run lean
STUDY_NOTEBOOKS = ("optical_scale_out.ipynb", "reconfigurable_topology.ipynb", "codesign_frontier.ipynb",
                   "chiplet_granularity.ipynb", "energy_breakdown.ipynb", "scale_and_reliability.ipynb")
NOTEBOOKS = [pytest.param(p, marks=pytest.mark.slow) if p.name in STUDY_NOTEBOOKS else p
             for p in sorted(Path("studies/notebooks").glob("*.ipynb"))]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: getattr(p, "name", str(p)))
def test_notebook_executes(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    monkeypatch.setenv("LIGHTPATH_OUT", str(tmp_path))
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    assert list(tmp_path.glob("*.html")), "the notebook writes its plot"
    if path.name != "plans_quicklook.ipynb":
        assert list(tmp_path.glob("*.png")), "figures are also saved as PNG (shown on GitHub)"
