"""The catalog's measured fused-attention rate (accelerators.toml ``attention_peak_fraction``)
reproduces the benchmark it cites: NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training,
sdpa_bf16_benchmark_results_NVIDIA_B200.csv, the cuDNN SDPA row at batch 1, s = 8192, 128 query
heads, head_dim 128, causal, BF16 (forward 1.877 ms, backward 5.833 ms). The check rebuilds the
FLOP count from the shape, so it tests the number, not the step model."""
import math

from hwmodels import parts

B, S, HQ, D = 1, 8192, 128, 128
T_FWD_S, T_BWD_S = 1.877e-3, 5.833e-3          # the CSV's forward_time / backward_time (ms)
FWD_TFLOPS, BWD_TFLOPS = 1171.278, 942.509      # the CSV's fwd_tflops_per_sec / bwd_tflops_per_sec


def _fwd_flops():
    # Q K^T and A V, 2 x 2 b h s^2 d, halved by the causal mask (the benchmark's convention)
    return 4.0 * B * HQ * S * S * D / 2.0


def test_cited_times_give_the_cited_rates():
    # the benchmark counts the backward as 2.5 x the forward FLOPs (five GEMMs against two)
    assert math.isclose(_fwd_flops() / T_FWD_S / 1e12, FWD_TFLOPS, rel_tol=2e-3)
    assert math.isclose(2.5 * _fwd_flops() / T_BWD_S / 1e12, BWD_TFLOPS, rel_tol=2e-3)


def test_b200_fraction_reproduces_the_cited_fwd_bwd_rate():
    b200 = parts.get_part("accelerators", "b200")
    # forward + backward counted as 3 x the forward FLOPs (a backward of 2 x the forward)
    rate = 3.0 * _fwd_flops() / (T_FWD_S + T_BWD_S)
    assert math.isclose(rate / 1e12, 855.6, rel_tol=1e-3)
    assert math.isclose(b200["attention_peak_fraction"] * b200["peak_flops_bf16"], rate, rel_tol=2e-3)
    assert "sdpa_bf16_benchmark_results_NVIDIA_B200.csv" in b200["source"]["attention_peak_fraction"]


def test_parts_without_a_measurement_are_nan():
    for pid in ("a100-sxm-80gb", "h100-sxm-80gb", "h200-sxm-141gb", "mi300x", "tpu-v4"):
        assert math.isnan(parts.get_part("accelerators", pid)["attention_peak_fraction"]), pid
