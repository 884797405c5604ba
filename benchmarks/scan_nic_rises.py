"""Scan random oversubscribed fat-tree designs at 0.5 NIC per device for steps that twice the NICs
lengthen (issue 10; docs/validation.md "Where the model is still wrong": "Monotone in every network resource").

Designs are drawn by the network property tests' strategy (tests/explore/network_designs.net_rows),
then set to a fat-tree at 0.5 NIC per device and 2:1 or 4:1 oversubscription; each is evaluated at
0.5 and 1 NIC in one batched call per model and seed. Prints the rises, how many fall in
network_designs.nic_exception, and their largest size.

    PYTHONPATH=$PWD python benchmarks/scan_nic_rises.py --seeds 0 1 2 --per 4000
"""
import argparse
import random
import sys
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "explore"))
import network_designs as nd

SO = "system.scale_out."


def draw_rows(moe, n, s):
    """``n`` designs from net_rows, drawn by hypothesis under seed ``s`` (generation only)."""
    rows = []

    @seed(s)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(nd.net_rows(moe))
    def collect(row):
        rows.append(row)

    collect()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--per", type=int, default=4000, help="designs per model and seed")
    args = ap.parse_args()
    total, rises = 0, []
    for s in args.seeds:
        rng = random.Random(s)
        for model in sorted(nd.MODELS):
            rows = draw_rows(model == "mixtral-8x7b", args.per, s)
            for r in rows:
                r.update({SO + "topology": "fat-tree", SO + "nics_per_device": 0.5,
                          SO + "oversubscription": rng.choice([2.0, 4.0])})
            variants = [v for r in rows for v in (r, {**r, SO + "nics_per_device": 1.0})]
            t = nd._evaluate_rows(model, variants)["step_time_s"].values.reshape(-1, 2)
            ok = np.isfinite(t).all(axis=1)
            bad = np.flatnonzero(ok & (t[:, 1] > t[:, 0] * (1 + 1e-9)))
            total += int(ok.sum())
            rises += [(t[i, 1] / t[i, 0] - 1, nd.NIC_EXCEPTION(rows[i]), rows[i]) for i in bad]
            print(f"seed {s} {model}: {int(ok.sum())} designs, {len(bad)} rises", flush=True)
    inside = sum(e for _, e, _ in rises)
    print(f"{total} designs: {len(rises)} steps longer at twice the NICs, {inside} inside nic_exception"
          + (f", largest +{100 * max(x for x, _, _ in rises):.1f} %" if rises else ""))
    for x, e, r in sorted(rises, key=lambda z: -z[0])[:5]:
        print(f"  +{100 * x:.2f} % {'(in class)' if e else '(OUTSIDE)'}: {r['system.devices']} devices, "
              f"{r[SO + 'oversubscription']}:1, tp {r['parallelism.tp']} pp {r['parallelism.pp']} "
              f"dp {r['parallelism.dp']} cp {r['parallelism.cp']} ep {r['parallelism.ep']} zero {r['parallelism.zero']}")


if __name__ == "__main__":
    main()
