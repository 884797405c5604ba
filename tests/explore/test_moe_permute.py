"""Megatron-Core's unfused MoE permute / unpermute (moe_permute_fusion False): the bytes charged
(explore/model/moe.py unfused_permute_bytes) against an independent count, the ops of
megatron/core/transformer/moe/moe_utils.py (core_r0.11.0 791b70e031, drop-and-pad path) run on
numpy arrays of the shapes they take, every array read or written counted by its nbytes."""
import copy
from pathlib import Path
from types import SimpleNamespace

import numpy as np

import explore
from explore.evaluate import evaluate
from explore.model import moe
from explore.scenario import load_scenario

SCEN = Path(explore.__file__).resolve().parent.parent / "tests" / "validation" / "frontier_scenarios"


def _counted_passes(n, k, e, h, cf):
    """Run the permute / unpermute ops and their autograd backward in numpy (bf16 as float16) and
    count the HBM bytes of each op from the arrays it reads and writes."""
    rng = np.random.default_rng(0)
    tokens = rng.standard_normal((n, h)).astype(np.float16)
    cap = int(n * k * cf / e)
    sorted_indices = np.concatenate([rng.permutation(n)[:cap] for _ in range(e)])  # argsort()[:, :capacity]
    probs = rng.random(sorted_indices.size).astype(np.float32)
    fwd = bwd = 0
    permuted = tokens[sorted_indices]                    # tokens.index_select(0, sorted_indices)
    fwd += permuted.nbytes + permuted.nbytes             # gathered rows read, permuted written
    expert_out = permuted                                # (the experts, not counted)
    weighted = expert_out * probs[:, None].astype(np.float16)   # permuted_tokens * permuted_probs
    fwd += expert_out.nbytes + weighted.nbytes
    out = np.zeros_like(tokens)                          # torch.zeros(restore_shape)
    np.add.at(out, sorted_indices, weighted)             # scatter_add_
    fwd += out.nbytes + weighted.nbytes + out.nbytes
    g = np.ones_like(out)                                # backward
    g_w = g[sorted_indices]                              # scatter_add_ -> gather
    bwd += g_w.nbytes + g_w.nbytes
    g_x = g_w * probs[:, None].astype(np.float16)        # mul -> grad * probs
    bwd += g_w.nbytes + g_x.nbytes
    g_p_full = g_w * expert_out                          # mul -> grad * tokens, then summed over h
    bwd += g_w.nbytes + expert_out.nbytes + g_p_full.nbytes + g_p_full.nbytes
    g_tokens = np.zeros_like(tokens)                     # index_select -> zeros + index_add_
    np.add.at(g_tokens, sorted_indices, g_x)
    bwd += g_tokens.nbytes + g_x.nbytes + g_tokens.nbytes
    return fwd, bwd


def test_unfused_permute_bytes_match_the_counted_ops():
    n, k, e, h = 64, 2, 8, 16
    m = SimpleNamespace(top_k=k, capacity_factor=1.0, hidden=h)
    assert np.allclose(moe.unfused_permute_bytes(m, n, 2.0), _counted_passes(n, k, e, h, 1.0))


def _step(sc):
    return float(evaluate(sc, keep_invalid=True)["step_time_s"][0])


def test_nemo_mixtral_rows_pay_the_unfused_passes_and_fusion_removes_them():
    """The NeMo Mixtral 8x7B row (moe_permute_fusion left False) against the same plan fused: slower by
    at most the charged bytes at the model's HBM rate, and by a positive amount."""
    sc = load_scenario(SCEN / "nemo2502_b200_mixtral8x7b_fp8_64.toml")
    assert sc["parallelism"]["moe_permute_fusion"] is False
    fused = copy.deepcopy(sc)
    fused["parallelism"]["moe_permute_fusion"] = True
    slow, fast = _step(sc), _step(fused)
    tokens = 2 * 4096                     # microbatch 2 x 4,096, tp 1 cp 1
    m = SimpleNamespace(top_k=2, capacity_factor=1.0, hidden=4096)
    per_layer = sum(moe.unfused_permute_bytes(m, tokens, 2.0))
    bound = 32 * 2 * per_layer / 8e12 / 0.5   # 32 MoE layers, 2 microbatches, >= half of B200's 8 TB/s
    assert 0.0 < slow - fast <= bound
