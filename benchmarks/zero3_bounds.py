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
  each rank's chunk from C++ (pytorch/pytorch torch/lib/c10d/ProcessGroupNCCL.cpp), DeepSpeed builds
  each list in Python, a tensor call or two per rank; each gather buffer zero-filled (torch.zeros)
  before the device is synchronized, and each weight's gradient reduce-scatter, issued from the next
  weight's gradient hook, hidden only under that weight's backward GEMMs (``zero3_fetch_sync``); the
  per-rank copies take the longer of their host issue and their HBM traffic. Every per-rank item at its cited parts
  (hwmodels/catalog/collectives.toml): a copy = ``copy_launch_s`` 2.2 us + ``aten_call_s`` 1.0 us,
  a Python tensor call ``python_tensor_call_s`` 2.0 us: 5.2 us per rank and gather, 7.2 us per
  rank and reduce-scatter, 10.2 us per rank and regathered small parameter.
* ``launch only``: the same, each per-rank item at one launch (2.2 us; the previous reading).
* ``+ all-reduce``: also the gradient reduction exposed and as an all-reduce (twice the
  reduce-scatter's ring time, without the per-rank list work of the reduce-scatters): with ``contiguous_gradients`` at its stage-3 default (false)
  ``reduce_ipg_grads`` falls back to ``buffered_reduce_fallback``, a ``dist.all_reduce`` of each
  bucket over the whole data-parallel group.

Last, the remaining gap (published - scenario) per TB that the ZeRO-3 collectives move per GPU and per
per-rank item, and the network bus bandwidth the collectives would have had if it were all
bandwidth (``residual_shape``).
Before that, the host time per rank and item beyond the cited parts (added to every per-rank item: gather,
reduce-scatter, regathered parameter) that each run would need for a zero error, and the one that
would make the published plateau (175B: 768 -> 1,536 GPUs; 530B: 1,120 -> 2,240) flat: the step is
linear in it, so two evaluations give it. These are implied figures, not fits.
Run: python benchmarks/zero3_bounds.py
"""
import copy

import numpy as np

import explore.model.fabric as fabric
from explore import validation as v
from explore.evaluate import Resolved, evaluate, fit, resolve
from explore.model import calibration as cal
from explore.model.system import build_system


def _eval(sc, **lib):
    """Evaluate one scenario with catalog figures replaced (copy_launch_s, aten_call_s, ...)."""
    orig = fabric.library
    if lib:
        fabric.library = lambda name="nccl": {**orig(name), **lib}
    try:
        r = evaluate(sc, keep_invalid=True)
    finally:
        fabric.library = orig
    return {k: float(np.asarray(r[k])[0]) for k in ("step_time_s", "time_s_dp_comm", "params_per_device")}


def residual_shape(rows_in):
    """What the remaining gap scales with: published - model per TB that the ZeRO-3 collectives move
    per GPU and step ((gather passes + 1 reduce-scatter) x 2 B x parameters x (n - 1) / n), per call
    and rank (gathers, reduce-scatters and regathered small parameters, each a per-rank item), and
    the network bus bandwidth those bytes would run at if the gap were all bandwidth (the model's own
    time for them at the fabric's bus bandwidth plus the gap). Implied figures, not fits."""
    print("residual (published - DeepSpeed 2021 scenario) by what it would scale with:")
    print(f"{'run':26s} {'gap s':>7s} {'TB/GPU':>7s} {'s per TB':>9s} {'us per rank-item':>17s} "
          f"{'implied busbw GB/s':>19s} {'model busbw':>12s}")
    for rid, sc, pub, model in rows_in:
        par = sc["parallelism"]
        n, mb = float(par["dp"]), float(sc["training"]["global_batch"]) / (float(par["dp"]) * par["microbatch"])
        p = model["params_per_device"]
        moved = (par["zero3_gather_passes"] + 1.0) * 2.0 * p * (n - 1.0) / n * mb
        r = resolve(sc)
        lay = float(np.ravel(r.values["model.layers"])[0])
        items = mb * lay * (par["zero3_calls_per_layer"] * (par["zero3_gather_passes"] + 1.0)) \
            + lay * par["zero3_replicated_params_per_layer"]
        gap = pub - model["step_time_s"]
        # the model's bandwidth time for those bytes: a gather at the fabric's bus bandwidth, from two
        # message sizes (latency cancels)
        d = Resolved(r.n, {k: fit(a, r.n) for k, a in r.values.items()}, r.name)
        fab = fabric.Fabric(build_system(d), cal.DEFAULT)
        t1, t2 = (float(np.ravel(fab.all_gather(b, 1, n, 1.0))[0]) for b in (1e9, 2e9))
        busbw = 1e9 * (n - 1) / n / (t2 - t1)
        implied = moved / (moved / busbw + gap)
        print(f"{rid:26s} {gap:7.1f} {moved / 1e12:7.2f} {gap / (moved / 1e12):9.1f} "
              f"{gap / (items * n) * 1e6:17.1f} {implied / 1e9:19.0f} {busbw / 1e9:12.0f}")


def coalesced(sc):
    s = copy.deepcopy(sc)
    for k in v.DEEPSPEED_2021_ZERO3:
        s["parallelism"].pop(k)
    s["parallelism"]["overlap_param_gather"] = True
    return s


def main() -> None:
    cases = [c for c in v.load_cases() if v.group_of(c[0]) == "zero3n21"]
    lib = fabric.library()
    launch, aten, py = (float(lib[k]) for k in ("copy_launch_s", "aten_call_s", "python_tensor_call_s"))
    keys = ("coalesced", "launch only", "DeepSpeed 2021", "+ all-reduce")
    rows, errs, lin, resid = [], {k: [] for k in keys}, {}, []
    for rid, sc, _, t in cases:
        co = _eval(coalesced(sc))["step_time_s"]
        lo = _eval(sc, aten_call_s=0.0, python_tensor_call_s=0.0)["step_time_s"]
        ds = _eval(sc)
        s2 = copy.deepcopy(sc)
        s2["parallelism"]["overlap_grad_reduce"] = False
        ser = _eval(s2)
        # ring all-reduce = 2 x the reduce-scatter's NCCL time, and a flat bucket takes no per-rank list
        nccl = _eval(s2, copy_launch_s=0.0, aten_call_s=0.0, python_tensor_call_s=0.0)["time_s_dp_comm"]
        allred = ser["step_time_s"] - ser["time_s_dp_comm"] + 2.0 * nccl
        a = ds["step_time_s"]                                    # step = a + b * extra per-rank time
        b = (_eval(sc, copy_launch_s=launch + 1e-6)["step_time_s"] - a) / 1e-6
        lin[rid] = (a, b)
        for k, p in zip(keys, (co, lo, a, allred)):
            errs[k].append(p / t - 1.0)
        rows.append((rid, t, co, lo, a, allred, (t - a) / b))
        resid.append((rid, sc, t, ds))
    print(f"per-rank host time (catalog): copy {(launch + aten) * 1e6:.1f} us (launch {launch * 1e6:.1f} + ATen "
          f"call {aten * 1e6:.1f}), Python tensor call {py * 1e6:.1f} us: {(launch + aten + py) * 1e6:.1f} us per "
          f"gather, {(launch + aten + 2 * py) * 1e6:.1f} us per reduce-scatter, {(launch + 4 * py) * 1e6:.1f} us "
          f"per regathered parameter")
    print(f"{'run':26s} {'published':>9s}" + "".join(f" {k:>16s}" for k in keys)
          + f" {'extra us for 0 error':>21s}")
    for rid, t, *p, need in rows:
        print(f"{rid:26s} {t:9.2f}" + "".join(f" {x:8.2f} {x / t - 1:+7.1%}" for x in p) + f" {need * 1e6:21.1f}")
    print("MAPE: " + "  ".join(f"{k} {100 * np.mean(np.abs(e)):.1f} %" for k, e in errs.items()))
    for lo, hi in (("zero3n21_t2_175B_768", "zero3n21_t2_175B_1536"),
                   ("zero3n21_t2_530B_1120", "zero3n21_t2_530B_2240")):
        (a0, b0), (a1, b1) = lin[lo], lin[hi]
        print(f"flat {lo.split('_')[2]} {lo.rsplit('_', 1)[1]} -> {hi.rsplit('_', 1)[1]} GPUs needs "
              f"{(a0 - a1) / (b1 - b0) * 1e6:.1f} us more per rank and item "
              f"(model at the cited figures: {a0:.1f} -> {a1:.1f} s, {a1 / a0 - 1:+.1%})")

    residual_shape(resid)


if __name__ == "__main__":
    main()
