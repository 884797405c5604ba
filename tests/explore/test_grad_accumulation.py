"""Unfused gradient accumulation (``parallelism.grad_accumulation`` "hook" / "autograd").

DeepSpeed's pipeline engine (microsoft/DeepSpeed v0.5.4 = commit bc7778ea5b6,
deepspeed/runtime/pipe/engine.py ``_exec_backward_pass``) runs each microbatch's backward through
``torch.autograd.backward``; with ZeRO-1 (deepspeed/runtime/zero/stage2.py, partition_gradients and
overlap_comm off: no gradient hooks) every weight gradient is added into ``param.grad`` by autograd's
AccumulateGrad, one element-wise kernel per parameter and microbatch, and read once at the boundary
(``reduce_gradients``). Megatron-LM of 2021 does the same add in its local DDP hook
(``param.main_grad.add_(param.grad.data)``, megatron/model/distributed.py, NVIDIA/Megatron-LM commit
de7dc40f of 2021-08-10); the fused form (the weight-gradient GEMM accumulating into main_grad) came in
February 2022 (commit 83b1e42f, "gradient accumulation fusion") and is the default here.

The step model charges 2 + 2 x grad_reduce_bytes bytes per local parameter on the slowest stage for
each add: every microbatch (hook) or every microbatch but the first (autograd keeps the first gradient). Checked here against figures the model does not produce: the parameters of a stage
counted from the layer's weight shapes, and the step's growth taken from an event simulation of
DeepSpeed's TrainSchedule with each stage's own accumulation time.
"""
import copy

import pytest

from explore import validation as V
from explore.evaluate import evaluate
from explore.model import calibration as cal
from hwmodels import get_part


def _train_schedule_makespan(m, p, tf, tb, tb_k=None):
    """Compute-only event simulation of DeepSpeed's TrainSchedule (deepspeed/runtime/pipe/schedule.py):
    stage s runs microbatch k's forward at step s + 2k and its backward at step 2p - 1 - s + 2k, in
    step order; a forward waits for the previous stage's forward of the same microbatch, a backward for
    the next stage's backward. tf[s], tb[s]: stage s's forward and backward times; tb_k(s, k), if
    given, microbatch k's backward time on stage s."""
    ops = []
    for s in range(p):
        for k in range(m):
            ops.append((s + 2 * k, s, "F", k))
            ops.append((2 * p - 1 - s + 2 * k, s, "B", k))
    ops.sort()
    free = [0.0] * p
    done = {}
    for _, s, kind, k in ops:
        if kind == "F":
            dep = done[("F", s - 1, k)] if s > 0 else 0.0
            dur = tf[s]
        else:
            dep = done[("B", s + 1, k)] if s < p - 1 else done[("F", s, k)]
            dur = tb[s] if tb_k is None else tb_k(s, k)
        free[s] = max(free[s], dep) + dur
        done[(kind, s, k)] = free[s]
    return max(free)


def test_simulation_is_1f1b_for_uniform_stages():
    """The simulation's own check: uniform stages take (m + p - 1)(t_f + t_b), as 1F1B."""
    for m, p in ((1, 4), (8, 4), (40, 7), (240, 35)):
        assert _train_schedule_makespan(m, p, [1.0] * p, [3.0] * p) == pytest.approx((m + p - 1) * 4.0)


def _megatron_layer_params_per_rank(h, t):
    """One GPT layer's parameters on a tensor rank, from its weight shapes (Shoeybi et al. 2019 Sec. 3,
    Megatron-LM megatron/model/transformer.py): column-parallel QKV (3h x h, bias 3h) and fc1 (4h x h,
    bias 4h) split over t; row-parallel projection (h x h) and fc2 (h x 4h) split over t with whole
    biases (h each); two layer norms (2h each), whole."""
    return (3 * h * h + 3 * h) / t + (h * h) / t + h + (4 * h * h + 4 * h) / t + (4 * h * h) / t + h + 2 * 2 * h


def test_mtnlg_accumulation_matches_counted_parameters_and_simulated_schedule():
    """MT-NLG 530B on 2,240 GPUs (105 layers, h 20480, vocabulary padded to 51,200, tp 8, pp 35,
    240 microbatches; DeepSpeed's fp16 .grad: 6 B per parameter and add, 239 adds). Stage parameters:
    3 layers on every stage, the tied output layer's 51,200 x 20,480 / 8 copy on the last (the first
    stage's embedding add is charged with the embedding's backward already). The step's growth must
    match the simulated TrainSchedule with each stage's own add, on stage times where the last stage
    (with the output layer) is the slowest, within 1 %."""
    sc = next(s for r, s, _, _ in V.load_cases() if r == "mtnlg22_530B_2240")
    assert sc["parallelism"]["grad_accumulation"] == "autograd"
    steps = {}
    for mode in ("fused", "autograd"):
        s = copy.deepcopy(sc)
        s["parallelism"]["grad_accumulation"] = mode
        steps[mode] = float(evaluate(s, keep_invalid=True)["step_time_s"][0])
    grown = steps["autograd"] - steps["fused"]

    h, t, layers, p, m, vocab = 20480, 8, 105, 35, 240, 51200
    hbm = get_part("accelerators", "a100-sxm-80gb")["hbm_bandwidth_bytes_per_s"] * cal.DEFAULT.hbm_efficiency
    per_stage = layers // p * _megatron_layer_params_per_rank(h, t)
    bytes_per_param = 2 + 2 * 2          # read the new fp16 gradient, read and write the fp16 .grad
    add = [bytes_per_param * per_stage / hbm] * p
    add[-1] += bytes_per_param * vocab * h / t / hbm
    # stage times of the order of the run's (~0.18 s per slot); the last stage carries the output layer
    tf, tb = [0.045] * p, [0.130] * p
    tf[-1] += 0.004
    tb[-1] += 0.008
    base = _train_schedule_makespan(m, p, tf, tb)
    # autograd keeps microbatch 0's gradient: every later backward adds
    tb_k = lambda s, k: tb[s] + (add[s] if k > 0 else 0.0)   # noqa: E731
    sim = _train_schedule_makespan(m, p, tf, tb, tb_k) - base
    assert 2.0 < sim < 3.0                      # ~9 ms per slot over 274 slots
    assert grown == pytest.approx(sim, rel=0.01)


def test_default_is_fused_and_only_the_2021_engines_set_it():
    """Megatron-Core's gradient-accumulation fusion is the default; only runs whose code predates it
    set another mode: MT-NLG (DeepSpeed's engine, autograd), Narayanan et al. 2021 (Table 1 with
    --DDP-impl torch up to 18.4B, autograd; local DDP above and in Table 2, hook), BLOOM (DeepSpeed's
    bf16 optimizer adds each microbatch's gradient into its fp32 copy, hook)."""
    from explore.fields import field_spec
    assert field_spec("parallelism.grad_accumulation").default == "fused"
    want = {"mtnlg22": "autograd", "megatron21t2": "hook", "bloom22": "hook"}
    for rid, sc, _, _ in V.load_cases():
        g = V.group_of(rid)
        if g == "megatron21":
            assert sc["parallelism"]["grad_accumulation"] == ("autograd" if rid in V.MEGATRON21_TORCH_DDP else "hook")
        elif g in want:
            assert sc["parallelism"]["grad_accumulation"] == want[g], rid
        else:
            assert "grad_accumulation" not in sc["parallelism"], rid


def test_hook_adds_in_every_microbatch_autograd_in_all_but_the_first():
    """One microbatch per step: autograd keeps its gradient (no add, the fused step), the local DDP
    hook still adds it into main_grad. Four microbatches on one stage: simulated growth is 4 adds for
    the hook and 3 for autograd (GPT-3 175B shapes, Brown et al. 2020 Table 2.1: 96 layers, h 12288;
    tp 8, one stage; fp32 main gradient for the hook, 10 B per add; fp16 .grad for autograd, 6 B)."""
    base = {"name": "acc", "model": {"preset": "gpt3-175b"},
            "training": {"global_batch": 1, "precision": "fp16", "flash_attention": False},
            "parallelism": {"tp": 8, "pp": 1, "dp": 1, "microbatch": 1, "recompute": "full"},
            "system": {"accelerator": "a100-sxm-80gb", "devices": 8, "scale_up": {"size": 8, "link": "nvlink3"},
                       "scale_out": {"topology": "fat-tree", "link": "ib-hdr-200", "nics_per_device": 1.0}}}

    def step(nmb, mode, g):
        s = copy.deepcopy(base)
        s["training"]["global_batch"] = nmb
        s["parallelism"].update(grad_accumulation=mode, grad_reduce_bytes=g)
        return float(evaluate(s, keep_invalid=True)["step_time_s"][0])

    assert step(1, "autograd", 2) == step(1, "fused", 2)
    hbm = get_part("accelerators", "a100-sxm-80gb")["hbm_bandwidth_bytes_per_s"] * cal.DEFAULT.hbm_efficiency
    # one stage: the tied output layer is the embedding, whose add is charged with its backward
    params = 96 * _megatron_layer_params_per_rank(12288, 8)
    for mode, g, adds in (("hook", 4, [1, 1, 1, 1]), ("autograd", 2, [0, 1, 1, 1])):
        add = (2 + 2 * g) * params / hbm
        sim = (_train_schedule_makespan(4, 1, [1.0], [2.0], lambda s, k: 2.0 + add * adds[k])
               - _train_schedule_makespan(4, 1, [1.0], [2.0]))
        assert step(4, mode, g) - step(4, "fused", g) == pytest.approx(sim, rel=0.01)
