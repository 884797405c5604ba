"""Peak memory per device against published measurements (``tests/validation/memory_runs.csv``).

The published figures are torchtitan's (PyTorch, Dec 2024, Llama 3.1 8B / 70B / 405B on
H100 96 GB): PyTorch's peak *reserved* memory (``reserved_bytes.all.peak``, torchtitan 9dec370
``metrics.py``: the caching allocator's segments, so fragmentation included; CUDA context and
NCCL buffers not), in GiB, the maximum over ranks. The model's ``memory_per_device_bytes`` is
the peak over pipeline stages of weights, gradients, optimizer states, activations, the
runtime's buffers and the allocator's reserve (``calibration.ALLOCATOR_OVERHEAD``, fitted here:
``--fit``) plus ``MEMORY_RESERVED_BYTES`` (context and communication buffers, outside the
allocator); the figure compared is that total less ``MEMORY_RESERVED_BYTES``, in GiB.

How a torchtitan run maps onto a plan (the same for every run, never tuned per run):
- FSDP degree -> dp; FSDP fully shards (ZeRO-3), except with pipeline parallelism, where
  torchtitan does not reshard parameters after forward and reduces gradients on the last
  microbatch only: unsharded 16-bit weights and gradients, sharded optimizer (ZeRO-1).
- Loss: PyTorch ``cross_entropy`` on upcast logits (``training.loss = "unfused"``); TP runs
  shard the logits over the vocabulary (loss parallel); TP uses sequence parallelism.
- Runtime: ``parallelism.runtime = "torch"`` (torch.distributed.pipelining buffers, DTensor
  sequence parallelism, all-gather context parallelism; explore/model/runtime_memory.py).
- Attention: SDPA flash; microbatch = local batch (no gradient accumulation) without PP,
  local batch / pp with PP (torchtitan's default microbatch count); precision fp8 for the
  Float8 runs (memory per parameter is the same as bf16's).

Exclusion rule (stated once): a run is compared only if the model expresses its
activation-checkpointing policy: torchtitan's op-level selective checkpointing (saves some
matmul outputs, recomputes others) is not Korthikanti et al.'s selective recompute, so its
runs are listed but not compared.

Run: ``python -m explore.validation_memory [--fit]``.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
CSV_PATH = REPO / "tests" / "validation" / "memory_runs.csv"
GIB = 2.0 ** 30
PRESETS = {"Llama 3.1 8B": "llama3-8b", "Llama 3.1 70B": "llama3-70b", "Llama 3.1 405B": "llama3-405b"}
TOLERANCE = 0.10


def load_runs(path=CSV_PATH):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def expressible(run) -> bool:
    """The exclusion rule: the model expresses the run's activation checkpointing."""
    return run["activation_checkpointing"] in ("full", "none", "selective (Korthikanti)")


def scenario(run) -> dict:
    i = lambda k: int(run[k])  # noqa: E731
    tp, pp = i("tp"), i("pp")
    ac = run["activation_checkpointing"].split(" ")[0]
    return {
        "model": {"preset": PRESETS[run["model"]], "seq_len": i("seq_len")},
        "training": {"global_batch": i("global_batch_seqs"), "loss": "unfused",
                     "precision": "fp8" if "Float8" in run["techniques"] else "bf16",
                     "flash_attention": True},
        "parallelism": {"tp": tp, "pp": pp, "dp": i("fsdp"), "cp": i("cp"), "microbatch": i("microbatch"),
                        "virtual_stages": i("virtual_stages"), "zero": 1 if pp > 1 else 3,
                        "recompute": ac, "sequence_parallel": tp > 1, "runtime": "torch"},
        "system": {"accelerator": {"base": "h100-sxm-80gb", "hbm_capacity_bytes": float(run["hbm_gb"]) * 1e9},
                   "devices": i("devices"), "scale_up": {"size": 8, "link": "nvlink4"},
                   "scale_out": {"link": "ib-ndr-400"}},
    }


def compare(runs=None, allocator_overhead=None):
    """Rows of (run_id, published GiB, model GiB or NaN, relative error, compared?). The model's
    figure is its peak reserved memory: ``memory_per_device_bytes`` less ``MEMORY_RESERVED_BYTES``
    (CUDA context and communication buffers, outside the caching allocator that torchtitan reads).
    ``allocator_overhead``: evaluate with this ``calibration.ALLOCATOR_OVERHEAD`` (for ``fit``)."""
    import explore
    from explore.model import calibration as cal
    saved = cal.ALLOCATOR_OVERHEAD
    if allocator_overhead is not None:
        cal.ALLOCATOR_OVERHEAD = allocator_overhead
    try:
        out = []
        for run in runs if runs is not None else load_runs():
            pub = float(run["published_memory_gib"])
            ok = expressible(run)
            model = np.nan
            if ok:
                ds = explore.evaluate(scenario(run), keep_invalid=True, inputs=False)
                model = (float(ds["memory_per_device_bytes"].values[0]) - cal.MEMORY_RESERVED_BYTES) / GIB
            out.append({"run_id": run["run_id"], "published_gib": pub, "model_gib": model,
                        "error": model / pub - 1.0, "compared": ok})
    finally:
        cal.ALLOCATOR_OVERHEAD = saved
    return out


def fit(grid=None):
    """The ``ALLOCATOR_OVERHEAD`` (default grid: 0-0.5 in steps of 0.005, GMLake's range) with the
    smallest mean absolute error over the compared runs, and that error."""
    grid = np.arange(0.0, 0.5001, 0.005) if grid is None else np.asarray(grid, dtype=float)
    runs = [r for r in load_runs() if expressible(r)]
    mape = [np.mean([abs(r["error"]) for r in compare(runs, float(f))]) for f in grid]
    k = int(np.argmin(mape))
    return float(grid[k]), float(mape[k])


def report(rows) -> str:
    lines = [f"{'run':22s} {'published':>10s} {'model':>8s} {'error':>8s}"]
    for r in rows:
        if r["compared"]:
            lines.append(f"{r['run_id']:22s} {r['published_gib']:8.1f} GiB {r['model_gib']:6.1f} GiB "
                         f"{100 * r['error']:+7.1f}%")
        else:
            lines.append(f"{r['run_id']:22s} {r['published_gib']:8.1f} GiB   (not compared: checkpointing policy)")
    c = [r for r in rows if r["compared"]]
    err = np.array([abs(r["error"]) for r in c])
    lines.append(f"memory: MAPE {100 * err.mean():.1f}%  max {100 * err.max():.1f}%  "
                 f"{int((err <= TOLERANCE).sum())} of {len(c)} within {100 * TOLERANCE:.0f}%")
    return "\n".join(lines)


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(prog="python -m explore.validation_memory")
    ap.add_argument("--fit", action="store_true", help="fit calibration.ALLOCATOR_OVERHEAD on these runs")
    a = ap.parse_args(argv)
    if a.fit:
        f, mape = fit()
        print(f"ALLOCATOR_OVERHEAD fitted: {f:.3f} (MAPE {100 * mape:.2f} %)")
    print(report(compare()))


if __name__ == "__main__":
    main()
