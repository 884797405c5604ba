"""Parallel plan: degrees, schedule and the rules a valid plan obeys.

Placement follows Megatron-LM's rank order (tensor innermost, then context,
data, pipeline): the tensor group is contiguous, the data group has stride
``tp * cp`` and the pipeline group stride ``tp * cp * dp``.

Device count (Megatron-Core): tp * pp * dp * cp = devices. Expert parallelism
does not add a factor. MoE layers re-fold the tp * dp * cp ranks of a stage
(Megatron-Core "MoE parallel folding", Liu et al. 2025, arXiv:2504.14960):
etp * ep * edp = tp * dp * cp, with the expert tensor-parallel degree etp
innermost, then ep (an expert group has stride etp), then the expert-data-parallel
group edp (stride etp * ep), which reduces the expert gradients. With the default
etp = tp this is "ep divides dp * cp" (older Megatron); ep must also divide the
number of experts.
Rules that break a design mark it invalid with a reason; they never raise.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explore.model.cardinality import fit
from hwmodels.divisible import indivisible
from explore.scenario import RECOMPUTE
from explore.model.workload import ModelSpec


@dataclass(frozen=True)
class ParallelPlan:
    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    microbatch: np.ndarray
    virtual_stages: np.ndarray
    zero: np.ndarray
    recompute: np.ndarray            # 0 none, 1 selective, 2 full
    sequence_parallel: np.ndarray    # bool, effective only when tp > 1
    overlap_grad_reduce: np.ndarray
    overlap_param_gather: np.ndarray
    overlap_tp_comm: np.ndarray
    grad_reduce_bytes: np.ndarray
    global_batch: np.ndarray
    grad_bucket_params: np.ndarray   # parameters per DP gradient bucket (inf: one bucket)
    param_gather_bytes: np.ndarray = 2.0   # bytes per element of the DP parameter all-gathers
    # --- issue 11: expert parallelism (explore/model/moe.py)
    ep: np.ndarray = 1.0
    overlap_moe_comm: np.ndarray = False
    etp: np.ndarray = 1.0                 # expert tensor parallel degree (default: tp)
    deepep: np.ndarray = False            # dispatcher sends one copy per remote scale-up domain
    permute_fusion: np.ndarray = True     # fused MoE permute / unpermute (moe.unfused_permute_bytes)
    runtime_torch: np.ndarray = False     # PyTorch-native runtime memory (runtime_memory.py)
    runtime_deepspeed: np.ndarray = False  # DeepSpeed ZeRO-3 per-submodule gathers (runtime_memory.py)
    zero3_calls_per_layer: np.ndarray = 1.0   # ZeRO-3 collectives per layer and pass (1: coalesced)
    zero3_gather_passes: np.ndarray = 2.0     # ZeRO-3 gathers per layer and microbatch
    list_collectives: np.ndarray = False      # DP gathers / reduce-scatters take a per-rank tensor list
    zero3_replicated_params_per_layer: np.ndarray = 0.0  # small ZeRO-3 params re-gathered rank by rank per step
    list_gather_host_calls: np.ndarray = 0.0    # caller's Python tensor calls per rank per list all-gather
    list_reduce_host_calls: np.ndarray = 0.0    # ... per rank per list reduce-scatter
    zero3_replicated_host_calls: np.ndarray = 0.0  # ... per rank per regathered small parameter
    zero3_fetch_sync: np.ndarray = False  # DeepSpeed 2021: zero-filled gathers after a device sync (step.py)
    backward_prefetch_post: np.ndarray = False  # ZeRO-3 backward gathers on the critical path (step.py)
    fsdp_root_unit: np.ndarray = False   # FSDP root unit (embedding) gathered first, reduced last (step.py)
    pp_p2p_serial: np.ndarray = False    # DeepSpeed pipeline engine: blocking sends/receives one at a time
    pp_p2p_overlapped: np.ndarray = False  # Megatron-Core interleaved, overlap_p2p_comm: fill/drain chains wait
    pp_p2p_send_wait: np.ndarray = False   # ... and each steady-state forward send waited at once (addc601f57)
    rs_per_chunk: np.ndarray = False       # interleaved: each chunk's reduction from its last backward (overlap.py)
    tp_per_gemm: np.ndarray = False        # TE userbuffers: each TP collective under its own GEMM (overlap.py)
    pp_scatter_grads: np.ndarray = True  # backward activation gradients scattered over the tensor group
    grad_acc_hook: np.ndarray = False      # an element-wise gradient add per parameter and microbatch (step.py)
    grad_acc_autograd: np.ndarray = False  # ... in every microbatch but the first (step.py)
    emb_layer: np.ndarray = False          # the embedding counts as a layer of the pipeline split (memory.py)
    loss_layer: np.ndarray = False         # ... the output layer and loss (memory.split_layout)

    @classmethod
    def from_resolved(cls, r) -> "ParallelPlan":
        v = r.values
        n = r.n
        tp = v["parallelism.tp"].astype(float)
        pp = v["parallelism.pp"].astype(float)
        cp = v["parallelism.cp"].astype(float)
        dev = v["system.devices"].astype(float)
        dp = v["parallelism.dp"].astype(float) if "parallelism.dp" in v else np.maximum(
            np.floor(dev / (tp * pp * cp)), 1.0)
        rc_labels = v["parallelism.recompute"]
        rc = sum(float(i) * (rc_labels == name) for i, name in enumerate(RECOMPUTE))
        kw = dict(tp=tp, pp=pp, dp=dp, cp=cp,
                  microbatch=v["parallelism.microbatch"].astype(float),
                  virtual_stages=v["parallelism.virtual_stages"].astype(float),
                  zero=v["parallelism.zero"].astype(float), recompute=rc,
                  sequence_parallel=np.asarray(v["parallelism.sequence_parallel"], bool),
                  overlap_grad_reduce=np.asarray(v["parallelism.overlap_grad_reduce"], bool),
                  overlap_param_gather=np.asarray(v["parallelism.overlap_param_gather"], bool),
                  overlap_tp_comm=np.asarray(v["parallelism.overlap_tp_comm"], bool),
                  grad_reduce_bytes=v["parallelism.grad_reduce_bytes"].astype(float),
                  param_gather_bytes=v["parallelism.param_gather_bytes"].astype(float),
                  global_batch=v["training.global_batch"].astype(float),
                  ep=v["parallelism.ep"].astype(float),
                  overlap_moe_comm=np.asarray(v["parallelism.overlap_moe_comm"], bool),
                  etp=v["parallelism.etp"].astype(float) if "parallelism.etp" in v else tp,
                  deepep=np.asarray(v["parallelism.moe_dispatcher"]) == "deepep",
                  permute_fusion=np.asarray(v["parallelism.moe_permute_fusion"], bool),
                  runtime_torch=np.asarray(v["parallelism.runtime"]) == "torch",
                  runtime_deepspeed=np.asarray(v["parallelism.runtime"]) == "deepspeed",
                  zero3_calls_per_layer=v["parallelism.zero3_calls_per_layer"].astype(float),
                  zero3_gather_passes=v["parallelism.zero3_gather_passes"].astype(float),
                  list_collectives=np.asarray(v["parallelism.list_collectives"], bool),
                  zero3_replicated_params_per_layer=v["parallelism.zero3_replicated_params_per_layer"].astype(float),
                  list_gather_host_calls=v["parallelism.list_gather_host_calls"].astype(float),
                  list_reduce_host_calls=v["parallelism.list_reduce_host_calls"].astype(float),
                  zero3_replicated_host_calls=v["parallelism.zero3_replicated_host_calls"].astype(float),
                  zero3_fetch_sync=np.asarray(v["parallelism.zero3_fetch_sync"], bool),
                  backward_prefetch_post=np.asarray(v["parallelism.backward_prefetch"]) == "post",
                  fsdp_root_unit=np.asarray(v["parallelism.fsdp_root_unit"], bool),
                  pp_p2p_serial=np.asarray(v["parallelism.pp_p2p"]) == "serial",
                  pp_p2p_overlapped=np.isin(np.asarray(v["parallelism.pp_p2p"]), ("overlapped", "overlapped_send_wait")),
                  pp_p2p_send_wait=np.asarray(v["parallelism.pp_p2p"]) == "overlapped_send_wait",
                  rs_per_chunk=np.asarray(v["parallelism.grad_reduce_window"]) == "per_chunk",
                  tp_per_gemm=np.asarray(v["parallelism.tp_overlap"]) == "per_gemm",
                  pp_scatter_grads=np.asarray(v["parallelism.pp_scatter_grads"], bool),
                  grad_acc_hook=np.asarray(v["parallelism.grad_accumulation"]) == "hook",
                  grad_acc_autograd=np.asarray(v["parallelism.grad_accumulation"]) == "autograd",
                  emb_layer=np.asarray(v["parallelism.pp_embedding_as_layer"], bool),
                  loss_layer=np.asarray(v["parallelism.pp_loss_as_layer"], bool),
                  grad_bucket_params=bucket_params(v, dp))
        return cls(**{k: fit(a, n) for k, a in kw.items()})   # constants stay length 1

    @property
    def model_parallel(self):
        return self.tp * self.pp * self.cp

    @property
    def microbatches(self):
        """Microbatches per optimizer step per pipeline: global_batch / (dp * microbatch)."""
        return self.global_batch / (self.dp * self.microbatch)

    @property
    def sp_active(self):
        return self.sequence_parallel & (self.tp > 1)


MCORE_BUCKET_MIN_PARAMS = 4e7
MCORE_BUCKET_PARAMS_PER_DP_RANK = 1e6


def bucket_params(v, dp):
    """Parameters per DP gradient bucket: the scenario's, else Megatron-Core's default
    max(4e7, 1e6 dp) with overlapped gradient reduction and one bucket without
    (megatron/core/distributed/distributed_data_parallel.py, DistributedDataParallelConfig.bucket_size)."""
    given = v.get("parallelism.grad_bucket_params")
    if given is not None:
        return np.asarray(given, dtype=float)
    mcore = np.maximum(MCORE_BUCKET_MIN_PARAMS, MCORE_BUCKET_PARAMS_PER_DP_RANK * dp)
    return np.where(np.asarray(v["parallelism.overlap_grad_reduce"], bool), mcore, np.inf)


def bubble_fraction(plan: ParallelPlan):
    """Pipeline bubble of (interleaved) 1F1B relative to the ideal time: (p - 1) / (v m).

    Narayanan et al. 2021, Sec. 2.2.2 (interleaved schedule)."""
    return (plan.pp - 1) / (plan.virtual_stages * plan.microbatches)


def bubble_time(t_stage, p, v, emb_chunk_saving=0.0):
    """Pipeline fill and drain time of (interleaved) 1F1B: (p - 1) / v slowest-stage microbatch times
    (Narayanan et al. 2021, Sec. 2.2.2), less ``emb_chunk_saving`` when the first rank's first chunk,
    which the fill and the drain cross once, is that much shorter than a middle chunk (the embedding
    counted as a layer of the split: step.py). An event-level step-through of Megatron-LM's interleaved
    order with uniform middle chunks gives m v t_chunk + this, t_chunk = t_stage / v, for p > 2
    (tests/explore/test_pipeline_layout.py)."""
    return (p - 1) / v * t_stage - emb_chunk_saving


def check_rules(m: ModelSpec, plan: ParallelPlan, devices, fp_ok):
    """Per-design validity: returns (valid bool array, reason str array, "" where valid).

    The first broken rule of a design is its reason."""
    code, table = rule_codes(m, plan, devices, fp_ok)
    reason = np.asarray(table, dtype=object)[code]
    details = reason_details(plan, code, table, m)
    if details is not None:
        reason[details[0]] = details[1]
    return code == 0, reason


def rule_codes(m: ModelSpec, plan: ParallelPlan, devices, fp_ok):
    """(code of the first broken rule per design, 0 = valid; table of reasons, table[0] = "")."""
    n = max(np.size(getattr(plan, f)) for f in plan.__dataclass_fields__)
    n = max(n, np.size(devices), np.size(fp_ok))
    split = np.asarray(plan.emb_layer, bool) | np.asarray(plan.loss_layer, bool)
    rules = [
        (plan.tp * plan.pp * plan.dp * plan.cp != devices,
         "parallelism: tp*pp*dp*cp must equal system.devices"),
        (indivisible(m.heads, plan.tp), "parallelism.tp must divide model.heads"),
        (indivisible(m.kv_heads, plan.tp) & indivisible(plan.tp, m.kv_heads),
         "parallelism.tp must divide model.kv_heads (or be a multiple of it)"),
        (indivisible(m.ffn_hidden, plan.tp), "parallelism.tp must divide model.ffn_hidden"),
        (indivisible(plan.global_batch, plan.dp * plan.microbatch),
         "training.global_batch must be divisible by dp*microbatch"),
        # a model chunk may hold only the embedding and one only the output layer and loss
        # (Llama 3 405B: 126 layers in 16 x 8 chunks, Dubey et al. 2024 Sec. 3.3.2)
        (plan.pp * plan.virtual_stages > m.layers + 2,
         "parallelism: pp*virtual_stages must not exceed model.layers + 2 (one embedding-only and one "
         "output-only chunk)"),
        ((plan.virtual_stages > 1) & (plan.pp == 1),
         "parallelism.virtual_stages > 1 needs pp > 1"),
        # the embedding / loss counted as a layer of the pipeline split (memory.split_layout)
        (split & (plan.pp == 1), "parallelism.pp_embedding_as_layer / pp_loss_as_layer need pp > 1"),
        (split & indivisible(split_slots(m, plan), plan.pp * plan.virtual_stages) if np.any(split) else False,
         SPLIT_RULE),
        ((plan.virtual_stages > 1) & indivisible(plan.microbatches, plan.pp) if np.any(plan.virtual_stages > 1)
         else False, "interleaved 1F1B needs the microbatch count to be a multiple of pp"),
        (~fp_ok, "training.precision is not supported by the accelerator"),
        # issue 11: expert and context parallelism (Megatron-Core convention, moe.py / context.py)
        (indivisible(plan.tp * plan.dp * plan.cp, plan.ep * plan.etp), EP_RULE),
        (indivisible(m.moe_ffn_hidden, plan.etp), "parallelism.etp must divide model.moe_ffn_hidden"),
        ((plan.ep > 1) & (m.experts <= 1), "parallelism.ep > 1 needs a MoE model (model.experts > 1)"),
        ((m.experts > 1) & indivisible(m.experts, plan.ep), "parallelism.ep must divide model.experts"),
        (indivisible(m.seq_len, plan.cp), "parallelism.cp must divide model.seq_len"),
    ]
    code = np.zeros(n, dtype=np.int16)
    for i, (bad, why) in enumerate(rules, 1):     # later rules only where no earlier one broke
        bad = np.broadcast_to(bad, (n,))
        if bad.any():
            code[bad & (code == 0)] = i
    return code, ("",) + tuple(why for _, why in rules)


EP_RULE = "parallelism: ep*etp must divide tp*dp*cp"
SPLIT_RULE = ("parallelism: pp*virtual_stages must divide model.layers + pp_embedding_as_layer + pp_loss_as_layer "
              "(Megatron-Core get_num_layers_to_build splits the slots evenly over the model chunks)")


def split_slots(m: ModelSpec, plan: ParallelPlan):
    """Slots of the pipeline split: the layers, plus one each for the embedding and the loss when they
    count as layers (memory.split_layout)."""
    return m.layers + np.where(plan.emb_layer, 1.0, 0.0) + np.where(plan.loss_layer, 1.0, 0.0)


def reason_details(plan: ParallelPlan, code, table, m: ModelSpec | None = None):
    """(mask, strings) of designs whose reason names their values (issue 11: the expert-parallel
    rule; the pipeline split's divisibility), to replace the table's text of those designs; None when
    no design needs it."""
    s = np.strings
    hit_ep = code == table.index(EP_RULE)
    hit_split = (code == table.index(SPLIT_RULE)) if m is not None else np.zeros_like(hit_ep)
    if not (hit_ep.any() or hit_split.any()):
        return None
    msg = np.empty(code.shape, dtype=object)
    if hit_ep.any():
        i = lambda a: np.broadcast_to(a, hit_ep.shape)[hit_ep].astype(np.int64).astype(str)  # noqa: E731
        q = i(np.floor(plan.tp * plan.dp * plan.cp / plan.etp))
        msg[hit_ep] = s.add(s.add(s.add(s.add(s.add(s.add(s.add(
            "parallelism.ep: value ", i(plan.ep)), " (etp = "), i(plan.etp)), ") must divide tp*dp*cp/etp = "), q),
            " (Megatron-Core: ep*etp divides tp*dp*cp; with etp = tp, ep divides dp*cp); allowed: a divisor of "),
            q).astype(object)
    if hit_split.any():
        i = lambda a: np.broadcast_to(a, hit_split.shape)[hit_split].astype(np.int64).astype(str)  # noqa: E731
        slots = i(split_slots(m, plan))
        parts = ("parallelism.virtual_stages: value ", i(plan.virtual_stages), " with pp = ", i(plan.pp),
                 ": pp*virtual_stages = ", i(plan.pp * plan.virtual_stages), " must divide the pipeline split's "
                 "slots, model.layers + pp_embedding_as_layer + pp_loss_as_layer = ", slots,
                 " (Megatron-Core get_num_layers_to_build); allowed: pp*virtual_stages a divisor of ", slots)
        text = parts[0]
        for part in parts[1:]:
            text = s.add(text, part)
        msg[hit_split] = text.astype(object)
    hit = hit_ep | hit_split
    return hit, msg[hit]
