"""An optical path whose link budget does not close marks the design invalid."""
import numpy as np

import explore


def test_lossy_ocs_path_fails_link_budget():
    sc = explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml")
    sc["system"]["scale_out"].update(topology="ocs-reconfigurable", optics="lpo",
                                     ocs_insertion_loss_db=np.array([1.0, 20.0]))
    ds = explore.evaluate(sc, keep_invalid=True)   # the failing design's raw margin
    margin = ds["network_link_budget_margin_db"].values
    assert margin[0] > 0 > margin[1]
    assert ds["valid"].values.tolist() == [True, False]
    assert ds["reason"].values[1].startswith("optics: link budget")
    assert ds["network_link_budget_margin_db"].attrs["units"] == "dB"
