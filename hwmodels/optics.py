"""Electrical and optical link technologies, with optical energy per bit from a link budget.

A link end (one transceiver, one co-packaged engine, one optical-I/O port or one
copper cable end) spends, per bit,

    E_bit = E_dsp + E_analog + [optical] * P_laser_elec / R_lane

where the laser must deliver the receiver sensitivity plus the path's losses
and a margin (all in dB, powers in dBm, per lane):

    loss_db   = coupler + modulator + splitter_excess + connectors * connector
                + fibre_m * fibre_db_per_m + ocs_hops * ocs_insertion_loss_db
    P_opt_w   = 1e-3 * 10 ** ((sensitivity_dbm + margin_db + loss_db) / 10)
    P_laser_elec = P_opt_w / wall_plug_efficiency

(a laser shared by ``lanes_per_laser`` lanes is charged per lane: its ideal
1:n split is exactly that share), so every optical switch a path traverses
raises the laser power needed; the link closes only while
``lanes_per_laser * P_opt_w <= laser_max_power_w``. Copper has no laser
and a reach limit of a few metres at 100-200 Gb/s per lane (docs/reference/hardware.md sec.4
[N3]: 800G passive DAC 0.5-2 m). Parameters and their sources are in
``hwmodels/catalog/optics.toml``; the link-budget form is the textbook
power budget (e.g. IEEE 802.3 clause 124 channel budgets, docs/reference/hardware.md sec.5 [P7]).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from hwmodels.parts import catalog_dataclass, get_part

TECHNOLOGIES = ("copper", "pluggable", "lpo", "cpo", "optical-io")
"""Scenario ``optics`` choices, each an id in ``catalog/optics.toml``; integer code = index."""


@dataclass(frozen=True)
class LinkTech:
    """One link technology's parameters (arrays broadcast; SI units, dB and dBm where named)."""
    optical: np.ndarray
    lane_rate_bps: np.ndarray
    reach_m: np.ndarray
    dsp_energy_per_bit_j: np.ndarray
    analog_energy_per_bit_j: np.ndarray
    receiver_sensitivity_dbm: np.ndarray
    link_margin_db: np.ndarray
    coupler_loss_db: np.ndarray
    modulator_loss_db: np.ndarray
    splitter_excess_loss_db: np.ndarray
    lanes_per_laser: np.ndarray
    connectors: np.ndarray
    connector_loss_db: np.ndarray
    fibre_loss_db_per_m: np.ndarray
    laser_wall_plug_efficiency: np.ndarray
    laser_max_power_w: np.ndarray
    cost_usd_per_bps: np.ndarray
    latency_s: np.ndarray
    fit: np.ndarray

    @classmethod
    def from_catalog(cls, ids) -> "LinkTech":
        """Vectorised over an array of optics ids (unique ids looked up once)."""
        return catalog_dataclass(cls, "optics", ids)

    @classmethod
    def of(cls, pid: str) -> "LinkTech":
        e = get_part("optics", pid)
        return cls(**{f.name: np.asarray(float(e[f.name])) for f in fields(cls)})


def path_loss_db(t: LinkTech, fibre_m, ocs_hops=0.0, ocs_insertion_loss_db=0.0):
    """Optical path loss (dB) from laser to receiver: fixed losses + fibre + each OCS traversed."""
    return (t.coupler_loss_db + t.modulator_loss_db + t.splitter_excess_loss_db
            + t.connectors * t.connector_loss_db
            + np.asarray(fibre_m, dtype=float) * t.fibre_loss_db_per_m
            + np.asarray(ocs_hops, dtype=float) * np.asarray(ocs_insertion_loss_db, dtype=float))


def laser_power_w(t: LinkTech, fibre_m, ocs_hops=0.0, ocs_insertion_loss_db=0.0):
    """Optical laser power per lane (W) that meets the receiver sensitivity: 1 mW * 10^((S + M + L)/10)."""
    dbm = t.receiver_sensitivity_dbm + t.link_margin_db + path_loss_db(t, fibre_m, ocs_hops,
                                                                       ocs_insertion_loss_db)
    return np.where(t.optical > 0, 1e-3 * 10.0 ** (dbm / 10.0), 0.0)


def budget_margin_db(t: LinkTech, fibre_m, ocs_hops=0.0, ocs_insertion_loss_db=0.0):
    """dB of headroom between the laser's maximum and the power the path needs (>= 0: link closes)."""
    need = t.lanes_per_laser * laser_power_w(t, fibre_m, ocs_hops, ocs_insertion_loss_db)
    ratio = np.maximum(t.laser_max_power_w, 1e-30) / np.maximum(need, 1e-30)
    return np.where(t.optical > 0, 10.0 * np.log10(ratio), np.inf)


def energy_per_bit_j(t: LinkTech, fibre_m, ocs_hops=0.0, ocs_insertion_loss_db=0.0):
    """Energy per bit of one link end (J/b): DSP + analog (driver, TIA, SerDes) + laser wall-plug / lane rate."""
    laser = laser_power_w(t, fibre_m, ocs_hops, ocs_insertion_loss_db) / t.laser_wall_plug_efficiency
    return t.dsp_energy_per_bit_j + t.analog_energy_per_bit_j + laser / t.lane_rate_bps


def port_power_w(t: LinkTech, port_bandwidth_bps, fibre_m, ocs_hops=0.0, ocs_insertion_loss_db=0.0):
    """Power of one link end carrying ``port_bandwidth_bps`` (W) = E_bit * rate."""
    return energy_per_bit_j(t, fibre_m, ocs_hops, ocs_insertion_loss_db) * port_bandwidth_bps


def port_cost_usd(t: LinkTech, port_bandwidth_bps):
    """Cost of one link end (USD) = cost per b/s * rate."""
    return t.cost_usd_per_bps * np.asarray(port_bandwidth_bps, dtype=float)


def within_reach(t: LinkTech, length_m):
    """True where a link of ``length_m`` is within the technology's reach."""
    return np.asarray(length_m, dtype=float) <= t.reach_m
