"""Keep freed array memory in the process for reuse (glibc malloc), instead of returning it.

A batch evaluation allocates a few hundred temporary arrays of the batch size (0.1-1 MB
each). glibc serves blocks above its mmap threshold (128 kB, raised dynamically) with
fresh ``mmap`` pages and trims freed heap memory above 128 kB back to the system, so each
new array touches new pages and pays a page fault per 4 kB page: measured on the 2-core
development machine, this was ~25 % of a 100,000-design ``explore.evaluate`` (145 -> 108 ms
CPU with the settings below; a compiled select of 110,592 elements: 0.5 ms with fresh
pages, 0.1 ms with reused ones). ``keep_freed_memory`` sets ``M_MMAP_THRESHOLD`` to 32 MB
(glibc's largest on 64-bit) and ``M_TRIM_THRESHOLD`` to 256 MB with ``mallopt(3)``, once
per process; the resident size then stays near the process's peak instead of shrinking
between batches. Results do not change.

Opt-in, as it changes malloc for the whole process (a library should not on import): call
``keep_freed_memory()`` or set ``LIGHTPATH_MALLOC=reuse`` (applied when ``explore.evaluate``
is imported); ``LIGHTPATH_MALLOC=default`` makes ``keep_freed_memory`` a no-op.
``benchmarks/bench_evaluate.py`` applies it unless ``--default-malloc``. On a system without
glibc nothing happens.
"""
from __future__ import annotations

import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 256 << 20
_done = False


def keep_freed_memory() -> bool:
    """Apply the settings above (idempotent); True if glibc accepted them."""
    global _done
    if _done:
        return True
    if os.environ.get("LIGHTPATH_MALLOC", "").lower() == "default":
        return False
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        ok = (libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
              and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1)
    except (OSError, AttributeError):
        return False
    _done = ok
    return ok
