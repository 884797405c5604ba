"""Per-call collective times the model computes for the foundry23 H100 runs (issue 10, fsdp3).

For each run (PyTorch 2.1 FSDP, llm-foundry MPT, 128 / 256 / 512 H100), in milliseconds:
one layer's bf16 all-gather and fp32 reduce-scatter (mixed precision DEFAULT), the root unit's
(embedding) gather and reduce-scatter, a 1 KiB all-gather (the ring's latency: NCCL runs
all-gather and reduce-scatter as rings, so it grows with the ranks) and a 4-byte all-reduce
(clip_grad_norm's one all-reduce per step, tree), the per-layer compute (forward, backward and
recompute), the backward's per-layer communication on the one NCCL stream (FULL_SHARD: gather +
reduce-scatter; SHARD_GRAD_OP: reduce-scatter), the exposed data-parallel time of the step model
and the step modelled and published. No constant is fitted.

Run: PYTHONPATH=. python benchmarks/fsdp_call_times.py
"""
import numpy as np

from explore import validation as V
from explore import validation_fsdp as F
from explore.evaluate import Resolved, evaluate, fit, resolve
from explore.model import calibration as cal
from explore.model.fabric import Fabric
from explore.model.plan import ParallelPlan
from explore.model.system import build_system
from explore.model.workload import ModelSpec, layer_params


def one(x):
    return float(np.ravel(x)[0])


def main():
    rows = {r["run_id"]: r for r in V.load_rows()}
    print(f"{'run':24s} {'GPUs':>5s} {'AG lay':>7s} {'RS lay':>7s} {'AG root':>7s} {'RS root':>7s} "
          f"{'AG 1KiB':>7s} {'AR 4B':>6s} {'comp/L':>7s} {'bwd comm/L':>10s} {'exposed':>8s} {'model':>8s} {'published':>9s}")
    for rid, sc, _, pub in V.load_cases():
        if V.group_of(rid) != F.GROUP or "_h100_" not in rid:
            continue
        r = resolve(sc)
        r = Resolved(r.n, {k: fit(a, r.n) for k, a in r.values.items()}, r.name)
        m, plan, s = ModelSpec.from_resolved(r), ParallelPlan.from_resolved(r), build_system(r)
        fab = Fabric(s, cal.DEFAULT)
        n, L = one(plan.dp), int(one(m.layers))
        lay, root = one(layer_params(m)), one(m.vocab * m.hidden)
        ag_l = one(fab.all_gather(np.array(2.0 * lay), 1.0, n))
        rs_l = one(fab.reduce_scatter(np.array(4.0 * lay), 1.0, n))
        ag_r = one(fab.all_gather(np.array(2.0 * root), 1.0, n))
        rs_r = one(fab.reduce_scatter(np.array(4.0 * root), 1.0, n))
        lat = one(fab.all_gather(np.array(1024.0), 1.0, n))
        ar = one(fab.all_reduce(np.array(4.0), 1.0, n))
        ds = evaluate(sc, keep_invalid=True)
        comp = one(ds["time_s_compute"]) / L
        full = "FULL_SHARD" in rows[rid]["zero_or_sharding"]
        bwd_comm = rs_l + (ag_l if full else 0.0)
        exposed = one(ds["time_s_dp_comm"]) + one(ds["time_s_zero3_comm"])
        print(f"{rid[10:]:24s} {n:5.0f} {1e3 * ag_l:7.2f} {1e3 * rs_l:7.2f} {1e3 * ag_r:7.2f} {1e3 * rs_r:7.2f} "
              f"{1e3 * lat:7.3f} {1e3 * ar:6.3f} {1e3 * comp:7.1f} {1e3 * bwd_comm:10.2f} {1e3 * exposed:8.1f} "
              f"{1e3 * one(ds['step_time_s']):8.1f} {1e3 * pub:9.1f}")


if __name__ == "__main__":
    main()
