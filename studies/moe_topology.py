"""Does the network rank differently for a mixture-of-experts job than for a dense job?

Two jobs on the same 4,096 H100 (8 per NVLink domain, one 400G NIC each), four
scale-out networks: fat-tree (full bisection), fat-tree oversubscribed 4:1, a 3D
torus of 8 x 8 x 8 servers, and OCS circuits set once for the job. Dense: Llama 3
405B (tp 8, pp 16, dp 32). MoE: DeepSeek-V3-like 671B/37B (tp 1, pp 16, dp 256,
ep 64, FP8 blockwise, all-to-all overlapped with compute and sent once per node as
DeepSeek-V3 trained),
whose 64-way expert all-to-all spans 8 servers per layer. One ``explore.evaluate`` call evaluates all eight designs.

Run ``python studies/moe_topology.py``: step time, exposed communication by kind
and the ranking of the networks per job, by step time and by cost per token.
"""
from __future__ import annotations

import numpy as np

import explore

NETWORKS = (("fat-tree", 1.0, "fat-tree"), ("fat-tree", 4.0, "fat-tree 4:1"),
            ("torus", 1.0, "torus 8x8x8"), ("ocs-reconfigurable", 1.0, "OCS circuits"))
JOBS = {
    "dense llama3-405b": dict(model={"preset": "llama3-405b"}, training={"global_batch": 2048, "precision": "bf16"},
                              parallelism={"tp": 8, "pp": 16, "dp": 32, "virtual_stages": 1}),
    "moe deepseek-v3": dict(model={"preset": "deepseek-v3"},
                            training={"global_batch": 15360, "precision": "fp8", "fp8_recipe": "blockwise",
                                      "optimizer_moments": "bf16", "fp8_dispatch": True},
                            parallelism={"tp": 1, "pp": 16, "dp": 256, "ep": 64, "overlap_moe_comm": True,
                                         "moe_dispatcher": "deepep"}),
}


def scenario() -> dict:
    """All jobs x networks as one array scenario (fields that differ per design are arrays)."""
    designs = [(j, net) for j in JOBS for net in NETWORKS]
    col = lambda f: [f(j, net) for j, net in designs]  # noqa: E731
    sc = {"name": "MoE vs dense on four networks, 4096 H100",
          "model": {"preset": "llama3-405b"}, "training": {"tokens": 1e12, "global_batch": 2048},
          "parallelism": {"microbatch": 1, "zero": 1, "recompute": "full", "sequence_parallel": True},
          "system": {"accelerator": "h100-sxm-80gb", "devices": 4096,
                     "scale_up": {"size": 8, "link": "nvlink4"},
                     "scale_out": {"link": "ib-ndr-400", "nics_per_device": 1.0,
                                   "torus_x": 8, "torus_y": 8, "torus_z": 8}}}
    for table in ("training", "parallelism"):
        keys = sorted({k for j in JOBS.values() for k in j[table]})
        for k in keys:
            sc[table][k] = np.array(col(lambda j, n, t=table, k=k: JOBS[j][t].get(k, sc[t].get(k, _DEFAULTS[t].get(k)))))
    presets = col(lambda j, n: JOBS[j]["model"]["preset"])
    sc["model"] = {"preset": presets[0]}  # presets are scalar: expand the model fields as arrays
    from explore.scenario import model_presets
    fields = sorted({k for p in set(presets) for k in model_presets()[p] if k != "source"})
    dflt = {"dense_layers": 0, "experts": 1, "top_k": 1, "shared_experts": 0, "kv_lora_rank": 0,
            "q_lora_rank": 0, "rope_head_dim": 64, "moe_ffn_hidden": None, "head_dim": None}
    sc["model"] = {}
    for k in fields:
        vals = [model_presets()[p].get(k, dflt.get(k)) for p in presets]
        if k == "moe_ffn_hidden":
            vals = [v if v is not None else model_presets()[p]["ffn_hidden"] for v, p in zip(vals, presets)]
        if k == "head_dim":
            vals = [v if v is not None else model_presets()[p]["hidden"] // model_presets()[p]["heads"]
                    for v, p in zip(vals, presets)]
        sc["model"][k] = np.array(vals)
    so = sc["system"]["scale_out"]
    so["topology"] = np.array(col(lambda j, n: n[0]))
    so["oversubscription"] = np.array(col(lambda j, n: n[1]))
    return sc, designs


_DEFAULTS = {"training": {"precision": "bf16", "fp8_recipe": "per-tensor", "optimizer_moments": "fp32",
                          "fp8_dispatch": False, "global_batch": 2048},
             "parallelism": {"ep": 1, "virtual_stages": 1, "overlap_moe_comm": False, "moe_dispatcher": "alltoall"}}


def run():
    sc, designs = scenario()
    return explore.evaluate(sc), designs


def rankings(ds, designs, metric="step_time_s") -> dict[str, list[str]]:
    """Per job: network labels from best (lowest ``metric``) to worst."""
    out = {}
    for job in JOBS:
        idx = [i for i, (j, _) in enumerate(designs) if j == job]
        order = sorted(idx, key=lambda i: float(ds[metric].values[i]))
        out[job] = [designs[i][1][2] for i in order]
    return out


def main() -> None:
    ds, designs = run()
    cols = (("step_time_s", "step s"), ("mfu", "MFU"), ("time_s_moe_comm", "MoE a2a s"),
            ("time_s_dp_comm", "DP s"), ("time_s_pp_p2p", "PP p2p s"), ("cost_per_token_usd", "USD/Mtok"))
    print("job".ljust(20) + "network".ljust(16) + "".join(h.rjust(12) for _, h in cols) + "   valid")
    for i, (job, net) in enumerate(designs):
        vals = "".join(f"{float(ds[k].values[i]) * (1e6 if k.startswith('cost') else 1):12.4g}" for k, _ in cols)
        print(job.ljust(20) + net[2].ljust(16) + vals + f"   {bool(ds['valid'].values[i])} {ds['reason'].values[i]}")
    for metric in ("step_time_s", "cost_per_token_usd"):
        print(f"ranking by {metric} (best first):")
        for job, order in rankings(ds, designs, metric).items():
            print(f"  {job}: " + " < ".join(order))


if __name__ == "__main__":
    main()
