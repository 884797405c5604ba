"""The per-call collective model against published nccl-tests bus bandwidths
(tests/validation/collective_bench.csv, one row per published figure with its source).

The link efficiencies are these measurements (not fitted on training runs): each scale-up link's
``bus_efficiency`` (hwmodels/catalog/links.toml; NVLink 3 and NVLink 5 from rows here) and
``scale_out_link_efficiency`` (explore/model/calibration.py), and so is the Simple protocol's
per-call pipeline time
(hwmodels/catalog/collectives.toml simple_pipeline_s, fitted on these points); this test checks
the whole per-call model (NCCL's protocol and algorithm choice by its own tuning estimates, ring /
tree / NVLS tree, NCCL's latency and tree-correction constants, the NVLS tree's bandwidth and
chunk-pipeline fill, bus bandwidth of the slowest hop) against
every published figure, 1 MiB to 32 GiB, 8 to 1,440 GPUs. Mid-size figures (1 MiB-1 GiB) above 40
GPUs: one 64-GPU H100 curve (NVIDIA/nccl-tests issue #309), GB200 NVL72 at one, two and twenty
racks (72 / 144 / 1,440 GPUs, 512 MiB-16 GiB, coreweave/nccl-tests README) and 248 H200 nodes
(1,984 GPUs, 512 MiB, NVIDIA/nccl-tests issue #283). For the GB200 rows
``gpus_per_node`` is the NVLink domain (one NVL72 rack) and the run disabled NVLink SHARP
(``NCCL_NVLS_ENABLE=0`` in the row's system text, so the model runs without its NVLS paths).
No row's job set NCCL_HOSTID, so every row runs at NCCL's own node count, one node per host or
NVL72 rack, without the model's split-domain trees (``Fabric(..., split_domains=False)``,
``test_bench_rows_run_nccl_own_node_count``).

Rule for the 15 % assertion (stated once; docs/validation.md "Collective model against the
published nccl-tests figures" gives every error): 70 of the 87 points are within 15 %, 38 of the 50 from
1 MiB to 1 GiB, 13 of the 18 of those at 64 GPUs or more (``test_counts_within_15_percent``). The
others, each asserted in direction and bound (a regression guard in either direction):

* ``OPTIMISTIC`` (6, at most +45 %; the worst is +43.2 %): the one-node A100 4 / 16 MiB points
  (+21 / +43 %: NCCL's own estimate runs them on LL128, as the model does, and the measured curve
  ramps up more slowly than LL128 at 0.92 of the bus bandwidth), three four-node H100 points
  in steps of the measured curves that a latency + size / bandwidth model cannot follow:
  all-reduce 256 MiB (+15.3 %, where NCCL's estimate, as the model's, leaves the NVLS tree for
  the ring at 223 MiB and the measured time jumps from 945 us at 128 MiB to 2,169 us),
  all-gather 128 MiB (the time doubles from 64 to 128 MiB) and 256 MiB, and the eight-node H100
  all-reduce at 8 MiB (+17.4 %: the measured curve dips at 8 MiB, 321 us in place against 204 us
  at 4 MiB and 374 us at 16 MiB, and the thread's tuned rerun dips there too; +53.3 % before the
  NVLS tree's pipeline fill, collmid). (The four-node all-reduce at 8 MiB, +15.3 %, and the
  eight-node one at 16 MiB, +28.2 %, were here before collmid: +6.4 / +13.3 % now. The two-rack
  GB200 points at 512 MiB and 1 GiB were here at +26.3 / +15.4 % while the bench rows ran the
  model's split-domain trees; at NCCL's node count they are +12.7 / +8.2 %);
* ``PESSIMISTIC`` (3, at most -40 %): the four-node H100 all-reduce at 1 MiB (-35.7 %) and the
  eight-node one at 1 and 2 MiB (-26.8 / -18.6 %): NCCL's own estimate picks Simple (its NVLS
  tree) there, where the model adds its fitted 80 us Simple pipeline time (``simple_pipeline_s``)
  that the measured curves show only from 2-4 MiB on. coll8: both 1 MiB times (92.5 / 117.0 us)
  sit on NCCL 2.24.3's own NVLS-tree estimate (88.3 / 116.3 us, NET 14 us per level, 5/6 x half
  the graph bandwidth). The eight-node 2 MiB point was -13.3 % before collmid: the NVLS tree's
  pipeline fill (one loop per channel there: 3 x 2 MiB / 344 GB/s = 18 us at 8 nodes) comes on
  top of the 80 us, which was fitted without it. (All three were less pessimistic on the
  split-domain trees of 4-GPU parts, which no job here set up; with LL128 across nodes in its
  estimate, which tuning.cc enables on compute capability 9.0 when the GPU-NIC path is PXN or
  closer, NCCL would rank the LL128 tree first at 1 MiB, a protocol the model does not run
  across domains: at 0.92 of the bus bandwidth it makes the 2-32 MiB multi-node H100 points
  24-111 % optimistic.)
  (The GB200 one- and two-rack points at
  2-16 GiB were here at -15 to -20 % while every NVLink generation took the A100 efficiency 0.775;
  with each link's measured catalog ``bus_efficiency``, 0.93 for NVLink 5, they are within 5 %.)
* ``FAR_OPTIMISTIC`` (7, each with its own bound): the 32-node H100 all-gather at 2 GiB (NVIDIA/nccl
  issue #1218, +49.9 %: the poster's round 200 GB/s on a RoCE cluster whose NIC speed is an
  estimate, 400 Gb/s; at 200 Gb/s the model gives 160.2 GB/s, -19.9 %, but 200 GB/s is above
  NCCL's 8 x 24 GB/s peak for 200 Gb/s NICs; the same model is within 12 % of Together AI's ring
  all-gathers on 8-64 B200 nodes, so it is this cluster's shortfall, not a loss the model lacks
  at 32 nodes in general, ``test_at_scale_ring_all_gather_is_not_a_third``) and the twenty-rack GB200 curve (+264.8 % at 512 MiB
  falling to +87.8 % at 16 GiB): its measured times fit 4.6 ms + size / (429 GB/s bus bandwidth)
  against 0.87 ms + size / (828 GB/s) at two racks, where the model keeps its double binary tree
  (0.5 ms + NVLink-bound bandwidth):
  it has neither the per-call time nor the bandwidth loss that ten times more racks cost on that
  fabric (``test_twenty_rack_error_is_a_per_call_term``). The tree is NCCL's own choice there, not
  the model's guess: NCCL 2.26.2's estimate ranks it first at all six sizes, and a ring at the
  model's per-step latencies is slower than the measured 512 MiB call
  (``test_nccl_estimate_keeps_the_tree_at_twenty_racks``);
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
from topologies.collectives import bus_bandwidth_gbs, ring_latency_s

ROWS = list(csv.DictReader(open(Path(__file__).parent / "collective_bench.csv")))
OPTIMISTIC = {"azure_ndv4_a100_1node_allreduce_4m", "azure_ndv4_a100_1node_allreduce_16m",
              "vp_h100_4node_allreduce_256m", "vp_h100_4node_allgather_128m", "vp_h100_4node_allgather_256m",
              "nt309_h100_8node_allreduce_8m"}
OPTIMISTIC_BOUND = 0.45
PESSIMISTIC = {"vp_h100_4node_allreduce_1m", "nt309_h100_8node_allreduce_1m", "nt309_h100_8node_allreduce_2m"}
PESSIMISTIC_BOUND = 0.40
TWENTY_RACKS = [f"cw_gb200_20rack_allreduce_{m}" for m in ("512m", "1g", "2g", "4g", "8g", "16g")]
# own bounds: measured +264.8 / 193.7 / 144.7 / 112.1 / 97.3 / 87.8 %
FAR_OPTIMISTIC = {"nccl1218_h100_32node_allgather_2g": 0.53,      # measured +49.9 %
                  **dict(zip(TWENTY_RACKS, (2.70, 1.99, 1.50, 1.16, 1.00, 0.90)))}
TOLERANCE = {r["bench_id"]: 0.15 for r in ROWS
             if r["bench_id"] not in OPTIMISTIC | PESSIMISTIC | set(FAR_OPTIMISTIC)}
TOLERANCE["ncclt119_a100_3node_allreduce"] = 0.20


def fabric(row):
    """The model's fabric for a CSV row's system (one data-parallel group over all its GPUs)."""
    gpus, per_node = int(row["gpus"]), int(row["gpus_per_node"])
    gen = ("b200" if "B200" in row["system"] else "h200" if "H200" in row["system"]
           else "h100" if "H100" in row["system"] else "a100")
    sc = {"name": row["bench_id"], "model": {"preset": "gpt3-175b"},
          "parallelism": {"tp": 1, "pp": 1, "dp": gpus},
          "training": {"global_batch": gpus},
          "system": {"accelerator": {"b200": "b200", "h200": "h200-sxm-141gb", "h100": "h100-sxm-80gb",
                                     "a100": "a100-sxm-80gb"}[gen],
                     "devices": gpus,
                     "scale_up": {"size": per_node, "link": {"b200": "nvlink5", "h200": "nvlink4", "h100": "nvlink4",
                                                             "a100": "nvlink3"}[gen]},
                     "scale_out": {"topology": "fat-tree", "link": "ib-hdr-200",
                                   "bandwidth_bps": float(row["nic_gbps"]) * 1e9,
                                   "nics_per_device": int(row["nics_per_node"]) / per_node}}}
    # NCCL's own node count (one node per host or NVL72 rack) unless the job set NCCL_HOSTID per part
    fab = Fabric(build_system(resolve(sc)), cal.DEFAULT, split_domains="NCCL_HOSTID" in row["system"])
    if "NCCL_NVLS_ENABLE=0" in row["system"]:      # the run disabled NVLink SHARP (NVLS / NVLS tree)
        fab.nvls = np.zeros_like(fab.nvls)
    return fab


def modelled_busbw(row, size=None):
    """nccl-tests bus bandwidth (GB/s) the model gives for a CSV row's system, collective and size."""
    gpus = int(row["gpus"])
    fab = fabric(row)
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
        assert (i in TOLERANCE) + (i in OPTIMISTIC) + (i in PESSIMISTIC) + (i in FAR_OPTIMISTIC) == 1, i


def test_bench_covers_sizes_collectives_and_scale():
    sizes = {float(r["message_bytes"]) for r in ROWS}
    assert min(sizes) <= 2 ** 20 and max(sizes) >= 2 ** 30
    assert {"all_reduce", "all_gather"} <= {r["collective"] for r in ROWS}
    assert max(int(r["gpus"]) for r in ROWS) >= 1024
    mid = [r for r in ROWS if 2 ** 20 <= float(r["message_bytes"]) <= 2 ** 30]
    assert max(int(r["gpus"]) for r in mid) >= 1024
    assert {int(r["gpus"]) for r in mid} >= {64, 72, 144, 1440}


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


@pytest.mark.parametrize("row", [r for r in ROWS if r["bench_id"] in FAR_OPTIMISTIC], ids=lambda r: r["bench_id"])
def test_far_optimistic_points_within_their_bounds(row):
    got, want = modelled_busbw(row), float(row["busbw_gbs"])
    assert want < got <= (1 + FAR_OPTIMISTIC[row["bench_id"]]) * want, f"{got:.1f} vs {want:.1f} GB/s"


def test_twenty_rack_error_is_a_per_call_term():
    """GB200 NVL72, 20 racks (1,440 GPUs): the model's excess falls with size at every step, as a
    missing per-call time does, and the measured time grows by less than the size (a per-call
    term of 4.6 ms); the same fit on two racks leaves 0.87 ms. The model's own per-call term at
    twenty racks stays below a quarter of the measured one."""
    rows = {r["bench_id"]: r for r in ROWS}
    err = [modelled_busbw(rows[i]) / float(rows[i]["busbw_gbs"]) - 1 for i in TWENTY_RACKS]
    assert all(a > b > 0 for a, b in zip(err, err[1:]))

    def fit(ids, busbw):      # per-call time (s) and slope (s/B) of t = a + size / b through the ends
        pts = [(float(rows[i]["message_bytes"]), int(rows[i]["gpus"]), busbw(rows[i])) for i in ids]
        t = [s * 2 * (n - 1) / n / (b * 1e9) for s, n, b in pts]
        slope = (t[-1] - t[0]) / (pts[-1][0] - pts[0][0])
        return t[0] - slope * pts[0][0], slope
    two = [f"cw_gb200_2rack_allreduce_{m}" for m in ("512m", "16g")]
    a20, _ = fit([TWENTY_RACKS[0], TWENTY_RACKS[-1]], lambda r: float(r["busbw_gbs"]))
    a2, _ = fit(two, lambda r: float(r["busbw_gbs"]))
    a20_model, _ = fit([TWENTY_RACKS[0], TWENTY_RACKS[-1]], modelled_busbw)
    assert a20 == pytest.approx(4.6e-3, rel=0.05) and a2 == pytest.approx(0.87e-3, rel=0.05)
    assert a20_model < 0.25 * a20


def test_nccl_estimate_keeps_the_tree_at_twenty_racks():
    """GB200 NVL72, 20 racks (NCCL_NVLS_ENABLE=0, NCCL 2.26.2): NCCL's own time estimate
    (NVIDIA/nccl:src/graph/tuning.cc at tag v2.26.2-1, commit f44ac759fee1, ncclTopoTuneModel and
    ncclTopoGetAlgoTime; enqueue.cc topoGetAlgoInfo takes the smallest) ranks the double binary
    tree first at every measured size, so the twenty-rack error is not NCCL running a ring the
    model does not choose. Figures by hand from tuning.cc (an NVL72 rack is one NCCL node under
    MNNVL, ppn 72; latencies in us): tree Simple 8.4 + 2 ((72 - 1) 4.0 + log2i(20) 14) = 688.4
    (the model takes log2(20) for log2i: 697 us); ring Simple 1.4 x (8.4 + 2,840 x max(3.4,
    3 x 1.0) + 38 x 14.0) = 14,275; ring LL 6.6 + 2,840 x max(0.6, 1.0) + 38 x 2.7 = 2,949 at
    min(20.4 GB/s, bus / 2) (LL128 across racks is off: its enable rule needs the graph's GPU-NIC
    path at PXN or closer, and the GB200 NICs sit behind the Grace CPU, PHB, as the job's
    NCCL_NET_GDR_C2C=1 says). With the model's bus bandwidth as NCCL's graph bandwidth (and at
    half of it) the tree's estimate is the smallest at 512 MiB-16 GiB. And a ring at the model's
    own per-step latencies, even without NCCL's x 1.4 plateau, is slower than the measured
    512 MiB call, so no ring explains that point either."""
    rows = {r["bench_id"]: r for r in ROWS}
    row = rows[TWENTY_RACKS[0]]
    fab = fabric(row)
    stride, n = np.array([1.0]), np.array([1440.0])
    _, outer, bus, tree_bus, _ = fab._bus(stride, n)
    terms = fab._choice(stride, n, outer, bus, tree_bus, True, None)
    assert float(outer[0]) == 20.0
    assert float(terms["tree_s"][0]) == pytest.approx(688.4e-6, rel=0.02)
    assert float(terms["ring_s"][0]) == pytest.approx(14274.96e-6, rel=1e-3)
    assert float(terms["ring_ll"][0]) == pytest.approx(2949.2e-6, rel=1e-3)
    assert terms["ring_128"] is None                       # no LL128 across racks
    for scale in (1.0, 0.5):
        graph_bps = scale * float(bus[0]) / 8.0            # bytes/s
        for i in TWENTY_RACKS:
            size = float(rows[i]["message_bytes"])
            tree = float(terms["tree_s"][0]) + size / (0.5 * 0.92 * graph_bps)
            ring = float(terms["ring_s"][0]) + size / (1440 / 2878 * graph_bps)
            ring_ll = float(terms["ring_ll"][0]) + size / (1440 / 2878 * min(20.4e9, 0.5 * graph_bps))
            assert tree < min(ring, ring_ll), (i, scale)
    size = float(row["message_bytes"])
    measured_s = size * 2 * 1439 / 1440 / (float(row["busbw_gbs"]) * 1e9)
    ring_s = (float(np.ravel(ring_latency_s(1440.0, 20.0, fab.su_lat, fab.so_lat, fab.base, True))[0])
              + 2 * 1439 / 1440 * size * 8 / float(bus[0]))
    assert ring_s > 1.3 * measured_s


def test_bench_rows_run_nccl_own_node_count():
    """No published job set NCCL_HOSTID, so NCCL sees one node per host, or per NVL72 rack under
    multi-node NVLink (NVIDIA/nccl v2.26.2-1: src/init.cc counts nNodes by the ring graph's first
    rank per node; src/graph/topo.cc fuses the XML of every rank in the MNNVL clique into one
    system), and the bench rows run without the model's split-domain trees (each part of a domain
    a node of its own, what NCCL_HOSTID per part would give). With them the two-rack GB200
    512 MiB / 1 GiB points were +26.3 / +15.4 % (a 36-rank chain per part: half the latency);
    with NCCL's node count +12.7 / +8.2 %, and the twenty-rack 512 MiB point +264.8 % instead of
    +307.9 %. The split never makes a call slower, so the same rows with it are at least as fast."""
    rows = {r["bench_id"]: r for r in ROWS}
    assert not any("NCCL_HOSTID" in r["system"] for r in ROWS)
    for bid, was in (("cw_gb200_2rack_allreduce_512m", 0.263), ("cw_gb200_2rack_allreduce_1g", 0.154),
                     ("cw_gb200_20rack_allreduce_512m", 3.079)):
        row = rows[bid]
        want = float(row["busbw_gbs"])
        split = dict(row, system=row["system"] + "; NCCL_HOSTID per part")
        assert modelled_busbw(split) / want - 1 == pytest.approx(was, abs=0.005)
        assert want < modelled_busbw(row) < modelled_busbw(split)
    assert abs(modelled_busbw(rows["cw_gb200_2rack_allreduce_512m"]) / 493.94 - 1) <= 0.15


def test_nccl_algorithm_choice_at_four_h100_nodes():
    """Four H100 nodes (the Voltage Park curves, NCCL 2.24.3): NCCL's own Simple estimates, by hand
    from src/graph/tuning.cc (us; the model's 344 GB/s bus bandwidth as the graph's): ring
    1.4 x (8.4 + 56 x max(3.4, 3 x 1.0) + 6 x 14) = 395.9 + S x 62/32 / 344 GB/s; NVLS tree
    25 + 2 x 2 x 14 = 81 + S / (5/6 x 172 GB/s); tree 8.4 + 2 (7 x 4.0 + 2 x 14) = 120.4 + 2 S /
    (0.92 x 344 GB/s x treeCorrectionFactor). At 128 MiB: ring 1,151.9, NVLS tree 1,017.4, tree
    1,062.8 (correction 0.9): NCCL runs the NVLS tree; at 256 MiB ring 1,907.8, NVLS tree 1,953.8,
    tree 2,005.3: the ring (they cross at 223 MiB). The model's margins
    (``topologies.collectives.nccl_simple_margins_s``) are 0 for NCCL's pick and the differences
    of the estimates for the others."""
    from topologies import collectives as coll
    row = next(r for r in ROWS if r["bench_id"] == "vp_h100_4node_allreduce_1m")
    fab = fabric(row)
    stride, n = np.array([1.0]), np.array([32.0])
    inner, outer, bus, tree_bus, _ = fab._bus(stride, n)
    assert float(bus[0]) == pytest.approx(344e9 * 8) and float(outer[0]) == 4.0
    nvls = fab.nvls & (outer > 1)
    terms = fab._choice(stride, n, outer, bus, tree_bus, True, nvls)
    gbs = 344e9
    for mib, ring, nvls_tree, tree in ((128, 1151.9, 1017.4, 1062.8), (256, 1907.8, 1953.8, 2005.3)):
        size = mib * 2.0 ** 20
        hand = {"ring": 395.9e-6 + size * 62 / 32 / gbs, "nvls": 81e-6 + size / (5 / 6 * gbs / 2),
                "tree": 120.4e-6 + 2 * size / (0.92 * gbs * 0.9)}
        for k, want in (("ring", ring), ("nvls", nvls_tree), ("tree", tree)):
            assert hand[k] == pytest.approx(want * 1e-6, abs=0.2e-6)
        betas = (size * 62 / 32 / gbs, 2 * size / (0.92 * gbs * 0.9), size / (5 / 6 * gbs / 2))
        margins = dict(zip(("ring", "tree", "nvls"), (float(np.ravel(m)[0]) for m in
                                                       coll.nccl_simple_margins_s(terms, *betas))))
        best = min(hand, key=hand.get)
        assert best == ("nvls" if mib == 128 else "ring")
        for k in hand:
            assert margins[k] == pytest.approx(hand[k] - hand[best], abs=0.5e-6), (mib, k)


def test_split_domains_only_ever_add_trees():
    """``split_domains`` adds the split-domain trees as further options and nothing else: over the
    bench's systems and 1 KiB-16 GiB an all-reduce at NCCL's node count is never faster than with
    them, and an all-gather (no split trees on a switched fabric) is the same."""
    sizes = 2.0 ** np.arange(10, 35, 2)
    for bid in ("vp_h100_4node_allreduce_1m", "nt309_h100_8node_allreduce_1m", "cw_gb200_2rack_allreduce_512m",
                "cw_gb200_20rack_allreduce_512m", "nccl1048_a100_2node_allreduce"):
        row = next(r for r in ROWS if r["bench_id"] == bid)
        own, split = fabric(row), fabric(dict(row, system=row["system"] + "; NCCL_HOSTID per part"))
        assert not own.split_domains and split.split_domains
        stride, n = np.array([1.0]), np.array([float(row["gpus"])])
        for size in sizes:
            assert own.all_reduce(size, stride, n)[0] >= split.all_reduce(size, stride, n)[0]
            assert own.all_gather(size, stride, n)[0] == split.all_gather(size, stride, n)[0]


def test_counts_within_15_percent():
    """70 of 87 points within 15 %; 38 of the 50 from 1 MiB to 1 GiB, 13 of the 18 of those at 64
    GPUs or more (none of the two at 1,440 GPUs). Before the NVLS tree ran as NCCL runs it (its
    own bandwidth without the plain tree's correction, its chunk-pipeline fill) and NCCL's
    algorithm choice (collmid): 69, 37 and 13 (mean |error| of the 24 H100 all-reduce points in
    the band 13.0 %, now 9.4 %). Before the 32-node H100 all-gather row (2 GiB,
    +49.9 %): 69 of 86. Before the 248-node H200 row (-14.5 %) and the
    four-node H100 RoCE row (+5.9 %): 67 of 84, 36 of 49, 12 of 17; the figures that follow are
    on those 84 rows. On the model's split-domain trees (NCCL_HOSTID
    per part, which no job here set) 66, 35 and 11. With one scale-up efficiency for every NVLink
    generation (0.775, the A100 figure) instead of each link's catalog bus_efficiency: 62, 37 and
    13 (the two-rack GB200 512 MiB / 1 GiB points were within 15 %, the one- and two-rack
    2-16 GiB points -15 to -20 %). Before the 64-1,440 GPU rows: 48 of 56 and 24 of 32 (20 of 32
    with the faster of the two protocols instead of NCCL's own choice)."""
    err = {r["bench_id"]: modelled_busbw(r) / float(r["busbw_gbs"]) - 1 for r in ROWS}
    band = [r["bench_id"] for r in ROWS if 2 ** 20 <= float(r["message_bytes"]) <= 2 ** 30]
    large = [r["bench_id"] for r in ROWS if r["bench_id"] in band and int(r["gpus"]) >= 64]
    assert sum(abs(e) <= 0.15 for e in err.values()) >= 70 and len(err) == 87
    assert sum(abs(err[i]) <= 0.15 for i in band) >= 38 and len(band) == 50
    assert sum(abs(err[i]) <= 0.15 for i in large) >= 13 and len(large) == 18


def test_at_scale_ring_all_gather_is_not_a_third():
    """Does a ring all-gather at many nodes run at about a third of the model's bus bandwidth, as
    the held-out ZeRO-3 residual would need (an implied 54-57 GB/s where the model's fabric gives
    172 GB/s, benchmarks/zero3_bounds.py)? The one new A100/H100 point past eight nodes, 32 x 8
    H100 on RoCE at 2 GiB (NVIDIA/nccl issue #1218), measures 200 GB/s against the model's 299.9
    at the estimated 400 Gb/s NICs: two thirds, not one third; with 200 Gb/s NICs the model
    (160.2) would be below the measurement. And Together AI's ring all-gathers on 8 x B200 with
    8 x 400 Gb/s InfiniBand stay flat from 8 to 64 nodes (378.5-382.8 GB/s at 32 GiB), where the
    model's ring gives 338-343, within 12 %: no collapse with node count there either."""
    rows = {r["bench_id"]: r for r in ROWS}
    zero3_need = 55.0 / 172.0
    row = rows["nccl1218_h100_32node_allgather_2g"]
    ratio = float(row["busbw_gbs"]) / modelled_busbw(row)
    assert ratio == pytest.approx(0.667, abs=0.01) and ratio > 2 * zero3_need
    slow_nics = modelled_busbw(dict(row, nic_gbps="200"))
    assert slow_nics == pytest.approx(160.2, abs=0.5) and slow_nics < float(row["busbw_gbs"])
    assert float(row["busbw_gbs"]) > 8 * 24.0                       # above NCCL's peak on 8 x 200 Gb/s
    together = [rows[f"together_fa_b200_{n}node_allgather_32g"] for n in (8, 16, 32, 64)]
    measured = [float(r["busbw_gbs"]) for r in together]
    assert max(measured) / min(measured) < 1.02                     # flat from 8 to 64 nodes
    for r in together:
        assert abs(modelled_busbw(r) / float(r["busbw_gbs"]) - 1) <= 0.12


def test_no_bandwidth_loss_per_fabric_tier():
    """The twenty-rack GB200 loss is not a loss per switch tier crossed: on a radix-64 fat-tree
    (topologies.fat_tree.tiers) the 248-node H200 run (1,984 NICs) crosses two tiers, as twenty
    NVL72 racks do on radix-144 Quantum-X800 switches (1,440 NICs; two racks fit under one), and
    it measures ~350 GB/s at 512 MiB against 287-324 GB/s at 1 GiB on one-tier 4-8-node H100
    fabrics of the same NICs. The model, with no such term, is already 14.9 % pessimistic there
    (14.5 % before collmid: NCCL's estimate runs the plain tree there, slower than the NVLS tree);
    the factor 429 / 828 that twenty racks lose would make it -56 %."""
    from topologies.fat_tree import tiers
    rows = {r["bench_id"]: r for r in ROWS}
    h200 = rows["nt283_h200_248node_allreduce_512m"]
    assert float(tiers(int(h200["nodes"]) * int(h200["nics_per_node"]), 64)) == 2.0
    assert float(tiers(20 * 72, 144)) == 2.0 and float(tiers(2 * 72, 144)) == 1.0
    assert float(tiers(8 * 8, 64)) == 1.0
    got, want = modelled_busbw(h200), float(h200["busbw_gbs"])
    assert 0.85 * want <= got < want, f"{got:.1f} vs {want:.1f} GB/s"
    assert got * 429.0 / 828.0 < 0.55 * want          # a per-tier factor fitted on GB200 would fail here


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


def test_scale_up_bus_efficiency_is_the_measured_ring_fraction():
    """Each NVLink generation's catalog ``bus_efficiency`` is its cited nccl-tests ring all-reduce
    bus bandwidth over the link's per-direction bandwidth: A100 232.54 / 300 GB/s (one 8-GPU node),
    GB200 NVL72 839.16 / 900 GB/s (one rack = one NVLink domain, NVLS off, 4 GiB), both rows of
    collective_bench.csv; H100 368.76 / 450 GB/s with NVLS off (NVIDIA/nccl-tests issue #309,
    comment of 2025-05-23; no message size printed, so not a bench row). Links without a
    measurement carry the A100 figure, marked as an estimate."""
    from hwmodels.parts import get_part
    rows = {r["bench_id"]: r for r in ROWS}
    for link, bid in (("nvlink3", "nccl1048_a100_1node_allreduce"), ("nvlink5", "cw_gb200_1rack_allreduce_4g")):
        row = rows[bid]
        assert int(row["gpus"]) == int(row["gpus_per_node"]) and row["collective"] == "all_reduce"  # one domain
        part = get_part("links", link)
        assert part["bus_efficiency"] == pytest.approx(float(row["busbw_gbs"]) * 8e9 / part["bandwidth_bps"], rel=1e-3)
        assert bid in part["source"]["bus_efficiency"]
    assert "NCCL_NVLS_ENABLE=0" in rows["cw_gb200_1rack_allreduce_4g"]["system"]
    h100 = get_part("links", "nvlink4")
    assert h100["bus_efficiency"] == pytest.approx(368.76 / 450, rel=1e-3)
    assert "368.76" in h100["source"]["bus_efficiency"] and "#309" in h100["source"]["bus_efficiency"]
    tpu = get_part("links", "tpu-v4-ici")
    assert tpu["bus_efficiency"] == get_part("links", "nvlink3")["bus_efficiency"]
    assert tpu["source"]["bus_efficiency"].startswith("estimate: A100 figure")
