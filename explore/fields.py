"""The scenario's fields: every key a scenario may hold, its kind, default, range and
documentation (``SCHEMA``), the accelerator's own fields, and the sanity bounds past which a
value is refused. ``explore.scenario`` reads, checks and resolves scenarios against this table;
``explore.schema`` renders it as JSON Schema and as docs/scenario-reference.md.
"""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hwmodels.parts import part_ids

REQUIRED = object()
# Integers are carried as int64 and multiplied together in float64: every integer field is
# bounded by 2**53 (exact in float64, far below the int64 wrap at 2**63).
INT_MAX = 2**53


class ScenarioError(ValueError):
    """A scenario (or design-space) file is malformed: names the field, the value and what is allowed."""


@dataclass(frozen=True)
class Field:
    kind: str                      # "int" | "float" | "bool" | "choice" | "id"
    default: Any = REQUIRED        # REQUIRED, None (derived/optional) or a value
    lo: float | None = None        # inclusive lower bound
    lo_open: bool = False          # lower bound exclusive
    hi: float | None = None        # inclusive upper bound
    hi_open: bool = False          # upper bound exclusive
    choices: tuple = ()
    catalog: str | None = None     # catalog kind for "id" fields
    doc: str = ""

    def allowed(self) -> str:
        if self.kind in ("choice",):
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.kind == "id":
            return f"a {self.catalog} id: " + ", ".join(part_ids(self.catalog))
        if self.kind == "bool":
            return "true or false"
        parts = ["an integer" if self.kind == "int" else "a finite number"]
        if self.lo is not None:
            parts.append(f"{'>' if self.lo_open else '>='} {self.lo:g}")
        hi = self.hi
        if self.kind == "int":
            hi = INT_MAX if hi is None else min(hi, INT_MAX)
        if hi is not None:
            op = "<" if self.hi_open else "<="
            parts.append(("and " if self.lo is not None else "") + ("<= 2**53" if hi == INT_MAX else f"{op} {hi:g}"))
        return " ".join(parts)


def _models_path() -> Path:
    return Path(__file__).parent / "data" / "models.toml"


@functools.cache
def model_presets() -> dict[str, dict]:
    """Model presets (explore/data/models.toml), parsed once; treat as read-only."""
    return tomllib.loads(_models_path().read_text())


PRECISIONS = ("bf16", "fp16", "fp8", "fp4")  # fp4 (issue 11): NVFP4 GEMMs where the part has FP4
# scale-out network choices (issue 4); kept here so the schema stays the one place of truth
SCALE_OUT_TOPOLOGIES = ("fat-tree", "rail-optimized", "torus", "dragonfly", "ocs-torus", "ocs-reconfigurable")
OPTICS = ("copper", "pluggable", "lpo", "cpo", "optical-io")
RECONFIG_POLICIES = ("per-job", "per-step", "per-phase")
RECOMPUTE = ("none", "selective", "full")

SCHEMA: dict[str, dict[str, Field]] = {
    "model": {
        "preset": Field("choice", None, choices=tuple(model_presets()), doc="model preset id"),
        "layers": Field("int", REQUIRED, lo=1),
        "hidden": Field("int", REQUIRED, lo=1),
        "heads": Field("int", REQUIRED, lo=1),
        "kv_heads": Field("int", None, lo=1, doc="default: heads (multi-head attention)"),
        "ffn_hidden": Field("int", None, lo=1, doc="default: 4 * hidden"),
        "vocab": Field("int", REQUIRED, lo=1),
        "seq_len": Field("int", REQUIRED, lo=1),
        "gated_mlp": Field("bool", False),
        "tied_embeddings": Field("bool", False),
        "experts": Field("int", 1, lo=1),
        "top_k": Field("int", 1, lo=1),
        "moe_ffn_hidden": Field("int", None, lo=1, doc="default: ffn_hidden"),
        "shared_experts": Field("int", 0, lo=0, doc="always-active experts of width moe_ffn_hidden"),
        # --- frontier workloads (issue 11): MoE layout, attention variants (explore/model/moe.py, attention.py)
        "dense_layers": Field("int", 0, lo=0, doc="MoE models: leading dense layers (DeepSeek-V3: 3)"),
        "capacity_factor": Field("float", 1.0, lo=1.0,
                                 doc="MoE: busiest expert's tokens / mean (load imbalance; it sets the pace)"),
        "head_dim": Field("int", None, lo=1, doc="default: hidden / heads"),
        "kv_lora_rank": Field("int", 0, lo=0, doc="multi-head latent attention (MLA) KV rank; 0 = GQA/MHA"),
        "q_lora_rank": Field("int", 0, lo=0, doc="MLA query compression rank; 0 = none"),
        "rope_head_dim": Field("int", 64, lo=0, doc="MLA decoupled RoPE key dimension"),
        "sliding_window": Field("int", 0, lo=0, doc="attention window in tokens; 0 = full (causal) context"),
        # dropout probabilities (Megatron-LM's --hidden-dropout / --attention-dropout, default 0.1): at 0
        # PyTorch runs no dropout kernel and stores no mask (workload.activation_bytes_per_layer, layer_compute)
        "hidden_dropout": Field("float", 0.1, lo=0.0, hi=1.0, hi_open=True,
                                doc="dropout probability after the attention and MLP blocks (before each residual "
                                    "add); 0 = no dropout: no masks stored, no dropout pass (Llama, Mixtral, "
                                    "DeepSeek-V3, Qwen3 presets); default 0.1, Megatron-LM's"),
        "attention_dropout": Field("float", 0.1, lo=0.0, hi=1.0, hi_open=True,
                                   doc="dropout probability on the attention probabilities; matters only without "
                                       "flash attention (the s x s mask and dropout output); default 0.1, Megatron-LM's"),
    },
    "training": {
        "global_batch": Field("int", REQUIRED, lo=1, doc="sequences per optimizer step"),
        "tokens": Field("float", 300e9, lo=0, lo_open=True, doc="token budget for time_to_train_s"),
        "precision": Field("choice", "bf16", choices=PRECISIONS),
        "flash_attention": Field("bool", True, doc="fused attention: no s^2 tensors in HBM"),
        # --- precision recipes (issue 11, explore/model/precision.py)
        "fp8_recipe": Field("choice", "per-tensor", choices=("per-tensor", "blockwise", "mxfp8"),
                            doc="scaling of FP8 GEMMs (precision fp8 only)"),
        "optimizer_moments": Field("choice", "fp32", choices=("fp32", "bf16"),
                                   doc="Adam m and v precision (DeepSeek-V3: bf16)"),
        "fp8_dispatch": Field("bool", False, doc="MoE dispatch all-to-all in FP8 (DeepSeek-V3); combine stays BF16"),
        "loss": Field("choice", "fused", choices=("fused", "unfused"),
                      doc="cross-entropy: fused (Megatron's vocab-parallel loss, fp32 logits once) or unfused "
                          "(PyTorch cross_entropy on upcast 16-bit logits: 12 B per logit at its peak, 16 B with "
                          "loss parallel, +2 B while the caller holds the logits; memory.loss_bytes_per_logit)"),
        "train_metrics": Field("int", 0, lo=0,
                               doc="training metrics that each recompute a cross-entropy over the logits in "
                                   "fp32 after every microbatch's backward (Composer's train metrics: "
                                   "llm-foundry's MPT registers 2, LanguageCrossEntropy and LanguagePerplexity; "
                                   "14 B per logit each, explore/model/calibration.py TRAIN_METRIC_BYTES_PER_ELEMENT)"),
        "step_syncs": Field("choice", "none", choices=("none", "composer-0.17"),
                            doc="per-batch scalar collectives of the training loop, serial with the step "
                                "(each read back on the host or awaited on the stream): none, or "
                                "composer-0.17 (Composer v0.17.2 as llm-foundry ran it: loss, samples/tokens "
                                "and SpeedMonitor FLOPs all-reduces, the batch-time broadcast from rank 0 and "
                                "FSDP clip_grad_norm_'s all-reduce; explore/model/host_syncs.py)"),
        "elementwise_kernels": Field("choice", "megatron",
                                     choices=("megatron", "llm-foundry-flash", "llm-foundry-triton"),
                                     doc="HBM traffic of the memory-bound kernels around the GEMMs and of the "
                                         "loss (explore/model/calibration.py): megatron (Megatron-LM's fused "
                                         "bias-dropout-add, backward = 2 x forward, fp32 vocab-parallel "
                                         "cross-entropy: 38 + 14 B per logit) or llm-foundry-* (MPT in eager "
                                         "PyTorch 2.1 as llm-foundry ran it, 2023-24: LayerNorm, residual adds, "
                                         "GELU, bias-gradient reductions, flash-attn's Triton cross-entropy: 2 + 4 "
                                         "B per logit; -flash adds the (un)padding copies of attn_impl flash, "
                                         "-triton (attn_impl triton) has none)"),
        "loss_kernel": Field("choice", "megatron", choices=("megatron", "te"),
                             doc="kernels of the cross-entropy over the logits (time; not with llm-foundry "
                                 "elementwise_kernels, which bring their own): megatron (Megatron-Core's "
                                 "vocab_parallel_cross_entropy on fp32 logits: 38 + 14 B per logit) or te "
                                 "(Transformer Engine's Triton parallel_cross_entropy on the 16-bit logits, "
                                 "Megatron-Core cross_entropy_fusion_impl 'te': 6 + 4 B per logit; "
                                 "explore/model/calibration.py TE_LOGITS_*)"),
    },
    "parallelism": {
        "tp": Field("int", 1, lo=1),
        "pp": Field("int", 1, lo=1),
        "dp": Field("int", None, lo=1, doc="default: devices / (tp * pp * cp)"),
        "cp": Field("int", 1, lo=1, doc="context parallelism (ring attention); tp*pp*dp*cp = devices"),
        "ep": Field("int", 1, lo=1, doc="expert parallelism; divides dp*cp and model.experts (Megatron-Core)"),
        "etp": Field("int", None, lo=1, doc="expert tensor parallelism (MoE parallel folding); default: tp; "
                                            "etp*ep divides tp*dp*cp"),
        "moe_dispatcher": Field("choice", "alltoall", choices=("alltoall", "deepep"),
                                doc="alltoall: one copy per selected expert; deepep: one copy per remote "
                                    "scale-up domain, forwarded inside it (DeepEP / HybridEP)"),
        "moe_permute_fusion": Field("bool", True,
                                    doc="Transformer Engine's fused MoE permute / unpermute (Megatron-Core "
                                        "moe_permute_fusion); False: the unfused PyTorch passes Megatron-Core runs "
                                        "by default (moe_utils.permute / unpermute), charged as memory traffic "
                                        "per MoE layer (explore/model/moe.py unfused_permute_bytes)"),
        "overlap_moe_comm": Field("bool", False,
                                  doc="overlap MoE all-to-all with another microbatch's compute (EP A2A overlap): "
                                      "Megatron-Core's combined 1F1B, steady-state forward/backward "
                                      "layer pairs only (explore/model/moe_overlap.py)"),
        "microbatch": Field("int", 1, lo=1),
        "virtual_stages": Field("int", 1, lo=1, doc="interleaved 1F1B model chunks per pipeline rank"),
        "pp_embedding_as_layer": Field("bool", False,
                                       doc="the input embedding counts as one layer of the pipeline split "
                                           "(Megatron-Core account_for_embedding_in_pipeline_split): the "
                                           "(layers + this + pp_loss_as_layer) slots split evenly over the pp * "
                                           "virtual_stages model chunks, which must divide them, and the first "
                                           "chunk of the first rank holds one layer fewer; with one slot per "
                                           "chunk, the embedding alone (Llama 3 405B: 126 + 2 on 16 x 8, Dubey "
                                           "et al. 2024 Sec. 3.3.2). Needs pp > 1 (memory.py, step.py)"),
        "pp_loss_as_layer": Field("bool", False,
                                  doc="the output layer and loss count as one layer of the pipeline split "
                                      "(Megatron-Core account_for_loss_in_pipeline_split): the last chunk of the "
                                      "last rank holds one layer fewer (with one slot per chunk, the output layer "
                                      "and loss alone); as pp_embedding_as_layer. Needs pp > 1"),
        "zero": Field("int", 1, lo=0, hi=3),
        "recompute": Field("choice", "selective", choices=RECOMPUTE),
        "sequence_parallel": Field("bool", True),
        "overlap_grad_reduce": Field("bool", True, doc="overlap DP gradient reduction with backward"),
        "overlap_param_gather": Field("bool", True, doc="overlap ZeRO parameter all-gathers with compute"),
        "overlap_tp_comm": Field("bool", False, doc="overlap tensor-parallel collectives with GEMMs (Megatron-Core --tp-comm-overlap)"),
        "tp_overlap": Field("choice", "layer", choices=("layer", "per_gemm"),
                            doc="with overlap_tp_comm, what the tensor-parallel collectives hide under: layer (the "
                                "layer's collectives summed under all its GEMMs, forward and backward) or per_gemm "
                                "(Transformer Engine userbuffers as Megatron-Bridge's FP8 Llama 3.1 405B layouts set "
                                "it: each collective fused into one GEMM and waited at its end; ring-exchange "
                                "forward all-gathers / reduce-scatters and data-gradient all-gathers under (tp - 1) "
                                "/ tp of their GEMM, the backward's bulk input all-gather and data-gradient "
                                "reduce-scatter under the qkv / fc1 data- and weight-gradient GEMMs, all-gathers in "
                                "FP8 under an FP8 recipe, plus the ring reduce-scatter's reduce pass; "
                                "overlap.userbuffers_exposed)"),
        "grad_reduce_bytes": Field("int", 4, lo=1, hi=4, doc="bytes per gradient element in the DP reduction and in the "
                                                             "main-gradient buffer (fp32 main grads: 4)"),
        "param_gather_bytes": Field("float", 2.0, lo=1, hi=4,
                                    doc="bytes per parameter element in every data-parallel parameter all-gather "
                                        "(the distributed optimizer's ZeRO-1/2 gather, ZeRO-3 / FSDP per-layer "
                                        "gathers): 16-bit weights 2; Megatron-Core fp8_param_gather (Transformer "
                                        "Engine FP8 parameters, gathered as uint8) or torchtitan "
                                        "enable_fsdp_float8_all_gather 1"),
        "runtime": Field("choice", "megatron", choices=("megatron", "torch", "deepspeed"),
                         doc="memory the training runtime holds (memory only, explore/model/runtime_memory.py): "
                             "megatron (Megatron-Core), torch (PyTorch native as torchtitan Dec 2024: pipeline "
                             "outputs and receive buffers kept per microbatch, DTensor sequence parallelism saves "
                             "gathered GEMM inputs, all-gather context parallelism) or deepspeed (DeepSpeed 2021: "
                             "ZeRO-3 gathers per submodule, not per layer)"),
        "zero3_calls_per_layer": Field("float", 1.0, lo=1, hi=64,
                                       doc="ZeRO-3 collectives per layer and pass (each parameter gather, the "
                                           "gradient reduce-scatter), each paying its latency: 1 = one coalesced "
                                           "call per layer (FSDP, Megatron-Core); DeepSpeed 2021 stage 3 gathered "
                                           "per weight matrix above stage3_param_persistence_threshold (4 per GPT "
                                           "layer)"),
        "zero3_gather_passes": Field("float", 2.0, lo=1, hi=3,
                                     doc="ZeRO-3 parameter gathers per layer and microbatch: 2 = forward and "
                                         "backward (a full recompute reuses the backward's gather: FSDP); 3 = "
                                         "the recompute gathers again (DeepSpeed 2021 stage 3 released each "
                                         "weight after every forward)"),
        "zero3_replicated_params_per_layer": Field("float", 0.0, lo=0, hi=64,
                                                   doc="ZeRO-3 parameters per layer kept whole (below DeepSpeed's "
                                                       "stage3_param_persistence_threshold: biases, norms) but "
                                                       "re-gathered after every optimizer step by a copy per rank "
                                                       "(DeepSpeed 2021 stage 3: 8 per GPT layer); 0: none"),
        "list_collectives": Field("bool", False,
                                  doc="data-parallel all-gathers and reduce-scatters take a list of one tensor per "
                                      "rank (torch.distributed.all_gather / reduce_scatter before _all_gather_base, "
                                      "as DeepSpeed 2021 stage 3): each call adds host work per rank "
                                      "(hwmodels/catalog/collectives.toml copy_launch_s + aten_call_s)"),
        "list_gather_host_calls": Field("float", 0.0, lo=0, hi=16,
                                        doc="Python tensor calls per rank that the caller of a list-form "
                                            "all-gather makes to build its list, each at the catalog's "
                                            "python_tensor_call_s (DeepSpeed 2021 stage 3 _allgather_param: 1, "
                                            "a narrow() view per rank); 0: none, or no list collectives"),
        "list_reduce_host_calls": Field("float", 0.0, lo=0, hi=16,
                                        doc="Python tensor calls per rank that the caller of a list-form "
                                            "reduce-scatter makes to build its list (DeepSpeed 2021 stage 3 "
                                            "_reduce_scatter_gradient: 2, view() and narrow() per rank)"),
        "zero3_replicated_host_calls": Field("float", 0.0, lo=0, hi=16,
                                             doc="Python tensor calls per rank for each small ZeRO-3 parameter "
                                                 "regathered after the step, besides its copy's launch "
                                                 "(DeepSpeed 2021 stage 3 _allgather_params: 4, narrow, view, "
                                                 "narrow and copy_)"),
        "zero3_fetch_sync": Field("bool", False,
                                  doc="every ZeRO-3 gather zero-fills its buffer and synchronizes the device "
                                      "first (DeepSpeed 2021 stage 3 _allgather_param: torch.zeros, then "
                                      "torch.cuda.synchronize()): the fill is on the critical path, and a weight's "
                                      "gradient reduce-scatter, issued from the next weight's gradient hook, "
                                      "hides only under that weight's backward GEMMs (the next gather waits for "
                                      "it); false: the reduction overlaps the whole backward"),
        "backward_prefetch": Field("choice", "pre", choices=("pre", "post"),
                                   doc="ZeRO-3 / FSDP FULL_SHARD backward all-gathers: pre (the next layer's gather "
                                       "is issued before the current layer's gradient computation and hidden under "
                                       "it: Megatron, DeepSpeed, FSDP BACKWARD_PRE) or post (issued after it, so the "
                                       "next layer's gradient computation waits for its gather: FSDP BACKWARD_POST, "
                                       "Composer's default)"),
        "fsdp_root_unit": Field("bool", False,
                                doc="PyTorch FSDP (torch 2.1 FSDP1, torch/distributed/fsdp/_runtime_utils.py): the "
                                    "parameters outside the layers (embedding, tied head, final norm) form the root "
                                    "unit, gathered first in every forward after the compute stream "
                                    "(_root_pre_forward) with the first layer's gather queued behind it, and "
                                    "reduce-scattered last, after the embedding's backward, before the step waits "
                                    "for the reduction stream (_post_backward_final_callback): both ends exposed "
                                    "per microbatch (step.py)"),
        "pp_p2p": Field("choice", "batched", choices=("batched", "serial", "overlapped", "overlapped_send_wait"),
                        doc="pipeline point-to-point: batched (Megatron-LM: the send to and the receive from a "
                            "neighbour in one batch_isend_irecv, 2 (v m + p - 1) exchanges on the critical path) "
                            "or serial (DeepSpeed's pipeline engine, TrainSchedule: one blocking send or receive "
                            "per tensor, one after another, 2 m + p - 4 transfers each way on the critical path; "
                            "a scattered tensor is preceded by its partition metadata), overlapped (Megatron-Core's "
                            "interleaved schedule with overlap_p2p_comm, as Megatron-Bridge sets it whenever pp > 1 "
                            "and vp > 1: blocking exchanges in the warm-up and cool-down, non-blocking in the steady "
                            "state, each waited one pass later; only the fill and drain chains through the p v "
                            "virtual stages wait, 2 (p v - 1) transfers) or overlapped_send_wait (the same from "
                            "Megatron-LM addc601f57 with deallocate_pipeline_outputs: each steady-state forward "
                            "send is waited as soon as it is posted, max(v (m - p) - 1, 0) transfers more); both "
                            "fall back to batched when v = 1 (batch_p2p_comm; pipeline_p2p.py)"),
        "grad_reduce_window": Field("choice", "last_slot", choices=("last_slot", "per_chunk"),
                                    doc="where the overlapped data-parallel gradient reduction (ZeRO 0/1) may "
                                        "start: last_slot (under the last backward slot) or per_chunk "
                                        "(Megatron-Core interleaved, v > 1: one DDP buffer set per model chunk, "
                                        "each chunk's gradient sync enabled for its last microbatch's backward "
                                        "(pipeline_parallel/schedules.py), so the cool-down's remaining chunk "
                                        "backwards hide the other chunks' reductions; overlap.per_chunk_reduce)"),
        "pp_scatter_grads": Field("bool", True,
                                  doc="the activation gradient sent back between pipeline stages is scattered over "
                                      "the tensor group, as the activation is (Megatron-LM; DeepSpeed from v0.5.4); "
                                      "false: every tensor rank sends the whole gradient (DeepSpeed up to v0.5.3)"),
        "grad_accumulation": Field("choice", "fused", choices=("fused", "hook", "autograd"),
                                   doc="how each microbatch's weight gradients join the step's accumulated "
                                       "gradient: fused (Megatron-Core's gradient-accumulation fusion: the "
                                       "weight-gradient GEMM adds into the main gradient, no extra pass); hook "
                                       "(a separate element-wise add per parameter in every microbatch: "
                                       "Megatron-LM 2021's local DDP hook main_grad.add_(grad), DeepSpeed's bf16 "
                                       "optimizer's update_hp_grads); autograd (the "
                                       "same add in every microbatch but the first, whose gradient autograd's "
                                       "AccumulateGrad keeps: PyTorch DDP under no_sync, DeepSpeed's pipeline "
                                       "engine). Each add reads the 16-bit gradient and reads and writes the "
                                       "accumulator of grad_reduce_bytes: 2 + 2 x grad_reduce_bytes bytes per "
                                       "local parameter, per shard parameter under ZeRO-2/3 (step.py)"),
        "grad_bucket_params": Field("float", None, lo=0, lo_open=True,
                                    doc="parameters per data-parallel gradient bucket (one collective each); "
                                        "default: Megatron-Core's max(4e7, 1e6 * dp) with overlap_grad_reduce, "
                                        "else one bucket"),
    },
    "system": {
        "accelerator": Field("id", REQUIRED, catalog="accelerators"),
        "devices": Field("int", REQUIRED, lo=1),
    },
    "system.scale_up": {
        "size": Field("int", 8, lo=1, doc="devices per scale-up domain"),
        "link": Field("id", "nvlink4", catalog="links"),
        "bandwidth_bps": Field("float", None, lo=0, lo_open=True, doc="per device per direction; default: the link's"),
        "latency_s": Field("float", None, lo=0, doc="default: the link's"),
        "switch": Field("id", None, catalog="switches",
                        doc="scale-up switch (e.g. nvlink-switch-tray): switches counted per domain; "
                            "default: the link's per-device cost and power"),
    },
    "system.scale_out": {
        "topology": Field("choice", "fat-tree", choices=SCALE_OUT_TOPOLOGIES,
                          doc="network family (topologies.network.FAMILIES)"),
        "link": Field("id", "ib-ndr-400", catalog="links"),
        "nics_per_device": Field("float", 1.0, lo=0, lo_open=True,
                                 doc="NIC ports per device; on a torus, its torus ports"),
        "oversubscription": Field("float", 1.0, lo=1.0),
        "switch": Field("id", "quantum-2-qm9700", catalog="switches"),
        "optics": Field("choice", "pluggable", choices=OPTICS,
                        doc="link technology of every network link end (copper only within reach)"),
        "transceiver": Field("id", None, catalog="switches",
                             doc="fixed module power/cost for optical link ends; default: the optics link budget"),
        "torus_x": Field("int", None, lo=1, doc="torus dimensions in scale-up nodes; default: near-cubic, and every call also tries the near-cubic shape of the domain split in 2, 4, ... parts"),
        "torus_y": Field("int", None, lo=1),
        "torus_z": Field("int", None, lo=1),
        "cube_dim": Field("int", 4, lo=1, doc="ocs-torus: nodes per cube edge (TPU v4: 4)"),
        "ocs": Field("id", "palomar-136", catalog="ocs", doc="optical circuit switch (ocs-* families)"),
        "ocs_reconfig_s": Field("float", None, lo=0, doc="default: the OCS's"),
        "ocs_insertion_loss_db": Field("float", None, lo=0, doc="default: the OCS's"),
        "reconfiguration": Field("choice", "per-job", choices=RECONFIG_POLICIES,
                                 doc="ocs-reconfigurable: when circuits are re-set"),
        "global_link_fraction": Field("float", 1.0, lo=0, lo_open=True, hi=1.0,
                                      doc="dragonfly: global ports populated per group as a fraction of the "
                                          "balanced a h of the switch radix (ceil(a h f) ports: the global links "
                                          "and their optics scale with it, and a group-spanning pattern gets "
                                          "min(1, ceil(a h f) / (p a)) of the injection rate, halved by Valiant "
                                          "routing; topologies/dragonfly.py); 1 = balanced; OLCF Frontier: "
                                          "292 / 512 = 0.5703125 (4 links to each of 73 other groups); a job "
                                          "filling more than ceil(a h f) + 1 groups is invalid (the global "
                                          "ports cannot join every pair of groups)"),
        "bandwidth_bps": Field("float", None, lo=0, lo_open=True, doc="per NIC per direction; default: the link's"),
        "latency_s": Field("float", None, lo=0, doc="default: the link's"),
    },
    "datacenter": {
        "pue": Field("float", 1.1, lo=1.0),
        "electricity_usd_per_kwh": Field("float", 0.08, lo=0.0),
        "lifetime_years": Field("float", 4.0, lo=0, lo_open=True),
        "interruptions_per_device_hour": Field("float", None, lo=0.0, doc="default: the accelerator's"),
        "restart_s": Field("float", 900.0, lo=0.0, doc="time to restart after an interruption"),
        "checkpoint_write_bps_per_device": Field("float", 8e9, lo=0, lo_open=True,
                                                 doc="storage write bandwidth per device, bits/s"),
        # issue 14: carbon (explore/model/carbon.py)
        "grid": Field("id", "usa", catalog="grid", doc="grid region for operational carbon (catalog/grid.toml)"),
        "grid_kg_per_kwh": Field("float", None, lo=0.0, doc="grid carbon intensity; default: the region's"),
    },
}
TOP_KEYS = ("name", "description", "model", "training", "parallelism", "system", "datacenter", "uncertainty")
# `uncertainty` (issue 14) is read by explore.uncertainty; resolve() ignores it.
# Inline accelerator tables accept the catalog fields plus `base`.
ACCEL_FIELDS = ("peak_flops_bf16", "peak_flops_fp16", "peak_flops_fp8", "hbm_capacity_bytes",
                "hbm_bandwidth_bytes_per_s", "tdp_w", "idle_power_w", "price_usd", "host_power_w",
                "host_price_usd", "interruptions_per_hour")
# Bounds of the inline catalog fields: a device must compute in BF16, hold and move data and
# draw power; FP16/FP8 peaks of 0 mean "not supported"; idle power may not exceed TDP
# (checked per design in explore.evaluate).
ACCEL_FIELD_SPECS: dict[str, Field] = {
    "peak_flops_bf16": Field("float", None, lo=0, lo_open=True, hi=1e18, doc="dense BF16 FLOP/s"),
    "peak_flops_fp16": Field("float", None, lo=0, hi=1e18, doc="dense FP16 FLOP/s; 0 = not supported"),
    "peak_flops_fp8": Field("float", None, lo=0, hi=1e18, doc="dense FP8 FLOP/s; 0 = not supported"),
    "hbm_capacity_bytes": Field("float", None, lo=0, lo_open=True, hi=1e15),
    "hbm_bandwidth_bytes_per_s": Field("float", None, lo=0, lo_open=True, hi=1e16),
    "tdp_w": Field("float", None, lo=0, lo_open=True, hi=1e5),
    "idle_power_w": Field("float", None, lo=0, hi=1e5, doc="at most tdp_w"),
    "price_usd": Field("float", None, lo=0, hi=1e9),
    "host_power_w": Field("float", None, lo=0, hi=1e5),
    "host_price_usd": Field("float", None, lo=0, hi=1e9),
    "interruptions_per_hour": Field("float", None, lo=0, hi=1.0),
}
# Sanity bounds beyond the schema's physical ones: each is several orders of magnitude past any
# part in the catalog or published cluster, so only typos and overflow probes hit them (a value
# there would otherwise overflow the float64 model into inf/NaN or swamp every other term).
SANITY_HI: dict[str, float] = {
    "training.tokens": 1e18,
    # issue 11/10/14 fields: an expert never sees 1,000x the mean load; no model has 1e15
    # parameters; the dirtiest grids are ~1 kgCO2e/kWh
    "model.capacity_factor": 1e3, "parallelism.grad_bucket_params": 1e15,
    "datacenter.grid_kg_per_kwh": 10.0,
    "system.scale_up.bandwidth_bps": 1e16, "system.scale_up.latency_s": 1.0,
    "system.scale_out.bandwidth_bps": 1e16, "system.scale_out.latency_s": 1.0,
    "system.scale_out.nics_per_device": 1024.0, "system.scale_out.oversubscription": 1e3,
    "system.scale_out.ocs_reconfig_s": 3600.0, "system.scale_out.ocs_insertion_loss_db": 100.0,
    "datacenter.pue": 10.0, "datacenter.electricity_usd_per_kwh": 100.0,
    "datacenter.lifetime_years": 100.0, "datacenter.interruptions_per_device_hour": 1.0,
    "datacenter.restart_s": 1e7, "datacenter.checkpoint_write_bps_per_device": 1e16,
    # parametric accelerator (a 300 mm wafer is 70,686 mm2)
    "system.accelerator.compute_dies": 1024, "system.accelerator.die_area_mm2": 1e5,
    "system.accelerator.clock_hz": 1e11, "system.accelerator.hbm_stacks": 1024,
    "system.accelerator.hbm_stack_capacity_bytes": 1e13,
    "system.accelerator.hbm_stack_bandwidth_bytes_per_s": 1e14,
    "system.accelerator.d2d_bandwidth_bps": 1e17, "system.accelerator.io_dies": 1024,
    "system.accelerator.io_die_area_mm2": 1e5, "system.accelerator.optical_io": 1024,
    "system.accelerator.io_bandwidth_bps": 1e17, "system.accelerator.board_power_w": 1e5,
    "system.accelerator.board_cost_usd": 1e9, "system.accelerator.power_limit_w": 1e6,
    "system.accelerator.nre_volume": 1e12, "system.accelerator.price_markup": 1e3,
}
# Extension point: later modules register extra inline-accelerator keys (parametric hardware).
ACCEL_EXTRA_FIELDS: dict[str, Field] = {}
# Parametric accelerator (issue 3, hwmodels.package): any of these keys makes the inline
# accelerator parametric; keys left out take the value of the reconstruction of `base`
# (hwmodels/catalog/accelerator_designs.toml; h100-sxm-80gb without a base).
ACCEL_EXTRA_FIELDS.update({
    "compute_dies": Field("int", None, lo=1, doc="compute dies in the package"),
    "die_area_mm2": Field("float", None, lo=0, lo_open=True, doc="area of one compute die"),
    "node": Field("id", None, catalog="process_nodes", doc="compute-die process node"),
    "matrix_fraction": Field("float", None, lo=0, lo_open=True, hi=1, doc="share of die area in matrix units"),
    "clock_hz": Field("float", None, lo=0, lo_open=True, doc="default: the node's clock"),
    "hbm": Field("id", None, catalog="hbm", doc="HBM generation"),
    "hbm_stacks": Field("int", None, lo=0),
    "hbm_stack_capacity_bytes": Field("float", None, lo=0, lo_open=True, doc="default: the generation's"),
    "hbm_stack_bandwidth_bytes_per_s": Field("float", None, lo=0, lo_open=True, doc="default: the generation's"),
    "package": Field("id", None, catalog="packaging", doc="package technology"),
    "d2d": Field("id", None, catalog="d2d", doc="die-to-die link class"),
    "d2d_bandwidth_bps": Field("float", None, lo=0, doc="per compute die per direction; default: its HBM share"),
    "io_dies": Field("int", None, lo=0, doc="I/O (base) dies carrying HBM PHYs and off-package I/O"),
    "io_die_area_mm2": Field("float", None, lo=0),
    "io_node": Field("id", None, catalog="process_nodes"),
    "optical_io": Field("int", None, lo=0, doc="optical I/O chiplets on the package"),
    "optical_io_type": Field("id", None, catalog="io_chiplets"),
    "io_bandwidth_bps": Field("float", None, lo=0, doc="electrical off-package I/O per direction"),
    "board_power_w": Field("float", None, lo=0),
    "board_cost_usd": Field("float", None, lo=0),
    "power_limit_w": Field("float", None, lo=0, lo_open=True, doc="package power limit (cooling)"),
    "nre_volume": Field("float", None, lo=0, doc="units over which NRE is amortised; 0 = not amortised"),
    "price_markup": Field("float", None, lo=0, lo_open=True,
                          doc="price / manufacturing cost; default: the base part's price / its reconstruction's cost"),
})


def field_spec(path: str) -> Field:
    """The ``Field`` of a dotted scenario path, with the sanity bound of SANITY_HI and, for
    integers, the 2**53 cap folded into ``hi``."""
    if path.startswith("system.accelerator."):
        key = path[len("system.accelerator."):]
        f = ACCEL_EXTRA_FIELDS.get(key) or ACCEL_FIELD_SPECS.get(key) or Field("float", lo=0.0)
    else:
        table, _, key = path.rpartition(".")
        f = SCHEMA[table][key]
    return bounded(path, f)


def bounded(path: str, f: Field) -> Field:
    hi = f.hi
    if path in SANITY_HI:
        hi = SANITY_HI[path] if hi is None else min(hi, SANITY_HI[path])
    if f.kind == "int":
        hi = INT_MAX if hi is None else min(hi, INT_MAX)
    return f if hi == f.hi else replace(f, hi=hi)
