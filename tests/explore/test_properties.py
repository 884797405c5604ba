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


# --------------------------------------------------------------------------------------------
# Network monotonicity over every scale-out family and every plan knob (issue 10).
#
# A design is drawn with every plan knob (tp, pp, dp, cp, ep on a MoE model, microbatch,
# virtual stages, ZeRO 0-3, recompute, sequence parallelism, every overlap flag, dispatcher)
# and every scale-out family with its own settings (torus cube edge, OCS reconfiguration policy
# and time). Each design is then perturbed in one network resource: more of a bandwidth (scale-up
# or scale-out bandwidth_bps, nics_per_device, scale-up domain size) must never lengthen a step;
# more oversubscription or latency (scale-up, scale-out, OCS reconfiguration) must never shorten
# it. All variants of all designs of one example are one batched evaluate call. Figures are read
# with keep_invalid=True (designs that do not fit in memory still have a step time); designs that
# break a plan rule have NaN figures and are skipped in the arm where they do.
#
# Scale-up domain size (x2) is checked on every family and every ZeRO stage. Each mechanism that
# made a larger domain slower is fixed so that the larger domain keeps what the smaller one had
# (rises in 24,000 random designs before -> after: fat-tree, dragonfly and rail-optimized ZeRO-0
# 0.2 %: an all-reduce tree of a split domain stays available, explore.model.fabric._split_trees;
# rail-optimized MoE all-to-all up to 9 %: PXN reaches every rail, topologies.placement;
# torus, ocs-torus and ocs-reconfigurable 0.2-0.4 %, up to 27 %: every call takes the fastest of
# the domain and its splits, each with its own torus shape or circuit plan,
# explore.model.system.sub_domain_networks; 0 of 72,000 designs x 8 resources rise after). The
# designs that rose before are pinned with @example (PINNED).
#
# NIC count is not asserted on one class, found by the randomized run (0.04 % of fat-tree designs,
# all of this class): fat-tree with oversubscription > 1 going from less than one NIC per device
# to twice that. At a fixed switch radix a leaf holds leaf_down / min(nics, 1) devices, so twice
# the NICs halve the devices under a leaf, and a pipeline pair or a gradient ring that fit one
# leaf crosses the oversubscribed uplinks (up to 8 % slower; counting the worst leaf's crossing
# pipeline streams gives 0.22 of a NIC each where the model gives 0.40, so the model is not
# pessimistic there). NIC_EXCEPTION is that class.
# --------------------------------------------------------------------------------------------
import pytest  # noqa: E402
from hypothesis import example  # noqa: E402
from hwmodels import get_part  # noqa: E402
from explore.scenario import SCALE_OUT_TOPOLOGIES  # noqa: E402

SCALE_UP_LINK = {"a100-sxm-80gb": "nvlink3", "h100-sxm-80gb": "nvlink4", "b200": "nvlink5"}
SCALE_OUT_LINK = {"a100-sxm-80gb": "ib-hdr-200", "h100-sxm-80gb": "ib-ndr-400", "b200": "ib-ndr-400"}
MODELS = {"gpt3-175b": {}, "mixtral-8x7b": {"seq_len": 4096}}   # dense and MoE (ep > 1)
MORE = ("scale_up_bandwidth", "scale_out_bandwidth", "nics_per_device", "scale_up_size")
WORSE = ("oversubscription", "scale_up_latency", "scale_out_latency", "ocs_reconfig")


def NIC_EXCEPTION(row):
    """Fat-tree, oversubscribed, under one NIC per device: twice the NICs halve a leaf's devices."""
    so = "system.scale_out."
    return (row[so + "topology"] == "fat-tree" and row[so + "oversubscription"] > 1
            and row[so + "nics_per_device"] < 1)


def _checked(row, knob):
    """Whether the property is asserted for ``knob`` on ``row`` (every knob but NIC_EXCEPTION)."""
    return knob != "nics_per_device" or not NIC_EXCEPTION(row)


@st.composite
def net_rows(draw, moe):
    """One design as flat {"table.key": value}: every plan knob and every network family."""
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4, 8]))
    cp = draw(st.sampled_from([1, 2]))
    dp = draw(st.sampled_from([1, 2, 4, 16, 64]))
    ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if (dp * cp) % e == 0])) if moe else 1
    mb = draw(st.sampled_from([1, 2]))
    nmb = draw(st.sampled_from([1, 4, 16]))
    vp = draw(st.sampled_from([1, 2])) if pp > 1 and nmb % pp == 0 else 1
    acc = draw(st.sampled_from(sorted(SCALE_UP_LINK)))
    family = draw(st.sampled_from(SCALE_OUT_TOPOLOGIES))
    p, so, su = "parallelism.", "system.scale_out.", "system.scale_up."
    up, out = get_part("links", SCALE_UP_LINK[acc]), get_part("links", SCALE_OUT_LINK[acc])
    return {
        p + "tp": tp, p + "pp": pp, p + "dp": dp, p + "cp": cp, p + "ep": ep, p + "microbatch": mb,
        p + "virtual_stages": vp, p + "zero": draw(st.integers(0, 3)),
        p + "recompute": draw(st.sampled_from(["none", "selective", "full"])),
        p + "sequence_parallel": draw(st.booleans()),
        p + "overlap_grad_reduce": draw(st.booleans()), p + "overlap_param_gather": draw(st.booleans()),
        p + "overlap_tp_comm": draw(st.booleans()), p + "overlap_moe_comm": draw(st.booleans()),
        p + "moe_dispatcher": draw(st.sampled_from(["alltoall", "deepep"])),
        p + "grad_reduce_bytes": draw(st.sampled_from([2, 4])),
        # ZeRO-3 runtime (DeepSpeed 2021 stage 3 vs a coalesced one, explore.validation.DEEPSPEED_2021_ZERO3)
        p + "zero3_calls_per_layer": draw(st.sampled_from([1.0, 4.0])),
        p + "zero3_gather_passes": draw(st.sampled_from([2.0, 3.0])),
        p + "list_collectives": draw(st.booleans()),
        p + "fsdp_root_unit": draw(st.booleans()),      # FSDP root unit's exposed ends (step.py)
        p + "zero3_replicated_params_per_layer": draw(st.sampled_from([0.0, 8.0])),
        # pipeline engine (DeepSpeed 2021: serial blocking transfers, whole gradients; explore.validation.DEEPSPEED_2021_PIPE)
        p + "pp_p2p": draw(st.sampled_from(["batched", "serial"])),
        p + "pp_scatter_grads": draw(st.booleans()),
        p + "grad_accumulation": draw(st.sampled_from(["fused", "hook", "autograd"])),
        "training.global_batch": dp * mb * nmb, "training.flash_attention": draw(st.booleans()),
        "system.devices": tp * pp * dp * cp, "system.accelerator": acc,
        su + "size": draw(st.sampled_from([4, 8, 16])), su + "link": SCALE_UP_LINK[acc],
        su + "bandwidth_bps": up["bandwidth_bps"], su + "latency_s": up["latency_s"],
        so + "topology": family, so + "link": SCALE_OUT_LINK[acc],
        so + "bandwidth_bps": out["bandwidth_bps"], so + "latency_s": out["latency_s"],
        so + "nics_per_device": draw(st.sampled_from([0.5, 1.0, 2.0])),
        so + "oversubscription": draw(st.sampled_from([1.0, 2.0, 4.0])),
        so + "cube_dim": draw(st.sampled_from([2, 4])),
        so + "reconfiguration": draw(st.sampled_from(["per-job", "per-step", "per-phase"])),
        so + "ocs_reconfig_s": draw(st.sampled_from([1e-6, 0.01, 1.0])),
    }


def _perturb(row, knob, factor):
    """row with one network resource changed by ``factor`` > 1 (more of it, or worse)."""
    out, so, su = dict(row), "system.scale_out.", "system.scale_up."
    key, scale = {"scale_up_bandwidth": (su + "bandwidth_bps", factor),
                  "scale_out_bandwidth": (so + "bandwidth_bps", factor),
                  "nics_per_device": (so + "nics_per_device", 2.0),
                  "scale_up_size": (su + "size", 2),
                  "oversubscription": (so + "oversubscription", factor),
                  "scale_up_latency": (su + "latency_s", factor),
                  "scale_out_latency": (so + "latency_s", factor),
                  "ocs_reconfig": (so + "ocs_reconfig_s", factor)}[knob]
    out[key] = row[key] * scale
    if knob.endswith("latency"):
        out[key] += 1e-6            # a latency of 0 must rise too
    return out


def _evaluate_rows(model, rows):
    """One evaluate call over designs given as flat dicts (arrays per field)."""
    sc = copy.deepcopy(BASE)
    sc["model"] = {"preset": model, **MODELS[model]}
    sc["system"]["scale_up"], sc["system"]["scale_out"] = {}, {}
    for path in rows[0]:
        table, key = path.rsplit(".", 1)
        node = sc
        for t in table.split("."):
            node = node[t]
        node[key] = [r[path] for r in rows]
    return explore.evaluate(sc, keep_invalid=True, inputs=False)


def _check_network(model, rows, factor):
    """Step time of every design against each of its network perturbations."""
    knobs = MORE + WORSE
    variants = [v for r in rows for v in [r] + [_perturb(r, k, factor) for k in knobs]]
    t = _evaluate_rows(model, variants)["step_time_s"].values.reshape(len(rows), 1 + len(knobs))
    base, moved = t[:, :1], t[:, 1:]
    checked = np.array([[_checked(r, k) for k in knobs] for r in rows])
    both = np.isfinite(base) & np.isfinite(moved) & checked
    more = np.array([k in MORE for k in knobs])
    rises = both & more & (moved > base * (1 + 1e-9))
    falls = both & ~more & (moved < base * (1 - 1e-9))
    bad = np.argwhere(rises | falls)
    assert not bad.size, "; ".join(
        f"{knobs[j]} x{factor:g} on {rows[i]}: {base[i, 0]:.6g} s -> {moved[i, j]:.6g} s" for i, j in bad[:3])
    return both.sum()


def designs():
    """(model, 8 designs): a dense or a MoE model and designs drawn for it."""
    return st.sampled_from(sorted(MODELS)).flatmap(
        lambda m: st.tuples(st.just(m), st.lists(net_rows(m == "mixtral-8x7b"), min_size=8, max_size=8)))


def _cp_ocs_reconfigurable():
    """Found by this test: a gradient ring over dp * cp = 32 ranks (cp 2) on 2 nodes of 16; the
    circuits were planned for a ring of dp = 16 ranks (inside one node: no demand), so the ring got
    one port of 8 and doubling the scale-up domain (8 -> 16) made the step 2.3x slower."""
    p, so, su = "parallelism.", "system.scale_out.", "system.scale_up."
    return {p + "tp": 1, p + "pp": 1, p + "dp": 16, p + "cp": 2, p + "ep": 1, p + "microbatch": 1,
            p + "virtual_stages": 1, p + "zero": 0, p + "recompute": "none", p + "sequence_parallel": False,
            p + "overlap_grad_reduce": False, p + "overlap_param_gather": False, p + "overlap_tp_comm": False,
            p + "overlap_moe_comm": False, p + "moe_dispatcher": "alltoall", p + "grad_reduce_bytes": 2,
            p + "zero3_calls_per_layer": 1.0, p + "zero3_gather_passes": 2.0, p + "list_collectives": False,
            p + "zero3_replicated_params_per_layer": 0.0,
            "training.global_batch": 16, "training.flash_attention": False, "system.devices": 32,
            "system.accelerator": "a100-sxm-80gb", su + "size": 8, su + "link": "nvlink3",
            su + "bandwidth_bps": 2.4e12, su + "latency_s": 3e-6, so + "topology": "ocs-reconfigurable",
            so + "link": "ib-hdr-200", so + "bandwidth_bps": 200e9, so + "latency_s": 5e-6,
            so + "nics_per_device": 0.5, so + "oversubscription": 1.0, so + "cube_dim": 2,
            so + "reconfiguration": "per-job", so + "ocs_reconfig_s": 1e-6}


def _moe_a2a_two_leaves():
    """Found by this test: an expert all-to-all (ep 8, tp 8: 64 devices) under one leaf with half a
    NIC per device spills just past one leaf with one NIC per device; every byte was charged at the
    uplinks' 1/o (o = 4) although only the off-leaf share crosses them: twice the NICs, 12 % slower."""
    p, so, su = "parallelism.", "system.scale_out.", "system.scale_up."
    return {**_cp_ocs_reconfigurable(), p + "tp": 8, p + "dp": 16, p + "cp": 1, p + "ep": 8,
            "training.global_batch": 64, "system.devices": 128, so + "topology": "fat-tree",
            so + "oversubscription": 4.0}


def _pinned():
    """Designs that got slower with a domain twice as large, found by a randomized run of this test
    (seed 2, 4,000 designs per family and model) before the fixes named above."""
    p, so, su = "parallelism.", "system.scale_out.", "system.scale_up."
    base = _cp_ocs_reconfigurable()
    return {
    "gpt3-175b": [
        # fat-tree, ZeRO 0: 0.73 % slower with the domain x2 before
        {**base, p + 'pp': 4, p + 'dp': 64, p + 'recompute': 'selective', p + 'overlap_grad_reduce': True,
         p + 'overlap_tp_comm': True, p + 'grad_reduce_bytes': 4, 'training.global_batch': 64,
         'system.devices': 512, su + 'size': 16, so + 'topology': 'fat-tree', so + 'nics_per_device': 1.0,
         so + 'oversubscription': 4.0, so + 'ocs_reconfig_s': 1.0},
        # rail-optimized, ZeRO 0: 0.74 % slower with the domain x2 before
        {**base, p + 'pp': 2, p + 'dp': 64, p + 'sequence_parallel': True, p + 'overlap_grad_reduce': True,
         p + 'moe_dispatcher': 'deepep', 'training.global_batch': 256, 'training.flash_attention': True,
         'system.devices': 256, su + 'size': 16, so + 'topology': 'rail-optimized',
         so + 'nics_per_device': 2.0, so + 'oversubscription': 4.0, so + 'ocs_reconfig_s': 0.01},
        # torus, ZeRO 1: 1.74 % slower with the domain x2 before
        {**base, p + 'tp': 2, p + 'pp': 8, p + 'dp': 64, p + 'microbatch': 2, p + 'virtual_stages': 2,
         p + 'zero': 1, p + 'sequence_parallel': True, p + 'moe_dispatcher': 'deepep',
         'training.global_batch': 2048, 'training.flash_attention': True, 'system.devices': 2048,
         'system.accelerator': 'b200', su + 'size': 16, su + 'link': 'nvlink5',
         su + 'bandwidth_bps': 7200000000000.0, so + 'topology': 'torus', so + 'link': 'ib-ndr-400',
         so + 'bandwidth_bps': 400000000000.0, so + 'nics_per_device': 2.0, so + 'oversubscription': 2.0,
         so + 'cube_dim': 4, so + 'ocs_reconfig_s': 1.0},
        # ocs-torus, ZeRO 1: 2.74 % slower with the domain x2 before
        {**base, p + 'tp': 4, p + 'pp': 8, p + 'dp': 64, p + 'cp': 1, p + 'virtual_stages': 2, p + 'zero': 1,
         p + 'recompute': 'selective', p + 'overlap_grad_reduce': True, p + 'overlap_param_gather': True,
         p + 'overlap_tp_comm': True, p + 'overlap_moe_comm': True, 'training.global_batch': 1024,
         'training.flash_attention': True, 'system.devices': 2048, 'system.accelerator': 'h100-sxm-80gb',
         su + 'size': 16, su + 'link': 'nvlink4', su + 'bandwidth_bps': 3600000000000.0,
         so + 'topology': 'ocs-torus', so + 'link': 'ib-ndr-400', so + 'bandwidth_bps': 400000000000.0,
         so + 'oversubscription': 2.0, so + 'cube_dim': 4, so + 'reconfiguration': 'per-phase'},
        # ocs-reconfigurable, ZeRO 2: 2.74 % slower with the domain x2 before
        {**base, p + 'tp': 8, p + 'pp': 2, p + 'microbatch': 2, p + 'zero': 2, p + 'recompute': 'full',
         p + 'overlap_grad_reduce': True, p + 'overlap_param_gather': True, p + 'overlap_moe_comm': True,
         'training.global_batch': 512, 'system.devices': 512, 'system.accelerator': 'b200', su + 'size': 4,
         su + 'link': 'nvlink5', su + 'bandwidth_bps': 7200000000000.0, so + 'link': 'ib-ndr-400',
         so + 'bandwidth_bps': 400000000000.0, so + 'nics_per_device': 2.0},
    ],
    "mixtral-8x7b": [
        # fat-tree, ZeRO 0: 0.44 % slower with the domain x2 before
        {**base, p + 'pp': 2, p + 'dp': 64, p + 'virtual_stages': 2, p + 'overlap_grad_reduce': True,
         'training.global_batch': 256, 'system.devices': 256, so + 'topology': 'fat-tree',
         so + 'nics_per_device': 2.0, so + 'reconfiguration': 'per-phase', so + 'ocs_reconfig_s': 0.01},
        # rail-optimized, ZeRO 0: 9.21 % slower with the domain x2 before
        {**base, p + 'tp': 8, p + 'dp': 64, p + 'ep': 8, p + 'recompute': 'selective',
         'training.global_batch': 1024, 'system.devices': 1024, 'system.accelerator': 'b200',
         su + 'link': 'nvlink5', su + 'bandwidth_bps': 7200000000000.0, so + 'topology': 'rail-optimized',
         so + 'link': 'ib-ndr-400', so + 'bandwidth_bps': 400000000000.0, so + 'nics_per_device': 1.0,
         so + 'oversubscription': 4.0, so + 'cube_dim': 4, so + 'ocs_reconfig_s': 0.01},
        # torus, ZeRO 3: 27.32 % slower with the domain x2 before
        {**base, p + 'tp': 8, p + 'pp': 8, p + 'dp': 4, p + 'ep': 2, p + 'zero': 3,
         p + 'sequence_parallel': True, p + 'overlap_param_gather': True, p + 'overlap_tp_comm': True,
         'training.global_batch': 64, 'training.flash_attention': True, 'system.devices': 512,
         su + 'size': 4, so + 'topology': 'torus', so + 'nics_per_device': 1.0, so + 'oversubscription': 2.0,
         so + 'reconfiguration': 'per-step', so + 'ocs_reconfig_s': 0.01},
        # ocs-torus, ZeRO 3: 15.20 % slower with the domain x2 before
        {**base, p + 'tp': 2, p + 'pp': 8, p + 'ep': 8, p + 'zero': 3, p + 'recompute': 'selective',
         p + 'sequence_parallel': True, p + 'overlap_grad_reduce': True, p + 'overlap_param_gather': True,
         p + 'overlap_moe_comm': True, p + 'grad_reduce_bytes': 4, 'training.global_batch': 256,
         'system.devices': 512, 'system.accelerator': 'h100-sxm-80gb', su + 'size': 4,
         su + 'link': 'nvlink4', su + 'bandwidth_bps': 3600000000000.0, so + 'topology': 'ocs-torus',
         so + 'link': 'ib-ndr-400', so + 'bandwidth_bps': 400000000000.0, so + 'nics_per_device': 2.0,
         so + 'oversubscription': 4.0, so + 'ocs_reconfig_s': 0.01},
        # ocs-reconfigurable, ZeRO 3: 0.98 % slower with the domain x2 before
        {**base, p + 'tp': 4, p + 'pp': 2, p + 'cp': 1, p + 'ep': 8, p + 'zero': 3,
         p + 'sequence_parallel': True, p + 'overlap_grad_reduce': True, p + 'overlap_param_gather': True,
         p + 'overlap_moe_comm': True, 'training.flash_attention': True, 'system.devices': 128,
         su + 'size': 16, so + 'oversubscription': 4.0, so + 'cube_dim': 4},
    ],
    }


PINNED = _pinned()
NET_SETTINGS = settings(max_examples=24, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@NET_SETTINGS
@given(designs(), st.floats(1.01, 10.0))
@example(("mixtral-8x7b", [_moe_a2a_two_leaves()]), 2.0)
@example(("gpt3-175b", PINNED["gpt3-175b"]), 2.0)
@example(("mixtral-8x7b", PINNED["mixtral-8x7b"]), 2.0)
def test_network_resources_move_step_time_one_way(model_rows, factor):
    model, rows = model_rows
    assert _check_network(model, rows, factor) > 0 or len(rows) < 8


@pytest.mark.slow
@settings(max_examples=600, derandomize=False, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(designs(), st.floats(1.01, 10.0))
def test_network_resources_move_step_time_one_way_randomized(model_rows, factor):
    model, rows = model_rows
    _check_network(model, rows, factor)


def _su_pair(model, row):
    """Step times of ``row`` and of ``row`` with a scale-up domain twice as large."""
    t = _evaluate_rows(model, [row, _perturb(row, "scale_up_size", 2.0)])["step_time_s"].values
    return t[0], t[1]


def test_larger_scale_up_domain_tree_chain():
    """Found by this test: NCCL's tree all-reduce chains the ranks of a node
    (collectives.tree_latency_s: (n/nodes - 1) intra-node hops), so doubling the domain (16 -> 32
    B200s) lengthened the latency-bound gradient all-reduce. On an NVLink-SHARP scale-up NCCL also
    has the NVLS tree (one switch reduction per node, collectives.nvls_tree_latency_s) and picks
    the faster; with it the larger domain is no slower."""
    p, so, su = "parallelism.", "system.scale_out.", "system.scale_up."
    row = {**_cp_ocs_reconfigurable(), p + "tp": 2, p + "pp": 2, p + "dp": 64, p + "cp": 2,
           p + "virtual_stages": 2, p + "recompute": "selective", p + "sequence_parallel": True,
           p + "overlap_grad_reduce": True, p + "overlap_param_gather": True, p + "overlap_moe_comm": True,
           p + "moe_dispatcher": "deepep", "training.global_batch": 1024, "training.flash_attention": True,
           "system.devices": 512, "system.accelerator": "b200", su + "size": 16, su + "link": "nvlink5",
           su + "bandwidth_bps": 7.2e12, so + "topology": "fat-tree", so + "link": "ib-ndr-400",
           so + "bandwidth_bps": 400e9, so + "nics_per_device": 2.0, so + "oversubscription": 2.0}
    a, b = _su_pair("mixtral-8x7b", row)
    assert b <= a * (1 + 1e-9), (a, b)


def test_larger_scale_up_domain_ocs_port_split():
    """Found by this test: ocs-reconfigurable split a node's ports greedily by planned bytes, and
    with twice the ports (8 -> 16) the pipeline chains kept one port each, half the share per
    device, while the step sums the phases' times: 1.3 % slower. Circuits now go where they save
    the most transfer time (reconfig.class_ports) for traffic weighted as on the step's critical
    path (explore.model.system.network_spec): 1.6 % faster instead."""
    p, so, su = "parallelism.", "system.scale_out.", "system.scale_up."
    row = {**_cp_ocs_reconfigurable(), p + "tp": 1, p + "pp": 4, p + "dp": 16, p + "cp": 1, p + "ep": 8,
           p + "microbatch": 2, p + "zero": 2, p + "recompute": "selective", p + "overlap_param_gather": True,
           p + "overlap_tp_comm": True, p + "overlap_moe_comm": True, p + "grad_reduce_bytes": 4,
           "training.global_batch": 32, "training.flash_attention": True, "system.devices": 64,
           "system.accelerator": "b200", su + "size": 4, su + "link": "nvlink5", su + "bandwidth_bps": 7.2e12,
           so + "link": "ib-ndr-400", so + "bandwidth_bps": 400e9, so + "nics_per_device": 2.0,
           so + "oversubscription": 2.0, so + "cube_dim": 4, so + "reconfiguration": "per-step",
           so + "ocs_reconfig_s": 1.0}
    a, b = _su_pair("mixtral-8x7b", row)
    assert b <= a * (1 + 1e-9), (a, b)


def test_context_parallel_gradient_ring_gets_circuits():
    """The design of _cp_ocs_reconfigurable (cp 2): doubling the scale-up domain no longer slows it."""
    a, b = _su_pair("gpt3-175b", _cp_ocs_reconfigurable())
    assert b <= a, (a, b)


def test_larger_scale_up_domain_torus_dimension_order():
    """Found by this test: an expert-gradient group (stride 32 devices, 16 ranks) on a torus of
    1,024 nodes of 4 (8 x 8 x 16) has rings of 8 and 2 along dimensions 1 and 2; with nodes of 8
    (8 x 8 x 8) its stride of 4 nodes leaves rings of 2 spaced 4 apart on dimension 0 (a quarter
    of its bandwidth) before a ring of 8 on dimension 1. Reduced in the dimensions' index order,
    the full buffer went over the slow ring first: 1.53x slower. The torus collective now runs its
    dimensions fastest first (collectives.torus_reduce_scatter_s)."""
    p, so, su = "parallelism.", "system.scale_out.", "system.scale_up."
    row = {**_cp_ocs_reconfigurable(), p + "tp": 4, p + "pp": 8, p + "dp": 64, p + "cp": 2, p + "ep": 8,
           p + "zero": 3, p + "recompute": "selective", p + "sequence_parallel": True,
           p + "overlap_grad_reduce": True, p + "overlap_tp_comm": True, p + "overlap_moe_comm": True,
           p + "moe_dispatcher": "deepep", p + "grad_reduce_bytes": 4, "training.global_batch": 256,
           "training.flash_attention": True, "system.devices": 4096, "system.accelerator": "h100-sxm-80gb",
           su + "size": 4, su + "link": "nvlink4", su + "bandwidth_bps": 7.2e12, so + "topology": "torus",
           so + "link": "ib-ndr-400", so + "bandwidth_bps": 400e9, so + "nics_per_device": 2.0,
           so + "oversubscription": 1.0, so + "reconfiguration": "per-step"}
    a, b = _su_pair("mixtral-8x7b", row)
    assert b <= a * (1 + 1e-9), (a, b)


def test_larger_scale_up_domain_torus_protocol():
    """Found by this test: a gradient group of 32 B200s on an ocs-torus of two nodes of 16 ran the
    torus model's plain rings (no per-call protocol time), on one node of 32 NCCL's flat call,
    which pays the Simple protocol's per-call pipeline time on each of its buckets: 5.4 % slower.
    The torus call now makes the same protocol choice (Simple with its pipeline time, or the
    low-latency protocol at a fraction of each link's rate)."""
    p, so, su = "parallelism.", "system.scale_out.", "system.scale_up."
    row = {**_cp_ocs_reconfigurable(), p + "zero": 1, p + "recompute": "full", p + "sequence_parallel": True,
           p + "overlap_grad_reduce": True, p + "overlap_tp_comm": True, p + "overlap_moe_comm": True,
           p + "grad_reduce_bytes": 4, "training.global_batch": 16, "system.accelerator": "b200",
           su + "size": 16, su + "link": "nvlink5", su + "bandwidth_bps": 7.2e12, so + "topology": "ocs-torus",
           so + "link": "ib-ndr-400", so + "bandwidth_bps": 400e9, so + "nics_per_device": 2.0,
           so + "oversubscription": 4.0}
    a, b = _su_pair("mixtral-8x7b", row)
    assert b <= a * (1 + 1e-9), (a, b)


# --------------------------------------------------------------------------------------------
# ZeRO-3 runtime knobs (DeepSpeed 2021 stage 3, explore/validation.py DEEPSPEED_2021_ZERO3): a third
# gather pass, list-form collectives (a copy per rank) and small parameters regathered rank by rank
# each cost time; none may shorten a step, on any family. More collectives per layer may: under
# overlap the gradient reduction's last call, exposed after the backward, is a smaller share of the
# layer (found by this test: ZeRO-3, dp 2, both overlaps on, 14.750 -> 14.743 s), so that knob is
# checked where nothing overlaps (every call then adds its latency).
RUNTIME_MOVES = [{"zero3_calls_per_layer": 4.0}, {"zero3_gather_passes": 3.0}, {"list_collectives": True},
                 {"zero3_replicated_params_per_layer": 8.0},
                 # DeepSpeed 2021's Python per rank on top of the list copies and the regather
                 {"list_collectives": True, "zero3_replicated_params_per_layer": 8.0, "list_gather_host_calls": 1.0,
                  "list_reduce_host_calls": 2.0, "zero3_replicated_host_calls": 4.0},
                 # PyTorch FSDP's root unit, gathered first and reduce-scattered last (step.py)
                 {"fsdp_root_unit": True}]


@NET_SETTINGS
@given(designs())
def test_zero3_runtime_costs_never_shorten_a_step(model_rows):
    model, rows = model_rows
    p = "parallelism."
    base = [{**r, p + "zero3_calls_per_layer": 1.0, p + "zero3_gather_passes": 2.0,
             p + "list_collectives": False, p + "zero3_replicated_params_per_layer": 0.0,
             p + "fsdp_root_unit": False, p + "list_gather_host_calls": 0.0, p + "list_reduce_host_calls": 0.0,
             p + "zero3_replicated_host_calls": 0.0} for r in rows]
    variants = [v for r in base for v in [r] + [{**r, **{p + k: x for k, x in m.items()}} for m in RUNTIME_MOVES]]
    t = _evaluate_rows(model, variants)["step_time_s"].values.reshape(len(rows), 1 + len(RUNTIME_MOVES))
    both = np.isfinite(t[:, :1]) & np.isfinite(t[:, 1:])
    serial = np.array([not (r[p + "overlap_grad_reduce"] or r[p + "overlap_param_gather"]) for r in rows])
    both[:, 0] &= serial
    assert both.any()
    assert not np.any(both & (t[:, 1:] < t[:, :1] * (1 - 1e-12))), t
    z3 = np.array([r[p + "zero"] == 3 and r[p + "dp"] * r[p + "cp"] > 1 for r in rows])
    # list copies and regathered small parameters cost where a ZeRO-3 group spans ranks
    moved = t[:, 1:] > t[:, :1]
    assert np.all(moved[z3 & both[:, 0], 2:5][both[z3 & both[:, 0], 2:5]])
    # the callers' Python tensor calls per rank add to the copies, never replace them
    ok = np.isfinite(t[:, 3]) & np.isfinite(t[:, 4]) & np.isfinite(t[:, 5])
    assert np.all(t[ok, 5] >= np.maximum(t[ok, 3], t[ok, 4]) * (1 - 1e-12)), t[ok]
    strict = ok & z3 & serial
    assert np.all(t[strict, 5] > np.maximum(t[strict, 3], t[strict, 4]))
