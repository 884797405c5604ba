"""Dragonfly group (OLCF Frontier: MI250X GCDs, Slingshot-11 dragonfly; tests/validation/dragonfly_runs.csv):
published Frontier training runs, held out (nothing is fitted on them; the shipped constants come from
published_runs.csv).

Measured with the constants of this commit: GPT-3 175B (Megatron-DeepSpeed log, 128 GCDs) +91.25 %,
Llama 3.1 8B (HF + accelerate FSDP, 512 GCDs) -49.60 %, Llama 3 8B (torchtitan FSDP2, 64 GCDs) -2.95 %;
MAPE 47.93 %. The 175B error is the borrowed GEMM rate: the run's logged whole-step hardware rate
(149.46 TFLOP/s per GCD) is 1.54x the model's GEMM ceiling on mi250x-gcd (97 TFLOP/s: MI300X's measured
matmul fraction, borrowed for want of an MI250X figure). The HF run is twice as slow as the model (its
stack: 19 % hardware utilisation). The exposed communication that crosses the dragonfly is under 1 % of
every modelled step, and no run spans a dragonfly group: the group tests the MI250X compute and memory
estimates far more than the dragonfly. Bounds are those figures plus a small margin, in the direction
found: they record where the model stands, not a target.
"""
import numpy as np
import pytest

from explore import validation_dragonfly as D
from explore.scenario import load_scenario
from hwmodels.parts import get_part
from topologies import dragonfly

CASES = D.load_cases()
ROWS = {r["run_id"]: r for r in D.load_rows()}
R175, R8_HF, R8_TT = "dash23_gpt175b_128", "orhan24_llama31_8b_fsdp_512", "orhan25_llama3_8b_fsdp2_64"


@pytest.fixture(scope="module")
def evaluated():
    return D.evaluate_cases(CASES)


@pytest.fixture(scope="module")
def errors(evaluated):
    return {rid: float(evaluated[rid]["step_time_s"][0]) / t - 1 for rid, _, _, t in CASES}


@pytest.mark.parametrize("row", D.load_rows(), ids=lambda r: r["run_id"])
def test_committed_scenarios_match_the_csv(row):
    assert load_scenario(D.SCENARIO_DIR / f"{row['run_id']}.toml") == D.build_scenario(row)
    assert row["source"] and row["source_location"] and row["step_time_kind"].split()[0] in ("MEASURED", "DERIVED")


def test_unknown_run_is_a_clear_error():
    with pytest.raises(ValueError, match=r"run_id 'x_1'.*allowed prefixes"):
        D.build_scenario({**ROWS[R175], "run_id": "x_1"})


def test_parameter_counts_follow_the_published_shapes():
    """Megatron GPT (12 h^2 + 13 h per layer, biases and two LayerNorms, tied embedding, learned positions)
    and Llama 3 8B (GQA, SwiGLU, untied) recounted from the shapes in the rows."""
    r = ROWS[R175]
    L, h, V, s = int(r["layers"]), int(r["hidden"]), int(r["vocab"]), int(r["seq_len"])
    gpt = L * (12 * h * h + 13 * h) + 2 * h + V * h + s * h
    assert gpt == 174_609_555_456 and abs(gpt / 1e9 - float(r["params_B"])) < 5e-4
    for rid in (R8_HF, R8_TT):
        r = ROWS[rid]
        L, h, V, f = int(r["layers"]), int(r["hidden"]), int(r["vocab"]), int(r["ffn_hidden"])
        kv = h * int(r["kv_heads"]) // int(r["attn_heads"])
        llama = L * (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h) + h + 2 * V * h
        assert llama == 8_030_261_248 and abs(llama / 1e9 - float(r["params_B"])) < 5e-4


def test_175b_step_is_the_logged_mean_and_reproduces_the_logged_tflops():
    """The row's step is the mean of the log's iterations 2, 3 and 5, and Megatron-DeepSpeed's
    throughput_calculator (96 B s l h^2 (1 + s/6h + V/16lh) / (t x world size), megatron/utils.py at the
    log's commit) applied to the row's shape, batch and iteration 2's time gives the logged 149.46."""
    r = ROWS[R175]
    logged_ms = (196496.4, 196681.1, 195081.8)
    assert float(r["step_time_s"]) == pytest.approx(np.mean(logged_ms) / 1e3, abs=5e-4)
    B, s, L, h, V = (int(r[k]) for k in ("global_batch_seqs", "seq_len", "layers", "hidden", "vocab"))
    flops = 24 * 4 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
    assert flops / (logged_ms[0] / 1e3 * int(r["n_accel"])) / 1e12 == pytest.approx(float(r["tflops_per_gpu"]), abs=0.01)
    assert int(r["tp"]) * int(r["pp"]) * int(r["dp"]) == int(r["n_accel"])


def test_torchtitan_step_follows_its_wps_and_its_mfu_agrees():
    """step = local batch x seq_len / wps (wps is per GCD); torchtitan's MFU of the same wps (6 x params
    without the embedding + 12 l h q t per token, over 191.5 TFLOP/s) is the published ~40 %."""
    r = ROWS[R8_TT]
    wps = 1333
    assert float(r["step_time_s"]) == pytest.approx(int(r["microbatch"]) * int(r["seq_len"]) / wps, abs=5e-4)
    L, h, heads, s, V = (int(r[k]) for k in ("layers", "hidden", "attn_heads", "seq_len", "vocab"))
    n_no_emb = 8_030_261_248 - V * h
    flop_per_token = 6 * n_no_emb + 12 * L * heads * (h // heads) * s
    assert 100 * flop_per_token * wps / (D.PEAK_TFLOPS * 1e12) == pytest.approx(float(r["mfu_pct"]), abs=0.5)
    assert int(r["tokens_per_s"]) == wps * int(r["n_accel"])


def test_hf_fsdp_row_is_the_stated_time_and_its_batch():
    r = ROWS[R8_HF]
    tokens = int(r["global_batch_seqs"]) * int(r["seq_len"])
    assert int(r["global_batch_tokens"]) == tokens == 4 * 512 * 8192
    assert int(r["tokens_per_s"]) == round(tokens / float(r["step_time_s"]))


def test_group_is_a_dragonfly_group_on_mi250x_gcds_and_held_out():
    from explore import validation as V
    assert len(CASES) == 3
    for rid, sc, _, _ in CASES:
        so = sc["system"]["scale_out"]
        assert sc["system"]["accelerator"] == "mi250x-gcd" and so["topology"] == "dragonfly"
        assert so["nics_per_device"] == 0.5 and sc["system"]["scale_up"]["size"] == 8   # 4 NICs per 8 GCDs
    assert not {r["run_id"] for r in V.load_rows()} & set(ROWS)        # no fit can see the group


def test_gcd_figures_are_half_an_mi250x():
    """The catalog device is one GCD: half the package's 383 TFLOP/s (FP16 and BF16), 64 of its 128 GB."""
    p = get_part("accelerators", "mi250x-gcd")
    assert 2 * p["peak_flops_bf16"] == 2 * p["peak_flops_fp16"] == pytest.approx(383e12)
    assert 2 * p["hbm_capacity_bytes"] == pytest.approx(128e9) and p["peak_flops_fp8"] == 0


def test_frontier_group_is_the_rosetta_group_with_its_global_links_tapered():
    """Klockwood's Frontier page: a group is one cabinet of 128 nodes x 4 NICs on 32 switches of 16
    endpoints; that is the balanced dragonfly of the 64-port Rosetta (p = h = 16, a = 32), so every run's
    NIC ports fit one group and the model never charges a global link here. Frontier wires 4 links to each
    of its 73 other groups: 292 of the balanced a h = 512 global ports, the scenarios'
    ``global_link_fraction`` 292 / 512. A group-spanning pattern then gets 292 / 512 = 1 / 1.753 of the
    injection rate before Valiant's half: the page's blocking factor (512 x 200 Gb/s = 102.4 Tb/s injected
    per group over 4 x 73 x 200 Gb/s = 58.4 Tb/s to the other groups)."""
    from explore.model import calibration
    from explore.model.fabric import Fabric
    from explore.model.system import build_system
    from explore.scenario import resolve
    p, a, h = (float(x) for x in dragonfly.balanced(get_part("switches", "rosetta-64x200g")["radix"]))
    assert (p, a, h) == (16, 32, 16) and p * a == 128 * 4 == D.GROUP_PORTS
    f = D.GLOBAL_LINK_FRACTION
    c = dragonfly.counts(74 * 128 * 4, p, a, h, f)                     # the 74 cabinets
    assert c["groups"] == 74 and c["global_ports_per_group"] == 4 * 73 and bool(c["feasible"])
    assert c["global_links"] == 74 * 4 * 73 / 2
    share = float(dragonfly.cross_group_factor(p, dragonfly.global_links_per_router(a, h, f), valiant=False))
    assert 1 / share == pytest.approx(1.753, abs=1e-3)
    assert 1 / share == pytest.approx(102.4 / 58.4)
    assert 1 / share == pytest.approx((512 * 200e9) / (4 * 73 * 200e9))
    for rid, sc, _, _ in CASES:
        assert sc["system"]["scale_out"]["global_link_fraction"] == f, rid
        assert sc["system"]["devices"] * sc["system"]["scale_out"]["nics_per_device"] <= p * a, rid
        place = Fabric(build_system(resolve(sc)), calibration.Calibration()).place
        assert place.df_factor.ravel()[0] == pytest.approx(share / 2), rid


def test_175b_fits_and_its_memory_matches_the_log(evaluated):
    """The log's rank 0 (first stage) after iteration 1: max allocated 33.90 GB, max reserved 37.81 GB;
    the model's 36.97 GB lies between them."""
    ds = evaluated[R175]
    assert bool(ds["valid"][0]), ds["reason"].values[0]
    mem = float(ds["memory_per_device_bytes"][0]) / 1e9
    assert 33.90 <= mem <= 37.81


def test_8b_runs_do_not_fit_in_the_model_memory(evaluated):
    """Recorded, not wanted: both 8B runs ran on 64 GB GCDs, but the model puts them above it, for
    reasons the plan mapping names. The HF run (4 x 8192 tokens per GCD): the unfused fp32 loss over
    4.2e9 logits is charged 59 GB of activations (75.3 GB in all). The torchtitan run: op-level selective
    recompute is mapped to none, so every activation of 8192 tokens is kept (49 GB) beside the 16 GB of
    unsharded bf16 parameters that reshard_after_forward=False holds (83.0 GB in all)."""
    for rid, act_gb in ((R8_HF, 55), (R8_TT, 45)):
        ds = evaluated[rid]
        assert not bool(ds["valid"][0]) and "does not fit" in ds["reason"].values[0], rid
        assert float(ds["memory_per_device_bytes"][0]) > 64e9
        assert float(ds["memory_bytes_activations"][0]) > act_gb * 1e9, rid


def test_errors_per_run_within_bounds(errors):
    """Measured +91.25 % (175B: too slow), -49.60 % (HF FSDP 8B: too fast), -2.95 % (torchtitan 8B:
    too fast); MAPE 47.93 %."""
    assert 0.85 <= errors[R175] <= 0.97, errors
    assert -0.55 <= errors[R8_HF] <= -0.45, errors
    assert -0.06 <= errors[R8_TT] <= 0.0, errors
    assert np.mean(np.abs(list(errors.values()))) <= 0.48


def test_175b_logged_rate_is_far_above_the_borrowed_gemm_ceiling():
    """Why the 175B step is modelled 91 % too slow: its logged whole-step hardware rate (149.46 TFLOP/s
    per GCD with the recomputed forward, bubble and tensor-parallel all-reduces included) is 1.54x the
    rate the model lets a linear GEMM reach on mi250x-gcd (191.5 x 0.601 borrowed from MI300X x
    gemm_efficiency = 97 TFLOP/s). MI250X GEMMs must run above 78 % of peak in that run."""
    ceiling = D.gemm_ceiling_tflops()
    assert 90 < ceiling < 105
    assert float(ROWS[R175]["tflops_per_gpu"]) / ceiling > 1.5
    assert float(ROWS[R175]["tflops_per_gpu"]) / D.PEAK_TFLOPS > 0.78


def test_compute_dominates_and_the_dragonfly_share_is_small(evaluated):
    """What the group measures: compute is over 90 % of every modelled step; the exposed communication of
    the groups that leave a node (the dragonfly's share, an upper bound) is under 1 % (175B: the pipeline
    sends between nodes, 0.8 %); the 175B's in-node tensor-parallel all-reduces are 5.5 %."""
    for rid, sc, _, _ in CASES:
        ds = evaluated[rid]
        step = float(ds["step_time_s"][0])
        assert float(ds["time_s_compute"][0]) > 0.9 * step, rid
        assert D.dragonfly_comm_s(sc, ds) < 0.01 * step, rid
        assert D.exposed_comm_s(ds) < 0.07 * step, rid
    assert float(evaluated[R175]["time_s_pp_p2p"][0]) > 0                  # the stages are on different nodes


def test_excluded_runs_carry_a_reason():
    assert len(D.EXCLUDED) >= 4 and all(len(v) > 40 for v in D.EXCLUDED.values())
