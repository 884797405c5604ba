"""The pymoo algorithms ``lightpath search`` offers, with its mixed-integer operators.

Integer (and choice-index) columns are sampled uniformly and rounded after
variation (``RoundIntegers``), so every algorithm runs unchanged on mixed spaces.
Every random decision draws from the algorithm's seeded generator, so a run is a
function of its seed (resuming replays it).
"""
from __future__ import annotations

import functools

import numpy as np
from pymoo.core.repair import Repair
from pymoo.core.sampling import Sampling


class RoundIntegers(Repair):
    """Round the integer (and index) columns and clip every column to its bounds."""

    def __init__(self, integer: np.ndarray):
        super().__init__()
        self.integer = integer

    def _do(self, problem, X, **kwargs):
        X = np.clip(X, problem.xl, problem.xu)
        X[:, self.integer] = np.round(X[:, self.integer])
        return X


class MixedSampling(Sampling):
    """Uniform integers on integer columns, uniform reals on the others."""

    def __init__(self, integer: np.ndarray):
        super().__init__()
        self.integer = integer

    def _do(self, problem, n_samples, *args, random_state=None, **kwargs):
        u = random_state.random((n_samples, problem.n_var))
        X = problem.xl + u * (problem.xu - problem.xl)
        span = problem.xu - problem.xl + 1.0
        X[:, self.integer] = (problem.xl + np.floor(u * span))[:, self.integer]
        return np.minimum(X, problem.xu)


# ----------------------------------------------------------------------------- algorithms

def _nsga2(pop, n_obj, seed, **kw):
    from pymoo.algorithms.moo.nsga2 import NSGA2
    return NSGA2(pop_size=pop, **kw)


def _ref_dirs(n_obj, pop, seed):
    return _energy_dirs(n_obj, pop, seed).copy()


@functools.lru_cache(maxsize=8)
def _energy_dirs(n_obj, pop, seed):
    """``pop`` reference directions: evenly spaced on the segment for two objectives (the
    Das-Dennis lattice), Riesz s-energy directions for three or more (seconds to
    compute: cached per process)."""
    from pymoo.util.ref_dirs import get_reference_directions
    if n_obj == 1:
        return np.ones((1, 1))
    if n_obj == 2:
        return get_reference_directions("uniform", 2, n_partitions=max(pop - 1, 1))
    return get_reference_directions("energy", n_obj, pop, seed=seed)


def _pick(a, b, a_val, b_val, coin):
    """Winner of each pair: the smaller value, else (tie) ``a`` or ``b`` by the coin."""
    return np.where(a_val < b_val, a, np.where(b_val < a_val, b, np.where(coin, a, b)))


def _cv_then_random(pop, P, random_state=None, **kwargs):
    """NSGA-III binary tournament (Deb & Jain 2014): the smaller constraint violation
    wins; between feasible designs, or equal violations, a fair coin from the
    algorithm's seeded generator (pymoo 0.6.2's own comparison draws ties from an
    unseeded generator, so runs were not reproducible)."""
    a, b = P[:, 0], P[:, 1]
    cv = pop.get("CV").ravel()
    coin = random_state.random(len(P)) < 0.5
    return _pick(a, b, cv[a], cv[b], coin)[:, None].astype(int)


def _rank_then_niche_distance(pop, P, random_state=None, **kwargs):
    """U-NSGA-III tournament (Seada & Deb 2016): the smaller violation wins; two feasible
    designs of the same niche compare by rank, then by distance to the niche's
    reference line; otherwise (and on ties) a coin from the seeded generator."""
    a, b = P[:, 0], P[:, 1]
    cv = pop.get("CV").ravel()
    coin = random_state.random(len(P)) < 0.5
    infeasible = (cv[a] > 0) | (cv[b] > 0)
    niche, rank, dist = (np.array([np.nan if x is None else x for x in pop.get(k)], float)
                         for k in ("niche", "rank", "dist_to_niche"))
    win = np.where(coin, a, b)
    same = ~infeasible & (niche[a] == niche[b])
    by_rank = same & (rank[a] != rank[b])
    by_dist = same & (rank[a] == rank[b])
    win = np.where(by_rank, _pick(a, b, rank[a], rank[b], coin), win)
    win = np.where(by_dist, _pick(a, b, dist[a], dist[b], coin), win)
    win = np.where(infeasible, _pick(a, b, cv[a], cv[b], coin), win)
    return win[:, None].astype(int)


def _nsga3(pop, n_obj, seed, **kw):
    from pymoo.algorithms.moo.nsga3 import NSGA3
    from pymoo.operators.selection.tournament import TournamentSelection
    return NSGA3(ref_dirs=_ref_dirs(n_obj, pop, seed), pop_size=pop,
                 selection=TournamentSelection(func_comp=_cv_then_random), **kw)


def _unsga3(pop, n_obj, seed, **kw):
    from pymoo.algorithms.moo.unsga3 import UNSGA3
    from pymoo.operators.selection.tournament import TournamentSelection
    return UNSGA3(ref_dirs=_ref_dirs(n_obj, pop, seed), pop_size=pop,
                  selection=TournamentSelection(func_comp=_rank_then_niche_distance), **kw)


def _smsemoa(pop, n_obj, seed, **kw):
    from pymoo.algorithms.moo.sms import SMSEMOA
    return SMSEMOA(pop_size=pop, **kw)


def _agemoea(pop, n_obj, seed, **kw):
    from pymoo.algorithms.moo.age import AGEMOEA
    return AGEMOEA(pop_size=pop, **kw)


ALGORITHMS = {"nsga2": _nsga2, "nsga3": _nsga3, "unsga3": _unsga3, "smsemoa": _smsemoa,
              "agemoea": _agemoea}


def make_algorithm(settings, problem):
    """pymoo algorithm with mixed-integer sampling, SBX/PM variation and rounding repair."""
    from pymoo.operators.crossover.sbx import SBX
    from pymoo.operators.mutation.pm import PM
    integer = problem.encoding.integer
    kw = dict(sampling=MixedSampling(integer), crossover=SBX(prob=0.9, eta=15),
              mutation=PM(eta=20), repair=RoundIntegers(integer), eliminate_duplicates=True)
    return ALGORITHMS[settings.algorithm](settings.pop, problem.n_obj, settings.seed, **kw)
