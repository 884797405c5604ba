"""Units of lightpath results, parseable by pint.

Every ``units`` attribute of an ``explore.evaluate`` result, search result or sweep
store parses with ``explore.units.registry()``: pint's default registry plus
``token`` (a trained token), ``FLOP`` (one floating-point operation), ``USD``
(US dollar, its own dimension: no exchange rates), ``FIT`` (failures in time,
one failure per 1e9 device-hours, JEDEC JESD85) and ``kgCO2e`` (a kilogram of
CO2-equivalent emissions, its own dimension: not convertible to a mass of anything).

```python
from explore.units import registry
q = ds["energy_per_token_j"].values * registry().parse_units(ds["energy_per_token_j"].attrs["units"])
```
"""
from __future__ import annotations

import functools

import pint

DEFINITIONS = (
    "token = [token]",
    "FLOP = [floating_point_operation]",
    "USD = [currency]",
    "FIT = 1 / (1e9 * hour)",
    "kgCO2e = [co2_equivalent]",
)


@functools.cache
def registry() -> pint.UnitRegistry:
    """A pint registry that knows token, FLOP, USD and FIT (built once)."""
    ureg = pint.UnitRegistry()
    for d in DEFINITIONS:
        ureg.define(d)
    return ureg


# unit of a scenario input from the unit in its name (STYLE: SI units, the unit in the name)
_SUFFIX_UNITS = (
    ("_bytes_per_s", "B/s"), ("_usd_per_kwh", "USD/kWh"), ("_per_device_hour", "1/h"),
    ("_per_hour", "1/h"), ("_bps_per_device", "bit/s"), ("_bps", "bit/s"), ("_bytes", "B"),
    ("_mm2", "mm**2"), ("_usd", "USD"), ("_db", "dB"), ("_hz", "Hz"), ("_years", "year"),
    ("_w", "W"), ("_s", "s"), ("_j", "J"), ("_m", "m"),
)


def input_units(path: str, kind: str) -> str | None:
    """Units of a scenario field (``None`` for choices, ids and booleans)."""
    if kind not in ("int", "float"):
        return None
    key = path.rpartition(".")[2]
    if key.startswith("peak_flops"):
        return "FLOP/s"
    if key == "tokens":
        return "token"
    for suffix, unit in _SUFFIX_UNITS:
        if key.endswith(suffix):
            return unit
    return "1"
