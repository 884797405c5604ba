"""How far DeepSpeed's 2021 ZeRO-3 code paths go towards Narayanan et al. 2021 Table 2 (held out).

Prints, for the six `zero3n21` runs (tests/validation/comm_runs.csv), the published step time and
the model's error under the scenario as written and under two pessimistic readings of DeepSpeed's
stage-3 code of v0.3.14-v0.5.10 (microsoft/DeepSpeed deepspeed/runtime/zero/stage3.py):

* ``no prefetch``: parameter gathers on the critical path (``overlap_param_gather = false``).
  From v0.3.14 the root module's ZeRO-3 pre-forward hook ran before the hook that resets the
  step counter, so every later sub-module missed its traced position and prefetching switched
  itself off ("Tracing failed. Prefetching is disabled"; DeepSpeed PR #1170 "off-by-one tracing
  issue"; fixed on a branch by commit f4802aa52, July 2021, in releases by v0.6.0).
* ``+ all-reduce``: also the gradient reduction exposed and as an all-reduce (twice the
  reduce-scatter's ring volume): with ``contiguous_gradients`` at its stage-3 default (false)
  ``reduce_ipg_grads`` falls back to ``buffered_reduce_fallback``, a ``dist.all_reduce`` of each
  bucket over the whole data-parallel group.

and the per-GPU bandwidth the published step implies if it were nothing but 3 or 4 passes of
the 16-bit weights. No constant is fitted: these are bounds, not the model.
Run: python benchmarks/zero3_bounds.py
"""
import copy

import numpy as np

from explore import validation as v
from explore.evaluate import evaluate


def _eval(sc):
    r = evaluate(sc, keep_invalid=True)
    return {k: float(np.asarray(r[k])[0]) for k in ("step_time_s", "time_s_dp_comm")}


def main() -> None:
    cases = [c for c in v.load_cases() if v.group_of(c[0]) == "zero3n21"]
    rows, errs = [], {"scenario": [], "no prefetch": [], "+ all-reduce": []}
    for rid, sc, _, t in cases:
        base = _eval(sc)
        s1 = copy.deepcopy(sc)
        s1["parallelism"]["overlap_param_gather"] = False
        nopf = _eval(s1)
        s2 = copy.deepcopy(s1)
        s2["parallelism"]["overlap_grad_reduce"] = False
        ser = _eval(s2)
        allred = ser["step_time_s"] + ser["time_s_dp_comm"]   # ring all-reduce = 2 x reduce-scatter
        for k, p in zip(errs, (base["step_time_s"], nopf["step_time_s"], allred)):
            errs[k].append(p / t - 1.0)
        params = 174.6e9 if "175B" in rid else 529.6e9
        n = sc["parallelism"]["dp"]
        pass_gb = 2.0 * params * (n - 1) / n / 1e9
        rows.append((rid, t, base["step_time_s"], nopf["step_time_s"], allred,
                     3 * pass_gb / t, 4 * pass_gb / t))
    print(f"{'run':26s} {'published':>9s} {'scenario':>16s} {'no prefetch':>16s} {'+ all-reduce':>16s}"
          f" {'GB/s/GPU (3|4 passes)':>22s}")
    for rid, t, a, b, c, bw3, bw4 in rows:
        print(f"{rid:26s} {t:9.2f} {a:8.2f} {a / t - 1:+7.1%} {b:8.2f} {b / t - 1:+7.1%} "
              f"{c:8.2f} {c / t - 1:+7.1%} {bw3:10.1f} | {bw4:5.1f}")
    print("MAPE: " + "  ".join(f"{k} {100 * np.mean(np.abs(e)):.1f} %" for k, e in errs.items()))


if __name__ == "__main__":
    main()
