"""Design points per second of one explore.evaluate call over random valid plans of a 175B model.

Target (issue 9): >= 1,000,000 points/s on one core, no Python loop per design. On a shared
machine the CPU time of the call is printed as well (wall time includes waiting for a core).
``--frontier`` (issue 11): random plans of a Mixtral-8x22B-like MoE at 32k context with
expert parallelism (ep, etp, dispatcher, all-to-all overlap), context parallelism and FP8
recipes; target >= 200,000 points/s on one core. ``--mixed-networks`` adds torus and
OCS-circuit designs (their placement paths cost extra, with or without MoE).
Run: python benchmarks/bench_evaluate.py [--n 100000] [--repeat 3] [--frontier]
"""
import argparse
import copy
import os
import time

import numpy as np

import explore


def random_plans(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    sc = explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml")
    tp = rng.choice([1, 2, 4, 8], n)
    pp = rng.choice([1, 2, 4, 8, 12, 16, 24, 32, 48, 96], n)
    dp = rng.choice([1, 2, 4, 8, 16, 32, 64], n)
    mb = rng.choice([1, 2, 4], n)
    gb = dp * mb * rng.choice([8, 16, 32, 64], n)
    sc = copy.deepcopy(sc)
    sc["parallelism"].update(tp=tp, pp=pp, dp=dp, microbatch=mb,
                             zero=rng.integers(0, 4, n),
                             recompute=rng.choice(["none", "selective", "full"], n),
                             sequence_parallel=rng.random(n) < 0.5)
    sc["training"]["global_batch"] = gb
    sc["system"]["devices"] = tp * pp * dp
    return sc


def random_frontier_plans(n: int, seed: int = 0, mixed_networks: bool = False) -> dict:
    """MoE + context parallelism + FP8: every frontier term active in most designs."""
    rng = np.random.default_rng(seed)
    tp = rng.choice([1, 2, 4, 8], n)
    pp = rng.choice([1, 2, 4, 7, 8], n)
    cp = rng.choice([1, 2, 4, 8], n)
    dp = rng.choice([1, 2, 4, 8, 16], n)
    ep = np.minimum(rng.choice([1, 2, 4, 8], n), dp * cp)
    mb = rng.choice([1, 2], n)
    return {"model": {"preset": "mixtral-8x22b", "seq_len": 32768},
            "training": {"global_batch": dp * mb * rng.choice([4, 8, 16], n),
                         "precision": rng.choice(["bf16", "fp8"], n),
                         "fp8_recipe": rng.choice(["per-tensor", "blockwise", "mxfp8"], n)},
            "parallelism": {"tp": tp, "pp": pp, "cp": cp, "dp": dp, "ep": ep, "etp": np.ones(n, int),
                            "microbatch": mb, "zero": rng.integers(0, 4, n),
                            "recompute": rng.choice(["none", "full"], n),
                            "moe_dispatcher": rng.choice(["alltoall", "deepep"], n),
                            "overlap_moe_comm": rng.random(n) < 0.5},
            "system": {"accelerator": "h100-sxm-80gb", "devices": tp * pp * cp * dp,
                       "scale_up": {"size": 8},
                       "scale_out": {"topology": (rng.choice(["fat-tree", "torus", "ocs-reconfigurable"], n)
                                                  if mixed_networks else "fat-tree"),
                                     "oversubscription": rng.choice([1.0, 2.0, 4.0], n)}}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--frontier", action="store_true", help="MoE + EP + CP + FP8 plans (issue 11)")
    ap.add_argument("--default-malloc", action="store_true",
                    help="leave glibc malloc alone (default: explore.allocator.keep_freed_memory)")
    ap.add_argument("--mixed-networks", action="store_true",
                    help="with --frontier: fat-tree, torus and OCS-circuit designs mixed (default: fat-tree, "
                         "oversubscribed 1-4x, as the 175B benchmark)")
    a = ap.parse_args()
    from explore.allocator import keep_freed_memory
    reuse = False if a.default_malloc else keep_freed_memory()
    if a.frontier:
        def make(n):
            return random_frontier_plans(n, mixed_networks=a.mixed_networks)
    else:
        make = random_plans
    sc = make(a.n)
    explore.evaluate(make(1000))  # warm caches (catalog, imports)
    best = cpu = np.inf
    for _ in range(a.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        ds = explore.evaluate(sc)
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    rules_ok = (ds["reason"] == "") | (ds["reason"] == "does not fit in accelerator memory")
    print(f"designs: {a.n}  rule-valid: {int(rules_ok.sum())}  fit memory: {int(ds['valid'].sum())}")
    if a.frontier:
        active = (ds["time_s_moe_comm"] > 0) & (ds["time_s_cp_comm"] >= 0) & rules_ok
        print(f"rule-valid with exposed MoE all-to-all: {int(active.sum())}")
    print(f"best of {a.repeat}: {best:.3f} s  ->  {a.n / best:,.0f} design points/s "
          f"(CPU time {cpu:.3f} s -> {a.n / cpu:,.0f}/s; load average {os.getloadavg()[0]:.1f}; "
          f"freed memory {'reused' if reuse else 'returned (default malloc)'})")


if __name__ == "__main__":
    main()
