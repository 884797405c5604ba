"""Frontier rows under other shares of the EP all-to-all overlap's compute slowdown (docs/validation.md,
"How much do GEMMs slow down beside a communication kernel?").

The model charges ``moe.COMM_SM_SHARE`` (20/132, DeepEP's 20 SMs) of every second of hidden all-to-all
(``moe_overlap.paired_layer_wall``). This script re-evaluates the frontier rows with that share replaced,
without changing the shipped model: the shipped share, the arXiv:2507.03114 mean (0.189) and maximum
(0.40, ``validation.FIT_BOUNDS["overlap_slowdown"]``), and the share that closes the Qwen3-235B
a2aoverlap row (bisected).

    python benchmarks/ep_overlap_share_sweep.py
"""
from __future__ import annotations

import numpy as np

from explore import validation, validation_frontier as vf
from explore.evaluate import evaluate
from explore.model import moe, moe_overlap as mo

A2A = "mcoremoe_h100_qwen3_235b_bf16_256_a2aoverlap"


def set_share(share):
    d = list(mo.paired_layer_wall.__defaults__)
    d[-1] = share
    mo.paired_layer_wall.__defaults__ = tuple(d)


def main():
    cases = vf.load_cases()
    shipped = mo.paired_layer_wall.__defaults__
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
        for share in (moe.COMM_SM_SHARE, 0.189, validation.FIT_BOUNDS["overlap_slowdown"][1], closing, 1.0):
            set_share(share)
            errs = vf.errors(cases)
            a = np.abs([e for r, e in errs.items() if r not in vf.EXCLUDED])
            dense = np.abs([e for r, e in errs.items() if r in vf.MBRIDGE_DENSE])
            print(f"share {share:.3f}: asserted MAPE {100 * a.mean():.2f} % (max {100 * a.max():.2f} %), "
                  f"Megatron-Bridge dense {100 * dense.mean():.2f} %")
            for rid, e in errs.items():
                if rid not in vf.MBRIDGE_DENSE and rid not in vf.EXCLUDED:
                    print(f"    {rid:<46} {100 * e:+7.2f} %")
    finally:
        mo.paired_layer_wall.__defaults__ = shipped


if __name__ == "__main__":
    main()
