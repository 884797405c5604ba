"""Invariants of explore.evaluate (hypothesis)."""
import copy

import numpy as np
from hypothesis import example, given, settings, strategies as st, HealthCheck

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


def _group_spanning_zero3():
    """175B on 1,024 A100, tp 8 x dp 128 under ZeRO-3: the data-parallel groups span both
    dragonfly groups of 512 (64-port switches), so the global links carry every gather."""
    sc = copy.deepcopy(BASE)
    sc["parallelism"].update(tp=8, pp=1, dp=128, microbatch=1, zero=3, recompute="full",
                             overlap_grad_reduce=False)
    sc["training"]["global_batch"] = 1536
    return sc


@st.composite
def dragonfly_scenarios(draw):
    """Jobs of 64 to 32,768 devices on a dragonfly of 64-port switches (groups of 512 NIC ports),
    so that data-, pipeline- and expert-parallel groups often span groups; MoE plans add the
    all-to-all. ``global_link_fraction`` is a pair (f, f x cut), cut < 1."""
    sc = copy.deepcopy(BASE)
    preset = draw(st.sampled_from(["megatron-7.5b", "llama3-70b", "gpt3-175b", "mixtral-8x7b"]))
    sc["model"] = {"preset": preset}
    tp = draw(st.sampled_from([1, 2, 8]))
    pp = draw(st.sampled_from([1, 2, 8]))
    dp = draw(st.sampled_from([64, 128, 512]))
    mb = draw(st.sampled_from([1, 2]))
    sc["parallelism"].update(tp=tp, pp=pp, dp=dp, microbatch=mb, zero=draw(st.integers(0, 3)),
                             recompute=draw(st.sampled_from(["selective", "full"])),
                             overlap_grad_reduce=draw(st.booleans()), sequence_parallel=tp > 1)
    if preset == "mixtral-8x7b":
        sc["parallelism"]["ep"] = draw(st.sampled_from([1, 8]))
    sc["training"]["global_batch"] = dp * mb * draw(st.sampled_from([1, 8]))
    sc["system"]["devices"] = tp * pp * dp
    sc["system"]["accelerator"] = draw(st.sampled_from(["h100-sxm-80gb", "b200"]))
    sc["system"]["scale_up"] = {"size": 8, "link": "nvlink4" if sc["system"]["accelerator"] != "b200" else "nvlink5"}
    so = sc["system"]["scale_out"]
    so.update(topology="dragonfly", link="ib-ndr-400", switch="quantum-2-qm9700",
              nics_per_device=draw(st.sampled_from([0.5, 1.0, 2.0])))
    f = draw(st.sampled_from([1.0, 0.75, 292 / 512, 0.5, 0.25, 0.05]))
    so["global_link_fraction"] = np.array([f, f * draw(st.floats(0.01, 0.99))])   # f, then fewer
    return sc


@SETTINGS
@given(dragonfly_scenarios())
@example(explore.set_field(_group_spanning_zero3(), "system.scale_out",
                           {"topology": "dragonfly", "link": "ib-hdr-200", "global_link_fraction": np.array([1.0, 0.01])}))
def test_fewer_global_links_never_speed_a_step_nor_cost_more(sc):
    """Dragonfly: a smaller ``global_link_fraction`` (fewer global links per group) never shortens
    a step and never adds capex or power (the global links' optics are all it removes). It never
    makes a design valid, and makes one invalid only where its groups outnumber what the fewer
    global ports can join: ceil(N / 512) > ceil(512 f) + 1 for N = devices x NICs endpoints on
    64-port switches (p a = a h = 512; 400 Gb/s NICs on 400 Gb/s ports)."""
    ds = explore.evaluate(sc)
    valid = ds["valid"].values
    assert valid[1] <= valid[0]
    if valid[0] and not valid[1]:
        so = sc["system"]["scale_out"]
        groups = np.ceil(sc["system"]["devices"] * so["nics_per_device"] / 512)
        assert groups > np.ceil(512 * so["global_link_fraction"][1]) + 1
        assert groups <= np.ceil(512 * so["global_link_fraction"][0]) + 1
        assert ds["reason"].values[1].startswith("system.scale_out.topology = dragonfly:")
        return
    if not bool(valid[0]):
        return
    a, b = ds["step_time_s"].values.astype(float)
    assert b >= a * (1 - 1e-12), (a, b)
    for m in ("capex_usd", "power_w"):
        hi, lo = ds[m].values.astype(float)
        assert lo <= hi * (1 + 1e-12), (m, hi, lo)


def test_tapered_global_links_slow_a_group_spanning_step():
    """The property above is not vacuous: on the group-spanning example (data-parallel rings of 128 ranks
    8 apart on 1,024 ports over two groups of 512) the 8 rings, one per tensor-parallel rank, each send
    one stream out of a group and one in; Valiant's busiest global link carries 2 x 8 / G port rates. At
    f = 1 (G = 512) that is the full rate; at f = 0.01 (G = ceil(5.12) = 6) 6 / 16 of it, while the
    tensor-parallel group (inside a node) keeps it; the exposed ZeRO-3 gathers and the step grow (the
    exposed part more than twice: the same compute hides less of it)."""
    from explore.model.fabric import Fabric
    from explore.model import calibration
    from explore.model.system import build_system
    from explore.scenario import resolve
    sc = _group_spanning_zero3()
    sc["system"]["scale_out"].update(topology="dragonfly", global_link_fraction=np.array([1.0, 0.01]))
    place = Fabric(build_system(resolve(sc)), calibration.Calibration()).place
    dp_bw = place.switched_bw(np.full(2, 8.0), np.full(2, 128.0))
    assert dp_bw[0] == place.bw[0]                          # 16 streams on 512 global ports
    np.testing.assert_allclose(dp_bw[1], 6 / 16 * place.bw[0], rtol=1e-12)
    tp_bw = place.switched_bw(np.full(2, 1.0), np.full(2, 8.0))
    assert tp_bw[0] == tp_bw[1] == place.bw[0]
    ds = explore.evaluate(sc)
    z = ds["time_s_zero3_comm"].values
    assert z[1] > 2.0 * z[0]
    assert ds["step_time_s"].values[1] > ds["step_time_s"].values[0]
