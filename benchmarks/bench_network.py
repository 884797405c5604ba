"""Throughput of the network cost model alone (topologies.bom.network_bom), vectorised.

Random designs over every family, optics technology, size, radix, oversubscription
and OCS part; prints designs per second (target >= 1e6/s). Usage:
``python benchmarks/bench_network.py [n_designs] [repeats]``.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from hwmodels.parts import lookup
from topologies import bom
from topologies.network import FAMILIES, NetworkSpec, balanced_dims
from hwmodels.optics import TECHNOLOGIES


def designs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    su = rng.choice([1.0, 4.0, 8.0, 72.0], n)
    devices = su * rng.choice([64.0, 128.0, 512.0, 2048.0], n)
    nodes = devices / su
    ocs_ids = rng.choice(["palomar-136", "calient-s320", "fast-soa-64", "awgr-32"], n)
    sw_ids = rng.choice(["quantum-2-qm9700", "tomahawk-5-64x800g", "quantum-x800-q3400"], n)
    net = NetworkSpec(
        family=rng.integers(0, len(FAMILIES), n), optics=rng.integers(0, len(TECHNOLOGIES), n),
        torus_dims=tuple(balanced_dims(nodes)), cube_dim=rng.choice([2.0, 4.0], n),
        ocs_radix=lookup("ocs", ocs_ids, "radix"), ocs_insertion_loss_db=lookup("ocs", ocs_ids, "insertion_loss_db"),
        ocs_reconfig_s=lookup("ocs", ocs_ids, "reconfig_s"), ocs_power_w=lookup("ocs", ocs_ids, "power_w"),
        ocs_cost_usd=lookup("ocs", ocs_ids, "cost_usd"), reconfig_policy=rng.integers(0, 3, n),
        reconfigs_per_step=np.ones(n), dp_bytes_per_node=np.ones(n), pp_bytes_per_node=np.ones(n),
        transceiver_power_w=np.full(n, np.nan), transceiver_cost_usd=np.full(n, np.nan))
    args = (devices, su, rng.choice([1.0, 2.0, 6.0], n), rng.choice([200e9, 400e9, 800e9], n),
            lookup("switches", sw_ids, "radix"), lookup("switches", sw_ids, "port_bandwidth_bps"),
            rng.choice([1.0, 2.0, 3.0], n), lookup("switches", sw_ids, "power_w"),
            lookup("switches", sw_ids, "cost_usd"))
    return net, args


def main() -> None:
    n = int(float(sys.argv[1])) if len(sys.argv) > 1 else 1_000_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    net, args = designs(n)
    bom.network_bom(net, *args)  # warm the technology table and catalog cache
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        counts, capex, power = bom.network_bom(net, *args)
        best = min(best, time.perf_counter() - t0)
    total = sum(capex.values())
    assert np.isfinite(total).all()
    print(f"network cost model: {n:,} designs in {best:.3f} s = {n / best:,.0f} designs/s "
          f"(families {len(FAMILIES)}, optics {len(TECHNOLOGIES)}; mean capex {total.mean():.3g} USD)")


if __name__ == "__main__":
    main()
