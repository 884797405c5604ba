"""Megatron-Core's combined 1F1B (EP all-to-all overlap) against an event simulation of its two
streams, written from the issue order and data dependencies of
``TransformerLayerSchedulePlan.run`` (NVIDIA/Megatron-LM d98e8a64dd,
megatron/core/models/common/model_chunk_schedule_plan.py), not from the closed form."""
from pathlib import Path

import numpy as np

import explore
from explore.model import moe_overlap as mo
from explore.scenario import load_scenario

SCEN = Path(__file__).resolve().parents[1] / "validation" / "frontier_scenarios"


def simulate_chunk(layers, a_f, e_f, a_b, e_b, d_f, c_f, d_b, c_b):
    """Wall time of a chunk of ``layers`` layers: forward of microbatch i through layers
    0..L-1 paired with the backward of microbatch j through L-1..0. Two in-order streams; each
    op starts when its stream is free and its inputs are ready. Backward attention and expert
    pieces are split into data- and weight-gradient halves (``delay_wgrad_compute``); a layer's
    attention weight gradient runs last in its step, so the next layer's combine_bwd (which only
    needs the data gradient) may start under it."""
    comp = comm = 0.0
    f_ready = 0.0      # forward activations of the previous layer (its combine_fwd)
    b_ready = 0.0      # backward gradient from the previous backward layer (its attention dgrad)
    for _ in range(layers):
        def run(stream_free, ready, dur):
            start = max(stream_free, ready)
            return start + dur
        # issue order of run(): combine_bwd, attn_fwd, mlp_bwd, dispatch_fwd, mlp_bwd_dw,
        # dispatch_bwd, mlp_fwd, combine_fwd, attn_bwd, attn_bwd_dw
        cb = run(comm, b_ready, c_b); comm = cb
        af = run(comp, f_ready, a_f); comp = af
        mb = run(comp, cb, e_b / 2); comp = mb
        df = run(comm, af, d_f); comm = df
        mw = run(comp, 0.0, e_b / 2); comp = mw
        db = run(comm, mb, d_b); comm = db
        mf = run(comp, df, e_f); comp = mf
        cf = run(comm, mf, c_f); comm = cf
        ab = run(comp, db, a_b / 2); comp = ab
        aw = run(comp, 0.0, a_b / 2); comp = aw
        f_ready, b_ready = cf, ab
    return max(comp, comm)


def test_closed_form_bounds_event_simulation():
    rng = np.random.default_rng(11)
    worst = 0.0
    for _ in range(400):
        a_f, e_f, d, c = rng.uniform(0.2, 2.0, 4)
        a_b, e_b = 2 * a_f * rng.uniform(0.8, 1.2), 2 * e_f * rng.uniform(0.8, 1.2)
        layers = int(rng.integers(1, 7))
        sim = simulate_chunk(layers, a_f, e_f, a_b, e_b, d, c, c, d)
        form = layers * float(mo.paired_layer_wall(a_f, e_f, a_b, e_b, d, c, c, d, share=0.0))
        assert sim <= form * (1 + 1e-12)                 # layer-synchronous form: an upper bound
        worst = max(worst, form / sim - 1.0)
    assert worst < 0.15, worst                          # and within 15 % of the simulated chunk


def test_exposes_what_the_pieces_cannot_hide():
    # each all-to-all larger than every compute piece: the compute hides only part of it
    a_f = e_f = 1.0
    a_b = e_b = 2.0
    sim = simulate_chunk(1, a_f, e_f, a_b, e_b, 3.0, 3.0, 3.0, 3.0)
    form = float(mo.paired_layer_wall(a_f, e_f, a_b, e_b, 3.0, 3.0, 3.0, 3.0, share=0.0))
    assert form == sim > a_f + e_f + a_b + e_b
    # all pieces larger than the all-to-all: fully hidden
    assert float(mo.paired_layer_wall(2.0, 2.0, 4.0, 4.0, 0.5, 0.5, 0.5, 0.5, share=0.0)) == 12.0


def test_warmup_and_cooldown_chunks_run_alone():
    # pp = 1: only the first forward and the last backward run alone
    assert float(mo.paired_fraction(8, 1, 1)) == 7 / 8
    # qwen3 best practice: p 8, V 4, m 128: 39 of 512 chunk passes unpaired on rank 0
    assert float(mo.unpaired_chunks(8, 4)) == 39.0
    assert float(mo.paired_fraction(4, 8, 4)) == 0.0


def test_qwen3_overlap_ratio_out_of_sample():
    """Published 19.7 s -> 17.6 s (ratio 0.893) from the 1F1B A2A overlap alone
    (yanring/Megatron-MoE-ModelZoo at e8650517d6, folder best_practice/qwen3, its readme). The
    model's code-level schedule hides more than the run did (its ratio is lower); the bound below states the remaining gap
    so that it can only be tightened: the model's ratio lies within 0.72 x and 1.0 x the published."""
    t = {}
    for name in ("mcoremoe_h100_qwen3_235b_bf16_256", "mcoremoe_h100_qwen3_235b_bf16_256_a2aoverlap"):
        ds = explore.evaluate(load_scenario(SCEN / f"{name}.toml"))
        t[name] = float(ds.step_time_s.values.ravel()[0])
    ratio = t["mcoremoe_h100_qwen3_235b_bf16_256_a2aoverlap"] / t["mcoremoe_h100_qwen3_235b_bf16_256"]
    published = 17.6 / 19.7
    assert 0.72 * published <= ratio <= published
