"""Parallel plan: degrees, schedule and the rules a valid plan obeys.

Placement follows Megatron-LM's rank order (tensor innermost, then context,
data, pipeline): the tensor group is contiguous, the data group has stride
``tp * cp`` and the pipeline group stride ``tp * cp * dp``.
Rules that break a design mark it invalid with a reason; they never raise.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explore.model.cardinality import fit
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
                  global_batch=v["training.global_batch"].astype(float))
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


def bubble_fraction(plan: ParallelPlan):
    """Pipeline bubble of (interleaved) 1F1B relative to the ideal time: (p - 1) / (v m).

    Narayanan et al. 2021, Sec. 2.2.2 (interleaved schedule)."""
    return (plan.pp - 1) / (plan.virtual_stages * plan.microbatches)


def check_rules(m: ModelSpec, plan: ParallelPlan, devices, fp_ok):
    """Per-design validity: returns (valid bool array, reason str array, "" where valid).

    The first broken rule of a design is its reason."""
    code, table = rule_codes(m, plan, devices, fp_ok)
    return code == 0, np.asarray(table, dtype=object)[code]


def rule_codes(m: ModelSpec, plan: ParallelPlan, devices, fp_ok):
    """(code of the first broken rule per design, 0 = valid; table of reasons, table[0] = "")."""
    n = max(np.size(getattr(plan, f)) for f in plan.__dataclass_fields__)
    n = max(n, np.size(devices), np.size(fp_ok))
    rules = [
        (plan.tp * plan.pp * plan.dp * plan.cp != devices,
         "parallelism: tp*pp*dp*cp must equal system.devices"),
        (np.mod(m.heads, plan.tp) != 0, "parallelism.tp must divide model.heads"),
        ((np.mod(m.kv_heads, plan.tp) != 0) & (np.mod(plan.tp, m.kv_heads) != 0),
         "parallelism.tp must divide model.kv_heads (or be a multiple of it)"),
        (np.mod(m.ffn_hidden, plan.tp) != 0, "parallelism.tp must divide model.ffn_hidden"),
        (np.mod(plan.global_batch, plan.dp * plan.microbatch) != 0,
         "training.global_batch must be divisible by dp*microbatch"),
        (plan.pp * plan.virtual_stages > m.layers,
         "parallelism: pp*virtual_stages must not exceed model.layers"),
        ((plan.virtual_stages > 1) & (plan.pp == 1),
         "parallelism.virtual_stages > 1 needs pp > 1"),
        ((plan.virtual_stages > 1) & (np.mod(plan.microbatches, plan.pp) != 0),
         "interleaved 1F1B needs the microbatch count to be a multiple of pp"),
        (~fp_ok, "training.precision is not supported by the accelerator"),
    ]
    code = np.zeros(n, dtype=np.int16)
    for i, (bad, why) in enumerate(rules, 1):     # later rules only where no earlier one broke
        bad = np.broadcast_to(bad, (n,))
        if bad.any():
            code[bad & (code == 0)] = i
    return code, ("",) + tuple(why for _, why in rules)
