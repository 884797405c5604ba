"""Exact facts of the workload model."""
import numpy as np
import pytest

import explore
from explore.scenario import resolve
from explore.model.workload import (ModelSpec, activation_bytes_per_layer, model_flops_per_token,
                              total_params)


def spec(**model):
    sc = {"model": model, "training": {"global_batch": 8},
          "system": {"accelerator": "a100-sxm-80gb", "devices": 8}}
    return ModelSpec.from_resolved(resolve(sc))


@pytest.mark.parametrize("preset,published", [
    ("gpt3-175b", 175e9),            # Brown et al. 2020 Table 2.1
    ("llama3-8b", 8.03e9),           # Llama 3 paper / model card: 8.03B
    ("llama3-70b", 70.6e9),          # 70.6B
    ("llama3-405b", 405.9e9),        # 405.9B
    ("nemotron4-340b", 341e9),       # Nemotron-4 340B report: 341B
    ("megatron-1t", 1008e9),         # Narayanan et al. 2021 Table 1
    ("megatron-529.6b", 529.6e9),
    ("megatron-18.4b", 18.4e9),
])
def test_parameter_counts_match_published(preset, published):
    assert float(total_params(spec(preset=preset))[0]) == pytest.approx(published, rel=0.01)


def test_flops_match_megatron_formula():
    """Narayanan et al. 2021 Eq. 3 without recompute: 72 B s l h^2 (1 + s/6h + V/12hl)."""
    m = spec(preset="gpt3-175b")
    B, s, L, h, V = 1536, 2048, 96, 12288, 51200
    megatron = 72 * B * s * L * h ** 2 * (1 + s / (6 * h) + V / (12 * h * L))
    assert float(model_flops_per_token(m)[0]) * B * s == pytest.approx(megatron, rel=1e-12)


def test_gqa_and_gating_change_flops_as_expected():
    mha = spec(layers=2, hidden=1024, heads=16, vocab=1000, seq_len=128)
    gqa = spec(layers=2, hidden=1024, heads=16, kv_heads=4, vocab=1000, seq_len=128)
    gated = spec(layers=2, hidden=1024, heads=16, vocab=1000, seq_len=128, gated_mlp=True)
    # K and V projections shrink from 2h^2 to 2h^2 g/a per layer: 3 x 2 x (2 h^2 (1 - 1/4)) per token
    d = 3 * 2 * 2 * 2 * 1024 ** 2 * 0.75
    assert float(model_flops_per_token(mha)[0] - model_flops_per_token(gqa)[0]) == pytest.approx(d)
    # a third MLP matrix: 3 x 2 x 2 layers x h f
    assert float(model_flops_per_token(gated)[0] - model_flops_per_token(mha)[0]) == pytest.approx(
        3 * 2 * 2 * 1024 * 4096)


class TestKorthikantiActivations:
    """Korthikanti et al. 2022, Table 2 (per layer, 16-bit activations)."""
    m = spec(preset="gpt3-175b")
    s, b, h, a = 2048, 1, 12288, 96

    def act(self, t, sp, rc, flash=False):
        return float(activation_bytes_per_layer(self.m, self.b, t, np.array([sp]), np.array([rc]),
                                                np.array([flash]))[0])

    def test_no_parallelism(self):
        assert self.act(1, False, 0) == pytest.approx(self.s * self.b * self.h * (34 + 5 * self.a * self.s / self.h))

    def test_tensor_parallel(self):
        t = 8
        expect = self.s * self.b * self.h * (10 + 24 / t + 5 * self.a * self.s / (self.h * t))
        assert self.act(t, False, 0) == pytest.approx(expect)

    def test_tensor_and_sequence_parallel(self):
        t = 8
        assert self.act(t, True, 0) == pytest.approx(self.s * self.b * self.h / t * (34 + 5 * self.a * self.s / self.h))

    def test_selective_recompute(self):
        assert self.act(8, True, 1) == pytest.approx(self.s * self.b * self.h / 8 * 34)

    def test_full_recompute(self):
        assert self.act(8, True, 2) == pytest.approx(2 * self.s * self.b * self.h / 8)
        assert self.act(8, False, 2) == pytest.approx(2 * self.s * self.b * self.h)


def test_bubble_fraction_interleaved_1f1b():
    sc = explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml")
    sc["parallelism"]["virtual_stages"] = np.array([1, 2, 3])
    ds = explore.evaluate(sc)
    m = 1536 / (16 * 1)
    np.testing.assert_allclose(ds["bubble_fraction"].values, 7 / (np.array([1, 2, 3]) * m))
    # interleaving shrinks the step
    assert np.all(np.diff(ds["step_time_s"].values) < 0)


def test_uneven_layers_slowest_stage_sets_the_pace():
    """Llama 3 405B: 126 layers on 16 stages -> 8 on the fullest stage."""
    sc = {"model": {"preset": "llama3-405b"}, "training": {"global_batch": 64},
          "parallelism": {"tp": 8, "pp": np.array([14, 16, 18]), "dp": 1},
          "system": {"accelerator": "h100-sxm-80gb", "devices": np.array([112, 128, 144])}}
    ds = explore.evaluate(sc, keep_invalid=True)   # some do not fit: compare raw compute times
    assert ds["valid"].values[1] or ds["reason"].values[1] == "does not fit in accelerator memory"
    # 126/14 = 9 layers, ceil(126/16) = 8, 126/18 = 7: compute per microbatch on the slowest stage falls
    t = ds["time_s_compute"].values
    assert t[0] > t[1] > t[2]
