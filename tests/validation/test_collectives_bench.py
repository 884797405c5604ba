"""The per-call collective model against published nccl-tests bus bandwidths
(tests/validation/collective_bench.csv, one row per published figure with its source).

The two link efficiencies in explore/model/calibration.py are two of these measurements (not
fitted on training runs), and so is the Simple protocol's per-call pipeline time
(hwmodels/catalog/collectives.toml simple_pipeline_s, fitted on these points); this test checks
the whole per-call model (NCCL's protocol choice by its own tuning estimates, ring/tree/NVLS-tree
choice, NCCL's latency and tree-correction constants, bus bandwidth of the slowest hop) against
every published figure, 1 MiB to 32 GiB, 8 to 512 GPUs (mid-size figures only up to 40 GPUs: no
published text figure at 1 MiB-1 GiB beyond 40 GPUs with its hardware stated was found).

Rule for the 15 % assertion (stated once; README "Collective model against the published
nccl-tests figures" gives every error): 48 of the 56 points are within 15 %, 24 of the 32 from
1 MiB to 1 GiB (``test_counts_within_15_percent``). The others, each asserted in direction and
bound (a regression guard in either direction):

* ``OPTIMISTIC`` (6, at most +45 %; the worst is +43.2 %): the one-node A100 4 / 16 MiB points
  (+21 / +43 %: NCCL's own estimate runs them on LL128, as the model does, and the measured curve
  ramps up more slowly than LL128 at 0.92 of the bus bandwidth), and four four-node H100 points
  in steps of the measured curves that a latency + size / bandwidth model cannot follow:
  all-reduce 8 MiB (+15.3 %), 256 MiB (+15.3 %), all-gather 128 MiB (+32.6 %: the time doubles
  from 64 to 128 MiB) and 256 MiB (+17.1 %);
* ``PESSIMISTIC`` (1, at most -40 %): the four-node H100 all-reduce at 1 MiB (-36.9 %): NCCL's own
  estimate (tuning.cc constants) picks Simple there (its NVLS tree, 122 us, against 178 us for
  LL), so the model charges Simple with its per-call pipeline time (147 us); the measured curve
  (92 us at 1 MiB, 155 us at 2 MiB) shows NCCL switching protocol between 1 and 2 MiB instead;
* the three-node 128 MiB point: 20 % (-18.5 %; its 'peak' is 10 % above the two-node 4 GiB
  figure of the same system class).
"""
import csv
from pathlib import Path

import numpy as np
import pytest

from explore.model import calibration as cal
from explore.model.fabric import Fabric
from explore.model.system import build_system
from explore.scenario import resolve
from topologies.collectives import bus_bandwidth_gbs

ROWS = list(csv.DictReader(open(Path(__file__).parent / "collective_bench.csv")))
OPTIMISTIC = {"azure_ndv4_a100_1node_allreduce_4m", "azure_ndv4_a100_1node_allreduce_16m",
              "vp_h100_4node_allreduce_8m", "vp_h100_4node_allreduce_256m",
              "vp_h100_4node_allgather_128m", "vp_h100_4node_allgather_256m"}
OPTIMISTIC_BOUND = 0.45
PESSIMISTIC = {"vp_h100_4node_allreduce_1m"}
PESSIMISTIC_BOUND = 0.40
TOLERANCE = {r["bench_id"]: 0.15 for r in ROWS if r["bench_id"] not in OPTIMISTIC | PESSIMISTIC}
TOLERANCE["ncclt119_a100_3node_allreduce"] = 0.20


def modelled_busbw(row, size=None):
    """nccl-tests bus bandwidth (GB/s) the model gives for a CSV row's system, collective and size."""
    gpus, per_node = int(row["gpus"]), int(row["gpus_per_node"])
    gen = "b200" if "B200" in row["system"] else "h100" if "H100" in row["system"] else "a100"
    sc = {"name": row["bench_id"], "model": {"preset": "gpt3-175b"},
          "parallelism": {"tp": 1, "pp": 1, "dp": gpus},
          "training": {"global_batch": gpus},
          "system": {"accelerator": {"b200": "b200", "h100": "h100-sxm-80gb", "a100": "a100-sxm-80gb"}[gen],
                     "devices": gpus,
                     "scale_up": {"size": per_node, "link": {"b200": "nvlink5", "h100": "nvlink4",
                                                             "a100": "nvlink3"}[gen]},
                     "scale_out": {"topology": "fat-tree", "link": "ib-hdr-200",
                                   "bandwidth_bps": float(row["nic_gbps"]) * 1e9,
                                   "nics_per_device": int(row["nics_per_node"]) / per_node}}}
    fab = Fabric(build_system(resolve(sc)), cal.DEFAULT)
    size = float(row["message_bytes"] if size is None else size)
    call = {"all_reduce": fab.all_reduce, "all_gather": fab.all_gather,
            "reduce_scatter": fab.reduce_scatter}[row["collective"]]
    t = call(size, np.array([1.0]), np.array([float(gpus)]))
    return float(bus_bandwidth_gbs(row["collective"], size, gpus, t)[0])


def test_every_row_is_asserted_by_exactly_one_rule():
    ids = [r["bench_id"] for r in ROWS]
    assert len(ids) == len(set(ids))
    assert OPTIMISTIC | PESSIMISTIC <= set(ids)
    for i in ids:
        assert (i in TOLERANCE) + (i in OPTIMISTIC) + (i in PESSIMISTIC) == 1, i


def test_bench_covers_sizes_collectives_and_scale():
    sizes = {float(r["message_bytes"]) for r in ROWS}
    assert min(sizes) <= 2 ** 20 and max(sizes) >= 2 ** 30
    assert {"all_reduce", "all_gather"} <= {r["collective"] for r in ROWS}
    assert max(int(r["gpus"]) for r in ROWS) >= 32


def test_two_node_nvls_tree_crosses_the_network_once():
    """Two H100 nodes (NVLink SHARP): the all-reduce's bus bandwidth exceeds the NICs' (8 x 200
    Gb/s = 200 GB/s per node, measured 298-339 GB/s), which only a tree that sends each byte over
    the network once reaches; the same two nodes on A100 (no NVLS) stay below the NICs' bound."""
    h100 = next(r for r in ROWS if r["bench_id"] == "a3mega_h100_2node_allreduce_8g")
    nic_bound = int(h100["nics_per_node"]) * float(h100["nic_gbps"]) / 8   # GB/s per node
    assert modelled_busbw(h100) > 1.4 * nic_bound
    a100 = dict(h100, system="2 x 8x A100 SXM4", bench_id="a100_same_nics")
    assert modelled_busbw(a100) < nic_bound


@pytest.mark.parametrize("row", [r for r in ROWS if r["bench_id"] in OPTIMISTIC], ids=lambda r: r["bench_id"])
def test_mid_size_points_are_optimistic_within_bound(row):
    got, want = modelled_busbw(row), float(row["busbw_gbs"])
    assert want < got <= (1 + OPTIMISTIC_BOUND) * want, f"{got:.1f} vs {want:.1f} GB/s"


@pytest.mark.parametrize("row", [r for r in ROWS if r["bench_id"] in PESSIMISTIC], ids=lambda r: r["bench_id"])
def test_pessimistic_points_within_bound(row):
    got, want = modelled_busbw(row), float(row["busbw_gbs"])
    assert (1 - PESSIMISTIC_BOUND) * want <= got < want, f"{got:.1f} vs {want:.1f} GB/s"


def test_counts_within_15_percent():
    """48 of 56 points within 15 %; 24 of the 32 from 1 MiB to 1 GiB (20 of 32 with the faster of
    the two protocols instead of NCCL's own choice)."""
    err = {r["bench_id"]: modelled_busbw(r) / float(r["busbw_gbs"]) - 1 for r in ROWS}
    band = [r["bench_id"] for r in ROWS if 2 ** 20 <= float(r["message_bytes"]) <= 2 ** 30]
    assert sum(abs(e) <= 0.15 for e in err.values()) >= 48
    assert sum(abs(err[i]) <= 0.15 for i in band) >= 24 and len(band) == 32


def test_protocol_switch_where_the_measured_all_gather_jumps():
    """Four-node H100 all-gather (Voltage Park log in collective_bench.csv): 110.75 us at 2 MiB,
    193.2 us at 4 MiB: NCCL leaves LL for Simple between the two (its own estimate: LL ring
    142 us vs Simple 152 us at 2 MiB, 242 vs 157 us at 4 MiB). The model's call time jumps there
    too (x 1.5 or more), rather than growing by the 2 MiB of bytes at the bus bandwidth."""
    row = next(r for r in ROWS if r["bench_id"] == "vp_h100_4node_allgather_1m")
    t = {m: m * 2 ** 20 * 31 / 32 / (modelled_busbw(row, m * 2 ** 20) * 1e9) for m in (2, 4)}
    assert t[4] > 1.5 * t[2]
    assert t[2] == pytest.approx(110.75e-6, rel=0.15) and t[4] == pytest.approx(193.2e-6, rel=0.15)


@pytest.mark.parametrize("row", [r for r in ROWS if r["bench_id"] in TOLERANCE], ids=lambda r: r["bench_id"])
def test_bus_bandwidth_matches_published(row):
    got = modelled_busbw(row)
    want = float(row["busbw_gbs"])
    assert abs(got / want - 1) <= TOLERANCE[row["bench_id"]], f"{got:.1f} vs {want:.1f} GB/s"


@pytest.mark.parametrize("bench_id", ["nccl1048_a100_2node_allreduce", "vp_h100_4node_allgather_1g"])
def test_bus_bandwidth_grows_with_message_size(bench_id):
    """Latency-bound small messages, bandwidth-bound large ones (the nccl-tests curve shape)."""
    row = next(r for r in ROWS if r["bench_id"] == bench_id)
    bws = [modelled_busbw(row, size) for size in (1e6, 1e7, 1e8, 1e9)]
    assert all(a < b for a, b in zip(bws, bws[1:]))
    assert bws[0] < 0.6 * bws[-1]
