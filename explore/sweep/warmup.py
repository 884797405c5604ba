"""Worker preload: the evaluation stack loaded once when a sweep worker starts, not in its first chunk.

A fresh process spends ~2-3 s (2-core machine, loaded) on its first evaluation of a
long batch: importing numba and loading the cached compiled select
(``hwmodels.select``, ``explore.model.cardinality``), plus the model's imports. ``explore.sweep.local_cluster``
preloads this module into each worker (dask's ``preload``), so that happens while the
cluster starts; for ``dask worker`` add ``--preload explore.sweep.warmup``.
"""
from __future__ import annotations


def warm() -> None:
    import numpy as np

    import explore.evaluate  # noqa: F401  (the model, catalogs and xarray)
    import explore.sweep  # noqa: F401
    from explore.model.cardinality import codes
    from hwmodels.select import FAST_MIN, where
    where(np.zeros(FAST_MIN, dtype=bool), np.zeros(FAST_MIN), 1.0)   # numba + the cached kernels
    for a in (np.resize(np.array(["ab", "c"]), FAST_MIN),          # the column scan in 8-byte words
              np.resize(np.array(["abc", "d"]), FAST_MIN)):        # and in 4-byte words
        codes(a)


def dask_setup(worker=None) -> None:
    """dask's preload hook (runs in the worker process at start-up). A failure only warns: the
    worker then loads the same things in its first chunk (and reports any real error there)."""
    try:
        warm()
    except Exception as e:     # noqa: BLE001 - never stop a worker from starting
        import warnings
        warnings.warn(f"explore.sweep.warmup: {type(e).__name__}: {e}", RuntimeWarning)
