"""The embedding and the loss counted as layers of the pipeline split (``parallelism.pp_embedding_as_layer``
/ ``pp_loss_as_layer``, Megatron-Core ``account_for_embedding_in_pipeline_split`` /
``account_for_loss_in_pipeline_split``) against an event-level step-through of Megatron-LM's
interleaved 1F1B order, written here from NVIDIA/Megatron-LM d98e8a64dd:

* megatron/core/transformer/transformer_block.py ``get_num_layers_to_build``: (L + e + l) / p slots per
  rank, / v per chunk; the first chunk of rank 0 builds one layer fewer with the embedding counted, the
  last chunk of rank p - 1 one fewer with the loss counted;
* megatron/core/pipeline_parallel/schedules.py ``get_schedule_table`` (groups of
  ``microbatch_group_size_per_vp_stage`` microbatches per chunk, default p: model_parallel_config.py),
  ``get_model_chunk_id`` (a backward runs the table's chunk reversed), ``get_pp_rank_microbatches``
  (warm-up 2 (p - i - 1) + (v - 1) p chunk-forwards on rank i, at most m v; non-interleaved p - i - 1),
  then one forward and one backward per step (forward first), then the cool-down backwards.

Memory: the peak over the order of the sum over chunks of (microbatches in flight) x (layers).
Time: the same order with each chunk-pass taking its time and waiting for the pass it depends on.
"""
import copy
import itertools

import numpy as np
import pytest

from explore.evaluate import evaluate
from explore.model import memory
from explore.model.plan import bubble_time
from explore.scenario import ScenarioError, load_scenario


def schedule_table(m, v, n):
    """(microbatch, chunk) of each virtual microbatch: groups of n microbatches per chunk."""
    table = []
    for g in range(0, m, n):
        hi = m if g + n >= m else g + n
        table += [(mb, c) for c in range(v) for mb in range(g, hi)]
    return table


def rank_order(p, v, m, rank, n=None):
    """('F' | 'B', microbatch, chunk) in the order rank ``rank`` runs them."""
    n = n or p
    total = m * v
    table = schedule_table(m, v, n)
    warm = min(2 * (p - rank - 1) + (v - 1) * n, total) if v > 1 else min(p - rank - 1, m)
    order = [("F",) + table[k] for k in range(warm)]
    for k in range(total - warm):
        order.append(("F",) + table[k + warm])
        mb, c = table[k]
        order.append(("B", mb, v - 1 - c))
    for k in range(total - warm, total):
        mb, c = table[k]
        order.append(("B", mb, v - 1 - c))
    return order


def chunk_layers(layers, p, v, rank, emb, loss):
    """Transformer layers each chunk of ``rank`` builds (get_num_layers_to_build)."""
    slots = layers + emb + loss
    assert slots % (p * v) == 0
    per_chunk = [slots // (p * v)] * v
    if emb and rank == 0:
        per_chunk[0] -= 1
    if loss and rank == p - 1:
        per_chunk[-1] -= 1
    return per_chunk


def peak_layer_microbatches(p, v, m, rank, per_chunk):
    """Largest sum over chunks of (forwards whose backward has not run) x (the chunk's layers)."""
    held = [0] * v
    peak = 0
    for kind, _, c in rank_order(p, v, m, rank):
        held[c] += 1 if kind == "F" else -1
        assert held[c] >= 0
        peak = max(peak, sum(h * n for h, n in zip(held, per_chunk)))
    return peak


LAYOUTS = ((0, 0), (1, 0), (0, 1), (1, 1))


@pytest.mark.parametrize("p,v", list(itertools.product((2, 3, 4, 8), (1, 2, 3, 4))))
def test_peak_activations_match_a_step_through_of_megatron_interleaved_order(p, v):
    """memory.stage_activation_layers on the model's ranks (first, the second as the middle one, last)
    equals the step-through's peak, for every layout, 1-3 slots per chunk and m = p, 2p, 3p; the second
    rank holds the most of the middle ones."""
    for k, c, (e, l) in itertools.product((1, 2, 3), (1, 2, 3), LAYOUTS):
        m, layers = k * p, c * p * v - e - l
        sim = [peak_layer_microbatches(p, v, m, r, chunk_layers(layers, p, v, r, e, l)) for r in range(p)]
        got = memory.stage_activation_layers(np.float64(layers), np.float64(p), np.float64(v), np.float64(m),
                                             np.bool_(e), np.bool_(l))
        case = (p, v, m, c, e, l)
        assert float(got[0]) == pytest.approx(sim[0]), case
        assert float(got[2]) == pytest.approx(sim[-1]), case
        if p > 2:
            assert float(got[1]) == pytest.approx(sim[1]), case
            assert sim[1] == max(sim[1:-1]), case


def test_llama3_405b_chunks_and_the_rank_that_peaks():
    """126 layers + embedding + loss on 16 x 8 chunks: one slot per chunk (Dubey et al. 2024 Sec. 3.3.2).
    Rank 0 runs 142 warm-up chunk-forwards; at m = 32 (8,192 GPUs) its first chunk holds 31 microbatches
    at the peak, all in the embedding-only chunk: 112 layer-microbatches, where 7 layers x the average
    count (143 / 8) gave 125.1. Rank 1 holds 141, and at m = 16 (16,384 GPUs) every rank up to 7 holds
    all 16 microbatches of its 8 chunks (its warm-up, 2 (15 - i) + 112, covers all 128): 128. The
    embedding-only chunk does not lower those."""
    assert chunk_layers(126, 16, 8, 0, 1, 1) == [0] + [1] * 7
    assert chunk_layers(126, 16, 8, 15, 1, 1) == [1] * 7 + [0]
    assert chunk_layers(126, 16, 8, 5, 1, 1) == [1] * 8
    c, first, mid, last = memory.split_layout(126.0, 16.0, 8.0, True, True)
    assert (c, first, mid, last) == (1, 7, 8, 7)
    want = {16: (112, 128, 112), 32: (112, 141, 113)}
    for m, (w0, w1, wl) in want.items():
        sim = [peak_layer_microbatches(16, 8, m, r, chunk_layers(126, 16, 8, r, 1, 1)) for r in (0, 1, 15)]
        assert sim == [w0, w1, wl]
        got = memory.stage_activation_layers(126.0, 16.0, 8.0, float(m), True, True)
        assert [float(x) for x in got] == [w0, w1, wl]
    uniform_first = memory.stage_activation_layers(126.0, 16.0, 8.0, 32.0)[0]
    assert float(uniform_first) == pytest.approx(7 * 143 / 8)


@pytest.mark.parametrize("p,v,m,c", [(4, 2, 8, 1), (4, 3, 4, 2), (3, 2, 6, 1), (8, 4, 16, 1), (4, 1, 8, 2)])
def test_peak_memory_holds_the_busiest_rank_of_the_step_through(p, v, m, c):
    """Through memory.peak_memory (one byte per layer-microbatch, nothing else): the activations are the
    largest peak over every rank of the step-through."""
    for e, l in LAYOUTS:
        layers = c * p * v - e - l
        want = max(peak_layer_microbatches(p, v, m, r, chunk_layers(layers, p, v, r, e, l)) for r in range(p))
        f = np.float64
        got = memory.peak_memory(f(1.0), f(0.0), f(0.0), f(0.0), f(layers), f(p), f(v), f(m), f(1.0), f(1.0),
                                 np.bool_(True), emb_layer=np.bool_(e), loss_layer=np.bool_(l))
        assert float(got["activations"]) == pytest.approx(want), (p, v, m, c, e, l)


def step_span(p, v, m, fwd, bwd):
    """Finish time of the step: each rank runs its order, a pass starting when the rank is free and the
    pass it needs has finished (forward: the same microbatch's previous chunk, on the previous rank or,
    from rank 0, the previous chunk on rank p - 1; backward: the next chunk's, mirrored; the last chunk's
    backward: its own forward). ``fwd[r][c]``, ``bwd[r][c]``: pass times; communication not counted."""
    orders = [rank_order(p, v, m, r) for r in range(p)]
    done, pos, free = {}, [0] * p, [0.0] * p
    moved = True
    while moved:
        moved = False
        for r in range(p):
            while pos[r] < len(orders[r]):
                kind, mb, c = orders[r][pos[r]]
                if kind == "F":
                    need = None if (r == 0 and c == 0) else ((r - 1, "F", mb, c) if r else (p - 1, "F", mb, c - 1))
                elif r == p - 1 and c == v - 1:
                    need = (r, "F", mb, c)
                else:
                    need = (r + 1, "B", mb, c) if r < p - 1 else (0, "B", mb, c + 1)
                if need is not None and need not in done:
                    break
                start = max(free[r], done[need] if need else 0.0)
                free[r] = start + (fwd if kind == "F" else bwd)[r][c]
                done[(r, kind, mb, c)] = free[r]
                pos[r] += 1
                moved = True
    assert all(pos[r] == len(orders[r]) for r in range(p)), "the order deadlocked"
    return max(free)


@pytest.mark.parametrize("p,v", list(itertools.product((3, 4, 8), (1, 2, 4))))
def test_embedding_chunk_shortens_the_fill_and_drain_once(p, v):
    """plan.bubble_time: with uniform chunks the step is (m v + p - 1) chunk times (Narayanan et al. 2021);
    the first rank's first chunk shorter by s (the embedding in place of one layer) shortens it by s,
    whatever the loss's chunk (lighter, equal, heavier); a lighter loss chunk shortens it further (the
    model keeps the bubble's upper bound there)."""
    lf, lb = 1.0, 2.0                         # one layer's forward, backward
    for k, c in itertools.product((1, 2, 3), (1, 2)):
        m = k * p
        t_chunk = c * (lf + lb)

        def span(emb, head):
            fwd = [[c * lf] * v for _ in range(p)]
            bwd = [[c * lb] * v for _ in range(p)]
            if emb:
                fwd[0][0], bwd[0][0] = (c - 1) * lf + 0.05, (c - 1) * lb + 0.4     # lookup, embedding gradient
            if head:
                fwd[p - 1][v - 1], bwd[p - 1][v - 1] = (c - 1) * lf + head[0], (c - 1) * lb + head[1]
            return step_span(p, v, m, fwd, bwd)

        uniform = span(False, None)
        assert uniform == pytest.approx(m * v * t_chunk + bubble_time(v * t_chunk, p, v))
        saving = lf + lb - 0.45
        assert span(True, None) == pytest.approx(m * v * t_chunk + bubble_time(v * t_chunk, p, v, saving))
        for head in ((0.6, 1.4), (2.0, 5.0)):
            assert span(False, head) - span(True, head) == pytest.approx(saving), (p, v, m, c, head)
        assert span(True, (0.6, 1.4)) < m * v * t_chunk + bubble_time(v * t_chunk, p, v, saving)


LLAMA = "tests/validation/frontier_scenarios/llama3_405b_prod_8k_{}gpu.toml"


def _llama(n, **par):
    sc = copy.deepcopy(load_scenario(LLAMA.format(n)))
    sc["parallelism"].update(par)
    return sc


def test_the_split_needs_a_pipeline_and_a_dividing_chunk_count():
    sc = _llama(16384, pp_embedding_as_layer=True, pp_loss_as_layer=True)
    sc["parallelism"]["virtual_stages"] = [8, 3, 4]          # 128 slots on 128, 48, 64 chunks
    reasons = evaluate(sc, keep_invalid=True)["reason"].values
    assert "pp_embedding_as_layer" not in reasons[0] and "pp_embedding_as_layer" not in reasons[2]
    assert "parallelism.virtual_stages: value 3 with pp = 16" in reasons[1]
    assert "a divisor of 128" in reasons[1]
    one = _llama(16384, pp_loss_as_layer=True, pp=1, virtual_stages=1, dp=2048)
    assert "need pp > 1" in evaluate(one, keep_invalid=True)["reason"].values[0]
    bad = _llama(16384, pp_embedding_as_layer="yes")
    with pytest.raises(ScenarioError, match="parallelism.pp_embedding_as_layer"):
        evaluate(bad)


def test_llama3_8k_layout_moves_the_first_rank_not_the_peak():
    """The published 8K plan with the embedding-only and loss-only chunks: the peak stays on a middle
    rank (its activations unchanged), so the plan still exceeds 80 GB; the step is shorter (the first
    rank holds 7 layers and the embedding gradient, below the middle ranks' 8; the fill and drain cross
    the embedding-only chunk)."""
    for n in (16384, 8192):
        off, on = (evaluate(_llama(n, pp_embedding_as_layer=f, pp_loss_as_layer=f), keep_invalid=True)
                   for f in (False, True))
        assert float(on["memory_bytes_activations"][0]) == pytest.approx(float(off["memory_bytes_activations"][0]))
        assert float(on["memory_per_device_bytes"][0]) > 80e9
        assert float(on["time_s_pp_bubble"][0]) < float(off["time_s_pp_bubble"][0])
        assert float(on["step_time_s"][0]) < float(off["step_time_s"][0])
