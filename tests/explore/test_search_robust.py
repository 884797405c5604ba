"""Search robustness: every advertised algorithm resumes exactly, checkpoints are data (never
pickle), outputs are checked before the work, moocore sorting, normalised hypervolume, API."""
import json
import pickle
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import explore
from explore.cli.main import main
from explore.search.problem import ALGORITHMS, run_search, settings_for
from explore.search.results import (checkpoint_path, hypervolume, nondominated, nondominated_rank,
                                    read_result, save_checkpoint)
from explore.search.space import SpaceError, load_space

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "studies" / "spaces" / "small-llama3-70b.toml"


def _interrupt_at(gen):
    def stop(g):
        if g == gen:
            raise KeyboardInterrupt
    return stop


def test_readme_lists_exactly_the_algorithms():
    text = (ROOT / "README.md").read_text()
    listed = re.search(r'algorithm = "nsga2"\s+# (.*)', text).group(1)
    assert [a.strip() for a in listed.split("|")] == list(ALGORITHMS)


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_every_algorithm_runs_and_resumes_exactly(algorithm, tmp_path):
    s = load_space(SMALL)
    st = settings_for(s, algorithm=algorithm, pop=10, gens=4, seed=3, evaluations=0)
    full = run_search(s, st)
    assert full.sizes["design"] >= 1 and full["valid"].values.all()
    out = tmp_path / "r.nc"
    with pytest.raises(KeyboardInterrupt):
        run_search(s, st, out=out, on_generation=_interrupt_at(2))
    assert zipfile.is_zipfile(checkpoint_path(out))             # an npz archive, not a pickle
    resumed = run_search(s, st, out=out, resume=True)
    xr.testing.assert_identical(full, resumed)
    again = run_search(s, st)                                    # and the seed fixes the run
    xr.testing.assert_identical(full, again)


# ----------------------------------------------------------------------------- checkpoints

class _Boom:
    """Unpickling this object creates a file: proof that code ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def _ckpt_of_a_real_run(tmp_path):
    s = load_space(SMALL)
    st = settings_for(s, pop=8, gens=3, seed=2, evaluations=0)
    out = tmp_path / "r.nc"
    with pytest.raises(KeyboardInterrupt):
        run_search(s, st, out=out, on_generation=_interrupt_at(1))
    return s, st, out


def test_a_crafted_checkpoint_never_executes_code(tmp_path, capsys):
    s, st, out = _ckpt_of_a_real_run(tmp_path)
    ckpt = checkpoint_path(out)
    marker = tmp_path / "pwned"
    payloads = {
        "pickle": pickle.dumps(_Boom(marker)),
        "npz with a pickled object array": None,
    }
    with open(tmp_path / "obj.npz", "wb") as f:
        np.savez(f, meta=np.array([_Boom(marker)], dtype=object), digest=np.array("x"))
    payloads["npz with a pickled object array"] = (tmp_path / "obj.npz").read_bytes()
    assert not marker.exists()
    for name, blob in payloads.items():
        ckpt.write_bytes(blob)
        with pytest.raises(SpaceError, match="cannot resume"):
            run_search(s, st, out=out, resume=True)
        rc = main(["search", str(SMALL), "--out", str(out), "--resume", "--no-progress"])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and len(err.splitlines()) == 1 and "cannot resume" in err, name
        assert not marker.exists(), name


@pytest.mark.parametrize("case, needle", [
    ("list", "'meta' is a list"),
    ("no history", "lacks 'history'"),
    ("history too short", "history.hypervolume"),
    ("tampered", "digest mismatch"),
    ("truncated", "unreadable"),
])
def test_damaged_checkpoints_give_one_clear_error(case, needle, tmp_path):
    s, st, out = _ckpt_of_a_real_run(tmp_path)
    ckpt = checkpoint_path(out)
    with np.load(ckpt, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays.pop("meta")))
    arrays.pop("digest")
    for k in ("format", "version"):
        meta.pop(k)
    if case == "list":
        meta = [meta]
    elif case == "no history":
        del meta["history"]
    elif case == "history too short":
        meta["history"]["hypervolume"] = []
    if case == "list":          # save_checkpoint takes a dict: write the list by hand
        from explore.search.results import _digest
        text = json.dumps(meta)
        with open(ckpt, "wb") as f:
            np.savez(f, meta=np.array(text), digest=np.array(_digest(text, arrays)), **arrays)
    else:
        save_checkpoint(ckpt, meta, arrays)
    if case == "tampered":
        arrays["cache_f"] = arrays["cache_f"] * 0.5
        with np.load(ckpt, allow_pickle=False) as z:
            good_meta, good_digest = z["meta"], z["digest"]
        with open(ckpt, "wb") as f:
            np.savez(f, meta=good_meta, digest=good_digest, **arrays)
    if case == "truncated":
        ckpt.write_bytes(ckpt.read_bytes()[:100])
    with pytest.raises(SpaceError, match=re.escape(needle)):
        run_search(s, st, out=out, resume=True)


# ----------------------------------------------------------------------------- outputs

def test_outputs_are_checked_before_the_work(tmp_path, capsys):
    space = tmp_path / "sp.toml"
    text = SMALL.read_text().replace('base = "', f'base = "{SMALL.parent}/')
    space.write_text(text)
    (tmp_path / "adir").mkdir()
    common = ["--pop", "4", "--gens", "1", "--no-progress"]
    cases = {
        "seed beyond int64": (["--out", str(tmp_path / "a.nc"), "--seed", str(2 ** 63)], "seed"),
        "out is a directory": (["--out", str(tmp_path / "adir")], "is a directory"),
        "html in a missing folder": (["--out", str(tmp_path / "b.nc"), "--html",
                                      str(tmp_path / "nope" / "f.html")], "does not exist"),
        "out is the space file": (["--out", str(space)], "refusing to overwrite"),
        "html is the space file": (["--out", str(tmp_path / "c.nc"), "--html", str(space)],
                                   "refusing to overwrite"),
    }
    for name, (args, needle) in cases.items():
        rc = main(["search", str(space), *args, *common])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and len(err.splitlines()) == 1 and needle in err, (name, err)
    assert space.read_text() == text                         # the input is never overwritten
    assert not list(tmp_path.glob("*.nc*"))                  # no work was done
    with pytest.raises(SpaceError, match="refusing to overwrite"):
        explore.search(space, out=space, pop=4, gens=1)
    assert space.read_text() == text


def test_pareto_on_a_result_without_senses_is_one_clear_error(tmp_path, capsys):
    s = load_space(SMALL)
    out = tmp_path / "r.nc"
    run_search(s, settings_for(s, pop=6, gens=1), out=out)
    ds = read_result(out)
    bad = ds.drop_vars("sense")
    for k in ("objective_senses", "objective_names"):
        bad.attrs.pop(k)
    bad.to_netcdf(tmp_path / "bad.nc")
    rc = main(["pareto", str(tmp_path / "bad.nc")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "no objectives declared" in err


# ----------------------------------------------------------------------------- sorting, HV, API

def _old_nondominated(F):
    """The hand-written filter this module used before moocore (kept as the reference)."""
    F = np.asarray(F, dtype=float)
    if not len(F):
        return np.zeros(0, dtype=int)
    le = (F[:, None, :] <= F[None, :, :]).all(axis=2)
    lt = (F[:, None, :] < F[None, :, :]).any(axis=2)
    return np.flatnonzero(~(le & lt).any(axis=0))


def _old_rank(F):
    rank, left, r = np.full(len(F), -1), np.arange(len(F)), 0
    while len(left):
        nd = _old_nondominated(F[left])
        rank[left[nd]] = r
        left, r = np.delete(left, nd), r + 1
    return rank


@pytest.mark.parametrize("k", [2, 3, 4])
def test_moocore_sorting_equals_the_old_loops_on_random_fronts(k):
    rng = np.random.default_rng(k)
    for trial in range(20):
        n = int(rng.integers(1, 400))
        F = rng.integers(0, 8, size=(n, k)).astype(float) if trial % 2 else rng.random((n, k))
        np.testing.assert_array_equal(nondominated(F), _old_nondominated(F))
        np.testing.assert_array_equal(nondominated_rank(F), _old_rank(F))
    from explore.sweep.accessor import pareto_mask
    F = rng.random((300, k))
    np.testing.assert_array_equal(np.flatnonzero(pareto_mask(F)), _old_nondominated(F))


def test_hypervolume_is_also_reported_normalised_to_the_reference_box():
    import moocore
    s = load_space(SMALL)
    ds = explore.search(s, pop=10, gens=4, seed=1)
    hv, hvn = ds["hypervolume"].values, ds["hypervolume_normalised"].values
    ref, ideal = np.array(ds.attrs["hv_reference_point"]), np.array(ds.attrs["hv_ideal_point"])
    F = ds["objectives"].values * s.signs
    assert np.allclose(ideal, F.min(axis=0))
    assert ((hvn >= 0) & (hvn <= 1)).all() and (np.diff(hvn) >= -1e-12).all()
    # independent: moocore's HV of the front scaled into the unit box
    unit = (F - ideal) / (ref - ideal)
    assert hvn[-1] == pytest.approx(moocore.hypervolume(unit, ref=np.ones(F.shape[1])), rel=1e-9)
    assert hvn[-1] == pytest.approx(hypervolume(F, ref) / np.prod(ref - ideal), rel=1e-12)
    assert np.allclose(hvn, hv / np.prod(ref - ideal), rtol=1e-12)    # one box for the history


def test_python_api_search_writes_returns_and_resumes(tmp_path):
    out = tmp_path / "api.nc"
    ds = explore.search(str(SMALL), out=out, pop=8, gens=2, seed=4)
    assert out.exists() and checkpoint_path(out).exists()
    xr.testing.assert_identical(read_result(out), read_result(out))
    assert ds.attrs["seed"] == 4 and ds.attrs["n_gen"] == 2
    longer = explore.search(str(SMALL), out=out, resume=True, gens=3)
    straight = explore.search(str(SMALL), pop=8, gens=3, seed=4)
    xr.testing.assert_identical(longer, straight)
    front = ds.lightpath.pareto()                            # accessor on a search result
    assert front.sizes["design"] == ds.sizes["design"]
    np.testing.assert_array_equal(front["time_to_train_s"].values, ds["time_to_train_s"].values)
