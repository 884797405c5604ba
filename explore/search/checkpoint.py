"""Checkpoints of a search run: what is stored after every generation, and resuming.

The record holds the settings, the history, the Pareto archive and every design
evaluated (F and G per decision vector). The pymoo algorithm itself is never
stored: resuming sets it up from the seed and replays the recorded generations,
every evaluation served from the stored ones (no model call), then checks the
replayed population against the stored one. The file format (``.npz`` of plain
arrays + JSON + sha256 digest, never pickle) is in ``explore.search.results``.
"""
from __future__ import annotations

import numpy as np

from explore.search.problem import (SETTING_KEYS, SearchSettings, _fresh_state, row_keys)
from explore.search.variables import SpaceError


def _checkpoint_record(state: dict) -> tuple[dict, dict]:
    """(JSON record, arrays) of a run after a generation: settings, history, the archive
    and every design evaluated (the cache). The pymoo algorithm itself is not stored:
    resuming replays its generations from the seed, served from the cache."""
    problem, hist, algo = state["problem"], state["history"], state["algorithm"]
    settings = dict(state["settings"].__dict__)
    settings["reference"] = [float(x) for x in settings["reference"]]
    archive, arrays = state["archive"].state()
    ref = hist["reference"]
    meta = {"fingerprint": state["fingerprint"], "settings": settings,
            "generation": int(state["generation"]), "n_designs": int(problem.n_designs),
            "history": {"generation": [int(x) for x in hist["generation"]],
                        "hypervolume": [float(x) for x in hist["hypervolume"]],
                        "evaluations": [int(x) for x in hist["evaluations"]],
                        "front_size": [int(x) for x in hist["front_size"]],
                        "reference": None if ref is None else [float(x) for x in ref],
                        "x_names": list(hist["x_names"])},
            "archive": archive}
    keys = problem.cache.keys
    arrays["cache_x"] = (np.ascontiguousarray(keys).view(np.float64).reshape(len(keys), problem.n_var)
                         if problem.n_var else np.zeros((0, 0)))
    arrays["cache_f"], arrays["cache_g"] = problem.cache.F, problem.cache.G
    if algo is not None and algo.pop is not None:
        arrays["pop_x"] = np.asarray(algo.pop.get("X"), float)
    return meta, arrays


_RECORD = {"fingerprint": str, "settings": dict, "generation": int, "n_designs": int,
           "history": dict, "archive": dict}
_HISTORY = ("generation", "hypervolume", "evaluations", "front_size")


def read_checkpoint(ckpt) -> tuple[dict, dict]:
    """A checkpoint's (record, arrays), checked field by field; SpaceError names what is wrong."""
    from explore.search.results import CheckpointError, load_checkpoint
    where = f"{ckpt}: cannot resume"
    try:
        meta, arrays = load_checkpoint(ckpt)
    except CheckpointError as e:
        raise SpaceError(f"{where}: {e}; allowed: a checkpoint written by lightpath search "
                         f"(or delete it to start again)") from None
    for key, kind in _RECORD.items():
        if key not in meta:
            raise SpaceError(f"{where}: the checkpoint lacks {key!r}")
        if not isinstance(meta[key], kind) or isinstance(meta[key], bool):
            raise SpaceError(f"{where}: checkpoint {key!r} is a {type(meta[key]).__name__}; "
                             f"allowed: a {kind.__name__}")
    for key in _HISTORY:
        if not isinstance(meta["history"].get(key), list) or \
                len(meta["history"][key]) != meta["generation"]:
            raise SpaceError(f"{where}: checkpoint history.{key} is missing or not one value per "
                             f"generation ({meta['generation']})")
    for key in ("cache_x", "cache_f", "cache_g", "archive_F"):
        if key not in arrays:
            raise SpaceError(f"{where}: the checkpoint lacks the array {key!r}")
    return meta, arrays


def _settings_of(meta: dict) -> SearchSettings:
    raw = dict(meta["settings"])
    if set(raw) - set(SETTING_KEYS):
        raise ValueError(f"unknown settings {sorted(set(raw) - set(SETTING_KEYS))}")
    raw["reference"] = tuple(raw.get("reference", ()))
    return SearchSettings(**raw)


def _resume_state(space, settings: SearchSettings, ckpt) -> dict:
    """The state of the checkpointed run: archive, history and evaluations from the file;
    the pymoo algorithm (with its random state) by replaying the recorded generations
    from the seed, every design served from the stored evaluations, and checked
    against the stored population."""
    meta, arrays = read_checkpoint(ckpt)
    where = f"{ckpt}: cannot resume"
    try:
        was = _settings_of(meta)
    except (TypeError, ValueError) as e:
        raise SpaceError(f"{where}: checkpoint settings are not valid ({e})") from None
    for key, old, now in (("fingerprint", meta["fingerprint"], space.fingerprint),
                          ("seed", was.seed, settings.seed), ("pop", was.pop, settings.pop),
                          ("algorithm", was.algorithm, settings.algorithm),
                          ("plan", was.plan, settings.plan)):
        if old != now:
            raise SpaceError(f"{where}: {key} was {old!r}, now {now!r}; "
                             f"allowed: the same space file and settings")
    state = _fresh_state(space, settings)
    problem, algo = state["problem"], state["algorithm"]
    from explore.search.results import Archive, CheckpointError
    try:
        X, F, G = arrays["cache_x"], arrays["cache_f"], arrays["cache_g"]
        if X.shape[0] != F.shape[0] or F.shape[0] != G.shape[0] or \
                (problem.n_var and X.shape[1] != problem.n_var):
            raise ValueError("stored evaluations have inconsistent shapes")
        if len(X) and problem.n_var:
            problem.cache.add(row_keys(X), F.astype(float), G.astype(float))
        hist = meta["history"]
        state["history"] = {k: list(hist[k]) for k in _HISTORY} | {
            "reference": None if hist.get("reference") is None else np.asarray(hist["reference"], float),
            "x_names": list(hist.get("x_names", state["history"]["x_names"]))}
        state["archive"] = Archive.from_state(meta["archive"], arrays)
    except (KeyError, TypeError, ValueError, IndexError, CheckpointError) as e:
        raise SpaceError(f"{where}: damaged checkpoint ({type(e).__name__}: {e})") from None
    state["generation"] = meta["generation"]
    if algo is not None:
        for _ in range(meta["generation"]):
            pop = algo.ask()
            algo.evaluator.eval(problem, pop)
            algo.tell(infills=pop)
        if "pop_x" in arrays and not np.array_equal(algo.pop.get("X"), arrays["pop_x"]):
            raise SpaceError(f"{where}: replaying its {meta['generation']} generations did not "
                             f"reproduce the stored population (another pymoo version?); "
                             f"delete the checkpoint to start again")
    problem.n_designs = meta["n_designs"]
    problem.last = None
    return state


def checkpoint_settings(ckpt) -> SearchSettings | None:
    """The settings a checkpointed run was started with (None if unreadable)."""
    try:
        return _settings_of(read_checkpoint(ckpt)[0])
    except (SpaceError, TypeError, ValueError):
        return None
