"""Per-chunk data-parallel gradient reduction under the interleaved schedule
(``parallelism.grad_reduce_window = "per_chunk"``, explore.model.overlap.per_chunk_reduce).

The closed form is checked against a first-come-first-served queue simulation of one link: the
backward order is taken from the virtual-microbatch table of Megatron-Core's get_schedule_table
(NVIDIA/Megatron-LM megatron/core/pipeline_parallel/schedules.py, groups of
microbatch_group_size_per_vp_stage = p microbatches, chunks run in reverse in the backward); the
cool-down's chunk backwards end the compute, each bwd_stage / v long; chunk j's reduction (comm / v)
is released at the start of its last microbatch's backward (backward_step_helper_preprocess enables
its gradient sync there) and the link serves the chunks in release order.
"""
import copy
import random

import numpy as np
import pytest

from explore.evaluate import evaluate
from explore.model import overlap


def _queue_end(p, v, m, compute, bwd_stage, comm):
    table = [(k, c) for g in range(0, m, p) for c in range(v) for k in range(g, min(g + p, m))]
    bwd = [v - 1 - c for _, c in table]                       # the chunk of each backward, in order
    chunk = bwd_stage / v
    release = {}
    for pos, c in enumerate(bwd):                             # the last backward of each chunk
        release[c] = compute - (len(bwd) - pos) * chunk
    t = 0.0
    for c in sorted(release, key=release.get):
        t = max(t, release[c]) + comm / v
    return max(compute, t)


@pytest.mark.parametrize("seed", range(40))
def test_closed_form_matches_the_queue_simulation(seed):
    rng = random.Random(seed)
    p, v = rng.choice((2, 3, 4, 8)), rng.choice((1, 2, 3, 4, 5, 8))
    m = p * rng.choice((1, 2, 3, 8))
    bwd_stage = rng.uniform(0.5, 2.0)
    compute = m * 1.5 * bwd_stage + rng.uniform(0.0, 3.0)
    comm = rng.uniform(0.0, 3.0) * bwd_stage * v
    before, bound = overlap.per_chunk_reduce(compute, bwd_stage, v, min(p, m), comm)
    wall, _ = overlap.nested(compute, [(comm, before)], 0.0, [bound])
    assert float(wall) == pytest.approx(_queue_end(p, v, m, compute, bwd_stage, comm), rel=1e-12)


def _scenario(**par):
    s = {"name": "rs-vp", "model": {"preset": "llama3-70b"},
         "training": {"global_batch": 64, "precision": "bf16", "flash_attention": True},
         "parallelism": {"tp": 4, "pp": 4, "dp": 8, "microbatch": 1, "virtual_stages": 4, "zero": 1,
                         "recompute": "none", "sequence_parallel": True, "overlap_grad_reduce": True},
         "system": {"accelerator": "h100-sxm-80gb", "devices": 128, "scale_up": {"size": 8, "link": "nvlink4"},
                    "scale_out": {"topology": "fat-tree", "link": "ib-hdr-200", "nics_per_device": 0.25}}}
    s["parallelism"].update(par)
    return float(evaluate(copy.deepcopy(s), keep_invalid=True)["time_s_dp_comm"][0])


def test_per_chunk_window_hides_more_and_is_the_last_slot_when_v_is_1():
    assert _scenario(grad_reduce_window="per_chunk") < _scenario()
    assert _scenario(grad_reduce_window="per_chunk", virtual_stages=1) == pytest.approx(
        _scenario(virtual_stages=1), rel=1e-12)
