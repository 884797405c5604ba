"""Megatron-Core's combined 1F1B (EP all-to-all overlap) against an event simulation of its two
streams, written from the issue order and data dependencies of
``TransformerLayerSchedulePlan.run`` (NVIDIA/Megatron-LM d98e8a64dd,
megatron/core/models/common/model_chunk_schedule_plan.py), not from the closed form."""
import copy
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
    so that it can only be tightened: the model's ratio lies within 0.85 x and 1.0 x the published
    (0.72 x before the overlapped run lost its TP overlap, validation_frontier.EP_OVERLAP_TP_MODELZOO)."""
    t = {}
    for name in ("mcoremoe_h100_qwen3_235b_bf16_256", "mcoremoe_h100_qwen3_235b_bf16_256_a2aoverlap"):
        ds = explore.evaluate(load_scenario(SCEN / f"{name}.toml"))
        t[name] = float(ds.step_time_s.values.ravel()[0])
    ratio = t["mcoremoe_h100_qwen3_235b_bf16_256_a2aoverlap"] / t["mcoremoe_h100_qwen3_235b_bf16_256"]
    published = 17.6 / 19.7
    assert 0.85 * published <= ratio <= published


def test_more_overlapped_communication_never_makes_a_paired_layer_faster():
    """Property: lengthening any all-to-all piece (or the TP collectives sharing the window) never
    shortens the paired layer, at any share of compute lost per second of hidden communication."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        a_f, e_f = rng.uniform(0.1, 2.0, 2)
        a_b, e_b = 2 * a_f * rng.uniform(0.8, 1.2), 2 * e_f * rng.uniform(0.8, 1.2)
        comm = list(rng.uniform(0.0, 3.0, 6))           # d_f, c_f, d_b, c_b, tp_f, tp_b
        share = float(rng.choice([0.0, mo.COMM_SM_SHARE, 0.4, 1.0]))
        base = float(mo.paired_layer_wall(a_f, e_f, a_b, e_b, *comm[:4], comm[4], comm[5], share=share))
        for i in range(6):
            more = list(comm)
            more[i] += float(rng.uniform(0.0, 1.0))
            wall = float(mo.paired_layer_wall(a_f, e_f, a_b, e_b, *more[:4], more[4], more[5], share=share))
            assert wall >= base * (1 - 1e-12)
        # and a larger share of lost compute never speeds it up
        assert float(mo.paired_layer_wall(a_f, e_f, a_b, e_b, *comm[:4], comm[4], comm[5],
                                          share=min(share + 0.1, 1.0))) >= base * (1 - 1e-12)


def test_cited_overlap_slowdown_cannot_close_the_qwen3_gap(monkeypatch):
    """docs/validation.md "How much do GEMMs slow down beside a communication kernel?": at the largest
    compute slowdown the cited measurements give (arXiv:2507.03114: 40 % at most,
    validation.FIT_BOUNDS["overlap_slowdown"]) charged per second of hidden all-to-all, in place of DeepEP's
    20/132 SMs, the overlapped Qwen3-235B run is still more than 10 % too fast, while DeepSeek-V3's own
    H800 run (already within 1 %) becomes more than 5 % too slow: one share cannot fit both."""
    from explore import validation, validation_frontier as vf
    published = {r["run_id"]: float(r["step_time_s"]) for r in vf.load_rows()}

    def step(name):
        ds = explore.evaluate(load_scenario(SCEN / f"{name}.toml"))
        return float(ds.step_time_s.values.ravel()[0])

    qwen, dsv3 = "mcoremoe_h100_qwen3_235b_bf16_256_a2aoverlap", "deepseekv3_prod_h800_2048"
    shipped = {n: step(n) for n in (qwen, dsv3)}
    upper = validation.FIT_BOUNDS["overlap_slowdown"][1]
    from explore.model import moe
    monkeypatch.setattr(moe, "comm_sm_share", lambda sm_count: np.full(np.shape(sm_count), upper))
    at_max = {n: step(n) for n in (qwen, dsv3)}
    assert at_max[qwen] > shipped[qwen] and at_max[dsv3] > shipped[dsv3]   # the share is charged
    assert at_max[qwen] < 0.90 * published[qwen]
    assert abs(shipped[dsv3] / published[dsv3] - 1) < 0.05 < at_max[dsv3] / published[dsv3] - 1


def simulate_pipeline(p, v, m, f, b, pair):
    """Interleaved 1F1B with the EP overlap as Megatron-Core orders it (schedules.py
    get_pp_rank_microbatches / get_model_chunk_id at d98e8a64dd): rank r runs
    2 (p - r - 1) + (v - 1) p + 1 warm-up forward chunks alone, then forward k + w paired with
    backward k, then the cool-down backwards alone. A chunk pass waits for its input from the
    previous virtual stage (forward) or the next (backward); an alone forward takes f, an alone
    backward b, a pair ``pair``. Returns the last rank's finish (point-to-point time left out)."""
    n = m * v

    def fwd_id(k):
        return (k // p) % v, (k // (p * v)) * p + k % p

    def bwd_id(k):
        c, i = fwd_id(k)
        return v - 1 - c, i

    def dep_f(r, c, i):
        return ("F", r - 1, c, i) if r > 0 else (("F", p - 1, c - 1, i) if c > 0 else None)

    def dep_b(r, c, i):
        if r < p - 1:
            return ("B", r + 1, c, i)
        return ("B", 0, c + 1, i) if c < v - 1 else ("F", p - 1, v - 1, i)

    ops = []
    for r in range(p):
        w = min(n, 2 * (p - r - 1) + (v - 1) * p + 1)
        ops.append([("F", k) for k in range(w)] + [("P", w + j, j) for j in range(n - w)]
                   + [("B", k) for k in range(n - w, n)])
    done, free, pos = {}, [0.0] * p, [0] * p
    moved = True
    while moved:
        moved = False
        for r in range(p):
            while pos[r] < len(ops[r]):
                op = ops[r][pos[r]]
                if op[0] == "F":
                    c, i = fwd_id(op[1]); deps, dur, outs = [dep_f(r, c, i)], f, [("F", r, c, i)]
                elif op[0] == "B":
                    c, i = bwd_id(op[1]); deps, dur, outs = [dep_b(r, c, i)], b, [("B", r, c, i)]
                else:
                    (cf, jf), (cb, jb) = fwd_id(op[1]), bwd_id(op[2])
                    deps, dur = [dep_f(r, cf, jf), dep_b(r, cb, jb)], pair
                    outs = [("F", r, cf, jf), ("B", r, cb, jb)]
                deps = [d for d in deps if d is not None]
                if any(d not in done for d in deps):
                    break
                free[r] = max([free[r]] + [done[d] for d in deps]) + dur
                for o in outs:
                    done[o] = free[r]
                pos[r] += 1
                moved = True
    assert pos == [len(o) for o in ops]
    return max(free)


def test_paired_share_and_bubble_against_a_pipeline_simulation():
    """step.py charges (m + (p - 1) / v) stage times, each with the paired share of chunk passes
    (paired_fraction) at the paired wall and the rest alone; the bubble at that same average. An
    event simulation of the interleaved schedule bounds it from below, tightly at Qwen3's plan
    (p 8, v 4, m 128). (Charging the bubble at the alone rate instead, as warm-up and cool-down
    chunks run alone, is looser: rank 0's own warm-up chunks already carry them.)"""
    for p, v, m, f, b, pair, tol in [(8, 4, 128, 1.0, 2.0, 2.3, 0.006), (8, 4, 32, 1.0, 2.0, 2.4, 0.02),
                                     (4, 2, 16, 1.0, 2.0, 2.2, 0.05), (2, 2, 8, 1.0, 2.1, 2.5, 0.02)]:
        sim = simulate_pipeline(p, v, m, f, b, pair)
        phi = float(mo.paired_fraction(m, p, v))
        slot = (1.0 - phi) * (f + b) + phi * pair
        form = (m * v + p - 1) * slot
        alone_bubble = m * v * slot + (p - 1) * (f + b)
        assert sim <= form * (1 + 1e-12) and form / sim - 1.0 < tol, (p, v, m, form / sim)
        assert abs(form - sim) <= abs(alone_bubble - sim)
        # no overlap: the textbook (m v + p - 1) chunk slots exactly
        assert np.isclose(simulate_pipeline(p, v, m, f, b, f + b), (m * v + p - 1) * (f + b))


def test_moe_layers_with_expert_tp_1_carry_the_attention_blocks_tp_collectives_only():
    """Megatron-Core's dispatchers start from the sequence-parallel shard when etp is 1 (the
    alltoall dispatcher gathers / reduce-scatters over the expert-TP group, of size etp:
    token_dispatcher.py at d98e8a64dd): a MoE layer then runs the attention block's all-gather and
    reduce-scatter, 2 of the 4 collectives per direction a dense layer (or etp = tp) runs. What
    turning the TP overlap off costs, Qwen3-235B (all layers MoE) at etp 1 against etp 2."""
    sc = load_scenario(SCEN / "mcoremoe_h100_qwen3_235b_bf16_256.toml")
    cost = {}
    for etp in (1, 2):
        t = {}
        for ov in (True, False):
            s = copy.deepcopy(sc)
            s["parallelism"].update(etp=etp, ep=16, overlap_tp_comm=ov)
            t[ov] = float(explore.evaluate(s).step_time_s.values.ravel()[0])
        cost[etp] = t[False] - t[True]
    assert cost[2] > 0 and abs(cost[1] / cost[2] - 2 / 4) < 0.01


def test_deepep_sm_share_is_20_of_the_parts_sms():
    """DeepEP's 20 SMs of the part's (catalog sm_count): 20/148 on B200 and the GB200 rows (base b200),
    20/132 on H100 and the H800 row; parts without an SM count (TPU v4, MI300X) fall back to 20/132."""
    from explore.model import moe
    from explore.model.system import build_system
    from explore.scenario import resolve
    assert moe.DEEPEP_SMS == 20.0 and moe.COMM_SM_SHARE == 20.0 / 132.0
    share = {}
    for name in ("mbridge2604_b200_dsv3_mxfp8_256", "mbridge2608_gb200_dsv3_mxfp8_256",
                 "mbridge2509_h100_dsv3_dropless_1024", "deepseekv3_prod_h800_2048"):
        s = build_system(resolve(load_scenario(SCEN / f"{name}.toml")))
        share[name] = moe.comm_sm_share(s.sm_count)
    assert np.allclose(share["mbridge2604_b200_dsv3_mxfp8_256"], 20.0 / 148.0)
    assert np.allclose(share["mbridge2608_gb200_dsv3_mxfp8_256"], 20.0 / 148.0)
    assert np.allclose(share["mbridge2509_h100_dsv3_dropless_1024"], 20.0 / 132.0)
    assert np.allclose(share["deepseekv3_prod_h800_2048"], 20.0 / 132.0)
    got = moe.comm_sm_share(np.array([132.0, 148.0, 108.0, np.nan, 0.0]))   # broadcasts over a batch
    assert np.allclose(got, [20 / 132, 20 / 148, 20 / 108, 20 / 132, 20 / 132])


def test_b200_overlapped_layer_no_slower_than_at_the_h800_share(monkeypatch):
    """Fewer SMs taken of more: a B200 design's EP-overlapped step at 20/148 is no slower than at 20/132."""
    from explore.model import moe
    name = "mbridge2604_b200_dsv3_mxfp8_256"

    def step():
        return float(explore.evaluate(load_scenario(SCEN / f"{name}.toml")).step_time_s.values.ravel()[0])

    per_part = step()
    monkeypatch.setattr(moe, "comm_sm_share", lambda sm_count: np.full(np.shape(sm_count), moe.COMM_SM_SHARE))
    assert per_part <= step() * (1 + 1e-12)
    # and the paired layer itself, piece by piece
    rng = np.random.default_rng(7)
    args = rng.uniform(0.1, 2.0, (10, 300))
    assert np.all(mo.paired_layer_wall(*args, share=20.0 / 148.0)
                  <= mo.paired_layer_wall(*args, share=20.0 / 132.0) * (1 + 1e-12))


def test_parametric_designs_keep_the_base_sm_count_only_with_its_compute_dies():
    """A parametric accelerator keeps its base part's SM count while its compute dies are the base's
    reconstruction's; other dies have no known count: NaN, which falls back to 20/132."""
    from explore.model import moe
    from explore.model.system import build_system
    from explore.scenario import resolve
    sc = load_scenario(SCEN / "mbridge2604_b200_dsv3_mxfp8_256.toml")

    def sm(acc):
        s2 = copy.deepcopy(sc)
        s2["system"]["accelerator"] = acc
        return build_system(resolve(s2)).sm_count

    assert np.allclose(sm({"base": "b200", "price_markup": 2.0}), 148.0)
    changed = sm({"base": "b200", "compute_dies": 1})
    assert np.all(np.isnan(changed)) and np.allclose(moe.comm_sm_share(changed), 20.0 / 132.0)
