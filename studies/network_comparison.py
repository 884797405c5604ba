"""175B-class training on 4,096 H100: nine scale-out networks side by side.

Run ``python studies/network_comparison.py`` (the CLI's ``evaluate`` takes one
design; this scenario holds nine as arrays). One call to
``explore.evaluate`` evaluates all designs as a batch; the table gives step
time, energy and cost per token, the network's exposed communication times and
its capex and power by component.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import explore

SCENARIO = Path(__file__).parent / "scenarios" / "network-comparison-175b-4096.toml"
LABELS = ("fat-tree + pluggable", "fat-tree + CPO", "rail-optimized", "dragonfly", "torus 8x8x8",
          "OCS torus (TPU v4 style)", "OCS circuits per job", "OCS per phase, 10 s MEMS",
          "OCS per phase, 1 us switch")
COLUMNS = (("step_time_s", "step s", 1.0), ("mfu", "MFU", 1.0),
           ("energy_per_token_j", "J/token", 1.0), ("cost_per_token_usd", "USD/Mtoken", 1e6),
           ("time_s_dp_comm", "DP exposed s", 1.0), ("time_s_pp_p2p", "PP p2p s", 1.0),
           ("network_reconfig_s_per_step", "reconfig s/step", 1.0),
           ("capex_usd", "capex M$", 1e-6), ("capex_usd_switches", "switch M$", 1e-6),
           ("capex_usd_transceivers", "optics M$", 1e-6), ("capex_usd_ocs", "OCS M$", 1e-6),
           ("power_w_switches", "switch kW", 1e-3), ("power_w_transceivers", "optics kW", 1e-3),
           ("power_w_ocs", "OCS kW", 1e-3))


def run(path=SCENARIO):
    return explore.evaluate(explore.load_scenario(path))


def table(ds) -> str:
    head = "design".ljust(28) + "".join(h.rjust(14) for _, h, _ in COLUMNS)
    rows = [head]
    for i in range(ds.sizes["design"]):
        label = LABELS[i] if i < len(LABELS) else str(i)
        vals = "".join(f"{float(ds[k].values[i]) * s:14.4g}" for k, _, s in COLUMNS)
        rows.append(label.ljust(28) + vals)
    return "\n".join(rows)


def main() -> None:
    ds = run()
    assert bool(np.all(ds["valid"].values)), ds["reason"].values
    print(ds.attrs.get("scenario_name", ""))
    print(table(ds))


if __name__ == "__main__":
    main()
