"""Non-dominated filtering and sorting: moocore (used since issue 13) vs the numpy block
filter and peeling loop the search used before, on random 3-objective fronts.

    python benchmarks/bench_pareto.py [N ...]      # default: 2000 20000 100000

Prints, per size, the seconds of each and the speed-up; checks that both agree.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from explore.search.results import nondominated, nondominated_rank

BLOCK = 2048


def old_nondominated(F: np.ndarray) -> np.ndarray:
    """The pre-moocore filter: rows in order of normalised sum, each block checked against
    the front so far and itself (numpy broadcasting)."""
    n = F.shape[0]
    lo, hi = F.min(axis=0), F.max(axis=0)
    norm = (F - lo) / np.where(hi > lo, hi - lo, 1.0)
    order = np.lexsort(tuple(F[:, ::-1].T) + (norm.sum(axis=1),))
    front, P = [], np.zeros((0, F.shape[1]))
    for s in range(0, n, BLOCK):
        idx = order[s:s + BLOCK]
        C = F[idx]
        if len(P):
            dom = np.zeros(len(C), dtype=bool)
            for p in range(0, len(P), BLOCK):
                B = P[p:p + BLOCK]
                dom |= ((B[:, None, :] <= C[None]).all(2) & (B[:, None, :] < C[None]).any(2)).any(0)
            idx, C = idx[~dom], C[~dom]
        keep = ~((C[:, None, :] <= C[None]).all(2) & (C[:, None, :] < C[None]).any(2)).any(0)
        front.append(idx[keep])
        P = np.vstack([P, C[keep]])
    return np.sort(np.concatenate(front))


def old_rank(F: np.ndarray) -> np.ndarray:
    rank, left, r = np.full(len(F), -1), np.arange(len(F)), 0
    while len(left):
        nd = old_nondominated(F[left])
        rank[left[nd]] = r
        left, r = np.delete(left, nd), r + 1
    return rank


def _time(fn, F):
    t = time.perf_counter()
    out = fn(F)
    return time.perf_counter() - t, out


def main(sizes):
    rng = np.random.default_rng(0)
    print(f"{'n':>8} {'what':>6} {'old s':>9} {'moocore s':>10} {'speed-up':>9}")
    for n in sizes:
        F = rng.random((n, 3))
        for what, old, new in (("filter", old_nondominated, nondominated),
                               ("rank", old_rank, nondominated_rank)):
            if what == "rank" and n > 20000:
                print(f"{n:>8} {what:>6} {'(skipped: old loop too slow)':>30}")
                continue
            t_old, a = _time(old, F)
            t_new, b = _time(new, F)
            assert np.array_equal(a, b)
            print(f"{n:>8} {what:>6} {t_old:>9.3f} {t_new:>10.4f} {t_old / t_new:>8.0f}x")


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [2000, 20000, 100000])
