"""Interruption rates against published failure data (tests/validation/reliability_runs.csv;
assumptions in explore/validation_reliability.py).

The class rates are derived from Llama 3 405B's Table 5, so that row is in-sample; every
other row is out-of-sample (other operators, A100 rather than H100, other networks and
years). Tolerance: the published figures disagree among themselves by about a factor of 3
(RSC-1 and RSC-2, same operator, hardware and period: 6.50 vs 2.34 per 1000 node-days;
within the same paper, the measured 8-GPU job MTTF implies 3.2x RSC-1's node rate), and
several are approximate ("every week or so", "~2 machines"). So the claim tested is a
typical (geometric-mean) error within a factor of 3 and no row off by more than a factor of 8,
not the 25 % the in-sample row meets. At the time of writing: typical x2.92, worst x6.26
(Meta's measured 1024-GPU job MTTF), the model low on average (model/published 0.38)."""
import re

import pytest

from explore.validation_reliability import CLASS_SETS, compare, load_rows, out_of_sample_stats


@pytest.fixture(scope="module")
def results():
    return compare()


def test_rows_are_sourced_and_typed():
    rows = load_rows()
    assert len(rows) >= 8
    assert sum(r["kind"] == "in_sample" for r in rows) == 1
    assert sum(r["kind"] == "rate" for r in rows) >= 6
    for r in rows:
        assert r["kind"] in ("rate", "upper_bound", "in_sample") and r["classes"] in CLASS_SETS, r["run_id"]
        assert r["source"] and r["verified"], r["run_id"]
        assert float(r["published_events"]) > 0 and float(r["exposure_hours"]) > 0, r["run_id"]
        if ".md" in r["source"]:       # repository files: owner/repo:path at a named commit
            assert re.search(r"[\w-]+/[\w-]+:[\w./-]+\.md", r["source"]) and re.search(r"[0-9a-f]{40}", r["source"])


def test_in_sample_anchor_is_reproduced(results):
    (anchor,) = [r for r in results if r["kind"] == "in_sample"]
    assert anchor["ratio"] == pytest.approx(1.0, rel=0.02)


def test_out_of_sample_error_within_a_factor_of_3_typical_and_8_worst(results):
    s = out_of_sample_stats(results)
    assert s["n"] >= 6
    assert s["gm_factor"] <= 3.0
    assert s["worst_factor"] <= 8.0
    assert 1 / 3 <= s["gm_ratio"] <= 3.0


def test_upper_bounds_hold(results):
    ub = [r for r in results if r["kind"] == "upper_bound"]
    assert ub and all(r["predicted_per_device_hour"] <= r["published_per_device_hour"] for r in ub)


def test_published_rates_are_recomputed_from_the_raw_counts(results):
    # independent arithmetic on two rows: BLOOM one GPU per week on 384 GPUs; RSC-1 6.50 per 1000 node-days
    by = {r["run_id"]: r for r in results}
    assert by["bloom_176b_gpu"]["published_per_device_hour"] == pytest.approx(1 / (7 * 24 * 384))
    assert by["rsc1_node_rate"]["published_per_device_hour"] == pytest.approx(6.50e-3 / (24 * 8))
