"""Issue 11: the expert all-to-all makes the network matter (studies/moe_topology.py).

Same 4,096-H100 cluster, four networks, a dense and a MoE job in one evaluate call:
the networks rank differently for the two jobs (by cost per token), and the MoE job's
slowdown from the fat-tree to the oversubscribed fat-tree and the torus is several
times the dense job's."""
import importlib.util
from pathlib import Path

import numpy as np

spec = importlib.util.spec_from_file_location("moe_topology", Path("studies/moe_topology.py"))
study = importlib.util.module_from_spec(spec)
spec.loader.exec_module(study)


def test_moe_job_ranks_networks_differently_from_dense_job():
    ds, designs = study.run()
    assert bool(np.all(ds["valid"].values)), ds["reason"].values
    cost = study.rankings(ds, designs, "cost_per_token_usd")
    dense, moe = cost["dense llama3-405b"], cost["moe deepseek-v3"]
    assert dense != moe
    # the torus undercuts the non-blocking tree for the dense job, and is the dearest for MoE
    assert dense.index("torus 8x8x8") < dense.index("fat-tree") and moe[-1] == "torus 8x8x8"
    assert dense[-1] == "fat-tree" and moe.index("fat-tree") <= 1       # dearest for dense, near best for MoE
    step = {(j, n[2]): float(ds["step_time_s"].values[i]) for i, (j, n) in enumerate(designs)}
    for net in ("fat-tree 4:1", "torus 8x8x8"):
        slow_dense = step[("dense llama3-405b", net)] / step[("dense llama3-405b", "fat-tree")]
        slow_moe = step[("moe deepseek-v3", net)] / step[("moe deepseek-v3", "fat-tree")]
        assert slow_moe > 1.5 and slow_dense < 1.15, (net, slow_dense, slow_moe)
    # the exposed all-to-all is what separates them
    a2a = {(j, n[2]): float(ds["time_s_moe_comm"].values[i]) for i, (j, n) in enumerate(designs)}
    assert a2a[("moe deepseek-v3", "torus 8x8x8")] > 10 * max(a2a[("moe deepseek-v3", "fat-tree")], 0.1)
