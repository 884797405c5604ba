"""``training.train_metrics``: the fp32 cross-entropies Composer's training metrics run over the
logits after every microbatch's backward (llm-foundry's MPT registers two; calibration.py
TRAIN_METRIC_BYTES_PER_ELEMENT, 14 B per logit each, a lower bound on the HBM traffic).

Checked against figures that do not come from the model: the size of the logits tensor
(microbatch x sequence x vocabulary, from the published row) and the H100 SXM's HBM3 bandwidth from
its datasheet (3.35 TB/s, NVIDIA H100 Tensor Core GPU datasheet, the catalog's h100-sxm-80gb entry)."""
import copy

import numpy as np
import pytest

import explore
from explore import validation as V
from explore import validation_fsdp as F
from explore.scenario import ScenarioError

CASES = {c[0]: c for c in V.load_cases()}
H100_HBM_BPS = 3.35e12          # NVIDIA H100 SXM5 80GB datasheet: HBM3, 3.35 TB/s


@pytest.fixture(autouse=True)
def _kernels_only(monkeypatch):
    """These tests bound the metrics' kernels; their per-step synchronization over all ranks
    (calibration.TRAIN_METRIC_STATES, also switched on by training.train_metrics) is checked on its
    own in test_metric_sync.py, so it is left out here."""
    from explore.model import calibration as cal
    monkeypatch.setattr(cal, "TRAIN_METRIC_STATES", 0.0)


def _with(run_id, metrics):
    sc = copy.deepcopy(CASES[run_id][1])
    sc["training"]["train_metrics"] = metrics
    return explore.evaluate(sc, keep_invalid=True)


@pytest.mark.parametrize("size", ["1b", "7b", "70b"])
def test_two_metrics_cost_between_the_write_floor_and_the_all_from_hbm_ceiling(size):
    """Each metric must at least write two fp32 tensors of the logits' shape (the autocast copy and
    log_softmax's output: 8 B per logit) and can at most read the bf16 logits once and the fp32 copy
    three times (cunn_SoftMaxForward's max, sum and output passes) besides: 2 + 4 + 12 + 4 = 22 B.
    Floor at the datasheet peak, ceiling at half of it (a memory-bound kernel reaches well over half
    of peak HBM bandwidth on tensors of gigabytes)."""
    run_id = f"{F.GROUP}_h100_{size}_512"
    row = next(r for r in V.load_rows() if r["run_id"] == run_id)
    logits = int(row["microbatch"]) * int(row["seq_len"]) * int(row["vocab"])   # one microbatch per step
    extra = float(_with(run_id, 2)["step_time_s"][0] - _with(run_id, 0)["step_time_s"][0])
    floor = 2 * 8 * logits / H100_HBM_BPS
    ceiling = 2 * 22 * logits / (0.5 * H100_HBM_BPS)
    assert floor <= extra <= ceiling, (extra, floor, ceiling)


def test_metrics_add_serially_and_count_as_compute():
    """After FSDP's final callback the compute stream waits for the gradient reduction, so nothing
    hides the metrics: the step grows by exactly the compute they add, and by twice one metric's."""
    run_id = f"{F.GROUP}_h100_3b_256"
    ds = {k: _with(run_id, k) for k in (0, 1, 2)}
    step = [float(ds[k]["step_time_s"][0]) for k in (0, 1, 2)]
    comp = [float(ds[k]["time_s_compute"][0]) for k in (0, 1, 2)]
    assert step[2] - step[0] == pytest.approx(comp[2] - comp[0], rel=1e-9)
    assert step[2] - step[0] == pytest.approx(2 * (step[1] - step[0]), rel=1e-9)
    assert step[1] > step[0]


def test_short_steps_gain_most_as_in_the_published_gap():
    """The logits per microbatch are a fixed cost against the layers' work, so the metrics weigh most
    on the small models with large microbatches (1B: 12 x 2048 tokens on 24 layers) and least on the
    70B; the published gap is ordered the same way (1B/3B/7B 12-22 % too fast, 70B 1-6 %)."""
    share = {}
    for size in ("1b", "3b", "7b", "13b", "30b", "70b"):
        run_id = f"{F.GROUP}_h100_{size}_128"
        on, off = (float(_with(run_id, k)["step_time_s"][0]) for k in (2, 0))
        share[size] = on / off - 1
    assert share["1b"] > share["3b"] > share["7b"] > share["13b"] > share["70b"] > 0
    assert 0.02 <= share["1b"] <= 0.06 and share["70b"] < 0.002, share


def test_only_the_llm_foundry_h100_runs_set_it():
    """Default 0: every other published run (and the A100 table, whose code is not pinned) unchanged."""
    for run_id, (_, sc, _, _) in CASES.items():
        want = 2 if (run_id.startswith(F.GROUP) and "_h100_" in run_id) else 0
        assert sc["training"].get("train_metrics", 0) == want, run_id


def test_negative_count_names_the_field():
    sc = copy.deepcopy(CASES[f"{F.GROUP}_h100_1b_128"][1])
    sc["training"]["train_metrics"] = -1
    with pytest.raises(ScenarioError) as e:
        explore.evaluate(sc)
    assert "training.train_metrics" in str(e.value) and "-1" in str(e.value)
