"""Step time against published training runs (tests/validation/published_runs.csv).

Bounds: issues 2 and 10 ask for MAPE <= 5 % and every run within 12 %, which are asserted; with
the per-step memory traffic of the cross-entropy, embedding gradient and gradient buffer modelled
the fit reaches MAPE 3.65 % and 10.7 % at worst over 42 runs (README "Validation and
calibration" says where). MT-NLG (held out, explore.validation.HELD_OUT_GROUPS) is not
bounded; DeepSpeed ZeRO-3 (Narayanan et al. 2021 Table 2, held out too) has its own honest bound
below.
The calibration constants in explore/model/calibration.py were fitted on this set
(`python -m explore.validation --fit`); the errors are in-sample.
"""
import numpy as np
import pytest

from explore import validation as V
from explore.scenario import load_scenario

CASES = V.load_cases()


def test_every_published_run_has_a_scenario():
    rows = V.load_rows()
    assert len(rows) == 72   # 71 + OPT-175B (opt22, tests/validation/test_opt_run.py)
    assert [c[0] for c in CASES] == [r["run_id"] for r in rows]


@pytest.mark.parametrize("row", V.load_rows(), ids=lambda r: r["run_id"])
def test_committed_scenarios_match_the_csv(row):
    """The shipped scenario files are exactly what the CSV and the stated assumptions give."""
    committed = load_scenario(V.SCENARIO_DIR / f"{row['run_id']}.toml")
    assert committed == V.build_scenario(row)


CALIB = V.calibration_cases(CASES)


@pytest.fixture(scope="module")
def errors():
    """In-sample errors of the calibration set (MT-NLG, held out, is reported but not bounded)."""
    return dict(zip([c[0] for c in CALIB], V.errors(CALIB)))


@pytest.mark.parametrize("run_id", [c[0] for c in CALIB])
def test_step_time_within_12_percent(errors, run_id):
    assert abs(errors[run_id]) <= 0.12, f"{run_id}: error {100 * errors[run_id]:.1f} %"


def test_mape_at_most_5_percent(errors):
    mape = float(np.mean(np.abs(list(errors.values()))))
    assert mape <= 0.05, f"MAPE {100 * mape:.2f} %"


def test_mfu_of_korthikanti_runs_matches_published():
    """Table 5 / Megatron README MFU (41.5 % ... 56.3 %) within 12 % relative."""
    from explore.evaluate import evaluate
    for row in V.load_rows():
        if row["run_id"].startswith("korthikanti") and row["mfu_pct"]:
            sc = load_scenario(V.SCENARIO_DIR / f"{row['run_id']}.toml")
            mfu = float(evaluate(sc, keep_invalid=True)["mfu"][0])   # as V.predict
            assert mfu == pytest.approx(float(row["mfu_pct"]) / 100, rel=0.12), row["run_id"]


@pytest.mark.parametrize("run_id", [c[0] for c in CASES])
def test_every_published_run_is_valid_and_fits_memory(run_id):
    """Each published run ran on its GPUs, so its published plan must be valid and fit."""
    from explore.evaluate import evaluate
    sc = dict((c[0], c[1]) for c in CASES)[run_id]
    ds = evaluate(sc)
    assert bool(ds["valid"][0]), f"{run_id}: {ds['reason'].values[0]}"
    assert float(ds["memory_per_device_bytes"][0]) <= 80e9


def test_zero3_530B_fits_on_640_gpus_and_not_on_560():
    """Narayanan et al. 2021 Table 2 caption ('*' row, comm_runs.csv): DeepSpeed ZeRO-3 did not fit the
    530B model on 560 GPUs at microbatch 4, so the paper ran 640 GPUs (batch 2560). Same plan, one
    factor (the shard count) apart: the model must put the boundary between them. It does with
    DeepSpeed's per-submodule gathers (runtime "deepspeed", 78.4 GB on 640, 80.3 GB on 560); with
    whole layers unsharded, as FSDP2 does (runtime "megatron"), it fits on neither (87.4 GB on 640).
    The margins are thin (1.6 GB and 0.3 GB; calibration.ALLOCATOR_OVERHEAD 0.195): a refit of the
    allocator reserve outside 0.19-0.225 moves the boundary, which this test then reports."""
    import copy
    from explore.evaluate import evaluate
    sc = dict((c[0], c[1]) for c in CASES)["zero3n21_t2_530B_640"]
    assert sc["parallelism"]["runtime"] == "deepspeed"
    at560 = copy.deepcopy(sc)
    at560["parallelism"]["dp"] = at560["system"]["devices"] = 560
    at560["training"]["global_batch"] = 560 * 4
    per_layer = copy.deepcopy(sc)
    per_layer["parallelism"]["runtime"] = "megatron"
    fits = lambda s: bool(evaluate(s, keep_invalid=True)["fits_memory"][0])  # noqa: E731
    assert fits(sc) and not fits(at560) and not fits(per_layer)


ZERO3 = [c for c in CASES if V.group_of(c[0]) == "zero3n21"]


def test_zero3_group_is_held_out_with_its_error_bounded():
    """Narayanan et al. 2021 Table 2, DeepSpeed ZeRO-3 without model parallelism (6 runs, held out of
    every fit), with DeepSpeed 2021 stage 3 as its code runs (per-weight list-form gathers on the
    critical path, regathered in the recompute, small parameters regathered rank by rank each step,
    each list built in Python per rank; explore.validation.DEEPSPEED_2021_ZERO3) and its per-rank
    host work at the cited parts (hwmodels/catalog/collectives.toml: copy launch 2.2 us + ATen call
    1.0 us per copy, 2.0 us per Python tensor call), each gather buffer zero-filled after a device
    sync and each gradient reduce-scatter hidden under one weight's backward only (zero3_fetch_sync),
    list copies bound by HBM as well: still too fast on every run, by 12-21 % where the
    published runs are compute-bound (384 / 640 GPUs) and by 25-41 % beyond (docs/validation.md "Where the
    model is still wrong"). Honest bound on today's out-of-sample error (MAPE 25.4 %, max 41.2 %; 26.9 / 42.4 %
    before zero3_fetch_sync): not a pass mark, a guard against getting worse."""
    assert "zero3n21" in V.HELD_OUT_GROUPS
    assert len(ZERO3) == 6
    e = V.errors(ZERO3)
    assert np.all(e < 0), e
    assert float(np.mean(np.abs(e))) <= 0.27
    assert float(np.max(np.abs(e))) <= 0.43


def _coalesced(case):
    """The same run under a coalesced runtime (FSDP / Megatron-Core style): one flat gather per layer,
    prefetched under compute, two gather passes, no per-rank copies."""
    import copy
    rid, sc, kind, t = case
    s = copy.deepcopy(sc)
    for k in V.DEEPSPEED_2021_ZERO3:
        s["parallelism"].pop(k)
    s["parallelism"]["overlap_param_gather"] = True
    return rid, s, kind, t


def test_zero3_deepspeed_2021_code_paths_make_the_175b_plateau_not_the_530b_one():
    """Against the coalesced reading (the scenarios before DeepSpeed's code was modelled: MAPE 54 %),
    DeepSpeed 2021's code paths slow every run by >= 8 points, more at more ranks (per-rank copies,
    Python calls and ring latency grow with N). At the cited per-rank host costs the 175B step stops
    falling from 768 to 1,536 GPUs (within 5 %; published 66.75 s on both, the model's 50.1 -> 50.4 s,
    its level 25 % below), while 530B's still falls by > 10 % from 1,120 to 2,240 (127.7 -> 108.1 s),
    where the published step stays flat (180 / 184 s) (benchmarks/zero3_bounds.py)."""
    e_ds, e_co = V.errors(ZERO3), V.errors([_coalesced(c) for c in ZERO3])
    assert float(np.mean(np.abs(e_co))) > 0.50
    assert np.all(e_ds > e_co + 0.08), (e_co, e_ds)
    gain = dict(zip([c[0] for c in ZERO3], e_ds - e_co))
    for model, counts in (("175B", (384, 768, 1536)), ("530B", (640, 1120, 2240))):
        g = [gain[f"zero3n21_t2_{model}_{n}"] for n in counts]
        assert g[0] < g[1] < g[2], (model, g)
    steps = {c[0]: (1 + e) * c[3] for c, e in zip(ZERO3, e_ds)}
    assert 0.95 < steps["zero3n21_t2_175B_1536"] / steps["zero3n21_t2_175B_768"] < 1.05
    assert steps["zero3n21_t2_530B_2240"] < 0.90 * steps["zero3n21_t2_530B_1120"]


# Megatron-LM GPT layer (DeepSpeedExamples Megatron-LM-v1.1.5-ZeRO3, mpu/layers.py, model/transformer.py):
# (name, shape) of its parameters for hidden size h, in forward order
def _gpt_layer_params(h):
    return [("input_layernorm.weight", (h,)), ("input_layernorm.bias", (h,)),
            ("attention.query_key_value.weight", (3 * h, h)), ("attention.query_key_value.bias", (3 * h,)),
            ("attention.dense.weight", (h, h)), ("attention.dense.bias", (h,)),
            ("post_attention_layernorm.weight", (h,)), ("post_attention_layernorm.bias", (h,)),
            ("mlp.dense_h_to_4h.weight", (4 * h, h)), ("mlp.dense_h_to_4h.bias", (4 * h,)),
            ("mlp.dense_4h_to_h.weight", (h, 4 * h)), ("mlp.dense_4h_to_h.bias", (h,))]


PERSISTENCE_THRESHOLD = 100000   # microsoft/DeepSpeed v0.3.14 deepspeed/runtime/zero/constants.py
                                 # ZERO_OPTIMIZATION_PARAM_PERSISTENCE_THRESHOLD_DEFAULT


@pytest.mark.parametrize("preset", ["gpt3-175b", "megatron-529.6b"])
def test_deepspeed_2021_call_counts_from_the_layer_shapes(preset):
    """DEEPSPEED_2021_ZERO3 against an enumeration of DeepSpeed's stage-3 rule on the layer's tensors:
    a parameter with fewer elements than stage3_param_persistence_threshold stays whole (persistent, only
    re-gathered after the step), every other one is fetched by its own sub-module, one all-gather each
    (stage3.py fetch_sub_module -> partition_parameters.py _allgather_param)."""
    from explore.fields import model_presets
    h = model_presets()[preset]["hidden"]
    numel = [int(np.prod(shape)) for _, shape in _gpt_layer_params(h)]
    gathered = sum(n >= PERSISTENCE_THRESHOLD for n in numel)
    kept = sum(n < PERSISTENCE_THRESHOLD for n in numel)
    assert gathered == V.DEEPSPEED_2021_ZERO3["zero3_calls_per_layer"]
    assert kept == V.DEEPSPEED_2021_ZERO3["zero3_replicated_params_per_layer"]
    # the rule depends on the shape: at h = 64 every tensor of the layer stays whole
    assert sum(int(np.prod(s)) >= PERSISTENCE_THRESHOLD for _, s in _gpt_layer_params(64)) == 0


def test_list_collective_copies_match_an_enumeration_of_a_deepspeed_step():
    """Step-time difference of DeepSpeed 2021's list-form collectives and per-rank small-parameter
    regather against an explicit walk over one optimizer step (serial: no overlap flags), with the
    host work per rank read off DeepSpeed v0.3.14's code (partition_parameters.py) and PyTorch's
    ProcessGroupNCCL: each list call copies once per rank from C++ (a launch and an ATen call), each
    list is built by Python tensor calls per rank (a gather: narrow; a reduce-scatter: view, narrow),
    each regathered parameter takes narrow, view, narrow and copy_ per rank from Python and the copy's
    launch."""
    import copy
    from explore.evaluate import evaluate
    from explore.model.fabric import library
    n_ranks, layers, mb_count = 64, 4, 3
    sc = {"name": "z3-small", "model": {"layers": layers, "hidden": 2048, "heads": 16, "vocab": 32000,
                                         "seq_len": 1024},
          "training": {"global_batch": n_ranks * mb_count, "precision": "fp16", "flash_attention": False},
          "parallelism": {"tp": 1, "pp": 1, "dp": n_ranks, "microbatch": 1, "zero": 3, "recompute": "full",
                          "sequence_parallel": False, "overlap_grad_reduce": False,
                          "overlap_param_gather": False, "grad_reduce_bytes": 2,
                          "zero3_calls_per_layer": 4.0, "zero3_gather_passes": 3.0},
          "system": {"accelerator": "a100-sxm-80gb", "devices": n_ranks, "scale_up": {"size": 8, "link": "nvlink3"},
                     "scale_out": {"topology": "fat-tree", "link": "ib-hdr-200", "nics_per_device": 1.0}}}
    lists = copy.deepcopy(sc)
    lists["parallelism"].update(list_collectives=True, zero3_replicated_params_per_layer=8.0,
                                list_gather_host_calls=1.0, list_reduce_host_calls=2.0,
                                zero3_replicated_host_calls=4.0)
    step = lambda s: float(evaluate(s, keep_invalid=True)["step_time_s"][0])  # noqa: E731
    lib = library()
    cost = {"launch": float(lib["copy_launch_s"]), "aten": float(lib["aten_call_s"]),
            "python": float(lib["python_tensor_call_s"])}
    host = []                                       # every host action of the step, by kind
    for _ in range(mb_count):                       # each microbatch
        for _ in range(layers):
            for _phase in ("forward", "recompute", "backward"):
                for _w in range(4):                 # one list all-gather per weight matrix
                    host += ["python"] * n_ranks    # _allgather_param: flat_tensor.narrow per rank
                    host += ["aten", "launch"] * n_ranks   # ProcessGroupNCCL: copy_ out per rank
            for _w in range(4):                     # one list reduce-scatter per weight gradient
                host += ["python", "python"] * n_ranks     # grad.view(-1).narrow per rank
                host += ["aten", "launch"] * n_ranks       # ProcessGroupNCCL: copy_ in per rank
    for _ in range(layers * 8):                     # _post_step: each small parameter, rank by rank
        host += ["python"] * 4 * n_ranks + ["launch"] * n_ranks
    want = sum(cost[k] for k in host)
    assert step(lists) - step(sc) == pytest.approx(want, rel=1e-6)
