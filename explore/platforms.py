"""Shipped scale-up platforms: which scale-up fabric and domain sizes each accelerator
really comes with (``explore/data/platforms.toml``, one source per entry).

Design spaces with ``[couplings] platforms = "shipped"`` make every other pairing an
invalid design; figures draw such what-if designs hollow.
"""
from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

import numpy as np

PATH = Path(__file__).parent / "data" / "platforms.toml"


@lru_cache(maxsize=1)
def platforms() -> dict:
    """accelerator id -> {"links": [...], "sizes": [...], "source": str, optional bandwidth_bps}."""
    with open(PATH, "rb") as f:
        return tomllib.load(f)


def whatif(accelerator, link=None, size=None) -> np.ndarray:
    """True where (accelerator, scale-up link, domain size) is not a shipped platform.

    Accelerators missing from the table (inline parametric designs) are never flagged."""
    table = platforms()
    acc = np.atleast_1d(np.asarray(accelerator).astype(str))
    out = np.zeros(acc.shape, bool)
    lk = None if link is None else np.broadcast_to(np.asarray(link).astype(str), acc.shape)
    sz = None if size is None else np.broadcast_to(np.asarray(size), acc.shape)
    for name, spec in table.items():
        m = acc == name
        if lk is not None:
            out |= m & ~np.isin(lk, spec["links"])
        if sz is not None:
            out |= m & ~np.isin(sz, spec["sizes"])
    return out
