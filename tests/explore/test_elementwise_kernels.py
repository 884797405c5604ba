"""``training.elementwise_kernels``: MPT's memory-bound kernels in eager PyTorch (llm-foundry) against
Megatron's default count (explore/model/calibration.py, FOUNDRY_*).

The byte constants are checked against an independent enumeration: the tensors each kernel of one MPT
block reads and writes, listed from llm-foundry's code (commit 5e85bd62d, blocks.py / attention.py /
ffn.py / norm.py) and flash-attn 2.4.2's bert_padding.py, as (tensor width in units of h, reads, writes)
with 2-byte elements; the wiring is checked by the change of the evaluated compute time."""
import copy

import pytest

import explore
from explore import validation as V
from explore.model import calibration as cal
from explore.scenario import ScenarioError

H = 1.0      # width of the residual stream, in units of h
QKV = 3.0    # the fused Wqkv output
B = 2.0      # bytes per bf16 element

# (kernel, width, tensors read, tensors written) for one block, tp = 1, attn_impl triton (no unpadding)
FORWARD = [("norm_1 layer_norm", H, 1, 1), ("attention residual add", H, 2, 1),
           ("norm_2 layer_norm", H, 1, 1), ("ffn residual add", H, 2, 1)]
BACKWARD = [("norm_1 dx", H, 2, 1), ("norm_1 dgamma/dbeta", H, 2, 0),
            ("norm_2 dx", H, 2, 1), ("norm_2 dgamma/dbeta", H, 2, 0),
            ("residual gradient sum before norm_1", H, 2, 1), ("residual gradient sum before norm_2", H, 2, 1),
            ("Wqkv bias gradient", QKV, 1, 0), ("out_proj bias gradient", H, 1, 0),
            ("down_proj bias gradient", H, 1, 0), ("qkv split backward (cat)", QKV, 1, 1)]
# attn_impl flash: flash-attn's unpad_input on q, k, v and pad_input on the output
UNPAD_FORWARD = [("gather q", H, 1, 1), ("gather k", H, 1, 1), ("gather v", H, 1, 1),
                 ("zeros for the padded output", H, 0, 1), ("index put of the output", H, 1, 1)]
UNPAD_BACKWARD = [("gather of the output gradient", H, 1, 1)] + [
    (f"zeros + scatter of d{x}", H, 1, 2) for x in "qkv"]
# per element of the FFN width f: GELU backward (grad, input -> grad) and the up_proj bias gradient
FFN_BACKWARD = [("gelu backward", 1.0, 2, 1), ("up_proj bias gradient", 1.0, 1, 0)]


def _bytes(kernels):
    return sum(B * w * (r + wr) for _, w, r, wr in kernels)


def test_byte_constants_match_the_kernel_by_kernel_enumeration():
    assert cal.FOUNDRY_FWD_BYTES_PER_SBH == _bytes(FORWARD)
    assert cal.FOUNDRY_BWD_BYTES_PER_SBH == _bytes(BACKWARD)
    assert cal.FOUNDRY_UNPAD_FWD_BYTES_PER_SBH == _bytes(UNPAD_FORWARD)
    assert cal.FOUNDRY_UNPAD_BWD_BYTES_PER_SBH == _bytes(UNPAD_BACKWARD)
    assert cal.FOUNDRY_BWD_BYTES_PER_FFN_ELEMENT == _bytes(FFN_BACKWARD)
    # flash-attn's Triton loss reads the bf16 logits forward, reads and writes them backward
    assert (cal.FOUNDRY_LOGITS_FWD_BYTES_PER_ELEMENT, cal.FOUNDRY_LOGITS_BWD_BYTES_PER_ELEMENT) == (B, 2 * B)


def _case(run_id):
    return copy.deepcopy(next(c[1] for c in V.load_cases() if c[0] == run_id))


@pytest.mark.parametrize("kernels", ["llm-foundry-flash", "llm-foundry-triton"])
def test_compute_time_changes_by_the_counted_bytes(kernels):
    """MPT-70B on 128 H100 (activation checkpointing: forward, recompute, backward; one microbatch):
    compute time with the llm-foundry kernels minus Megatron's = counted bytes / achieved HBM rate."""
    sc = _case("foundry23_h100_70b_128")
    L, h, V_ = sc["model"]["layers"], sc["model"]["hidden"], sc["model"]["vocab"]
    tokens = sc["parallelism"]["microbatch"] * sc["model"]["seq_len"]
    sc["training"]["elementwise_kernels"] = kernels
    new = explore.evaluate(sc)
    sc["training"]["elementwise_kernels"] = "megatron"
    old = explore.evaluate(sc)
    unpad = kernels.endswith("flash")
    fwd = _bytes(FORWARD) + (_bytes(UNPAD_FORWARD) if unpad else 0.0)
    bwd = _bytes(BACKWARD) + (_bytes(UNPAD_BACKWARD) if unpad else 0.0)
    # Megatron's count for a dropout-free layer (MPT trains at p = 0, validation_fsdp.MPT_DROPOUT): 22 - 2
    # forward, 2 x 22 - 10 backward (calibration.MEMBOUND_BYTES_PER_SBH_REPLICATED, HIDDEN_DROPOUT_*)
    assert sc["model"]["hidden_dropout"] == 0.0
    megatron_fwd = cal.MEMBOUND_BYTES_PER_SBH_REPLICATED - cal.HIDDEN_DROPOUT_FWD_BYTES_PER_SBH
    megatron_bwd = 2 * cal.MEMBOUND_BYTES_PER_SBH_REPLICATED - cal.HIDDEN_DROPOUT_BWD_BYTES_PER_SBH
    assert (megatron_fwd, megatron_bwd) == (20.0, 34.0)
    # the FFN-width terms agree: GELU 4 B forward; backward 6 + 2 = 8 = 2 x 4
    layer = (2 * (fwd - megatron_fwd) + (bwd - megatron_bwd)) * tokens * h
    head = (B + 2 * B - 38.0 - 14.0) * tokens * V_
    hbm = 3.35e12 * cal.DEFAULT.hbm_efficiency        # H100 SXM HBM3 (catalog) x the fitted efficiency
    want = (L * layer + head) / hbm
    got = float(new["time_s_compute"][0] - old["time_s_compute"][0])
    assert got == pytest.approx(want, rel=1e-9)


def test_default_is_megatron_and_bad_value_is_named():
    sc = _case("foundry23_h100_70b_128")
    del sc["training"]["elementwise_kernels"]
    a = float(explore.evaluate(sc)["step_time_s"][0])
    sc["training"]["elementwise_kernels"] = "megatron"
    assert float(explore.evaluate(sc)["step_time_s"][0]) == a
    sc["training"]["elementwise_kernels"] = "fused-by-magic"
    with pytest.raises(ScenarioError) as e:
        explore.evaluate(sc)
    assert "training.elementwise_kernels" in str(e.value) and "'fused-by-magic'" in str(e.value)


def test_foundry_scenarios_follow_sweep_attn_impl():
    """sweep.py (llm-foundry 5e85bd62d) runs 13B and 30B with attn_impl triton, the others with flash."""
    for run_id, sc, _, _ in V.load_cases():
        if run_id.startswith("foundry23_h100_"):
            size = run_id.split("_")[2]
            want = "llm-foundry-triton" if size in ("13b", "30b") else "llm-foundry-flash"
            assert sc["training"]["elementwise_kernels"] == want, run_id
        elif run_id.startswith("foundry23_a100_"):
            assert "elementwise_kernels" not in sc["training"]
