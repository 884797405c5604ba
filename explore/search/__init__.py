"""Design spaces and multi-objective search over them.

``space`` (a base scenario plus variables, derived fields, couplings, constraints and
objectives), ``variables`` and ``expression`` (its parts), ``problem`` (the pymoo
problem and the run), ``algorithms`` (the pymoo algorithms offered, mixed-integer
operators), ``checkpoint`` (what a checkpoint holds, resuming), ``results`` (archive,
hypervolume, NetCDF results, the checkpoint file format) and ``plot`` (the
Pareto-front figure).
"""
from __future__ import annotations

import os

from explore.search.checkpoint import checkpoint_settings
from explore.search.problem import ALGORITHMS, SearchSettings, run_search, settings_for
from explore.search.results import read_result
from explore.search.space import Space, SpaceError, load_space


def search(space, out=None, *, resume: bool = False, progress: bool = False, **settings):
    """Search a design space; returns the result ``xarray.Dataset`` (written to ``out`` if given).

    ``space`` is a space file, a dict or a loaded ``Space``; ``settings`` override its
    ``[search]`` table (``algorithm``, ``pop``, ``gens``, ``seed``, ``evaluations``,
    ``plan``, ``reference``). With ``out``, a checkpoint ``out + ".ckpt"`` is written
    after every generation; with ``resume=True`` an interrupted run continues from it
    with its own settings and ends identical to an uninterrupted run. Bad settings or
    an ``out`` that is a directory, in a missing folder or the space file itself raise
    ``SpaceError`` before any work."""
    from explore.search.results import check_outputs
    inputs = [space] if isinstance(space, (str, os.PathLike)) else [getattr(space, "path", None)]
    if isinstance(space, (str, os.PathLike, dict)):
        space = load_space(space)
    if out is not None:
        check_outputs(inputs, out)
    base = None
    if resume and out is not None:
        from explore.search.results import checkpoint_path
        if checkpoint_path(out).exists():
            base = checkpoint_settings(checkpoint_path(out))
    return run_search(space, settings_for(space, base, **settings), out=out, resume=resume,
                      progress=progress)


__all__ = ["search", "load_space", "read_result", "run_search", "settings_for", "Space",
           "SpaceError", "SearchSettings", "ALGORITHMS"]
