"""How far DeepSpeed's 2021 ZeRO-3 code paths go towards Narayanan et al. 2021 Table 2 (held out).

Prints, for the six `zero3n21` runs (tests/validation/comm_runs.csv), the published step time and
the model's error under four readings, no constant fitted:

* ``coalesced``: the runtime the model assumed before DeepSpeed's code was read: one flat gather
  per layer, prefetched under compute, two gather passes, no per-rank copies (FSDP-like).
* ``DeepSpeed 2021`` (the scenarios, ``explore.validation.DEEPSPEED_2021_ZERO3``): what
  microsoft/DeepSpeed v0.3.13-v0.5.9 stage 3 does (deepspeed/runtime/zero/stage3.py,
  partition_parameters.py; v0.3.14 = commit 0cd9abf2041): one ``torch.distributed.all_gather``
  per weight matrix into a list of world-size views, each preceded by ``torch.cuda.synchronize()``
  (gathers on the critical path; DeepSpeed PR #1188: "the async version is not async at all"),
  regathered in the recompute, the per-weight list reduce-scatter of the gradients, and the small
  (persistent) parameters regathered rank by rank after each step; PyTorch's list collectives copy
  each rank's chunk with its own launch (pytorch/pytorch torch/lib/c10d/ProcessGroupNCCL.cpp),
  charged at the catalog's ``list_collective_per_rank_s`` (2.2 us, a measured launch: a lower bound).
* ``+ all-reduce``: also the gradient reduction exposed and as an all-reduce (twice the
  reduce-scatter's ring volume): with ``contiguous_gradients`` at its stage-3 default (false)
  ``reduce_ipg_grads`` falls back to ``buffered_reduce_fallback``, a ``dist.all_reduce`` of each
  bucket over the whole data-parallel group.

Then the per-rank host time per list call that each run would need for a zero error, and the one
that would make the published plateau (175B: 768 -> 1,536 GPUs; 530B: 1,120 -> 2,240) flat: the
step is linear in that time, so two evaluations give it. These are implied figures, not fits.
Run: python benchmarks/zero3_bounds.py
"""
import copy

import numpy as np

import explore.model.fabric as fabric
from explore import validation as v
from explore.evaluate import evaluate


def _eval(sc, per_rank_s=None):
    orig = fabric.library
    if per_rank_s is not None:
        fabric.library = lambda name="nccl": {**orig(name), "list_collective_per_rank_s": per_rank_s}
    try:
        r = evaluate(sc, keep_invalid=True)
    finally:
        fabric.library = orig
    return {k: float(np.asarray(r[k])[0]) for k in ("step_time_s", "time_s_dp_comm")}


def coalesced(sc):
    s = copy.deepcopy(sc)
    for k in v.DEEPSPEED_2021_ZERO3:
        s["parallelism"].pop(k)
    s["parallelism"]["overlap_param_gather"] = True
    return s


def main() -> None:
    cases = [c for c in v.load_cases() if v.group_of(c[0]) == "zero3n21"]
    cat = float(fabric.library()["list_collective_per_rank_s"])
    rows, errs, lin = [], {"coalesced": [], "DeepSpeed 2021": [], "+ all-reduce": []}, {}
    for rid, sc, _, t in cases:
        co = _eval(coalesced(sc))["step_time_s"]
        ds = _eval(sc)
        s2 = copy.deepcopy(sc)
        s2["parallelism"]["overlap_grad_reduce"] = False
        ser = _eval(s2)
        allred = ser["step_time_s"] + ser["time_s_dp_comm"]   # ring all-reduce = 2 x reduce-scatter
        a = _eval(sc, 0.0)["step_time_s"]                       # step = a + b * per-rank time
        b = (ds["step_time_s"] - a) / cat
        lin[rid] = (a, b)
        for k, p in zip(errs, (co, ds["step_time_s"], allred)):
            errs[k].append(p / t - 1.0)
        rows.append((rid, t, co, ds["step_time_s"], allred, (t - a) / b))
    print(f"per-rank time per list call (catalog): {cat * 1e6:.1f} us")
    print(f"{'run':26s} {'published':>9s} {'coalesced':>16s} {'DeepSpeed 2021':>16s} {'+ all-reduce':>16s}"
          f" {'per-rank us for 0 error':>24s}")
    for rid, t, a, b, c, need in rows:
        print(f"{rid:26s} {t:9.2f} {a:8.2f} {a / t - 1:+7.1%} {b:8.2f} {b / t - 1:+7.1%} "
              f"{c:8.2f} {c / t - 1:+7.1%} {need * 1e6:24.1f}")
    print("MAPE: " + "  ".join(f"{k} {100 * np.mean(np.abs(e)):.1f} %" for k, e in errs.items()))
    for lo, hi in (("zero3n21_t2_175B_768", "zero3n21_t2_175B_1536"),
                   ("zero3n21_t2_530B_1120", "zero3n21_t2_530B_2240")):
        (a0, b0), (a1, b1) = lin[lo], lin[hi]
        print(f"flat {lo.split('_')[2]} {lo.rsplit('_', 1)[1]} -> {hi.rsplit('_', 1)[1]} GPUs needs "
              f"{(a0 - a1) / (b1 - b0) * 1e6:.1f} us per rank and list call "
              f"(model at the catalog's {cat * 1e6:.1f} us: {a0 + b0 * cat:.1f} -> {a1 + b1 * cat:.1f} s)")


if __name__ == "__main__":
    main()
