"""Transformer Engine userbuffers TP overlap (``parallelism.tp_overlap = "per_gemm"``,
explore.model.overlap.userbuffers_exposed) against an event simulation of the chunk schedules in
transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp (release_v2.9):

* split_overlap_ag (ring exchange): GEMM chunk i runs on the chunk received at step i - 1 (chunk 0
  is local); each received chunk is forwarded to the next rank, transfers back to back on the link;
* split_overlap_rs (ring exchange): GEMM chunk i, then the send of chunk i - 1 once its GEMM has
  ended; after the last GEMM chunk the main stream waits for every transfer, then reduce_bf16 sums
  the tp chunks (the reduce pass);
* bulk_overlap: the collective beside the whole GEMM, waited at its end.
"""
import copy

import numpy as np
import pytest

from explore.model import overlap


def _ring_ag(g, c, tp):
    chunk_g, chunk_c = g / tp, c / (tp - 1)
    recv_end, gemm_end = [0.0], 0.0
    for k in range(1, tp):
        recv_end.append(recv_end[-1] + chunk_c)
    for k in range(tp):
        gemm_end = max(gemm_end, recv_end[k]) + chunk_g
    return gemm_end - g


def _ring_rs(g, c, tp):
    chunk_g, chunk_c = g / tp, c / (tp - 1)
    gemm_end = [(i + 1) * chunk_g for i in range(tp)]
    send_end = 0.0
    for k in range(tp - 1):                      # chunk k's send once GEMM chunk k has ended
        send_end = max(send_end, gemm_end[k]) + chunk_c
    return max(gemm_end[-1], send_end) - g


def _bulk(g, c):
    return max(g, c) - g


def _simulated(gemms, ag, rs, red, tp):
    qkv, proj, fc1, fc2 = gemms
    fwd = _ring_ag(qkv, ag, tp) + _ring_rs(proj, rs, tp) + _ring_ag(fc1, ag, tp) + _ring_rs(fc2, rs, tp) + 2 * red
    bwd = (_ring_ag(proj, ag, tp) + _ring_ag(fc2, ag, tp)
           + _bulk(qkv, ag) + _bulk(qkv, rs) + _bulk(fc1, ag) + _bulk(fc1, rs))
    return fwd, bwd


def test_matches_the_chunk_schedule_simulation():
    rng = np.random.default_rng(11)
    for _ in range(400):
        tp = int(rng.choice([2, 4, 8]))
        gemms = rng.uniform(0.05, 2.0, 4)
        ag, rs, red = rng.uniform(0.0, 1.0, 3)
        fwd, bwd = overlap.userbuffers_exposed(gemms, ag, rs, red, tp, 0.0)
        sf, sb = _simulated(gemms, ag, rs, red, tp)
        assert float(fwd) == pytest.approx(sf, abs=1e-12)
        assert float(bwd) == pytest.approx(sb, abs=1e-12)


def test_monotone_in_gemms_and_collectives():
    """Wall time (GEMMs + exposures) never falls when a GEMM or a collective grows (any slowdown in [0, 1])."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        tp, kappa = int(rng.choice([2, 4, 8])), float(rng.uniform(0, 1))
        g = rng.uniform(0.05, 2.0, 4)
        a, r, d = rng.uniform(0.0, 1.0, 3)

        def wall(g, a, r, d):
            f, b = overlap.userbuffers_exposed(list(g), a, r, d, tp, kappa)
            return float(sum(g) + f), float(2 * sum(g) + b)

        base = wall(g, a, r, d)
        for i in range(4):
            g2 = g.copy()
            g2[i] *= 1.3
            assert all(x >= y - 1e-12 for x, y in zip(wall(g2, a, r, d), base))
        for args in ((g, a * 1.3, r, d), (g, a, r * 1.3, d), (g, a, r, d * 1.3)):
            assert all(x >= y - 1e-12 for x, y in zip(wall(*args), base))


def test_b200_405b_row_exposes_only_the_proj_tail_and_the_reduce_passes():
    """Megatron-Bridge 25.11 Llama 3.1 405B on 128 B200 (TP 4, CP 2): the ring reduce-scatter's reduce
    pass moves (tp + 1) / tp x 2 B x s b h / cp bytes (reduce_bf16 reads tp chunks of s b h / (cp tp),
    writes one) = 167.8 MB per reduce-scatter; twice per layer forward. Every other collective hides under
    its GEMM except the proj reduce-scatter, whose 3/4-GEMM ring window is shorter than it."""
    from explore.evaluate import evaluate
    from explore.scenario import load_scenario
    from explore.validation_frontier import SCENARIO_DIR
    sc = load_scenario(SCENARIO_DIR / "mbridge2511_b200_llama31_405b_fp8_128.toml")
    assert sc["parallelism"]["tp_overlap"] == "per_gemm"
    seen = {}
    orig = overlap.userbuffers_exposed

    def spy(gemms, gather, scatter, reduce_pass, tp, slowdown):
        seen.update(gemms=[float(np.ravel(x)[0]) for x in gemms], ag=float(np.ravel(gather)[0]),
                    rs=float(np.ravel(scatter)[0]), red=float(np.ravel(reduce_pass)[0]))
        return orig(gemms, gather, scatter, reduce_pass, tp, slowdown)

    overlap.userbuffers_exposed = spy
    try:
        per_gemm = float(evaluate(copy.deepcopy(sc), keep_invalid=True)["step_time_s"][0])
    finally:
        overlap.userbuffers_exposed = orig
    layer = copy.deepcopy(sc)
    layer["parallelism"]["tp_overlap"] = "layer"
    assert per_gemm > float(evaluate(layer, keep_invalid=True)["step_time_s"][0])
    from explore.model.calibration import DEFAULT
    sbh = 8192 / 2 * 16384
    hbm = seen["red"] / (5 / 4 * 2 * sbh)        # seconds per byte the model charged
    assert 5 / 4 * 2 * sbh == pytest.approx(167.77e6, rel=1e-3)
    qkv, proj, fc1, fc2 = seen["gemms"]
    r = 3 / 4
    assert seen["rs"] > r * proj and seen["rs"] < r * qkv          # only the proj tail shows
    assert seen["ag"] < r * qkv and seen["rs"] < r * fc2
    fwd, bwd = orig(seen["gemms"], seen["ag"], seen["rs"], seen["red"], 4, DEFAULT.overlap_slowdown)
    assert float(bwd) == 0.0
    assert float(fwd) == pytest.approx(2 * seen["red"] + seen["rs"] - r * proj)
    assert hbm > 0
