"""The PyTorch FSDP group of the validation set (``tests/validation/fsdp_runs.csv``): issue 10's
"new communication-bound group", pure sharded data parallelism without tensor or pipeline parallelism.

Source: MosaicML llm-foundry's MPT training benchmarks (repository mosaicml/llm-foundry, file
scripts/train/benchmarking/README.md, commit c90b9b312c644dbde5c9e6eef75c6f1c117d8782), table
"H100 80GB BF16 (Large Scale, >= 128 GPUs)": MPT 1B-70B on 128, 256 and 512 H100, one microbatch
per GPU per step (GradAccum 1). The target is the measured step time GlobalBatchSize (T) /
Throughput (T/s), both from the table.

Plan mapping (Composer's FSDP, ``composer/trainer/mosaic_fsdp_utils.py`` of mosaicml/composer,
commit fb1dd382733fb0ad16a75415633fc900d8156fe4; llm-foundry wraps every transformer block as one
FSDP unit):

* ``FULL_SHARD`` -> ``zero = 3``: one all-gather per block in the forward, one in the backward
  (under activation checkpointing the backward's gather serves the recompute and the gradient
  computation both: the recomputed forward runs inside the unit's backward pre-hook), one
  reduce-scatter per block;
* ``SHARD_GRAD_OP`` -> ``zero = 2``: parameters gathered once per block in the forward and kept
  through the backward, gradients reduce-scattered per block. With one microbatch per step this is
  ZeRO-2's traffic (one gather and one reduce-scatter of every parameter per step), the gather under
  the forward (``overlap_param_gather``), the reduce-scatter in FSDP-unit-sized buckets under the
  backward (``grad_bucket_params`` = one block's parameters);
* mixed precision ``DEFAULT``: bf16 parameters for compute (gathered in bf16), fp32 gradient
  reduction (``grad_reduce_bytes = 4``); ``PURE`` would reduce in bf16;
* activation checkpointing of every block -> ``recompute = "full"``; otherwise ``"none"``;
* ``parallelism.runtime = "torch"``: FSDP allocates the unsharded parameters and the gradients per
  step and the caching allocator keeps its reserve (``explore/model/runtime_memory.py``).
"""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FSDP_CSV_PATH = REPO / "tests" / "validation" / "fsdp_runs.csv"
GROUP = "foundry23"

ASSUMPTIONS = (
    "MosaicML llm-foundry MPT benchmarks (H100 80GB BF16, >= 128 GPUs), PyTorch FSDP via Composer, tp = pp = 1, "
    "dp = GPUs, the table's microbatch, global batch (one microbatch per GPU per step), sharding strategy "
    "(FULL_SHARD: ZeRO-3 gathers per block forward and backward; SHARD_GRAD_OP: one gather per step, gradients "
    "reduce-scattered per block) and activation checkpointing (every block, full recompute); mixed precision "
    "DEFAULT (bf16 gathers, fp32 gradient reduce-scatter); flash attention; gathers and reduce-scatters "
    "overlapped with compute (FSDP prefetch). Not in the source: the network, assumed HGX/DGX H100 SXM with "
    "8 x 400 Gb/s InfiniBand NDR per node (one NIC per GPU) on a non-blocking fat tree; bias and LayerNorm "
    "parameters (13 L d, under 0.1 %) and the learned positional embedding are not modelled; Composer's default "
    "backward_prefetch BACKWARD_POST (composer/utils/parallelism.py of mosaicml/composer, commit "
    "008dac709c5da87a4d3e425fea6743c992fc5331; the benchmark scripts do not set it)")

ASSUMPTIONS_A100 = (
    "MosaicML llm-foundry MPT benchmarks (A100 80GB with 1600 Gbps node-node interconnect (RoCE)), the multi-node "
    "rows: PyTorch FSDP via Composer, FULL_SHARD (ZeRO-3), tp = pp = 1, dp = GPUs, the table's microbatch and "
    "gradient accumulation (gathers and reduce-scatters every microbatch), activation checkpointing of every block; "
    "mixed precision PURE (bf16 gathers and bf16 gradient reduce-scatter); flash attention; Composer's "
    "BACKWARD_POST prefetch. The network is the table's 1600 Gbps per node, read as 8 x 200 Gb/s RoCE "
    "(one NIC per GPU) on a non-blocking fat tree; DGX/HGX A100 SXM with NVLink3 assumed; bias and LayerNorm "
    "parameters and the learned positional embedding not modelled")


def build_scenario(row: dict) -> dict:
    """Scenario of one foundry23 run (module docstring for the mapping)."""
    L, h = int(row["layers"]), int(row["hidden"])
    n, mb = int(row["n_accel"]), int(row["microbatch"])
    full_shard = "FULL_SHARD" in row["zero_or_sharding"]
    fp32_reduce = "fp32 gradient reduction" in row["precision"]
    ckpt = row["activation_recompute"].startswith("yes")
    model = {"layers": L, "hidden": h, "heads": int(row["attn_heads"]), "ffn_hidden": int(row["ffn_hidden"]),
             "vocab": int(row["vocab"]), "seq_len": int(row["seq_len"]), "tied_embeddings": True}
    par = {"tp": 1, "pp": 1, "dp": n, "microbatch": mb, "virtual_stages": 1, "zero": 3 if full_shard else 2,
           "recompute": "full" if ckpt else "none", "sequence_parallel": False,
           "overlap_grad_reduce": True, "overlap_param_gather": True,
           "grad_reduce_bytes": 4 if fp32_reduce else 2, "grad_bucket_params": 12.0 * h * h,
           "runtime": "torch", "backward_prefetch": "post"}
    training = {"global_batch": int(row["global_batch_seqs"]), "precision": "bf16", "flash_attention": True}
    if row["run_id"].startswith(GROUP + "_a100"):
        system = {"accelerator": "a100-sxm-80gb", "devices": n, "scale_up": {"size": 8, "link": "nvlink3"},
                  "scale_out": {"topology": "fat-tree", "link": "roce-400", "nics_per_device": 1.0,
                                "bandwidth_bps": 200e9}}
        description = ASSUMPTIONS_A100
    else:
        system = {"accelerator": "h100-sxm-80gb", "devices": n, "scale_up": {"size": 8, "link": "nvlink4"},
                  "scale_out": {"topology": "fat-tree", "link": "ib-ndr-400", "nics_per_device": 1.0}}
        description = ASSUMPTIONS
    return {"name": row["run_id"], "description": description, "model": model,
            "training": training, "parallelism": par, "system": system}
