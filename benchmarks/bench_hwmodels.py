"""Throughput of the parametric accelerator model, alone and inside full scenarios.

1. ``hwmodels.package.build`` on 1e6 random parametric accelerators (mixed
   nodes, HBM generations, packages, die-to-die classes): designs/s.
2. ``explore.evaluate`` of the random-plan benchmark of bench_evaluate.py with
   an inline parametric accelerator whose dies, area, node, HBM and package
   vary per design: design points/s (foundation target >= 200,000/s).
Also prints the reconstruction error of each catalog part with a design.
Run: python benchmarks/bench_hwmodels.py [--n 1000000] [--n-eval 100000] [--repeat 3]
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import explore  # noqa: E402
from bench_evaluate import random_plans  # noqa: E402
from hwmodels import package  # noqa: E402
from hwmodels.parts import get_part  # noqa: E402


def random_designs(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    dies = rng.choice([1, 2, 4, 8], n)
    return {
        "compute_dies": dies, "die_area_mm2": rng.uniform(400, 1700, n) / dies,
        "matrix_fraction": rng.uniform(0.3, 0.6, n), "clock_hz": rng.uniform(1.4e9, 2.2e9, n),
        "hbm_stacks": rng.integers(4, 9, n), "hbm_stack_capacity_bytes": rng.choice([16e9, 24e9, 36e9], n),
        "hbm_stack_bandwidth_bytes_per_s": rng.uniform(0.4e12, 2e12, n),
        "d2d_bandwidth_bps": rng.uniform(5e12, 40e12, n), "io_dies": rng.choice([0, 0, 2, 4], n),
        "io_die_area_mm2": rng.uniform(100, 400, n), "optical_io": rng.integers(0, 4, n),
        "io_bandwidth_bps": rng.uniform(1e12, 8e12, n), "board_power_w": np.full(n, 30.0),
        "board_cost_usd": np.full(n, 300.0), "power_limit_w": np.full(n, 1200.0),
        "nre_volume": rng.choice([0.0, 1e5, 1e6], n),
        "node": rng.choice(["n7", "n5", "n4", "n4p", "n3", "n2"], n),
        "hbm": rng.choice(["hbm2e", "hbm3", "hbm3e", "hbm4"], n),
        "package": rng.choice(["organic", "cowos-s", "cowos-l"], n),
        "d2d": rng.choice(["ucie-standard", "ucie-advanced", "hybrid-bond-3d"], n),
        "io_node": rng.choice(["n6", "n5"], n), "optical_io_type": np.full(n, "optical-io-gen3"),
    }


def parametric_scenario(n: int, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    sc = random_plans(n, seed)
    dies = rng.choice([1, 2, 4], n)
    sc["system"]["accelerator"] = {
        "base": "h100-sxm-80gb", "compute_dies": dies, "die_area_mm2": rng.uniform(500, 1600, n) / dies,
        "node": rng.choice(["n5", "n4", "n3"], n), "hbm": rng.choice(["hbm3", "hbm3e", "hbm4"], n),
        "hbm_stacks": rng.integers(4, 9, n), "package": rng.choice(["cowos-s", "cowos-l"], n),
        "d2d": "ucie-advanced"}
    sc["system"]["scale_up"]["link"] = "nvlink4"
    return sc


def best_of(f, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--n-eval", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()

    print("reconstructions vs datasheet (relative error):")
    for pid in package.design_ids():
        r, s = package.reconstruct(pid), get_part("accelerators", pid)
        errs = "  ".join(f"{k} {100 * (r[k] / s[k] - 1):+5.1f}%" for k in
                         ("peak_flops_bf16", "tdp_w", "hbm_capacity_bytes", "hbm_bandwidth_bytes_per_s"))
        print(f"  {pid:<15} {errs}  unit cost ${r['unit_cost_usd']:,.0f}")

    p = random_designs(a.n)
    package.build(random_designs(1000))
    t, out = best_of(lambda: package.build(p), a.repeat)
    ok = int((out["invalid_code"] == 0).sum())
    print(f"hwmodels.package.build: {a.n:,} designs ({ok:,} feasible), best of {a.repeat}: "
          f"{t:.3f} s -> {a.n / t:,.0f} accelerators/s")

    for label, make in (("catalog a100 (baseline)", random_plans), ("inline parametric", parametric_scenario)):
        sc = make(a.n_eval)
        explore.evaluate(make(1000))
        t, ds = best_of(lambda: explore.evaluate(sc), a.repeat)
        print(f"explore.evaluate, {label}: {a.n_eval:,} designs ({int(ds.valid.sum()):,} valid), "
              f"best of {a.repeat}: {t:.3f} s -> {a.n_eval / t:,.0f} design points/s")


if __name__ == "__main__":
    main()
