"""Issue 11: step time against published MoE / long-context / FP8 runs (tests/validation/frontier_runs.csv).

The calibration constants are the ones fitted on published_runs.csv (not refitted on these
runs), so the errors are out of sample. Runs the model cannot represent (hardware missing from
the catalog, context beyond the fitted attention term) are reported by
``python -m explore.validation_frontier`` but not asserted (``EXCLUDED``, with the reason).
"""
import numpy as np
import pytest

from explore import validation_frontier as VF
from explore.scenario import load_scenario

CASES = VF.load_cases()


@pytest.mark.parametrize("row", VF.load_rows(), ids=lambda r: r["run_id"])
def test_committed_scenarios_match_the_csv(row):
    assert load_scenario(VF.SCENARIO_DIR / f"{row['run_id']}.toml") == VF.build_scenario(row)
    assert row["source"] and row["source_location"]


@pytest.fixture(scope="module")
def errors():
    return VF.errors(CASES)


MOE_DISPATCH_GAP = {"nemo2502_b200_mixtral8x7b_fp8_64"}
"""NeMo 25.02 Mixtral 8x7B on B200 (Megatron-Core core_r0.11.0 791b70e031), too fast by 24.0 %
(25.5 % before the unfused permute / unpermute passes were charged; -11.7 % when the FP8 casts were
charged three times, which had hidden it). The dense Llama 3 8B run of the same container is
modelled at +0.6 %, so the gap is in the MoE layer. Not host synchronisations: the recipe's
MegatronTokenDropCallback (capacity factor 1, pad to capacity) puts MoEAlltoAllTokenDispatcher on
its drop-and-pad path, which takes the split sizes from the capacity on the host (no device-to-host
copy, no stream synchronize; token_dispatcher.py preprocess). What is left is not found in the
code. The NeMo 25.04 GB200 row (-13.1 % with the passes) is back under the issue-11 bounds.
Bounded on its own, in the direction found (docs/validation.md, Megatron-Bridge dense group, FP8)."""


def test_moe_dispatch_gap_rows_are_too_fast_within_30_percent(errors):
    for r in MOE_DISPATCH_GAP:
        assert r in errors and r not in VF.EXCLUDED
        assert -0.30 <= errors[r] < 0.0, f"{r}: {100 * errors[r]:.1f} %"


def test_at_least_eight_asserted_runs_with_mape_at_most_9_percent(errors):
    """The issue-11 asserted set (without the two MoE-dispatch rows above, 7.0 % over 8 runs at
    commit time); the Megatron-Bridge dense group has its own bounds below."""
    kept = {r: e for r, e in errors.items()
            if r not in VF.EXCLUDED and r not in VF.MBRIDGE_DENSE and r not in MOE_DISPATCH_GAP}
    assert len(kept) >= 8
    mape = float(np.mean(np.abs(list(kept.values()))))
    assert mape <= 0.09, f"MAPE {100 * mape:.2f} % over {len(kept)} runs"
    assert set(VF.EXCLUDED) <= set(errors)      # every exclusion names a run that exists


def test_every_asserted_run_within_22_percent(errors):
    for r, e in errors.items():
        if r not in VF.EXCLUDED and r not in VF.MBRIDGE_DENSE and r not in MOE_DISPATCH_GAP:
            assert abs(e) <= 0.22, f"{r}: {100 * e:.1f} %"


def test_megatron_bridge_dense_group_is_asserted_and_within_its_bounds(errors):
    """Held out, no refit: 12 dense Llama 3 / 3.1 rows of the Megatron-Bridge performance summary
    (8 to 1,024 GPUs, every plan field printed), all representable, so all asserted. Measured at
    commit time: MAPE 10.68 %, worst 16.27 % (Llama 3.1 405B FP8-CS on 128 B200, the model too fast;
    11.99 % / 18.49 %, Llama 3 8B FP8-CS on 8 B200 too slow, before the recipes' Transformer Engine
    cross-entropy, training.loss_kernel te, replaced Megatron's fp32 loss: 10 B per logit for 52; 12.17 %
    before the tp > 1 rows' userbuffers collectives each hid under their own GEMM only (tp_overlap
    per_gemm, as Transformer Engine fuses them), 15.03 /
    35.55 % before the FP8 casts were counted once and the FP8 GEMMs took their own rates, 11.35 % before
    the interleaved rows ran Megatron-Core's overlapped pipeline transfers and per-chunk gradient
    reductions as their recipes set them, which hide time the code hides and make the too-fast 405B
    rows faster still; 10.46 % / 16.62 % before the 405B rows took their recipes' pipeline split,
    account_for_embedding / loss_in_pipeline_split, which makes them faster: now 10.82 % / 17.49 %);
    bounds set just above, to be tightened."""
    assert len(VF.MBRIDGE_DENSE) == 12 and not set(VF.MBRIDGE_DENSE) & set(VF.EXCLUDED)
    e = np.abs([errors[r] for r in VF.MBRIDGE_DENSE])
    assert e.mean() <= 0.110, f"dense group MAPE {100 * e.mean():.2f} %"
    assert e.max() <= 0.180, f"dense group worst {100 * e.max():.2f} %"


TWINS = (("mbridge2511_b200_llama3_8b_mxfp8_8", "mbridge2511_b200_llama3_8b_fp8_8"),
         ("mbridge2511_gb200_llama3_8b_mxfp8_8", "mbridge2511_gb200_llama3_8b_fp8_8"),
         ("mbridge2511_b200_llama31_405b_mxfp8_128", "mbridge2511_b200_llama31_405b_fp8_128"),
         ("mbridge2606_gb200_llama31_405b_mxfp8_256", "mbridge2606_gb200_llama31_405b_fp8_256"))


@pytest.mark.parametrize("mx,cs", TWINS)
def test_mxfp8_is_slower_than_fp8_current_scaling_as_published(mx, cs):
    """Every published MXFP8 / FP8-CS twin is slower in MXFP8 (step ratios 1.037-1.077); the model ranks
    them the same way (MXFP8's block-scaled GEMMs, precision.MXFP8_GEMM_RATE, outweigh its cheaper casts
    on Blackwell, where per-tensor FP8 writes no transposed copy)."""
    rows = {r["run_id"]: float(r["step_time_s"]) for r in VF.load_rows()}
    cases = {rid: sc for rid, sc, _, _ in VF.load_cases() if rid in (mx, cs)}
    from explore.evaluate import evaluate
    t = {rid: float(evaluate(sc, keep_invalid=True)["step_time_s"][0]) for rid, sc in cases.items()}
    assert rows[mx] > rows[cs]
    assert t[mx] > t[cs]


@pytest.mark.parametrize("rid", VF.MBRIDGE_DENSE + ("mbridge2606_h100_llama31_405b_fp8_1024",))
def test_megatron_bridge_derived_step_reproduces_the_published_model_tflops(rid):
    """The step time is derived from the row's tokens/s/GPU; the row's other published figure,
    Model TFLOP/s/GPU, times GPUs times that step must equal the FLOPs Megatron-Bridge counts for
    the global batch (src/megatron/bridge/training/utils/flop_utils.py at 4ab94dfad3, dense GQA
    branch: per token 6 h (3 ffn L) + 6 L (h (q + 2 kv) + q h + q s) + 6 h V_padded, q = h,
    kv = 128 x kv_heads, V padded to a multiple of 128 tp), within the rounding of the printed
    figures (3-4 digits: <= 0.3 %). 26.04.01's tokens/s fail this (quantised to multiples of 64
    or 8: 70B H100 1664 tokens/s is 2.2 % off its 731 TFLOP/s), which is why 26.04's rows are used."""
    row = {r["run_id"]: r for r in VF.load_rows()}[rid]
    L, h, ffn, s, V, tp = (int(row[k]) for k in ("layers", "hidden", "ffn_hidden", "seq_len", "vocab", "tp"))
    kv, div = 128 * int(row["kv_heads"]), 128 * tp
    v_pad = -(-V // div) * div
    per_token = 6 * h * 3 * ffn * L + 6 * L * (h * (h + 2 * kv) + h * h + h * s) + 6 * h * v_pad
    megatron_flops = int(row["global_batch_seqs"]) * s * per_token
    published = float(row["tflops_per_gpu"]) * 1e12 * int(row["n_accel"]) * float(row["step_time_s"])
    assert published == pytest.approx(megatron_flops, rel=0.003)


def test_llama31_405b_fp8_megatron_bridge_plan_fits_80_gb():
    """It ran on 80 GB H100s (Megatron-Bridge perf recipe: TP 8 PP 8 CP 2 VP 8, BF16 main
    gradients, Transformer Engine FP8): the plan must be valid and fit (was 79.3 GiB with FP32
    gradients and 16-bit saved GEMM inputs; now 60.6 GiB)."""
    from explore.evaluate import evaluate
    sc = {c[0]: c[1] for c in CASES}["mbridge2606_h100_llama31_405b_fp8_1024"]
    ds = evaluate(sc, keep_invalid=True)
    assert bool(ds["valid"][0]), ds["reason"].values[0]
    assert float(ds["memory_per_device_bytes"][0]) <= 80e9


LLAMA3_8K = ("llama3_405b_prod_8k_8192gpu", "llama3_405b_prod_8k_16384gpu")


@pytest.mark.parametrize("rid", VF.LLAMA3_ROWS)
def test_llama3_derived_step_times_reproduce_the_published_mfu(rid):
    """The CSV's step times come from Meta's TFLOP/s per GPU (Llama 3, Table 4) with PaLM's
    6N + 12 L h s count; the model's own MFU numerator over that time, against the H100 BF16
    dense peak (989.4 TFLOP/s), must give the published MFU (printed to 1 %, TFLOP/s to 10)."""
    from explore.evaluate import evaluate
    row = {r["run_id"]: r for r in VF.load_rows()}[rid]
    ds = evaluate({c[0]: c[1] for c in CASES}[rid], keep_invalid=True)
    flops_per_device = float(ds["model_flops_per_s_per_device"][0] * ds["step_time_s"][0])
    mfu = flops_per_device / (float(row["step_time_s"]) * 989.4e12)
    assert abs(100 * mfu - float(row["mfu_pct"])) <= 0.6


def test_llama3_mfu_drop_from_8k_to_16k_gpus_appears_in_the_model():
    """Out of sample: Meta's step at 16,384 GPUs (DP 128, 16 sequences per DP rank) is
    (430 / 400) / 2 = 0.5375 of the step at 8,192 (DP 64, 32 per rank), not 0.5 (Llama 3
    Sec. 3.3.2: the lower batch per DP group); this ratio needs no FLOP convention. The model's
    ratio comes from the interleaved bubble (p - 1) / (v m) at half the microbatches."""
    rows = {r["run_id"]: r for r in VF.load_rows()}
    a, b = (rows[r] for r in LLAMA3_8K)
    published = (float(a["tflops_per_gpu"]) / float(b["tflops_per_gpu"])) * int(a["n_accel"]) / int(b["n_accel"])
    from explore.evaluate import evaluate
    sc = {c[0]: c[1] for c in CASES}
    t8, t16 = (float(evaluate(sc[r], keep_invalid=True)["step_time_s"][0]) for r in LLAMA3_8K)
    assert published == pytest.approx(0.5375)
    assert t16 / t8 == pytest.approx(published, rel=0.02)
    assert t16 / t8 > 0.52          # the drop is there, not perfect scaling (0.5)


def test_an_embedding_only_and_an_output_only_chunk_are_a_valid_plan():
    """Llama 3 405B: 126 layers on pp 16 x v 8 = 128 chunks (Sec. 3.3.2); one more chunk is not."""
    import copy
    from explore.evaluate import evaluate
    sc = {c[0]: c[1] for c in CASES}["llama3_405b_prod_8k_8192gpu"]
    assert "pp*virtual_stages" not in evaluate(sc, keep_invalid=True)["reason"].values[0]
    bad = copy.deepcopy(sc)
    bad["parallelism"]["virtual_stages"] = 9        # 144 chunks > 126 + 2
    assert "pp*virtual_stages" in evaluate(bad, keep_invalid=True)["reason"].values[0]


def test_llama3_8k_rows_are_excluded_for_memory_alone():
    """With the published layout (an embedding-only first and a loss-only last chunk, V = 8 inferred:
    parallelism.pp_embedding_as_layer / pp_loss_as_layer) the 8K rows are valid plans that do not fit
    80 GB: 97.8 GB on 8,192 GPUs and 90.6 GB on 16,384, the second pipeline rank's interleaved warm-up
    (docs/validation.md, "Llama 3 405B's pipeline layout"). Their exclusion says so with the model's
    figures; were they asserted they would be -21.0 % and -21.4 % (frontier_last_report.txt)."""
    from explore.evaluate import evaluate
    sc = {c[0]: c[1] for c in CASES}
    for rid, gb in zip(LLAMA3_8K, ("97.8", "90.6")):
        par = sc[rid]["parallelism"]
        assert par["pp_embedding_as_layer"] and par["pp_loss_as_layer"] and par["virtual_stages"] == 8
        ds = evaluate(sc[rid], keep_invalid=True)
        assert ds["reason"].values[0] == "does not fit in accelerator memory"
        assert f"{float(ds['memory_per_device_bytes'][0]) / 1e9:.1f}" == gb
        assert VF.EXCLUDED[rid].startswith("does not fit 80 GB as modelled") and gb + " GB" in VF.EXCLUDED[rid]
