"""``training.loss_kernel``: Transformer Engine's fused cross-entropy (Megatron-Core
``cross_entropy_fusion_impl = "te"``) against Megatron's fp32 vocab-parallel loss
(explore/model/calibration.py, LOGITS_* and TE_LOGITS_*).

The byte constants are checked against an independent enumeration of the kernels' loads and stores
over the logits, listed from TE release_v2.9 transformer_engine/pytorch/triton/cross_entropy.py
(``online_softmax_kernel``: one tl.load of each logit block; ``cross_entropy_kernel``: one tl.load and
one tl.store of each block, the gradient written into the input buffer in its dtype;
``element_mul_kernel``: one tl.load and one tl.store) and of Megatron-Core's unfused loss
(megatron/core/tensor_parallel/cross_entropy.py on ``logits.float()``); the wiring is checked by the
change of the evaluated compute time, against the logits' size from the published plan and the
B200's HBM3e bandwidth from its datasheet."""
import copy

import pytest

import explore
from explore import validation_frontier as VF
from explore.model import calibration as cal
from explore.scenario import ScenarioError, load_scenario

B16, F32 = 2.0, 4.0
# (kernel, element size, logits read, logits written)
TE_FORWARD = [("online_softmax_kernel", B16, 1, 0), ("cross_entropy_kernel", B16, 1, 1)]
TE_BACKWARD = [("element_mul_kernel", B16, 1, 1)]
B200_HBM_BPS = 7.7e12     # NVIDIA HGX B200 spec: HBM3e 7.7 TB/s per GPU (the catalog b200 entry's source)


def _bytes(kernels):
    return sum(size * (r + w) for _, size, r, w in kernels)


def test_byte_constants_match_the_kernel_by_kernel_enumeration():
    assert cal.TE_LOGITS_FWD_BYTES_PER_ELEMENT == _bytes(TE_FORWARD)
    assert cal.TE_LOGITS_BWD_BYTES_PER_ELEMENT == _bytes(TE_BACKWARD)
    # Megatron's unfused loss, for scale: the bf16 -> fp32 cast, then max, subtract, exp, sum, divide in fp32
    megatron_fwd = B16 + F32 + F32 + 2 * F32 + 2 * F32 + F32 + 2 * F32
    assert cal.LOGITS_FWD_BYTES_PER_ELEMENT == megatron_fwd


def _sc(run_id="mbridge2511_b200_llama3_8b_fp8_8"):
    return copy.deepcopy(load_scenario(VF.SCENARIO_DIR / f"{run_id}.toml"))


def test_compute_time_changes_by_the_counted_bytes():
    """Llama 3 8B on 8 B200 (pp 1, tp 1, 8 microbatches of 2 x 8192 tokens): the step's compute with TE's
    loss minus Megatron's = (6 + 4 - 38 - 14) B x the logits of every microbatch / achieved HBM rate."""
    sc = _sc()
    assert sc["training"]["loss_kernel"] == "te"
    new = explore.evaluate(sc)
    sc["training"]["loss_kernel"] = "megatron"
    old = explore.evaluate(sc)
    par = sc["parallelism"]
    microbatches = sc["training"]["global_batch"] // (par["microbatch"] * par["dp"])
    logits = par["microbatch"] * sc["model"]["seq_len"] * 128256          # Llama 3 vocabulary
    want = microbatches * (_bytes(TE_FORWARD) + _bytes(TE_BACKWARD) - 38.0 - 14.0) * logits / (
        B200_HBM_BPS * cal.DEFAULT.hbm_efficiency)
    got = float(new["time_s_compute"][0] - old["time_s_compute"][0])
    assert got == pytest.approx(want, rel=1e-9)
    assert float(new["step_time_s"][0] - old["step_time_s"][0]) == pytest.approx(want, rel=1e-6)


def test_default_is_megatron_and_bad_values_are_named():
    sc = _sc()
    sc["training"]["loss_kernel"] = "megatron"
    a = float(explore.evaluate(sc)["step_time_s"][0])
    del sc["training"]["loss_kernel"]
    assert float(explore.evaluate(sc)["step_time_s"][0]) == a
    sc["training"]["loss_kernel"] = "liger"
    with pytest.raises(ScenarioError) as e:
        explore.evaluate(sc)
    assert "training.loss_kernel" in str(e.value) and "'liger'" in str(e.value)
    sc["training"]["loss_kernel"] = "te"
    sc["training"]["elementwise_kernels"] = "llm-foundry-flash"
    with pytest.raises(ScenarioError) as e:
        explore.evaluate(sc)
    assert "training.loss_kernel" in str(e.value) and "llm-foundry-flash" in str(e.value)


def test_array_of_kernels_broadcasts():
    sc = _sc()
    sc["training"]["loss_kernel"] = ["megatron", "te"]
    ds = explore.evaluate(sc)
    one = {}
    for k in ("megatron", "te"):
        s1 = _sc()
        s1["training"]["loss_kernel"] = k
        one[k] = float(explore.evaluate(s1)["step_time_s"][0])
    assert [float(x) for x in ds["step_time_s"]] == pytest.approx([one["megatron"], one["te"]], rel=1e-12)


def test_megatron_bridge_rows_carry_the_recipe_fact():
    for rid in VF.MBRIDGE_DENSE:
        assert VF.TRAINING_FACTS[rid][0] == {"loss_kernel": "te"}, rid
        assert "cross_entropy_fusion_impl" in VF.TRAINING_FACTS[rid][1]
    for rid in VF.RECIPE_FACTS:
        if not rid.startswith("mbridge"):
            assert rid not in VF.TRAINING_FACTS, rid
