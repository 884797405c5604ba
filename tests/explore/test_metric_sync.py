"""Composer's per-step training-metric synchronization (``explore/model/host_syncs.py``, ``calibration.TRAIN_METRIC_STATES``).

Composer v0.17.2 computes its training metrics after every batch and torchmetrics (< 1.1) syncs
each metric state with ``gather_all_tensors``: a barrier, ``world_size`` ``zeros_like`` from Python
and a list-form ``all_gather`` of the scalar, whose output ProcessGroupNCCL copies out rank by rank.
Checked against figures that do not come from the step model: the host costs per rank read straight
from the catalog (hwmodels/catalog/collectives.toml: copy_launch_s, aten_call_s,
python_tensor_call_s, each with its source), the state count of composer/metrics/nlp.py, and the
closed form of a ring's latency, linear in the ranks."""
import copy
import tomllib
from pathlib import Path

import pytest

from explore.evaluate import evaluate
from explore import validation as V
from explore import validation_fsdp as F
from explore.model import calibration as cal

ROOT = Path(__file__).resolve().parents[2]
CASES = {c[0]: c for c in V.load_cases()}
LIB = tomllib.loads((ROOT / "hwmodels/catalog/collectives.toml").read_text())


def _lib(key):
    for v in LIB.values():
        if isinstance(v, dict) and key in v and not isinstance(v[key], str):
            return float(v[key])
    return float(LIB[key])


def _step(sc):
    return float(evaluate(sc, keep_invalid=True)["step_time_s"][0])


def _sync(sc, monkeypatch):
    """The step with the metrics' synchronization minus the same step without it."""
    with_sync = _step(sc)
    monkeypatch.setattr(cal, "TRAIN_METRIC_STATES", 0.0)
    without = _step(sc)
    monkeypatch.undo()
    return with_sync - without


def _case(size, gpus):
    return copy.deepcopy(CASES[f"{F.GROUP}_h100_{size}_{gpus}"][1])


@pytest.mark.parametrize("gpus", [128, 256, 512])
def test_sync_at_least_the_host_work_per_rank_from_the_catalog(gpus, monkeypatch):
    """Two metrics x two states, each at least world_size x (a Python zeros_like and its fill kernel:
    python_tensor_call_s + copy_launch_s) + world_size x (the C++ copy out of the flat buffer:
    copy_launch_s + aten_call_s); the barrier and the ring call add more, so this is a floor. Ceiling:
    the floor plus, per state, a ring of world_size - 1 steps at 20 us each (above NCCL's tuning.cc
    Simple network latency, 14 us, the largest per-step figure the catalog cites) and a 1 ms barrier."""
    sc = _case("1b", gpus)
    states = 2 * 2
    host = states * gpus * (2 * _lib("copy_launch_s") + _lib("aten_call_s") + _lib("python_tensor_call_s"))
    got = _sync(sc, monkeypatch)
    assert got >= host * (1 - 1e-9), (got, host)
    assert got <= host + states * ((gpus - 1) * 20e-6 + 1e-3), (got, host)


def test_sync_is_linear_in_the_ranks_as_a_ring_and_a_per_rank_loop(monkeypatch):
    """Every term is per rank (host loops) or per ring step (n - 1), so doubling the ranks from 256 to
    512 adds about twice what 128 -> 256 added (the closed form gives (511 - 255) / (255 - 127) = 2;
    the per-call base latency and the tree barrier only lower the ratio a little)."""
    s = {n: _sync(_case("1b", n), monkeypatch) for n in (128, 256, 512)}
    ratio = (s[512] - s[256]) / (s[256] - s[128])
    assert 1.9 <= ratio <= 2.05, (s, ratio)


def test_sync_is_the_same_for_every_model_size(monkeypatch):
    """It depends on the world size only (scalars), not on the layers: 1B and 70B at 512 pay the same."""
    assert _sync(_case("1b", 512), monkeypatch) == pytest.approx(_sync(_case("70b", 512), monkeypatch), rel=1e-9)


def test_no_metrics_no_sync(monkeypatch):
    sc = _case("7b", 512)
    sc["training"]["train_metrics"] = 0
    assert _sync(sc, monkeypatch) == 0.0


@pytest.mark.parametrize("latency_s, bandwidth_bps", [(5e-6, 400e9), (10e-6, 400e9), (20e-6, 400e9),
                                                       (5e-6, 200e9), (5e-6, 100e9)])
def test_sync_and_step_never_faster_when_latency_rises_or_bandwidth_falls(latency_s, bandwidth_bps, monkeypatch):
    """Against the catalog's NDR link (its latency and 400 Gb/s), a slower network (higher per-hop
    latency or less bandwidth) never shortens the synchronization or the step."""
    base = _case("1b", 512)
    slow = copy.deepcopy(base)
    slow["system"]["scale_out"].update(latency_s=latency_s, bandwidth_bps=bandwidth_bps)
    ndr = copy.deepcopy(base)
    ndr_lat = float(next(v for k, v in tomllib.loads((ROOT / "hwmodels/catalog/links.toml").read_text()).items()
                         if k == "ib-ndr-400")["latency_s"])
    ndr["system"]["scale_out"].update(latency_s=min(ndr_lat, latency_s), bandwidth_bps=400e9)
    assert _sync(slow, monkeypatch) >= _sync(ndr, monkeypatch) * (1 - 1e-12)
    assert _step(slow) >= _step(ndr) * (1 - 1e-12)
