"""NetworkSpec: the scale-out fabric's family, parameters and parts as arrays (one per design).

Built by ``explore.model.system.build_system`` from the scenario's ``[system.scale_out]``
table; read by the step model's ``Fabric`` (placement, contention) and by the
cost model (``topologies.bom``). Categorical choices are integer codes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hwmodels.optics import TECHNOLOGIES

FAMILIES = ("fat-tree", "rail-optimized", "torus", "dragonfly", "ocs-torus", "ocs-reconfigurable")
FAT_TREE, RAIL, TORUS, DRAGONFLY, OCS_TORUS, OCS_RECONF = range(len(FAMILIES))


def codes(labels, choices) -> np.ndarray:
    """Integer codes of an array of labels (all labels already validated)."""
    lab = np.asarray(labels).astype(str)
    out = np.zeros(lab.shape, dtype=np.int64)
    for i, c in enumerate(choices):
        out[lab == c] = i
    return out


def balanced_dims(nodes, ndims=3):
    """Near-cubic torus dimensions with product == nodes (x <= y <= z, each a divisor), vectorised."""
    import pandas as pd
    n_all = np.asarray(nodes, dtype=float)
    # few distinct node counts: work on those (pandas' hash labelling, linear time: the sorted
    # values and labels of np.unique(return_inverse=True), a third of its time on 57,283 designs)
    inv, n = pd.factorize(n_all.ravel(), sort=True, use_na_sentinel=False)
    dims = []
    rest = n.copy()
    for k in range(ndims, 1, -1):
        target = np.floor(rest ** (1.0 / k) + 1e-9)
        best = np.ones_like(rest)
        for c in range(1, int(np.max(target)) + 1):
            ok = (np.mod(rest, c) == 0) & (c <= target)
            best = np.where(ok, float(c), best)
        dims.append(best)
        rest = rest / best
    dims.append(rest)
    return [d[inv].reshape(n_all.shape) for d in dims]


@dataclass(frozen=True)
class NetworkSpec:
    family: np.ndarray                  # code into FAMILIES
    optics: np.ndarray                  # code into hwmodels.optics.TECHNOLOGIES
    torus_dims: tuple                   # three arrays (scale-up nodes per dimension)
    cube_dim: np.ndarray                # ocs-torus cube edge (nodes)
    ocs_radix: np.ndarray
    ocs_insertion_loss_db: np.ndarray
    ocs_reconfig_s: np.ndarray
    ocs_power_w: np.ndarray
    ocs_cost_usd: np.ndarray
    reconfig_policy: np.ndarray         # code into topologies.reconfig.POLICIES
    reconfigs_per_step: np.ndarray
    dp_bytes_per_node: np.ndarray       # plan traffic per step per scale-up node (circuit planning)
    pp_bytes_per_node: np.ndarray
    transceiver_power_w: np.ndarray     # NaN: derived from the optics link budget
    transceiver_cost_usd: np.ndarray
    ocs_fit: np.ndarray = 0.0           # failures per 1e9 device-hours of one OCS
    global_link_fraction: np.ndarray = 1.0  # dragonfly: populated global ports / the balanced a h

    @property
    def optics_labels(self):
        return np.asarray(TECHNOLOGIES)[self.optics]
