"""``explore.evaluate(..., metrics=[...])`` returns those metrics with the values of a full evaluation."""
import copy

import numpy as np

import explore

BASE = explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml")


def _batch(n=400, seed=1):
    rng = np.random.default_rng(seed)
    sc = copy.deepcopy(BASE)
    tp, pp, dp = rng.choice([1, 2, 4, 8], n), rng.choice([1, 4, 8, 16, 96], n), rng.choice([1, 4, 32], n)
    sc["parallelism"].update(tp=tp, pp=pp, dp=dp, microbatch=rng.choice([1, 2], n),
                             recompute=rng.choice(["none", "full"], n))
    sc["training"]["global_batch"] = dp * rng.choice([8, 64], n)   # some break the batch rule
    sc["system"]["devices"] = tp * pp * dp
    sc["datacenter"]["pue"] = rng.choice([1.1, 1.4], n)
    return sc


def test_selected_metrics_equal_the_full_evaluation():
    sc = _batch()
    for keep_invalid in (False, True):
        full = explore.evaluate(sc, keep_invalid=keep_invalid, reason_codes=True)
        assert (~full["valid"].values).any() and full["valid"].values.any()
        some = explore.evaluate(sc, keep_invalid=keep_invalid, reason_codes=True,
                                metrics=["mfu", "time_s_compute", "carbon_per_token_kg"])
        assert set(some.data_vars) == {"mfu", "time_s_compute", "carbon_per_token_kg", "valid", "reason"}
        for k in some.data_vars:
            np.testing.assert_array_equal(some[k].values, full[k].values)
            assert some[k].attrs == full[k].attrs


def test_carbon_is_skipped_only_when_no_carbon_metric_is_asked(monkeypatch):
    """evaluate leaves the carbon model out when no asked name contains 'carbon': sound only while
    every metric the carbon model returns is so named (and no validity rule reads them)."""
    import sys
    ev = sys.modules["explore.evaluate"]
    seen = []

    def recording(*a, **k):
        res = ev_carbon(*a, **k)
        seen.append(set(res))
        return res
    ev_carbon = ev.carbon
    monkeypatch.setattr(ev, "carbon", recording)
    full = explore.evaluate(_batch(50), keep_invalid=True)
    assert seen and seen[0] and all("carbon" in k for k in seen[0])
    some = explore.evaluate(_batch(50), keep_invalid=True, metrics=["cost_per_token_usd"])
    assert len(seen) == 1                                   # not run for a carbon-free selection
    np.testing.assert_array_equal(some["valid"].values, full["valid"].values)
    np.testing.assert_array_equal(some["reason"].values, full["reason"].values)
    np.testing.assert_array_equal(some["cost_per_token_usd"].values, full["cost_per_token_usd"].values)
