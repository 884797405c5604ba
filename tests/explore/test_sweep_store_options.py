"""[sweep] store (which metrics a sweep keeps) and reason codes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from explore.search.space import load_space
from explore.sweep import Layout, SweepError, evaluate_chunk
from explore.sweep.grid import DEFAULT_STORE, _probe

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "studies" / "scenarios" / "gpt3-175b-1024-a100.toml"


def space(store=None, tmp=None):
    text = f"""name = "store options"
base = "{BASE}"
[variables]
tp = {{ field = "parallelism.tp", values = [2, 4, 8] }}
pp = {{ field = "parallelism.pp", values = [3, 8, 16] }}
[derived]
"parallelism.dp" = "system.devices / (parallelism.tp * parallelism.pp)"
[objectives]
time_to_train_s = "min"
bubble_fraction = "min"
"""
    if store is not None:
        text += f"[sweep]\nstore = {store}\n"
    p = tmp / "s.toml"
    p.write_text(text)
    return load_space(p)


def test_default_store_is_the_default_set_plus_objectives(tmp_path):
    names = set(_probe(space(tmp=tmp_path)).data_vars)
    assert names == set(DEFAULT_STORE) | {"valid", "reason", "bubble_fraction"}


def test_store_patterns_and_all(tmp_path):
    names = set(_probe(space('["time_s_*", "mfu"]', tmp_path)).data_vars)
    assert {"time_s_compute", "time_s_pp_bubble", "mfu", "valid", "reason"} <= names
    assert "cost_per_token_usd" not in names and "capex_usd" not in names
    every = set(_probe(space('["all"]', tmp_path)).data_vars)
    assert len(every) > 60 and names < every


def test_unknown_store_name_is_refused_with_a_suggestion(tmp_path):
    with pytest.raises(SweepError, match=r"sweep.store: 'mfuu' is not a metric \(did you mean 'mfu'\?\)"):
        _probe(space('["mfuu"]', tmp_path))


def test_reason_codes_decode_to_the_reason_strings(tmp_path):
    s = space('["all"]', tmp_path)
    lay = Layout.for_grid([v.size for v in s.variables], 9)
    plain, with_codes = evaluate_chunk(s, lay, 0), evaluate_chunk(s, lay, 0, reason_codes=True)
    np.testing.assert_array_equal(plain["valid"].values, with_codes["valid"].values)
    text = plain["reason"].values
    coded = with_codes["reason"]
    assert coded.dtype.kind == "i"
    decoded = np.asarray(coded.attrs["codes"], dtype=object)[coded.values]
    np.testing.assert_array_equal(decoded.astype(str), text.astype(str))
    # pp = 3 does not divide: a derived-field reason, coded past the evaluation's own reasons
    assert any(str(t).startswith("derived parallelism.dp") for t in text.ravel())
    assert set(np.unique(text.astype(str))) > {""}
