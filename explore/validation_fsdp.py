"""The PyTorch FSDP group of the validation set (``tests/validation/fsdp_runs.csv``): issue 10's
"new communication-bound group", pure sharded data parallelism without tensor or pipeline parallelism.

Source: MosaicML llm-foundry's MPT training benchmarks
(mosaicml/llm-foundry:scripts/train/benchmarking/README.md, commit
c90b9b312c644dbde5c9e6eef75c6f1c117d8782), table "H100 80GB BF16 (Large Scale, >= 128 GPUs)": MPT 1B-70B on 128, 256 and 512 H100, one microbatch
per GPU per step (GradAccum 1). The target is the measured step time GlobalBatchSize (T) /
Throughput (T/s), both from the table.

Plan mapping (Composer's FSDP, ``composer/trainer/mosaic_fsdp_utils.py`` of mosaicml/composer,
commit fb1dd382733fb0ad16a75415633fc900d8156fe4; llm-foundry wraps every transformer block as one
FSDP unit):

* ``FULL_SHARD`` -> ``zero = 3``: one all-gather per block in the forward, one in the backward
  (under activation checkpointing the backward's gather serves the recompute and the gradient
  computation both: the checkpointed block recomputes after its unit's pre-backward unshard, on
  the gathered parameters, which are resharded only after its gradient: ``FlatParamHandle.unshard``
  skips the all-gather while the unsharded storage is allocated, ``needs_unshard`` in torch's
  ``torch/distributed/fsdp/_flat_param.py``), one reduce-scatter per
  block. The H100 table was run by llm-foundry's scripts/train/benchmarking/sweep.py (commit
  5e85bd62d4ec9e13353ca95877477602ab538e5b, the commit that added the table; its per-model arguments
  are the table's microbatch, sharding and checkpointing), which passes
  ``--fsdp_config_backward_prefetch BACKWARD_PRE --fsdp_config_forward_prefetch true`` and
  submit_benchmarks.py writes both into ``fsdp_config``: BACKWARD_PRE issues the next block's backward
  gather before the current block's gradient computation (torch ``torch/distributed/fsdp/api.py``,
  ``BackwardPrefetch``): ``parallelism.backward_prefetch = "pre"``. (The same script passes
  ``--fsdp_config_mixed_precision PURE``, but submit_benchmarks.py never hands it on, so the default
  DEFAULT applies, as the table's "MP Mode" column says.) The A100 table is older and no script
  records its settings: Composer's default ``BACKWARD_POST`` (composer/trainer/dist_strategy.py, v0.17.2,
  ``fsdp_config.setdefault('backward_prefetch', 'BACKWARD_POST')``), ``backward_prefetch = "post"``:
  each backward gather after the previous block's gradient computation, on the critical path;
* ``SHARD_GRAD_OP`` -> ``zero = 2``: parameters gathered once per block in the forward and kept
  through the backward, gradients reduce-scattered per block. With one microbatch per step this is
  ZeRO-2's traffic (one gather and one reduce-scatter of every parameter per step), the gather under
  the forward (``overlap_param_gather``), the reduce-scatter in FSDP-unit-sized buckets under the
  backward (``grad_bucket_params`` = one block's parameters);
* mixed precision ``DEFAULT``: bf16 parameters for compute (gathered in bf16), fp32 gradient
  reduction (``grad_reduce_bytes = 4``); ``PURE`` would reduce in bf16;
* FSDP's root unit (Composer wraps the model's child as the FSDP root; the blocks are units of their
  own, so the root holds the embedding, tied head and final norm) -> ``fsdp_root_unit = True``: its
  gather opens every forward and its reduce-scatter closes every backward, both exposed, with the
  first block's (torch 2.1 ``torch/distributed/fsdp/_runtime_utils.py``: ``_root_pre_forward``,
  ``_post_forward_reshard``, ``_post_backward_final_callback``; step.py);
* activation checkpointing of every block -> ``recompute = "full"``; otherwise ``"none"``;
* ``parallelism.runtime = "torch"``: FSDP allocates the unsharded parameters and the gradients per
  step and the caching allocator keeps its reserve (``explore/model/runtime_memory.py``);
* ``training.elementwise_kernels = "llm-foundry-flash"`` (``"llm-foundry-triton"`` for 13B and 30B,
  which sweep.py runs with ``--attn_impl triton``): the H100 rows ran MPT in eager PyTorch 2.1
  (llm-foundry commit 5e85bd62d4ec9e13353ca95877477602ab538e5b, the commit that added the table and
  scripts/train/benchmarking/sweep.py): unfused LayerNorm, residual adds, GELU and bias-gradient
  reductions, flash-attn 2.4.2's varlen (un)padding copies, and flash-attn's fused Triton
  cross-entropy on the bf16 logits instead of Megatron's fp32 one (byte counts, kernel by kernel, in
  ``explore/model/calibration.py``, ``FOUNDRY_*``). The A100 rows (an older table) keep the default.
* ``training.train_metrics = 2`` (H100 rows): llm-foundry's ComposerMPTCausalLM registers
  LanguageCrossEntropy and LanguagePerplexity as train metrics (``use_train_metrics`` default True; the
  benchmark yamls leave it on), and Composer 0.17.2 (llm-foundry's pin) updates both after every
  microbatch's backward (``_train_microbatches`` -> ``_eval_train_metrics``), each a torch cross-entropy
  on the bf16 logits that autocast runs in fp32 (``calibration.TRAIN_METRIC_BYTES_PER_ELEMENT``). The
  A100 table's code is not pinned: 0 there (it would add under 0.1 %).
* ``training.step_syncs = "composer-0.17"`` (H100 rows): Composer v0.17.2's training loop
  (mosaicml/composer commit 7e0e40a72a6b, composer/trainer/trainer.py ``_train_loop`` and
  ``_accumulate_time_across_ranks``; composer/callbacks/speed_monitor.py ``batch_end``;
  composer/algorithms/gradient_clipping, which calls torch 2.1 FSDP's ``clip_grad_norm_``) runs per
  batch four scalar all-reduces (loss, samples/tokens, SpeedMonitor FLOPs, gradient norm) and one
  broadcast of the batch time from rank 0, each read back on the host or awaited on the stream, so
  serial with the step (host_syncs.py). The yamls enable speed_monitor and gradient_clipping (llm-foundry
  5e85bd62d scripts/train/yamls/pretrain/mpt-*.yaml). The A100 rows keep "none" (code not pinned).
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
    "DEFAULT (bf16 gathers, fp32 gradient reduce-scatter); flash attention; MPT's memory-bound kernels as they "
    "ran in eager PyTorch 2.1 (training.elementwise_kernels: llm-foundry-flash, llm-foundry-triton for 13B and 30B "
    "(sweep.py's attn_impl), flash-attn's Triton cross-entropy); Composer's two training metrics (fp32 "
    "cross-entropies over the logits after every microbatch's backward); gathers and reduce-scatters "
    "overlapped with compute except the FSDP root unit's (embedding) gather and reduce-scatter at the step's two "
    "ends (FSDP backward_prefetch BACKWARD_PRE and forward_prefetch, as llm-foundry's "
    "scripts/train/benchmarking/sweep.py, commit 5e85bd62d4ec9e13353ca95877477602ab538e5b, sets them). "
    "Not in the source: the network, assumed HGX/DGX H100 SXM with "
    "8 x 400 Gb/s InfiniBand NDR per node (one NIC per GPU) on a non-blocking fat tree; bias and LayerNorm "
    "parameters (13 L d, under 0.1 %) and the learned positional embedding are not modelled")

ASSUMPTIONS_A100 = (
    "MosaicML llm-foundry MPT benchmarks (A100 80GB with 1600 Gbps node-node interconnect (RoCE)), the multi-node "
    "rows: PyTorch FSDP via Composer, FULL_SHARD (ZeRO-3), tp = pp = 1, dp = GPUs, the table's microbatch and "
    "gradient accumulation (gathers and reduce-scatters every microbatch), activation checkpointing of every block; "
    "mixed precision PURE (bf16 gathers and bf16 gradient reduce-scatter); flash attention; Composer's "
    "BACKWARD_POST prefetch. The network is the table's 1600 Gbps per node, read as 8 x 200 Gb/s RoCE "
    "(one NIC per GPU) on a non-blocking fat tree; DGX/HGX A100 SXM with NVLink3 assumed; bias and LayerNorm "
    "parameters and the learned positional embedding not modelled")


MPT_DROPOUT = {"hidden_dropout": 0.0, "attention_dropout": 0.0}
"""MPT trains without dropout: MPTConfig's resid_pdrop defaults to 0.0 and the attention config's attn_pdrop
to 0.0, and neither the benchmark yamls nor sweep.py set them (mosaicml/llm-foundry
llmfoundry/models/mpt/configuration_mpt.py and llmfoundry/models/layers/blocks.py ``attn_config_defaults`` at
5e85bd62d4ec9e13353ca95877477602ab538e5b; configuration_mpt.py and llmfoundry/models/utils/config_defaults.py
at c90b9b312c644dbde5c9e6eef75c6f1c117d8782). The llm-foundry kernel counts (calibration.FOUNDRY_*) already
exclude dropout; this removes its masks from the activation memory as well."""
TRITON_ATTN = ("13b", "30b")   # sweep.py's --attn_impl triton (module docstring)


def build_scenario(row: dict) -> dict:
    """Scenario of one foundry23 run (module docstring for the mapping)."""
    L, h = int(row["layers"]), int(row["hidden"])
    n, mb = int(row["n_accel"]), int(row["microbatch"])
    full_shard = "FULL_SHARD" in row["zero_or_sharding"]
    fp32_reduce = "fp32 gradient reduction" in row["precision"]
    ckpt = row["activation_recompute"].startswith("yes")
    model = {"layers": L, "hidden": h, "heads": int(row["attn_heads"]), "ffn_hidden": int(row["ffn_hidden"]),
             "vocab": int(row["vocab"]), "seq_len": int(row["seq_len"]), "tied_embeddings": True,
             **MPT_DROPOUT}
    par = {"tp": 1, "pp": 1, "dp": n, "microbatch": mb, "virtual_stages": 1, "zero": 3 if full_shard else 2,
           "recompute": "full" if ckpt else "none", "sequence_parallel": False,
           "overlap_grad_reduce": True, "overlap_param_gather": True,
           "grad_reduce_bytes": 4 if fp32_reduce else 2, "grad_bucket_params": 12.0 * h * h,
           "runtime": "torch", "backward_prefetch": "post" if "_a100_" in row["run_id"] else "pre",
           "fsdp_root_unit": True}
    training = {"global_batch": int(row["global_batch_seqs"]), "precision": "bf16", "flash_attention": True}
    if "_h100_" in row["run_id"]:   # sweep.py: attn_impl triton for 13B and 30B, flash for the others
        triton = row["run_id"].split("_")[2] in TRITON_ATTN
        training["elementwise_kernels"] = "llm-foundry-triton" if triton else "llm-foundry-flash"
        training["train_metrics"] = 2     # LanguageCrossEntropy, LanguagePerplexity (module docstring)
        training["step_syncs"] = "composer-0.17"   # Composer 0.17.2's per-batch collectives (docstring)
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


SUBTABLES = {  # label -> run-id prefix test
    "H100 FULL_SHARD + activation checkpointing (13B-70B)": lambda r: "_h100_" in r and r.split("_")[2] in ("13b", "30b", "70b"),
    "H100 FULL_SHARD, no checkpointing (7B)": lambda r: "_h100_7b_" in r,
    "H100 SHARD_GRAD_OP, no checkpointing (1B, 3B)": lambda r: "_h100_1b_" in r or "_h100_3b_" in r,
    "A100 80GB, 1600 Gbps RoCE, FULL_SHARD (70B, 32-64 GPUs)": lambda r: "_a100_" in r,
}


def group_report(fit_in: bool = False) -> str:
    """The group out of sample (the shipped constants, fitted without it), by sub-table, with the
    step-time growth from 128 to 512 GPUs published and modelled; with ``fit_in`` also the
    constants refitted on the calibration set plus this group."""
    import numpy as np
    from explore import validation as V
    cases = V.load_cases()
    grp = [c for c in cases if V.group_of(c[0]) == GROUP]
    runs = {"shipped constants (fitted without the group)": None}
    if fit_in:
        c_in, _ = V.fit(V.calibration_cases(cases) + grp)
        runs["fitted with the group in (" + ", ".join(f"{f} {getattr(c_in, f):.3g}" for f in V.FIT_FIELDS) + ")"] = c_in
    out = []
    for label, c in runs.items():
        pred = V.predict(grp, c) if c is not None else V.predict(grp)
        pub = np.array([g[3] for g in grp])
        e = pred / pub - 1
        out.append(f"{label}: MAPE {100 * np.mean(np.abs(e)):.2f}%  max {100 * np.max(np.abs(e)):.2f}%  "
                   f"({len(e)} runs, {int((e < 0).sum())} too fast)")
        for sub, test in SUBTABLES.items():
            m = np.array([test(g[0]) for g in grp])
            out.append(f"  {sub}: MAPE {100 * np.mean(np.abs(e[m])):.2f}%  signed "
                       + " ".join(f"{100 * x:+.1f}" for x in e[m]))
        if c is not None:
            calib = V.calibration_cases(cases)
            ec = V.errors(calib, c)
            out.append(f"  calibration set under these constants: MAPE {100 * np.mean(np.abs(ec)):.2f}%  "
                       f"max {100 * np.max(np.abs(ec)):.2f}%")
        by = {g[0]: (p, g[3]) for g, p in zip(grp, pred)}
        for size in ("1b", "3b", "7b", "13b", "30b", "70b"):
            lo, hi = by[f"{GROUP}_h100_{size}_128"], by[f"{GROUP}_h100_{size}_512"]
            out.append(f"  {size} step 128 -> 512 GPUs: published {100 * (hi[1] / lo[1] - 1):+.1f}%  "
                       f"model {100 * (hi[0] / lo[0] - 1):+.1f}%")
    return "\n".join(out)


if __name__ == "__main__":
    import sys
    print(group_report(fit_in="--fit" in sys.argv))
