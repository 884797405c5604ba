"""Training energy against published figures (tests/validation/energy_runs.csv; assumptions
in explore/validation_energy.py). The published figures are GPU-hours x TDP (x PUE)
estimates by their authors, so this checks the modelled GPU-hours and the convention."""
import numpy as np

from explore.validation_energy import compare


def test_energy_within_15_percent_of_published():
    res = compare()
    err = np.abs([r["error"] for r in res])
    assert len(res) >= 8 and all(r["valid"] for r in res)
    # at the time of writing: LLaMA 7B -2.8 %, 13B +7.4 %, 33B +0.6 %, Llama 2 70B -1.0 %
    assert (err <= 0.15).sum() >= 3
    assert err.mean() <= 0.15                # MAPE over all runs (10.7 %)
    assert err.max() <= 0.26                 # worst: Llama 2 13B (-23.2 %)
    # lightpath's facility energy counts hosts, network, idle and PUE: above the GPU-only convention
    assert all(r["facility_j_per_token"] > r["predicted_j_per_token"] for r in res)
