"""Search quality on the enumerable space (c): exhaustive front vs pymoo's front.

Prints, for 5 seeds: the hypervolume ratio HV(search front) / HV(exhaustive front)
(same reference point: the exhaustive front's nadir + 10 % of its extent), the
distinct designs evaluated (as a share of the grid) and the wall time; then the
medians, against the target (>= 0.99 of the hypervolume with <= 2 % of the
evaluations). Then nested mode (plan enumerated per hardware candidate) against
plain search, at the same evaluation budget and at the same wall time.

    python benchmarks/bench_search.py [--space studies/spaces/small-llama3-70b.toml] [--seeds 5]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from explore.search.problem import _grid, run_search, settings_for
from explore.search.results import hypervolume, nondominated
from explore.search.space import load_space

ROOT = Path(__file__).resolve().parents[1]


def exhaustive(space):
    t = time.perf_counter()
    ds = space.evaluate(_grid(space.variables))
    F = space.signs * space.objective_values(ds)
    feas = (space.violation(ds) <= 0).all(axis=1)
    front = F[feas][nondominated(F[feas])]
    return front, ds.sizes["design"], int(feas.sum()), time.perf_counter() - t


def timed(space, ref, hv_x, time_limit_s=None, **flags):
    """Run a search with the exhaustive front's reference point; returns (final HV ratio,
    distinct evaluations, evaluations and seconds to reach a ratio >= 0.99 (None if
    never), generations, wall seconds)."""
    stamps = []
    t0 = time.perf_counter()
    ds = run_search(space, settings_for(space, reference=tuple(ref * space.signs), **flags),
                    on_generation=lambda g: stamps.append(time.perf_counter() - t0),
                    time_limit_s=time_limit_s)
    wall = time.perf_counter() - t0
    r = ds["hypervolume"].values / hv_x
    hit = np.flatnonzero(r >= 0.99)
    reach = (int(ds["evaluations"].values[hit[0]]), stamps[hit[0]]) if len(hit) else (None, None)
    return r[-1] if len(r) else 0.0, ds.attrs["evaluations"], reach[0], reach[1], len(r), wall


def _fmt(x, f="{:.0f}"):
    return "never" if x is None else f.format(x)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--space", default=str(ROOT / "studies/spaces/small-llama3-70b.toml"))
    ap.add_argument("--seeds", type=int, default=5)
    a = ap.parse_args()
    space = load_space(a.space)
    front, n_grid, n_feas, t_x = exhaustive(space)
    ref = front.max(axis=0) + 0.1 * (front.max(axis=0) - front.min(axis=0))
    hv_x = hypervolume(front, ref)
    print(f"space: {space.name} ({Path(a.space).name})")
    print(f"exhaustive: {n_grid} designs ({n_feas} feasible) in {t_x:.2f} s, front {len(front)} points, "
          f"HV {hv_x:.6g}")
    base = settings_for(space)
    print(f"search: {base.algorithm}, pop {base.pop}, <= {base.gens} generations, budget "
          f"{base.evaluations} distinct evaluations ({100 * base.evaluations / n_grid:.2f} % of grid)")
    rows = []
    for seed in range(a.seeds):
        r, ev, e99, t99, gens, wall = timed(space, ref, hv_x, seed=seed)
        rows.append((r, ev, np.nan if e99 is None else e99, np.nan if t99 is None else t99, wall))
        print(f"  seed {seed}: HV ratio {r:.4f}, {ev} evaluations ({100 * ev / n_grid:.2f} %), "
              f"ratio >= 0.99 after {_fmt(e99)} evaluations / {_fmt(t99, '{:.1f}')} s, "
              f"{gens} generations, {wall:.1f} s")
    R = np.array(rows, dtype=float)
    med = np.median(R, axis=0)
    e99 = np.sort(np.where(np.isnan(R[:, 2]), np.inf, R[:, 2]))[len(R) // 2]
    t99 = np.sort(np.where(np.isnan(R[:, 3]), np.inf, R[:, 3]))[len(R) // 2]
    ok = med[0] >= 0.99 and med[1] <= 0.02 * n_grid
    print(f"median: HV ratio {med[0]:.4f} (target >= 0.99), {med[1]:.0f} evaluations "
          f"({100 * med[1] / n_grid:.2f} % of grid, target <= 2 %); ratio >= 0.99 after {e99:.0f} "
          f"evaluations ({100 * e99 / n_grid:.2f} %) / {t99:.1f} s; wall {med[4]:.1f} s -> "
          f"{'MET' if ok else 'NOT met'}")

    n_plans = int(np.prod([v.size for v in space.variables if v.field.startswith("parallelism.")]))
    print(f"nested (plan = enumerate: {n_plans} plans per hardware candidate) vs search:")
    for seed in range(min(3, a.seeds)):
        pop = max(2, base.evaluations // n_plans)        # same budget: candidates x all plans
        nb = timed(space, ref, hv_x, seed=seed, plan="enumerate", pop=pop, gens=1, evaluations=0)
        nt = timed(space, ref, hv_x, time_limit_s=R[seed, 4], seed=seed, plan="enumerate", pop=8,
                   gens=10 ** 6, evaluations=0)
        print(f"  seed {seed}: search {R[seed, 0]:.4f} ({R[seed, 1]:.0f} evals, {R[seed, 4]:.1f} s, "
              f">= 0.99 after {R[seed, 3]:.1f} s) | nested, same budget {nb[0]:.4f} ({nb[1]} evals) | "
              f"nested, same wall time {nt[0]:.4f} ({nt[1]} evals, >= 0.99 after "
              f"{_fmt(nt[2])} evals / {_fmt(nt[3], '{:.1f}')} s)")


if __name__ == "__main__":
    main()
