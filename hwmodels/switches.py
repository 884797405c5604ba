"""Packet switches and optical circuit switches (MEMS OCS, AWGR, fast optical switches).

A packet switch of radix k and port rate R has capacity k R and spends
``power_w / (k R)`` joules per bit forwarded (optics excluded; the link ends are
``hwmodels.optics``). A circuit switch forwards light without conversion: it
adds ``insertion_loss_db`` to every optical path through it (which raises the
laser power, ``hwmodels.optics.laser_power_w``), draws a small fixed power, and
needs ``reconfig_s`` to move circuits. Parameters are in
``catalog/switches.toml`` and ``catalog/ocs.toml`` with their sources; both
classes may also be built inline (a parameterised fast optical switch is just
a ``CircuitSwitch`` with ns-us ``reconfig_s``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hwmodels.parts import catalog_dataclass


@dataclass(frozen=True)
class PacketSwitch:
    radix: np.ndarray
    port_bandwidth_bps: np.ndarray
    power_w: np.ndarray
    cost_usd: np.ndarray
    latency_s: np.ndarray

    @classmethod
    def from_catalog(cls, ids) -> "PacketSwitch":
        return catalog_dataclass(cls, "switches", ids)

    @property
    def capacity_bps(self):
        """Switching capacity (b/s, one direction) = radix * port rate."""
        return self.radix * self.port_bandwidth_bps

    @property
    def energy_per_bit_j(self):
        """Energy per bit switched (J/b) = power / capacity."""
        return self.power_w / self.capacity_bps


@dataclass(frozen=True)
class CircuitSwitch:
    radix: np.ndarray
    insertion_loss_db: np.ndarray
    reconfig_s: np.ndarray
    power_w: np.ndarray
    cost_usd: np.ndarray
    fit: np.ndarray

    @classmethod
    def from_catalog(cls, ids) -> "CircuitSwitch":
        return catalog_dataclass(cls, "ocs", ids)

    @property
    def power_w_per_port(self):
        return self.power_w / self.radix

    @property
    def cost_usd_per_port(self):
        return self.cost_usd / self.radix


def switches_for_ports(ports, radix):
    """Switches needed to offer ``ports`` ports of radix-k switches: ceil(ports / k)."""
    return np.ceil(np.asarray(ports, dtype=float) / np.asarray(radix, dtype=float))


def ports_per_endpoint(endpoint_bandwidth_bps, port_bandwidth_bps):
    """Switch ports an endpoint of a given rate occupies: ceil(B_endpoint / B_port), at least 1."""
    return np.maximum(np.ceil(np.asarray(endpoint_bandwidth_bps, dtype=float)
                              / np.asarray(port_bandwidth_bps, dtype=float) - 1e-9), 1.0)
