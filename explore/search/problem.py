"""Multi-objective co-design search over a design space with pymoo.

The decision vector encodes each variable as one column: a choice or an int with
listed values as its index, an int range as its value, a real as its value (its
log if ``log``); ``explore.search.algorithms`` samples and rounds the integer
columns, so the algorithms run unchanged on mixed spaces.
``SpaceProblem._evaluate`` decodes the *whole population* into one batched
scenario and makes one ``explore.evaluate`` call; infeasible designs are
constraint violations (``G > 0``), objectives are negated for ``max`` (pymoo
minimises) and given back with the user's sign in the results.

Plan modes: ``plan = "search"`` lets pymoo choose every variable. ``"enumerate"``
(white-box inside black-box, in the spirit of ChipLight, DATE 2026) lets pymoo
choose only the hardware/network variables and enumerates all parallel plans
(``parallelism.*`` variables) of each candidate in the same vectorised call; the
candidate's fitness is its best plan by sum of log objectives (scale-free), and
every evaluated plan enters the Pareto archive.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pymoo.core.problem import Problem

from explore.search.algorithms import ALGORITHMS, make_algorithm
from explore.search.variables import SpaceError

BIG = 1e30       # objective value given to designs with no metric (they are infeasible anyway)
# Reasons that depend only on the plan, the model, the batch and the device count.
MAX_BATCH = 200_000   # designs per explore.evaluate call (bounds memory in enumerate mode)
PLAN_RULES = ("parallelism", "training.global_batch", "interleaved 1F1B", "derived parallelism.")


# ----------------------------------------------------------------------------- encoding

@dataclass(frozen=True)
class Encoding:
    """Decision vector <-> variable columns for a list of ``Variable``."""
    variables: tuple

    @property
    def integer(self) -> np.ndarray:
        return np.array([v.kind != "real" for v in self.variables], dtype=bool)

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = [], []
        for v in self.variables:
            if v.values:
                lo.append(0.0), hi.append(float(len(v.values) - 1))
            elif v.log:
                lo.append(np.log(v.low)), hi.append(np.log(v.high))
            else:
                lo.append(float(v.low)), hi.append(float(v.high))
        return np.array(lo), np.array(hi)

    def decode(self, X: np.ndarray) -> dict[str, np.ndarray]:
        """(n, n_var) decision matrix -> {variable name: values (labels for choices)}."""
        X = np.atleast_2d(X)
        cols = {}
        for j, v in enumerate(self.variables):
            x = X[:, j]
            if v.values:
                cols[v.name] = np.asarray(v.values)[np.clip(np.round(x), 0, len(v.values) - 1).astype(int)]
            elif v.kind == "int":
                cols[v.name] = np.round(x).astype(np.int64)
            else:
                cols[v.name] = np.exp(x) if v.log else x.astype(float)
        return cols

    def encode(self, cols: dict[str, np.ndarray]) -> np.ndarray:
        """Inverse of ``decode`` (labels -> indices)."""
        out = []
        for v in self.variables:
            c = np.asarray(cols[v.name])
            if v.values:
                hit = c[:, None] == np.asarray(v.values)[None, :]
                out.append(hit.argmax(axis=1).astype(float))
            else:
                out.append(np.log(c.astype(float)) if v.log else c.astype(float))
        return np.column_stack(out) if out else np.zeros((0, 0))


# ----------------------------------------------------------------------------- the problem

def split_plan(space) -> tuple[list, list]:
    """(outer, inner) variables: inner = the parallel plan (``parallelism.*``)."""
    inner = [v for v in space.variables if v.field.startswith("parallelism.")]
    outer = [v for v in space.variables if not v.field.startswith("parallelism.")]
    return outer, inner


def _grid(variables) -> dict[str, np.ndarray]:
    """Full cross product of the variables' grid values (one column per variable)."""
    grids = [v.grid_values() for v in variables]
    if not grids:
        return {}
    idx = np.meshgrid(*[np.arange(len(g)) for g in grids], indexing="ij")
    return {v.name: g[i.ravel()] for v, g, i in zip(variables, grids, idx)}


def row_keys(X: np.ndarray) -> np.ndarray:
    """Each row of X as one opaque value (numpy void), for exact vectorised look-ups."""
    X = np.ascontiguousarray(X, dtype=float)
    return X.view(np.dtype((np.void, X.dtype.itemsize * max(X.shape[1], 1)))).ravel() \
        if X.shape[1] else np.zeros(len(X), dtype="V8")


class Cache:
    """F and G of every decision vector evaluated so far (sorted keys, searchsorted)."""

    def __init__(self, n_obj: int, n_con: int):
        self.keys = np.zeros(0, dtype="V8")
        self.F = np.zeros((0, n_obj))
        self.G = np.zeros((0, n_con))

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not len(self.keys) or self.keys.dtype != keys.dtype:
            return np.zeros(len(keys), bool), np.zeros(len(keys), int)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return self.keys[at] == keys, at

    def add(self, keys, F, G) -> None:
        if len(self.keys) and self.keys.dtype == keys.dtype:
            keys, F, G = (np.concatenate([self.keys, keys]), np.vstack([self.F, F]),
                          np.vstack([self.G, G]))
        order = np.argsort(keys, kind="stable")
        self.keys, self.F, self.G = keys[order], F[order], G[order]


class SpaceProblem(Problem):
    """pymoo problem over a ``Space``: one ``explore.evaluate`` call per population.

    After each evaluation ``self.last`` holds, per evaluated chunk, the feasible
    non-dominated designs (Dataset, F, G) among all evaluated (all plans in enumerate
    mode), for the Pareto archive."""

    def __init__(self, space, plan: str = "search"):
        if plan not in ("search", "enumerate"):
            raise SpaceError(f"{space.path}: search.plan: value {plan!r} is not allowed; "
                             f"allowed: 'search', 'enumerate'")
        self.space = space
        self.plan = plan
        outer, inner = split_plan(space) if plan == "enumerate" else (list(space.variables), [])
        if plan == "enumerate" and not inner:
            raise SpaceError(f"{space.path}: search.plan: 'enumerate' needs parallelism.* variables")
        if plan == "enumerate" and any(v.kind == "real" for v in inner):
            raise SpaceError(f"{space.path}: search.plan: 'enumerate' needs int or choice plan variables")
        self.encoding = Encoding(tuple(outer))
        self.inner = _grid(inner)
        self.n_inner = len(next(iter(self.inner.values()))) if inner else 1
        self.inner_names = [v.name for v in inner]
        self.last = None
        self.n_designs = 0
        self.cache = Cache(len(space.objectives), len(space.constraint_names))
        xl, xu = self.encoding.bounds
        super().__init__(n_var=len(outer), n_obj=len(space.objectives),
                         n_ieq_constr=len(space.constraint_names), xl=xl, xu=xu)
        if plan == "enumerate":
            self._prune_inner()

    def _prune_inner(self) -> None:
        """Drop plans that break a plan rule for every candidate (exact only when no outer
        variable or coupling can change devices, the model or the batch)."""
        touch = ("system.devices", "model.", "training.global_batch")
        if any(v.field.startswith(touch) for v in self.encoding.variables) or \
                "capex_budget_usd" in self.space.couplings:
            return
        first = {v.name: np.asarray(v.grid_values()[:1]) for v in self.encoding.variables}
        ds = self.space.evaluate({**first, **self.inner})
        reason = ds["reason"].values.astype(str)
        # memory, power and the like may depend on the hardware: keep those plans
        keep = ~np.logical_or.reduce([np.char.startswith(reason, p) for p in PLAN_RULES])
        if keep.any():
            self.inner = {k: c[keep] for k, c in self.inner.items()}
            self.n_inner = int(keep.sum())

    def columns(self, X: np.ndarray) -> dict[str, np.ndarray]:
        """Decision matrix -> batched columns (each candidate repeated over its plans)."""
        cols = self.encoding.decode(X) if self.n_var else {}
        n = X.shape[0]
        if self.plan == "enumerate":
            cols = {k: np.repeat(c, self.n_inner) for k, c in cols.items()}
            cols.update({k: np.tile(c, n) for k, c in self.inner.items()})
        return cols

    def evaluate_columns(self, cols: dict):
        s = self.space
        ds = s.evaluate(cols)
        F = s.signs * s.objective_values(ds)
        F = np.where(np.isfinite(F), F, BIG)
        G = s.violation(ds)
        self.n_designs += ds.sizes["design"]
        return ds, F, G

    def evaluate_rows(self, X: np.ndarray):
        """F and G per row of X (its best plan in enumerate mode), evaluated in chunks of at
        most MAX_BATCH designs, and per chunk its feasible non-dominated designs
        (Dataset, F, G) for the archive, so memory stays bounded."""
        from explore.search.results import nondominated
        step = max(1, MAX_BATCH // self.n_inner)
        Fs, Gs, parts = [], [], []
        for s in range(0, len(X), step):
            Xc = X[s:s + step]
            ds, F, G = self.evaluate_columns(self.columns(Xc))
            feas = np.flatnonzero((G <= 0).all(axis=1))
            keep = feas[nondominated(F[feas])]
            parts.append((ds.isel(design=keep), F[keep], G[keep]))
            if self.plan == "enumerate":
                F, G = self._best_plan(F, G, len(Xc))
            Fs.append(F)
            Gs.append(G)
        return np.vstack(Fs), np.vstack(Gs), parts

    def _evaluate(self, X, out, *args, **kwargs):
        """Evaluate the new rows of X in one batch; rows seen before come from the cache,
        so the evaluation count (``n_designs``) counts distinct designs only."""
        keys = row_keys(X)
        hit, at = self.cache.lookup(keys)
        F = np.empty((len(X), self.n_obj))
        G = np.empty((len(X), self.n_ieq_constr))
        F[hit], G[hit] = self.cache.F[at[hit]], self.cache.G[at[hit]]
        self.last = None
        if not hit.all():
            ukeys, first, inv = np.unique(keys[~hit], return_index=True, return_inverse=True)
            Xn = X[~hit][first]
            Fn, Gn, self.last = self.evaluate_rows(Xn)
            self.cache.add(ukeys, Fn, Gn)
            F[~hit], G[~hit] = Fn[inv.ravel()], Gn[inv.ravel()]
        out["F"], out["G"] = F, G

    def _best_plan(self, F, G, n):
        """Each candidate's best plan: feasible first, then least sum of log objectives
        (scale-free; rank-sum when some objective is not positive), else least violation."""
        m, k = self.n_inner, F.shape[1]
        F3, G3 = F.reshape(n, m, k), G.reshape(n, m, -1)
        cv = np.maximum(G3, 0.0).sum(axis=2)
        feas = cv <= 0
        user = F3 * self.space.signs
        if (user[feas] > 0).all():
            with np.errstate(divide="ignore", invalid="ignore"):
                score = (self.space.signs * np.log(np.where(user > 0, user, 1.0))).sum(axis=2)
        else:
            score = np.argsort(np.argsort(F3, axis=1), axis=1).sum(axis=2).astype(float)
        score = np.where(feas, score, np.inf)
        pick = np.where(feas.any(axis=1), np.argmin(score, axis=1), np.argmin(cv, axis=1))
        rows = np.arange(n)
        return F3[rows, pick], G3[rows, pick]


# ----------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class SearchSettings:
    """How to search: from the space file's [search] table, overridden by CLI flags."""
    algorithm: str = "nsga2"
    pop: int = 64
    gens: int = 30
    seed: int = 1
    plan: str = "search"
    evaluations: int = 0             # budget of designs evaluated (0: no budget)
    reference: tuple = ()            # hypervolume reference point, user's units and sign


SETTING_KEYS = tuple(SearchSettings.__dataclass_fields__)
INT64_MAX = 2 ** 63 - 1          # settings are stored as int64 (NetCDF attributes)


def settings_for(space, base: SearchSettings | None = None, **flags) -> SearchSettings:
    """Validate the space's [search] table (or ``base``) and apply CLI flags (None = not given)."""
    raw = dict(space.search) if base is None else dict(base.__dict__)
    where = f"{space.path}: search"
    for k in raw:
        if k not in SETTING_KEYS:
            from explore.search.variables import _suggest
            raise SpaceError(f"{where}.{k}: unknown key{_suggest(k, SETTING_KEYS)}; "
                             f"allowed: {', '.join(SETTING_KEYS)}")
    raw.update({k: v for k, v in flags.items() if v is not None})
    s = SearchSettings(**{k: (tuple(v) if k == "reference" and isinstance(v, (list, tuple)) else v)
                          for k, v in raw.items()})
    if s.algorithm not in ALGORITHMS:
        from explore.search.variables import _suggest
        raise SpaceError(f"{where}.algorithm: value {s.algorithm!r} is not allowed"
                         f"{_suggest(str(s.algorithm), ALGORITHMS)}; allowed: {', '.join(ALGORITHMS)}")
    if s.plan not in ("search", "enumerate"):
        raise SpaceError(f"{where}.plan: value {s.plan!r} is not allowed; allowed: 'search', 'enumerate'")
    for k, lo in (("pop", 2), ("gens", 1), ("seed", 0), ("evaluations", 0)):
        v = getattr(s, k)
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= INT64_MAX:
            raise SpaceError(f"{where}.{k}: value {v!r} is not allowed; allowed: an integer "
                             f"from {lo} to {INT64_MAX} (2**63 - 1)")
    if not isinstance(raw.get("reference", ()), (list, tuple)):
        raise SpaceError(f"{where}.reference: value {raw['reference']!r} is not allowed; allowed: "
                         f"a list of {len(space.objectives)} numbers, one per objective")
    if s.reference and (len(s.reference) != len(space.objectives) or
                        not all(isinstance(x, (int, float)) and np.isfinite(x) for x in s.reference)):
        raise SpaceError(f"{where}.reference: value {list(s.reference)!r} is not allowed; allowed: "
                         f"{len(space.objectives)} finite numbers, one per objective")
    return s


# ----------------------------------------------------------------------------- the run

def _fresh_state(space, settings: SearchSettings) -> dict:
    problem = SpaceProblem(space, settings.plan)
    state = {"fingerprint": space.fingerprint, "settings": settings, "problem": problem,
             "algorithm": None, "archive": None, "generation": 0,
             "history": {"generation": [], "hypervolume": [], "evaluations": [], "front_size": [],
                         "reference": (space.signs * np.asarray(settings.reference, float)
                                       if settings.reference else None),
                         "x_names": [v.name for v in problem.encoding.variables]}}
    from explore.search.results import Archive
    state["archive"] = Archive([v.name for v in space.variables])
    if problem.n_var:
        from pymoo.termination.max_gen import MaximumGenerationTermination
        algo = make_algorithm(settings, problem)
        algo.setup(problem, termination=MaximumGenerationTermination(10 ** 9), seed=settings.seed,
                   verbose=False)
        state["algorithm"] = algo
    return state


def run_search(space, settings: SearchSettings | None = None, out=None, resume: bool = False,
               progress: bool = False, on_generation=None, time_limit_s: float | None = None):
    """Run (or resume) a search; returns the result Dataset (and writes ``out`` if given).

    A checkpoint ``out + ".ckpt"`` is written atomically after every generation;
    ``resume=True`` continues from it and ends identical to an uninterrupted run.
    ``time_limit_s`` stops after the generation that crosses a wall-time budget (for
    benchmarks; unlike generations and evaluations it is not reproducible)."""
    import time
    t0 = time.perf_counter()
    from explore.search.results import (checkpoint_path, hypervolume, reference_point,
                                        result_dataset, save_checkpoint, write_result)
    from explore.search.checkpoint import _checkpoint_record, _resume_state
    settings = settings or settings_for(space)
    ckpt = checkpoint_path(out) if out is not None else None
    if resume and ckpt is not None and ckpt.exists():
        state = _resume_state(space, settings, ckpt)
    else:
        state = _fresh_state(space, settings)
    problem, algo, archive, hist = (state["problem"], state["algorithm"], state["archive"],
                                    state["history"])
    gens = settings.gens if problem.n_var else 1
    bar = None
    if progress:
        from tqdm.auto import tqdm   # a widget in Jupyter, text on a terminal
        bar = tqdm(total=gens, initial=state["generation"], desc="search", unit="gen",
                   dynamic_ncols=True)
    try:
        batch = (settings.pop if algo is not None else 1) * problem.n_inner   # per generation
        while state["generation"] < gens and not (
                settings.evaluations and problem.n_designs + batch > settings.evaluations) \
                and not (time_limit_s is not None and time.perf_counter() - t0 > time_limit_s):
            if algo is None:
                parts = problem.evaluate_rows(np.zeros((1, 0)))[2]
            else:
                pop = algo.ask()
                algo.evaluator.eval(problem, pop)
                algo.tell(infills=pop)
                parts = problem.last or []
            for ds, F, G in parts:
                archive.add(ds, F, G)
            if hist["reference"] is None and len(archive.F):
                hist["reference"] = reference_point(archive.F)
            state["generation"] += 1
            hv = hypervolume(archive.F, hist["reference"])
            for k, v in (("generation", state["generation"]), ("hypervolume", hv),
                         ("evaluations", problem.n_designs), ("front_size", len(archive.F))):
                hist[k].append(v)
            if ckpt is not None:
                save_checkpoint(ckpt, *_checkpoint_record(state))
            if bar is not None:
                bar.update(1)
                bar.set_postfix(evals=problem.n_designs, hv=f"{hv:.4g}", front=len(archive.F))
            if on_generation is not None:
                on_generation(state["generation"])
    finally:
        if bar is not None:
            bar.close()
    if algo is not None and algo.pop is not None:
        px, pf, pcv = algo.pop.get("X"), algo.pop.get("F"), algo.pop.get("CV")
    else:
        px = pf = pcv = None
    ds = result_dataset(space, settings, archive, hist, px, pf, pcv, problem.n_designs)
    if getattr(space, "robust", None) and ds.sizes.get("design", 0):   # issue 14: P(non-dominated) of each Pareto design
        from explore.uncertainty.robust import add_nondominance
        ds = add_nondominance(ds, space)
    if out is not None:
        write_result(ds, out)
    return ds
