"""Frontier rows under other shares of the EP all-to-all overlap's compute slowdown (docs/validation.md,
"How much do GEMMs slow down beside a communication kernel?").

The model charges ``moe.comm_sm_share`` (DeepEP's 20 SMs of the part's: 20/132 on H100 / H800, 20/148 on
B200 / GB200) of every second of hidden all-to-all (``moe_overlap.paired_layer_wall``). This script
re-evaluates the frontier rows with that share replaced by one value on every part, without changing the
shipped model: the shipped per-part share, 20/132 everywhere (``moe.COMM_SM_SHARE``, the share before it
was per part), the arXiv:2507.03114 mean (0.189) and maximum
(0.40, ``validation.FIT_BOUNDS["overlap_slowdown"]``), and the share that closes the Qwen3-235B
a2aoverlap row (bisected).

    python benchmarks/ep_overlap_share_sweep.py
"""
from __future__ import annotations

import numpy as np

from explore import validation, validation_frontier as vf
from explore.evaluate import evaluate
from explore.model import moe

A2A = "mcoremoe_h100_qwen3_235b_bf16_256_a2aoverlap"


SHIPPED = moe.comm_sm_share


def set_share(share):
    """One share on every part (None: the shipped per-part share)."""
    moe.comm_sm_share = SHIPPED if share is None else (lambda sm_count: np.full(np.shape(sm_count), share))


def main():
    cases = vf.load_cases()
    try:
        a2a_case = [c for c in cases if c[0] == A2A]
        lo, hi = 0.0, 1.0
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            set_share(mid)
            if vf.errors(a2a_case)[A2A] < 0:
                lo = mid
            else:
                hi = mid
        closing = 0.5 * (lo + hi)
        for share in (None, moe.COMM_SM_SHARE, 0.189, validation.FIT_BOUNDS["overlap_slowdown"][1], closing, 1.0):
            set_share(share)
            errs = vf.errors(cases)
            a = np.abs([e for r, e in errs.items() if r not in vf.EXCLUDED])
            dense = np.abs([e for r, e in errs.items() if r in vf.MBRIDGE_DENSE])
            label = "20/SMs (shipped)" if share is None else f"{share:.3f}"
            print(f"share {label}: asserted MAPE {100 * a.mean():.2f} % (max {100 * a.max():.2f} %), "
                  f"Megatron-Bridge dense {100 * dense.mean():.2f} %")
            for rid, e in errs.items():
                if rid not in vf.MBRIDGE_DENSE and rid not in vf.EXCLUDED:
                    print(f"    {rid:<46} {100 * e:+7.2f} %")
    finally:
        set_share(None)


if __name__ == "__main__":
    main()
