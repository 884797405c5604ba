"""The collective bench points under NCCL's own algorithm choice (issue 10, coll6).

Prints, for every row of tests/validation/collective_bench.csv (87 today), the published bus bandwidth and
the model's error under two readings. No constant is fitted:

* ``model``: the model as it is. Per call it takes the cheapest of ring, tree and NVLS tree, each
  charged the margin by which NCCL's estimates rank it behind NCCL's pick (and the trees of the
  domain split into parts, which the bench rows do not run). For the protocol it uses NCCL's own
  preference, charged the same way (``topologies.collectives.nccl_call_s``).
* ``nccl pick``: the model's time of the one (algorithm, protocol) that NCCL's own estimate ranks
  first. These are the catalog's ``tuning_*`` constants from NVIDIA/nccl src/graph/tuning.cc
  (the same in v2.26.2-1, commit f44ac759fee1), and src/enqueue.cc topoGetAlgoInfo takes the
  smallest estimate. It is a hard choice, not monotone in bandwidth, so it is a diagnostic only.

Both readings run at NCCL's own node count, without the model's split-domain trees, because no
published job set NCCL_HOSTID (the bench's ``fabric``, ``Fabric(..., split_domains=False)``).

The rows are ring or tree at Simple, and the low-latency protocol on each (LL, or LL128 inside
one domain). The last line counts the points within 15 %: all of them, those from 1 MiB to 1 GiB,
those of the latter at >= 64 GPUs, and the 6 at twenty GB200 racks (today 70 / 87, 38 / 50,
13 / 18, 0 / 6 for the model and for NCCL's pick; before collmid, with the model running the
faster algorithm by its own time, 69 / 87, 37 / 50, 13 / 18 and 68 / 87, 36 / 50, 12 / 18).

Run: PYTHONPATH=. python benchmarks/nccl_algorithm_choice.py
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "validation"))
import test_collectives_bench as bench  # noqa: E402

from topologies import collectives as coll  # noqa: E402


def nccl_pick_call_s(size_bytes, n, nodes, bus_bw_bps, tree_bus_bps, lat_intra_s, lat_net_s, base_s, all_reduce,
                     plateau, tree_factor, correction, ll_fraction, pipeline_s, nvls=None, lat_nvls_s=0.0,
                     choice=None, nvls_tree=None):
    """``coll.nccl_call_s`` with the model's time of the option that NCCL's estimate ranks first.
    The estimates use the same terms as ``coll.nccl_low_latency_excess_s`` and
    ``coll.nccl_simple_margins_s`` (the NVLS tree its own option where ``nvls``)."""
    n = np.asarray(n, dtype=float)
    nodes = np.asarray(nodes, dtype=float)
    lat = coll.ring_latency_s(n, nodes, lat_intra_s, lat_net_s, base_s, all_reduce)
    if all_reduce:
        lat = np.where(nodes > 1, lat * plateau, lat)
    bw = coll.ring_steps(n, all_reduce) / n * coll._beta(size_bytes, bus_bw_bps)
    model = {"ring Simple": lat + bw + pipeline_s, "ring low-latency": lat + bw / ll_fraction}
    est = {"ring Simple": choice["ring_s"] + bw, "ring low-latency": choice["ring_ll"] + bw * choice["ring_ll_g"]}
    if choice["ring_128"] is not None:
        est["ring low-latency"] = np.minimum(est["ring low-latency"], choice["ring_128"] + bw / 0.92)
    if all_reduce:
        idx = coll._size_index(size_bytes)
        tbw = 2.0 * coll._beta(size_bytes, tree_factor * np.asarray(tree_bus_bps, dtype=float)
                               * coll._table(idx, correction))
        tlat = coll.tree_latency_s(n, nodes, lat_intra_s, lat_net_s, base_s)
        model["tree Simple"], model["tree low-latency"] = tlat + tbw + pipeline_s, tlat + tbw / ll_fraction
        i = np.minimum(idx, coll._RATIO_COLS - 1)
        est["tree Simple"] = choice["tree_s"] + tbw
        est["tree low-latency"] = choice["tree_ll"] + tbw * np.take(choice["ratio_ll"], i) * choice["tree_ll_g"]
        if choice["tree_128"] is not None:
            est["tree low-latency"] = np.minimum(est["tree low-latency"],
                                                 choice["tree_128"] + tbw * np.take(choice["ratio_128"], i))
        if nvls is not None and choice.get("nvls_s") is not None:
            nvt, nbw = coll._nvls_tree_s(size_bytes, nodes, tree_bus_bps, lat_nvls_s, lat_net_s, base_s, nvls_tree)
            model["NVLS tree Simple"] = np.where(nvls, nvt + pipeline_s, np.inf)
            est["NVLS tree Simple"] = choice["nvls_s"] + nbw
    shape = np.shape(model["ring Simple"])
    keys = list(est)
    pick = np.argmin(np.stack([np.broadcast_to(est[k], shape) for k in keys]), axis=0)
    nccl_pick_call_s.last = [keys[j] for j in np.ravel(pick)]
    t = np.take_along_axis(np.stack([np.broadcast_to(model[k], shape) for k in keys]), pick[None], 0)[0]
    return np.where(n > 1, t, 0.0)


def errors(reading):
    call = coll.nccl_call_s
    if reading == "nccl pick":
        coll.nccl_call_s = nccl_pick_call_s
    try:
        out = {}
        for r in bench.ROWS:
            nccl_pick_call_s.last = None
            out[r["bench_id"]] = (bench.modelled_busbw(r) / float(r["busbw_gbs"]) - 1, nccl_pick_call_s.last)
        return out
    finally:
        coll.nccl_call_s = call


def counts(err):
    band = [r for r in bench.ROWS if 2 ** 20 <= float(r["message_bytes"]) <= 2 ** 30]
    groups = {"all": bench.ROWS, "1 MiB-1 GiB": band, ">= 64 GPUs": [r for r in band if int(r["gpus"]) >= 64],
              "20 racks": [r for r in bench.ROWS if r["bench_id"] in bench.TWENTY_RACKS]}
    return "  ".join(f"{k} {sum(abs(err[r['bench_id']][0]) <= 0.15 for r in g)}/{len(g)}" for k, g in groups.items())


def main():
    model, pick = errors("model"), errors("nccl pick")
    print(f"{'bench_id':42s} {'GPUs':>5s} {'size MiB':>9s} {'GB/s':>7s} {'model':>8s} {'nccl pick':>9s}  NCCL's pick")
    for r in bench.ROWS:
        i = r["bench_id"]
        print(f"{i:42s} {int(r['gpus']):5d} {float(r['message_bytes']) / 2 ** 20:9.0f} {float(r['busbw_gbs']):7.1f} "
              f"{model[i][0] * 100:+7.1f}% {pick[i][0] * 100:+8.1f}%  {(pick[i][1] or ['?'])[0]}")
    print("within 15 %, model:     ", counts(model))
    print("within 15 %, nccl pick: ", counts(pick))


if __name__ == "__main__":
    main()
