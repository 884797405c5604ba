"""FP8 step-time mechanisms (precision.py, step.py, the catalog's FP8 rates), each against an independent figure.

* casts: every FP8 GEMM input is quantized once in the forward and every output gradient once in the
  backward; the counts are the K and N widths of the GEMM shapes gemm.py enumerates (not precision.py's
  own sums), and a cast moves the bytes Transformer Engine's kernels move (2 B read, 1 B per copy).
* layout: TE keeps a separate transposed FP8 copy only where FP8 GEMMs are TN-only (Hopper); Blackwell
  (compute capability 10.x) uses one buffer (transformer_engine/pytorch/utils.py is_non_tn_fp8_gemm_supported).
* FP8 GEMM rate: the catalog reproduces the measured FP8 MAMF in TFLOP/s (stas00/ml-engineering table).
* MXFP8 GEMM rate: TE's GEMM profiling guide, B300 kernel-only per-layer GEMM times.
"""
import numpy as np
import pytest

import explore
from explore.model import calibration as cal
from explore.model import gemm
from explore.model.precision import Recipe
from explore.model.step import layer_compute
from explore.model.system import build_system
from explore.model.workload import ModelSpec, mlp_inner_width
from explore.scenario import resolve


def _scenario(acc="b200", recipe="per-tensor", precision="fp8", preset="llama3-8b"):
    return {"model": {"preset": preset, "seq_len": 8192},
            "training": {"global_batch": 128, "precision": precision, "fp8_recipe": recipe,
                         "flash_attention": True},
            "parallelism": {"tp": 1, "pp": 1, "dp": 8, "microbatch": 2, "zero": 1, "recompute": "none"},
            "system": {"accelerator": acc, "devices": 8, "scale_up": {"size": 8, "link": "nvlink5"},
                       "scale_out": {"link": "ib-ndr-400", "nics_per_device": 1.0}}}


def _parts(sc):
    r = resolve(sc)
    m, s = ModelSpec.from_resolved(r), build_system(r)
    return m, s, Recipe.from_resolved(r, s)


def _layer(m, s, rec, cast=None, amax=None):
    hbm = s.hbm_bandwidth_bytes_per_s * cal.DEFAULT.hbm_efficiency
    cast = rec.cast_bytes_per_element if cast is None else cast
    amax = rec.amax_bytes_per_element if amax is None else amax
    return layer_compute(m, 2.0, 1.0, 1.0, False, True, s.peak_flops, s.peak_flops_bf16, hbm, cast, amax,
                         0.0, 0.0, cal.DEFAULT), hbm


def test_casts_are_counted_once_from_the_gemm_shapes():
    """Forward cast traffic = bytes/element x (sum of the GEMMs' K) x tokens; backward = x (sum of N):
    each GEMM input quantized once forward (its column-wise copy saved for the weight gradient), each
    output gradient once backward (the old model charged the whole count forward and twice backward)."""
    m, s, rec = _parts(_scenario())
    tokens = 2.0 * 8192
    shapes = gemm.layer_gemm_shapes(tokens, m.hidden, m.heads, m.kv_heads, mlp_inner_width(m), m.gated_mlp, 1.0)
    sum_k = sum(float(np.ravel(k)[0]) for _, _, k in shapes)      # GEMM inputs
    sum_n = sum(float(np.ravel(n)[0]) for _, n, _ in shapes)      # output gradients
    assert (sum_k, sum_n) == (4096 + 4096 + 4096 + 14336, 6144 + 4096 + 28672 + 4096)   # Llama 3 8B by hand
    with_cast, hbm = _layer(m, s, rec, cast=3.0, amax=0.0)
    without, _ = _layer(m, s, rec, cast=0.0, amax=0.0)
    fwd = float(np.ravel(with_cast["mem"] - without["mem"])[0]) * hbm
    bwd = float(np.ravel(with_cast["mem_bwd"] - without["mem_bwd"])[0]) * hbm
    assert fwd == pytest.approx(3.0 * sum_k * tokens, rel=1e-12)
    assert bwd == pytest.approx(3.0 * sum_n * tokens, rel=1e-12)


def test_current_scaling_amax_pass_skips_only_the_norm_fed_inputs():
    """TE LayerNormLinear computes the amax inside the norm (quantize_with_amax) for the QKV and MLP-up
    inputs (2 h); every other quantized tensor takes a separate 2-B read."""
    m, s, rec = _parts(_scenario())
    tokens, h = 2.0 * 8192, 4096
    amax, hbm = _layer(m, s, rec, cast=0.0, amax=2.0)
    none, _ = _layer(m, s, rec, cast=0.0, amax=0.0)
    fwd = float(np.ravel(amax["mem"] - none["mem"])[0]) * hbm
    bwd = float(np.ravel(amax["mem_bwd"] - none["mem_bwd"])[0]) * hbm
    assert fwd == pytest.approx(2.0 * (26624 - 2 * h) * tokens, rel=1e-12)
    assert bwd == pytest.approx(2.0 * 43008 * tokens, rel=1e-12)


@pytest.mark.parametrize("acc,recipe,expected", [
    ("h100-sxm-80gb", "per-tensor", 2 + 1 + 1),   # TN-only: row-wise + transposed copy
    ("b200", "per-tensor", 2 + 1),                # sm100: one buffer serves both uses
    ("h100-sxm-80gb", "mxfp8", 2 + 1 + 1 + 2 / 32),
    ("b200", "mxfp8", 2 + 1 + 1 + 2 / 32),        # 1 x 32 scales along K: both copies always
])
def test_cast_bytes_follow_transformer_engine_layouts(acc, recipe, expected):
    _, _, rec = _parts(_scenario(acc, recipe))
    assert float(np.ravel(rec.cast_bytes_per_element)[0]) == pytest.approx(expected)
    assert float(np.ravel(rec.amax_bytes_per_element)[0]) == (2.0 if recipe == "per-tensor" else 0.0)


@pytest.mark.parametrize("acc,mamf_tflops", [("h100-sxm-80gb", 1402.6), ("h200-sxm-141gb", 1453.4),
                                             ("b200", 3432.5)])
def test_fp8_gemm_rate_is_the_measured_fp8_mamf(acc, mamf_tflops):
    """stas00/ml-engineering, 'Maximum Achievable Matmul FLOPS comparison table', FP8 rows (TFLOP/s)."""
    _, s, _ = _parts(_scenario(acc))
    rate = float(np.ravel(s.peak_flops * s.gemm_peak_fraction)[0])
    assert rate == pytest.approx(mamf_tflops * 1e12, rel=2e-3)
    _, s16, _ = _parts(_scenario(acc, precision="bf16"))      # 16-bit keeps the BF16 MAMF
    assert float(np.ravel(s16.gemm_peak_fraction)[0]) == float(np.ravel(s16.matmul_peak_fraction)[0])


def test_mxfp8_gemms_run_at_the_block_scaled_rate_of_the_te_profile():
    """Compute-bound GEMMs: MXFP8 / per-tensor GEMM time = 7.161 / 6.812 ms (TE gemm_profiling.rst, B300
    kernel-only per-layer GEMM times); the BF16 attention core is unchanged."""
    res = {}
    for recipe in ("per-tensor", "mxfp8"):
        sc = _scenario("b200", recipe)
        ds = explore.evaluate(sc, keep_invalid=True)
        res[recipe] = ds
    m, s, rec_pt = _parts(_scenario("b200", "per-tensor"))
    _, _, rec_mx = _parts(_scenario("b200", "mxfp8"))
    assert float(np.ravel(rec_mx.gemm_rate)[0]) / float(np.ravel(rec_pt.gemm_rate)[0]) == pytest.approx(6.812 / 7.161)
    tok = 2.0 * 8192
    shapes = gemm.layer_gemm_shapes(tok, m.hidden, m.heads, m.kv_heads, mlp_inner_width(m), m.gated_mlp, 1.0)
    pk = s.peak_flops * s.gemm_peak_fraction
    t_pt = gemm.gemm_time_s(shapes, pk * rec_pt.gemm_rate, cal.DEFAULT.gemm_efficiency, s.hbm_bandwidth_bytes_per_s)
    t_mx = gemm.gemm_time_s(shapes, pk * rec_mx.gemm_rate, cal.DEFAULT.gemm_efficiency, s.hbm_bandwidth_bytes_per_s)
    assert float(np.ravel(t_mx / t_pt)[0]) == pytest.approx(7.161 / 6.812, rel=1e-9)   # all four compute-bound
    # the published ranking of the Megatron-Bridge 25.11 B200 Llama 3 8B twins (MXFP8 4.44 s, FP8-CS 4.28 s)
    assert res["mxfp8"]["step_time_s"].values[0] > res["per-tensor"]["step_time_s"].values[0]


def test_recipe_fields_broadcast_over_designs():
    sc = _scenario()
    sc["system"]["accelerator"] = np.array(["h100-sxm-80gb", "b200", "b200", "h100-sxm-80gb"])
    sc["training"]["fp8_recipe"] = np.array(["per-tensor", "per-tensor", "mxfp8", "mxfp8"])
    sc["training"]["precision"] = np.array(["fp8", "fp8", "fp8", "bf16"])
    _, s, rec = _parts(sc)
    assert np.allclose(np.broadcast_to(rec.cast_bytes_per_element, 4), [4.0, 3.0, 4 + 2 / 32, 0.0])
    assert np.allclose(np.broadcast_to(rec.gemm_rate, 4), [1.0, 1.0, 6.812 / 7.161, 1.0])
    assert np.allclose(np.broadcast_to(s.gemm_peak_fraction, 4), [0.709, 0.763, 0.763, 0.803])
    ds = explore.evaluate(sc, keep_invalid=True)
    assert np.all(np.isfinite(ds["step_time_s"].values))
