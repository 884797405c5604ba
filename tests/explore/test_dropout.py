"""Dropout-free layers (model.hidden_dropout / model.attention_dropout): at p = 0 PyTorch stores no
mask and runs no dropout pass (explore/model/workload.py activation_bytes_per_layer,
explore/model/calibration.py HIDDEN_DROPOUT_*, docs/validation.md "Dropout-free layers")."""
import copy
import tomllib
from pathlib import Path

import numpy as np
import pytest

import explore
from explore.model.workload import ModelSpec, activation_bytes_per_layer
from explore.scenario import ScenarioError

REPO = Path(__file__).resolve().parents[2]


def gpt(hidden_dropout, attention_dropout, s=2048.0, h=12288.0, a=96.0):
    """A GPT-3-style layer as Korthikanti et al. 2022 count it: multi-head attention, a plain 4h MLP."""
    one = lambda x: np.array([float(x)])  # noqa: E731
    return ModelSpec(layers=one(96), hidden=one(h), heads=one(a), kv_heads=one(a), ffn_hidden=one(4 * h),
                     vocab=one(51200), seq_len=one(s), gated_mlp=np.array([False]),
                     tied_embeddings=np.array([True]), experts=one(1), top_k=one(1),
                     moe_ffn_hidden=one(4 * h), shared_experts=one(0), head_dim=one(h / a),
                     hidden_dropout=one(hidden_dropout), attention_dropout=one(attention_dropout))


S, B, H, A = 2048.0, 1.0, 12288.0, 96.0
SBH = S * B * H


def per_layer(m, t=1.0, sp=False, recompute=0, flash=False):
    return float(activation_bytes_per_layer(m, np.array([B]), np.array([t]), np.array([sp]),
                                            np.array([recompute]), np.array([flash]))[0])


def test_korthikanti_table2_with_dropout_is_unchanged():
    """Korthikanti et al. 2022 (arXiv:2205.05198) Table 2, with Megatron's dropout 0.1: no parallelism
    s b h (34 + 5 a s / h); tensor parallelism s b h (10 + 24/t + 5 a s / (h t)); with sequence
    parallelism s b h / t (34 + 5 a s / h)."""
    m = gpt(0.1, 0.1)
    assert per_layer(m) == pytest.approx(SBH * (34 + 5 * A * S / H))
    assert per_layer(m, t=8) == pytest.approx(SBH * (10 + 24 / 8 + 5 * A * S / (H * 8)))
    assert per_layer(m, t=8, sp=True) == pytest.approx(SBH / 8 * (34 + 5 * A * S / H))


def test_korthikanti_table2_without_dropout_masks():
    """Korthikanti Sec. 4.1 itemises the two hidden-dropout masks (s b h each, 1 byte per element) and,
    in the attention, the dropout mask (a s^2 b) and the dropout output (2 a s^2 b) next to the
    softmax output (2 a s^2 b). At p = 0 none exist (PyTorch's dropout returns its input, which the
    A V product then saves: the softmax output): 34 -> 32 s b h and 5 -> 2 a s^2 b."""
    m = gpt(0.0, 0.0)
    assert per_layer(m) == pytest.approx(SBH * (32 + 2 * A * S / H))
    # the masks are part of the replicated 10 s b h under plain tensor parallelism ...
    assert per_layer(m, t=8) == pytest.approx(SBH * (8 + 24 / 8 + 2 * A * S / (H * 8)))
    # ... and sharded like the rest under sequence parallelism
    assert per_layer(m, t=8, sp=True) == pytest.approx(SBH / 8 * (32 + 2 * A * S / H))
    # selective recompute and flash attention store no s x s tensors, with or without dropout
    for kw in ({"recompute": 1}, {"flash": True}):
        assert per_layer(m, **kw) == pytest.approx(SBH * 32)
        assert per_layer(gpt(0.1, 0.1), **kw) == pytest.approx(SBH * 34)
    # full recompute keeps the layer input only: dropout changes nothing
    assert per_layer(m, recompute=2) == per_layer(gpt(0.1, 0.1), recompute=2) == pytest.approx(2 * SBH)


def test_the_two_probabilities_act_separately():
    """Hidden dropout: the 2 s b h masks; attention dropout: 3 a s^2 b (its mask and output) only."""
    both, hid_only, attn_only, none = gpt(0.1, 0.1), gpt(0.1, 0.0), gpt(0.0, 0.1), gpt(0.0, 0.0)
    assert per_layer(both) - per_layer(attn_only) == pytest.approx(2 * SBH)
    assert per_layer(both) - per_layer(hid_only) == pytest.approx(3 * A * S * S * B)
    assert per_layer(hid_only, flash=True) == per_layer(both, flash=True)
    assert per_layer(attn_only, flash=True) == per_layer(none, flash=True)


def _plans(n=48, seed=3):
    """A mixed batch of plans around a Llama-3-70B-sized model on H100 (each field one value per design)."""
    rng = np.random.default_rng(seed)
    tp, pp = rng.choice([1, 2, 4, 8], n), rng.choice([1, 2, 4, 8], n)
    return {
        "model": {"preset": "llama3-70b", "seq_len": rng.choice([2048, 4096, 8192], n).tolist()},
        "training": {"global_batch": 512, "precision": rng.choice(["bf16", "fp8"], n).tolist(),
                     "flash_attention": rng.choice([True, False], n).tolist()},
        "parallelism": {"tp": tp.tolist(), "pp": pp.tolist(), "dp": 8,
                        "microbatch": rng.choice([1, 2], n).tolist(),
                        "recompute": rng.choice(["none", "selective", "full"], n).tolist(),
                        "sequence_parallel": (rng.random(n) < 0.5).tolist(),
                        "zero": rng.choice([0, 1, 3], n).tolist()},
        "system": {"accelerator": "h100-sxm-80gb", "devices": (tp * pp * 8).tolist(),
                   "scale_up": {"size": 8, "link": "nvlink4"},
                   "scale_out": {"topology": "fat-tree", "link": "ib-ndr-400"}},
    }


def _with(sc, hd, ad):
    sc = copy.deepcopy(sc)
    sc["model"]["hidden_dropout"] = hd
    sc["model"]["attention_dropout"] = ad
    return explore.evaluate(sc, keep_invalid=True)


def test_no_dropout_never_costs_more_memory_or_time():
    """Property over a mixed batch of plans (tp, pp, sp, recompute, flash, precision, ZeRO): dropout 0
    never uses more memory or step time than dropout 0.1, and saves some of both on every plan that
    stores layer activations."""
    sc = _plans()
    off, on = _with(sc, 0.0, 0.0), _with(sc, 0.1, 0.1)
    assert np.all(np.isfinite(on["step_time_s"].values))
    assert np.all(off["step_time_s"].values <= on["step_time_s"].values)
    # strictly shorter wherever the step is not bound by ZeRO-3's parameter gathers (there the shorter
    # layer compute can hide under the communication and the step stays as it was)
    z3 = np.asarray(sc["parallelism"]["zero"]) == 3
    assert np.all(off["step_time_s"].values[~z3] < on["step_time_s"].values[~z3])
    assert (off["step_time_s"].values[z3] < on["step_time_s"].values[z3]).any()
    assert np.all(off["memory_per_device_bytes"].values <= on["memory_per_device_bytes"].values)
    # strictly less wherever layer activations are stored (full recompute keeps the layer inputs only, and
    # its recomputed layer's working set can sit under another peak, such as the loss's logits)
    full = np.asarray(sc["parallelism"]["recompute"]) == "full"
    assert np.all(off["memory_per_device_bytes"].values[~full] < on["memory_per_device_bytes"].values[~full])
    # the unfused attention's s x s saving only where it stores scores (no flash, no recompute)
    att = _with(sc, 0.1, 0.0)
    stores = (~np.asarray(sc["training"]["flash_attention"])
              & (np.asarray(sc["parallelism"]["recompute"]) == "none"))
    less = att["memory_per_device_bytes"].values < on["memory_per_device_bytes"].values
    same = att["memory_per_device_bytes"].values == on["memory_per_device_bytes"].values
    assert stores.any() and np.all(less[stores]) and np.all(same[~stores])


def test_dropout_broadcasts_within_one_batch():
    """A batch mixing p = 0 and p = 0.1 designs gives each design the result of its own evaluation."""
    sc = _plans(n=12, seed=5)
    hd = [0.0, 0.1] * 6
    ad = [0.1, 0.0, 0.0] * 4
    mixed = _with(sc, hd, ad)
    for i in (0, 1, 4, 9):
        one = copy.deepcopy(sc)
        for table in ("model", "training", "parallelism", "system"):
            for k, v in one[table].items():
                if isinstance(v, list):
                    one[table][k] = v[i]
        single = _with(one, hd[i], ad[i])
        for k in ("step_time_s", "memory_per_device_bytes"):
            assert float(mixed[k].values[i]) == pytest.approx(float(single[k].values[0]), rel=1e-12), (i, k)


@pytest.mark.parametrize("field,value", [("hidden_dropout", 1.0), ("hidden_dropout", -0.1),
                                         ("attention_dropout", 1.5), ("attention_dropout", [0.0, 1.0])])
def test_bad_probability_names_field_value_and_range(field, value):
    sc = _plans(n=1)
    with pytest.raises(ScenarioError) as e:
        _with(sc, **{"hd": 0.0, "ad": 0.0, {"hidden_dropout": "hd", "attention_dropout": "ad"}[field]: value})
    msg = str(e.value)
    bad = value[-1] if isinstance(value, list) else value
    assert f"model.{field}" in msg and f"{bad:g}" in msg and "is out of range" in msg, msg
    assert ">= 0 and < 1" in msg, msg


def test_json_schema_bounds_the_probability_exclusively():
    from explore.schema import json_schema
    for field in ("hidden_dropout", "attention_dropout"):
        one = json_schema()["properties"]["model"]["properties"][field]["anyOf"][0]
        assert one["minimum"] == 0.0 and one["exclusiveMaximum"] == 1.0 and "maximum" not in one


def test_presets_without_dropout_cite_their_configs():
    """Presets at dropout 0 say where their published configs set it; the GPT-3-style Megatron presets
    keep Megatron-LM's default 0.1 (they set neither field)."""
    presets = tomllib.loads((REPO / "explore" / "data" / "models.toml").read_text())
    zero = {k for k, p in presets.items() if p.get("hidden_dropout") == 0.0}
    assert {"llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b", "deepseek-v3",
            "qwen3-235b-a22b"} <= zero
    for k in zero:
        assert presets[k]["attention_dropout"] == 0.0
        assert "dropout" in presets[k]["source"] and "commit" in presets[k]["source"], k
    for k in ("gpt3-175b", "megatron-22b", "megatron-1t"):
        assert "hidden_dropout" not in presets[k] and "attention_dropout" not in presets[k]


def test_published_gb200_405b_run_fits_without_the_phantom_masks():
    """Megatron-Bridge 26.06 ran Llama 3.1 405B FP8 on 256 GB200 (186 GB each) with TP 4, PP 16, VP 4
    and no recompute (tests/validation/frontier_scenarios/mbridge2606_gb200_llama31_405b_fp8_256.toml).
    With dropout masks the model put it at 189.7 GB, over the 186 GB; without them (Llama trains at 0)
    it fits, as it must, having run."""
    path = REPO / "tests/validation/frontier_scenarios/mbridge2606_gb200_llama31_405b_fp8_256.toml"
    sc = tomllib.loads(path.read_text())
    ds = explore.evaluate(sc, keep_invalid=True)
    assert bool(ds["fits_memory"][0])
    assert float(ds["memory_per_device_bytes"][0]) < 186e9
    with_masks = copy.deepcopy(sc)
    with_masks["model"].update(hidden_dropout=0.1, attention_dropout=0.1)
    ds01 = explore.evaluate(with_masks, keep_invalid=True)
    assert not bool(ds01["fits_memory"][0])
