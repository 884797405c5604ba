"""Composer v0.17.2's per-batch scalar collectives (``training.step_syncs = "composer-0.17"``, explore/model/host_syncs.py).

Read in mosaicml/composer at v0.17.2 (commit 7e0e40a72a6b): per batch, three 4-byte all-reduces
(``_train_loop``'s loss, the SpeedMonitor's FLOPs, FSDP ``clip_grad_norm_``'s norm), one 8-byte
all-reduce (``_accumulate_time_across_ranks``: samples and tokens) and one 4-byte broadcast of the
batch time from rank 0, which NCCL runs as a ring chain. Checked against figures that do not come from
the step model: NCCL's per-call base latency and the links' per-hop latencies from the catalog
(hwmodels/catalog/collectives.toml ``base_latency_s``, hwmodels/catalog/links.toml ``latency_s``), the
call count read from the code, and the closed form of a chain of n - 1 hops, linear in the ranks."""
import copy
import tomllib
from pathlib import Path

import pytest

from explore.evaluate import evaluate
from explore import validation as V
from explore import validation_fsdp as F

ROOT = Path(__file__).resolve().parents[2]
CASES = {c[0]: c for c in V.load_cases()}
NCCL = tomllib.loads((ROOT / "hwmodels/catalog/collectives.toml").read_text())["nccl"]
LINKS = tomllib.loads((ROOT / "hwmodels/catalog/links.toml").read_text())
CALLS = 5          # 4 all-reduces + 1 broadcast per batch (module docstring)


def _step(sc):
    return float(evaluate(sc, keep_invalid=True)["step_time_s"][0])


def _syncs(sc):
    """The step with Composer's per-batch collectives minus the same step without them."""
    off = copy.deepcopy(sc)
    off["training"]["step_syncs"] = "none"
    return _step(sc) - _step(off)


def _case(size, gpus):
    return copy.deepcopy(CASES[f"{F.GROUP}_h100_{size}_{gpus}"][1])


def test_the_h100_rows_set_it_and_the_a100_rows_do_not():
    for rid, sc, _, _ in V.load_cases():
        if V.group_of(rid) != F.GROUP:
            continue
        want = "composer-0.17" if "_h100_" in rid else None
        assert sc["training"].get("step_syncs") == want, rid


@pytest.mark.parametrize("gpus", [128, 256, 512])
def test_between_the_catalogs_latencies_and_a_slow_ring(gpus):
    """Floor: every call pays NCCL's per-call base latency, and the broadcast's 4 bytes cross the ring's
    n - 1 hops one after the other, each at least the faster link's per-hop latency (NVLink 4).
    Ceiling: every call a full ring of n - 1 steps at 20 us each (above the largest per-step figure
    the catalog cites, NCCL's 14 us Simple network latency) on top of its base latency."""
    got = _syncs(_case("1b", gpus))
    base = float(NCCL["base_latency_s"])
    hop = min(float(LINKS["nvlink4"]["latency_s"]), float(LINKS["ib-ndr-400"]["latency_s"]))
    floor = CALLS * base + (gpus - 1) * hop
    ceiling = CALLS * (base + (gpus - 1) * 20e-6)
    assert floor <= got <= ceiling, (got, floor, ceiling)


def test_growth_is_linear_in_the_ranks_as_a_chain():
    """The broadcast's chain is n - 1 hops, so 256 -> 512 adds about twice what 128 -> 256 added
    ((511 - 255) / (255 - 127) = 2); the tree all-reduces grow only with log n and lower it a little."""
    s = {n: _syncs(_case("1b", n)) for n in (128, 256, 512)}
    ratio = (s[512] - s[256]) / (s[256] - s[128])
    assert 1.8 <= ratio <= 2.05, (s, ratio)


def test_same_for_every_model_size():
    """Scalars only: the cost depends on the world size, not on the layers."""
    assert _syncs(_case("1b", 512)) == pytest.approx(_syncs(_case("70b", 512)), rel=1e-9)


def test_default_is_none_and_costs_nothing():
    sc = _case("7b", 512)
    sc["training"]["step_syncs"] = "none"
    assert _syncs(sc) == 0.0
    del sc["training"]["step_syncs"]
    assert _step(sc) == _step(dict(sc, training=dict(sc["training"], step_syncs="none")))


def test_one_rank_has_nothing_to_sync():
    sc = _case("1b", 128)
    sc["parallelism"]["dp"] = 1
    sc["system"]["devices"] = 1
    sc["training"]["global_batch"] = sc["parallelism"]["microbatch"]
    assert _syncs(sc) == 0.0


@pytest.mark.parametrize("latency_s, bandwidth_bps", [(5e-6, 400e9), (10e-6, 400e9), (20e-6, 400e9),
                                                       (5e-6, 200e9), (5e-6, 100e9)])
def test_never_faster_when_latency_rises_or_bandwidth_falls(latency_s, bandwidth_bps):
    """Against the catalog's NDR link (its latency, 400 Gb/s), a slower network never shortens the
    collectives or the step."""
    base = _case("1b", 512)
    slow = copy.deepcopy(base)
    slow["system"]["scale_out"].update(latency_s=latency_s, bandwidth_bps=bandwidth_bps)
    ndr = copy.deepcopy(base)
    ndr["system"]["scale_out"].update(latency_s=min(float(LINKS["ib-ndr-400"]["latency_s"]), latency_s),
                                      bandwidth_bps=400e9)
    assert _syncs(slow) >= _syncs(ndr) * (1 - 1e-12)
    assert _step(slow) >= _step(ndr) * (1 - 1e-12)
