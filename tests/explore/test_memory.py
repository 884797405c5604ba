"""Activation memory in flight per pipeline stage, and published plans that must fit in 80 GB."""
import copy

import numpy as np
import pytest

import explore
from explore.model import memory


def _one_f_one_b_peak(p, stage, m):
    """Peak number of forwards whose backward has not run yet on ``stage``, by stepping through
    the non-interleaved 1F1B order (warm-up forwards, then one forward / one backward pairs,
    then the cool-down backwards; Narayanan et al. 2021, Fig. 4 top)."""
    warm = min(p - stage - 1, m)
    order = ["F"] * warm
    for _ in range(m - warm):
        order += ["F", "B"]
    order += ["B"] * warm
    live = peak = 0
    for op in order:
        live += 1 if op == "F" else -1
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize("p", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("m", [1, 3, 8, 64])
def test_1f1b_in_flight_matches_the_schedule(p, m):
    for stage in range(p):
        got = float(memory.in_flight(np.float64(p), np.float64(1), np.float64(m), np.float64(stage)))
        assert got == _one_f_one_b_peak(p, stage, m), (p, m, stage)


def test_interleaved_first_stage_matches_korthikanti():
    """Korthikanti et al. 2022 Sec. 4.2.3: the first stage of an interleaved schedule holds
    p (1 + (p - 1) / (p v)) microbatches' worth of its layers."""
    for p, v in [(8, 2), (16, 3), (4, 4)]:
        want = p * (1 + (p - 1) / (p * v))
        assert float(memory.in_flight(np.float64(p), np.float64(v), np.float64(1e6), 0.0)) == pytest.approx(want)


def test_stage_layout_llama3():
    """126 layers on 16 stages: 7 on the first and last, 8 in the middle (Dubey et al. 2024)."""
    first, full, last = memory.stage_layout(np.float64(126), np.float64(16))
    assert (first, full, last) == (7, 8, 7)
    assert memory.stage_layout(np.float64(96), np.float64(8)) == (12, 12, 12)


def llama3_405b():
    """Llama 3 405B pre-training plan (Dubey et al. 2024, Table 4 and Sec. 3.3.2): 16,384 H100,
    tp 8, cp 1, pp 16, dp 128, 8,192-token sequences, 16M-token batches (2,048 sequences);
    FSDP shards gradients and optimizer states but keeps weights gathered (ZeRO-2 memory)."""
    return {"name": "llama3-405b", "model": {"preset": "llama3-405b"},
            "training": {"global_batch": 2048, "precision": "bf16", "flash_attention": True},
            "parallelism": {"tp": 8, "pp": 16, "dp": 128, "microbatch": 1, "zero": 2,
                            "recompute": "none", "sequence_parallel": True},
            "system": {"accelerator": "h100-sxm-80gb", "devices": 16384,
                       "scale_up": {"size": 8, "link": "nvlink4"},
                       "scale_out": {"topology": "fat-tree", "link": "roce-400"}}}


def test_llama3_405b_published_plan_fits_in_80_gb():
    ds = explore.evaluate(llama3_405b())
    assert bool(ds.valid[0]), str(ds.reason.values[0])
    assert float(ds.memory_per_device_bytes[0]) <= 80e9


def test_more_in_flight_with_interleaving():
    sc = llama3_405b()
    sc["parallelism"]["virtual_stages"] = [1, 2]
    ds = explore.evaluate(sc)
    act = ds.memory_bytes_activations.values
    assert act[1] > act[0]
