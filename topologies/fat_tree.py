"""Closed-form size of a folded-Clos (fat-tree) scale-out fabric.

A T-tier fat-tree of radix-k switches with full bisection connects up to
2 (k/2)^T endpoints (Leiserson 1985; Al-Fares et al., SIGCOMM 2008 for the
3-tier k^3/4 case). With oversubscription o >= 1 at the leaf, the upper tiers
carry 1/o of the endpoint bandwidth. Port count:

    ports = N (1 + 2 (T - 1) / o),   switches = ports / k,

and every inter-switch link (N (T - 1) / o of them) plus every endpoint link
uses two transceivers (one per end).
"""
from __future__ import annotations

import numpy as np


def tiers(endpoints, radix):
    """Smallest T >= 1 with 2 (k/2)^T >= N (T = 1 for a single switch)."""
    n = np.maximum(np.asarray(endpoints, dtype=float), 1.0)
    k = np.asarray(radix, dtype=float)
    t = np.ceil(np.log(n / 2.0) / np.log(k / 2.0) - 1e-9)
    return np.where(n <= k, 1.0, np.maximum(t, 2.0))


def bill_of_materials(endpoints, radix, oversubscription=1.0):
    """Switches, switch ports, inter-switch links and transceivers of a fat-tree."""
    n = np.asarray(endpoints, dtype=float)
    o = np.asarray(oversubscription, dtype=float)
    t = tiers(n, radix)
    ports = n * (1.0 + 2.0 * (t - 1.0) / o)
    switches = np.ceil(ports / np.asarray(radix, dtype=float))
    links_up = n * (t - 1.0) / o
    transceivers = 2.0 * (n + links_up)
    return {"tiers": t, "switches": switches, "switch_ports": ports,
            "inter_switch_links": links_up, "transceivers": transceivers}
