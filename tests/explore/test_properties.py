"""Invariants of explore.evaluate (hypothesis)."""
import copy

import numpy as np
from hypothesis import given, settings, strategies as st, HealthCheck

import explore

BASE = explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml")


@st.composite
def scenarios(draw):
    sc = copy.deepcopy(BASE)
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4, 8, 16]))
    dp = draw(st.sampled_from([1, 2, 8, 32]))
    mb = draw(st.sampled_from([1, 2]))
    sc["parallelism"].update(tp=tp, pp=pp, dp=dp, microbatch=mb,
                             zero=draw(st.integers(0, 3)),
                             recompute=draw(st.sampled_from(["none", "selective", "full"])),
                             sequence_parallel=draw(st.booleans()),
                             overlap_grad_reduce=draw(st.booleans()),
                             overlap_tp_comm=draw(st.booleans()))
    sc["training"]["global_batch"] = dp * mb * draw(st.sampled_from([4, 16, 64]))
    sc["training"]["flash_attention"] = draw(st.booleans())
    sc["system"]["devices"] = tp * pp * dp
    sc["system"]["accelerator"] = draw(st.sampled_from(["a100-sxm-80gb", "h100-sxm-80gb", "b200"]))
    sc["system"]["scale_out"]["nics_per_device"] = draw(st.sampled_from([0.5, 1.0]))
    sc["system"]["scale_out"]["oversubscription"] = draw(st.sampled_from([1.0, 2.0]))
    return sc


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(scenarios(), st.floats(1.01, 10.0), st.sampled_from(["scale_up", "scale_out"]))
def test_more_bandwidth_never_slows_a_step(sc, factor, fabric):
    base = explore.evaluate(sc)
    faster = copy.deepcopy(sc)
    from hwmodels import get_part
    link = get_part("links", sc["system"][fabric].get("link", "nvlink4" if fabric == "scale_up" else "ib-ndr-400"))
    faster["system"][fabric]["bandwidth_bps"] = link["bandwidth_bps"] * factor
    fast = explore.evaluate(faster)
    a, b = float(base["step_time_s"][0]), float(fast["step_time_s"][0])
    if np.isfinite(a):
        assert b <= a * (1 + 1e-12)


@SETTINGS
@given(scenarios(), st.floats(1.0, 4.0))
def test_more_hbm_never_breaks_fit(sc, factor):
    base = explore.evaluate(sc)
    bigger = copy.deepcopy(sc)
    from hwmodels import get_part
    cap = get_part("accelerators", sc["system"]["accelerator"])["hbm_capacity_bytes"]
    bigger["system"]["accelerator"] = {"base": sc["system"]["accelerator"],
                                       "hbm_capacity_bytes": cap * factor}
    big = explore.evaluate(bigger)
    if bool(base["fits_memory"][0]):
        assert bool(big["fits_memory"][0])


METRICS = ["step_time_s", "tokens_per_s", "model_flops_per_s_per_device", "mfu",
           "memory_per_device_bytes", "time_to_train_s", "energy_per_token_j", "cost_per_token_usd"]


@SETTINGS
@given(scenarios())
def test_valid_designs_have_finite_positive_metrics(sc):
    ds = explore.evaluate(sc)
    if bool(ds["valid"][0]):
        for m in METRICS:
            v = float(ds[m][0])
            assert np.isfinite(v) and v > 0, m
        assert float(ds["mfu"][0]) < 1.0


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(scenarios(), min_size=2, max_size=6))
def test_batch_equals_one_at_a_time(scs):
    """One call over arrays gives the same numbers as one call per design."""
    keys = [("parallelism", k) for k in ("tp", "pp", "dp", "microbatch", "zero", "recompute",
                                         "sequence_parallel", "overlap_grad_reduce", "overlap_tp_comm")]
    keys += [("training", "global_batch"), ("training", "flash_attention"), ("system", "devices"),
             ("system", "accelerator")]
    batch = copy.deepcopy(BASE)
    for t, k in keys:
        batch[t][k] = np.array([s[t][k] for s in scs])
    for k in ("nics_per_device", "oversubscription"):
        batch["system"]["scale_out"][k] = np.array([s["system"]["scale_out"][k] for s in scs])
    ds = explore.evaluate(batch)
    for i, s in enumerate(scs):
        one = explore.evaluate(s)
        for m in METRICS + ["valid"]:
            np.testing.assert_allclose(ds[m].values[i].astype(float), one[m].values[0].astype(float),
                                       rtol=1e-12, equal_nan=True)
        assert ds["reason"].values[i] == one["reason"].values[0]
