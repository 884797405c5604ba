"""Power: no double-counted host / NVSwitch / NIC power, and accelerators draw more than idle while waiting."""
import copy

import numpy as np
import pytest

import explore
from hwmodels import get_part
from explore.model.costs import WAIT_POWER_FRACTION_OF_TDP

DGX = [  # (accelerator, scale-up link, NIC link, published system power W, GPUs): DGX datasheets
    ("a100-sxm-80gb", "nvlink3", "ib-hdr-200", 6500.0, 8),
    ("h100-sxm-80gb", "nvlink4", "ib-ndr-400", 10200.0, 8),
]


@pytest.mark.parametrize("acc,su,nic,system_w,gpus", DGX)
def test_per_gpu_power_adds_up_to_the_dgx_system_power(acc, su, nic, system_w, gpus):
    """Host share + NVSwitch share + one NIC + GPU TDP = the DGX system power per GPU (1 %):
    each watt is charged once."""
    a, s, n = get_part("accelerators", acc), get_part("links", su), get_part("links", nic)
    total = a["host_power_w"] + s["power_w"] + n["power_w"] + a["tdp_w"]
    assert total == pytest.approx(system_w / gpus, rel=0.01)


def test_waiting_accelerators_draw_the_cited_waiting_power():
    sc = explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml")
    sc["system"]["scale_out"]["bandwidth_bps"] = [200e9, 20e9]     # the second waits on the network
    ds = explore.evaluate(sc)
    a = get_part("accelerators", "a100-sxm-80gb")
    wait_s = ds.step_time_s.values - ds.busy_time_s.values
    want = 1024 * (WAIT_POWER_FRACTION_OF_TDP * a["tdp_w"] - a["idle_power_w"]) * wait_s
    np.testing.assert_allclose(ds.energy_j_accelerators_waiting.values, want, rtol=1e-9)
    assert wait_s[1] > wait_s[0] and ds.energy_per_step_j.values[1] > ds.energy_per_step_j.values[0]
