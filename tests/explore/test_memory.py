"""Activation memory in flight per pipeline stage, and published plans that must fit in 80 GB."""
import copy

import numpy as np
import pytest

import explore
from explore.model import memory


def _one_f_one_b_peak(p, stage, m):
    """Peak number of forwards whose backward has not run yet on ``stage``, by stepping through
    the non-interleaved 1F1B order (warm-up forwards, then one forward / one backward pairs,
    then the cool-down backwards; Narayanan et al. 2021, Fig. 4 top)."""
    warm = min(p - stage - 1, m)
    order = ["F"] * warm
    for _ in range(m - warm):
        order += ["F", "B"]
    order += ["B"] * warm
    live = peak = 0
    for op in order:
        live += 1 if op == "F" else -1
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize("p", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("m", [1, 3, 8, 64])
def test_1f1b_in_flight_matches_the_schedule(p, m):
    for stage in range(p):
        got = float(memory.in_flight(np.float64(p), np.float64(1), np.float64(m), np.float64(stage)))
        assert got == _one_f_one_b_peak(p, stage, m), (p, m, stage)


def test_interleaved_first_stage_matches_korthikanti():
    """Korthikanti et al. 2022 Sec. 4.2.3: the first stage of an interleaved schedule holds
    p (1 + (p - 1) / (p v)) microbatches' worth of its layers."""
    for p, v in [(8, 2), (16, 3), (4, 4)]:
        want = p * (1 + (p - 1) / (p * v))
        assert float(memory.in_flight(np.float64(p), np.float64(v), np.float64(1e6), 0.0)) == pytest.approx(want)


def test_stage_layout_llama3():
    """126 layers on 16 stages: 7 on the first and last, 8 in the middle (Dubey et al. 2024)."""
    first, full, last = memory.stage_layout(np.float64(126), np.float64(16))
    assert (first, full, last) == (7, 8, 7)
    assert memory.stage_layout(np.float64(96), np.float64(8)) == (12, 12, 12)


def llama3_405b():
    """Llama 3 405B pre-training plan (Dubey et al. 2024, Table 4 and Sec. 3.3.2): 16,384 H100,
    tp 8, cp 1, pp 16, dp 128, 8,192-token sequences, 16M-token batches (2,048 sequences);
    FSDP shards gradients and optimizer states but keeps weights gathered (ZeRO-2 memory)."""
    return {"name": "llama3-405b", "model": {"preset": "llama3-405b"},
            "training": {"global_batch": 2048, "precision": "bf16", "flash_attention": True},
            "parallelism": {"tp": 8, "pp": 16, "dp": 128, "microbatch": 1, "zero": 2,
                            "recompute": "none", "sequence_parallel": True},
            "system": {"accelerator": "h100-sxm-80gb", "devices": 16384,
                       "scale_up": {"size": 8, "link": "nvlink4"},
                       "scale_out": {"topology": "fat-tree", "link": "roce-400"}}}


def test_llama3_405b_published_plan_fits_in_80_gb():
    ds = explore.evaluate(llama3_405b(), keep_invalid=True)
    assert bool(ds.valid[0]), str(ds.reason.values[0])
    assert float(ds.memory_per_device_bytes[0]) <= 80e9


def test_more_in_flight_with_interleaving():
    sc = llama3_405b()
    sc["parallelism"]["virtual_stages"] = [1, 2]
    ds = explore.evaluate(sc, keep_invalid=True)
    act = ds.memory_bytes_activations.values
    assert act[1] > act[0]


def _torch_1f1b_live_peak(p, stage, m, layers):
    """Peak live inter-stage-sized tensors on ``stage`` of torch.distributed.pipelining's 1F1B
    under full recompute (every layer stores its input, the size of the stage's input), stepping
    through the schedule: one receive buffer per microbatch (non-first stages, the first layer's
    stored input while its microbatch is in flight), one gradient receive buffer per microbatch
    (non-last stages), each forward's output kept until the step ends (output_chunks), and on
    non-first stages the input gradient each backward leaves in its receive buffer's ``.grad``
    (``stage_backward`` calls ``torch.autograd.backward``; ``clear_runtime_states`` resets it at the
    next step)."""
    warm = min(p - stage - 1, m)
    order = ["F"] * warm
    for _ in range(m - warm):
        order += ["F", "B"]
    order += ["B"] * warm
    first, last = stage == 0, stage == p - 1
    live = forwarded = backwarded = peak = 0
    for op in order:
        if op == "F":
            live += 1
            forwarded += 1
        else:
            live -= 1
            backwarded += 1
        stored = live * (layers if first else layers - 1)
        persistent = (0 if first else m) + (0 if last else m)
        outputs = 0 if last else forwarded
        input_grads = 0 if first else backwarded
        peak = max(peak, stored + persistent + outputs + input_grads)
    return peak


@pytest.mark.parametrize("p,m", [(2, 2), (4, 4), (8, 8), (4, 16)])
def test_torch_pipeline_buffers_match_a_schedule_step_through(p, m):
    from explore.model import runtime_memory as rt
    layers = 5
    P, V, M = np.float64(p), np.float64(1.0), np.float64(m)
    held = rt.pipeline_held_bytes(1.0, 0.0, P, V, M, np.bool_(True))
    for stage, h in ((0, held[0]), (1, held[1])):
        if stage >= p - 1:
            continue
        want = _torch_1f1b_live_peak(p, stage, m, layers)
        got = layers * float(memory.in_flight(P, V, M, np.float64(stage))) + float(h)
        assert got == want, (p, m, stage)
    # the last stage keeps the 16-bit logits of the m - 1 microbatches before the one in its loss
    last = rt.pipeline_held_bytes(0.0, 1.0, P, V, M, np.bool_(True))[2]
    assert float(last) == m - 1
    # and, at that loss, the receive buffers and input gradients of those m - 1 microbatches
    # (its stored inputs: the one in flight, counted with the activations)
    last_x = rt.pipeline_held_bytes(1.0, 0.0, P, V, M, np.bool_(True))[2]
    assert float(last_x) == 2 * (m - 1)


def _torch_interleaved_live_x(p, v, m, rank, layers):
    """Peak of the inter-stage-sized tensors on ``rank`` of ScheduleInterleaved1F1B (the order of
    ``_torch_peak_with_gradients``; microbatches in order per chunk), counted per chunk (stage
    rank + c p) as ``_torch_1f1b_live_peak`` does per stage: stored layer inputs of the
    chunk-forwards in flight (the first layer's is the receive buffer on non-first stages), one
    receive buffer per microbatch and the input gradients of the backwards run (non-first stages),
    one gradient receive buffer per microbatch and the forwards' outputs (non-last stages; the last
    stage's output, the logits, is counted apart)."""
    m_r = m // max(1, m // p)
    warm = min((v - 1) * m_r + 2 * (p - 1 - rank), m * v)
    pairs = m * v - warm
    ops = []
    for op in range(m * v + warm):
        f = ("F", (op // m_r) % v) if op < warm + pairs else None
        b = ("B", v - 1 - ((op - warm) // m_r) % v) if op >= warm else None
        ops += [x for x in (f, b) if x]
    live, fwd, bwd = [0] * v, [0] * v, [0] * v
    peak = 0
    for kind, c in ops:
        if kind == "F":
            live[c] += 1
            fwd[c] += 1
        else:
            live[c] -= 1
            bwd[c] += 1
        total = 0
        for k in range(v):
            stage = rank + k * p
            first, last = stage == 0, stage == p * v - 1
            total += live[k] * (layers if first else layers - 1)
            total += 0 if first else m + bwd[k]
            total += 0 if last else m + fwd[k]
        peak = max(peak, total)
    return peak


@pytest.mark.parametrize("p,v,m", [(8, 2, 8), (4, 2, 4), (4, 3, 4), (2, 4, 2), (8, 3, 8), (8, 2, 16), (4, 2, 12)])
def test_torch_interleaved_pipeline_buffers_match_a_schedule_step_through(p, v, m):
    """Stored inputs + the runtime's inter-stage buffers of ScheduleInterleaved1F1B against the closed
    form (``memory.in_flight`` x layers + ``pipeline_held_bytes``) on the ranks the model evaluates
    (first, second, last): equal at one backward round (m = p, torchtitan's default: every forward
    has run when the in-flight count last peaks), and on the last rank, whose peak (its last loss)
    torchtitan's Table 5 interleaved run reaches, at any m. With more rounds the first ranks' count
    is approximate (backwards of the first stage leave no input gradient; some forwards are still to
    come at the peak): within 2 m inter-stage tensors here."""
    from explore.model import runtime_memory as rt
    layers = 5                                   # per chunk
    P, V, M = np.float64(p), np.float64(v), np.float64(m)
    held = rt.pipeline_held_bytes(1.0, 0.0, P, V, M, np.bool_(True))
    ranks = ((0, held[0]), (1, held[1]), (p - 1, held[2])) if p > 2 else ((0, held[0]), (p - 1, held[2]))
    for rank, h in ranks:       # the model's middle stage exists only for p > 2
        got = layers * v * float(memory.in_flight(P, V, M, np.float64(rank))) + float(h)
        want = _torch_interleaved_live_x(p, v, m, rank, layers)
        if rank == p - 1 or m == p:
            assert got == pytest.approx(want), (p, v, m, rank)
        else:
            assert abs(got - want) <= 2 * m, (p, v, m, rank, got, want)


def _plan(**par):
    sc = copy.deepcopy(llama3_405b())
    sc["parallelism"].update(par)
    return sc


def test_gradient_memory_follows_the_reduction_dtype():
    """Megatron-Core keeps main gradients in the dtype it reduces them in (grad_reduce_in_fp32)."""
    sc = _plan(zero=1, grad_reduce_bytes=[4, 2])
    g = explore.evaluate(sc, keep_invalid=True).memory_bytes_gradients.values
    assert g[0] == pytest.approx(2.0 * g[1])


def test_zero3_over_one_rank_is_no_sharding():
    """ZeRO-3 over a single rank holds the model as ZeRO-0 does: no extra unsharded copies."""
    sc = {"name": "z", "model": {"preset": "llama3-8b"},
          "training": {"global_batch": 8, "precision": "bf16"},
          "parallelism": {"tp": 8, "pp": 1, "dp": 1, "zero": [0, 3], "recompute": "full"},
          "system": {"accelerator": "h100-sxm-80gb", "devices": 8}}
    mem = explore.evaluate(sc, keep_invalid=True).memory_per_device_bytes.values
    assert mem[0] == pytest.approx(mem[1])


def test_zero3_holds_more_than_its_shards():
    """Sharded over 8 ranks, ZeRO-3 still holds two layers' weights and one layer's gradient whole."""
    sc = {"name": "z", "model": {"preset": "llama3-8b"},
          "training": {"global_batch": 64, "precision": "bf16"},
          "parallelism": {"tp": 1, "pp": 1, "dp": 8, "zero": 3, "recompute": "full"},
          "system": {"accelerator": "h100-sxm-80gb", "devices": 8}}
    ds = explore.evaluate(sc, keep_invalid=True)
    per_layer = 218_112_000      # Llama 3 8B layer: 4096 x (2 x 4096 + 2 x 1024) + 3 x 4096 x 14336 + norms
    shard_w = 2.0 * 8.03e9 / 8
    assert float(ds.memory_bytes_weights[0]) == pytest.approx(shard_w + 2 * 2.0 * per_layer, rel=0.01)


def test_transformer_engine_fp8_keeps_smaller_activations():
    """With FP8 GEMMs, Transformer Engine saves the FP8 copies of the GEMM inputs: activations fall."""
    sc = _plan(recompute="none")
    sc["training"]["precision"] = ["bf16", "fp8"]
    a = explore.evaluate(sc, keep_invalid=True).memory_bytes_activations.values
    assert a[1] < a[0]


def _torch_interleaved_peak(p, v, m, rank):
    """Peak live chunk-forwards (forwards of one model chunk whose backward has not run) on ``rank`` of
    torch.distributed.pipelining's ScheduleInterleaved1F1B, stepping through its order
    (schedules.py, ``_get_warmup_ops`` with multiply_factor 2 and ``_get_1f1b_rank_ops``): warm-up
    forwards min((v - 1) m_r + 2 (p - 1 - rank), m v), m_r = m / max(1, m // p) microbatches per
    round; then forward / backward pairs; then the cool-down backwards."""
    m_r = m // max(1, m // p)
    warm = min((v - 1) * m_r + 2 * (p - 1 - rank), m * v)
    order = ["F"] * warm + ["F", "B"] * (m * v - warm) + ["B"] * warm
    live = peak = 0
    for op in order:
        live += 1 if op == "F" else -1
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize("p,v,m", [(8, 2, 8), (8, 2, 16), (4, 3, 8), (4, 2, 4), (2, 4, 6)])
def test_interleaved_in_flight_matches_torch_schedule_step_through(p, v, m):
    """memory.in_flight (units: one microbatch through the rank's v chunks) is the peak chunk count / v on
    every rank, when m is a multiple of p (torchtitan's default m = p; Megatron's requirement). At
    Table 5's plan (p 8, v 2, m 8) ranks 0-3 hold all 16 chunk-forwards, as 1F1B's first rank holds all
    8 microbatches: interleaving cannot lower the stored activations there; it lowers the gradients
    held with them (test_torch_gradients_at_the_peak_match_a_schedule_step_through)."""
    for rank in range(p):
        want = _torch_interleaved_peak(p, v, m, rank) / v
        got = float(memory.in_flight(np.float64(p), np.float64(v), np.float64(m), np.float64(rank)))
        assert got == pytest.approx(want), (p, v, m, rank)
    if (p, v, m) == (8, 2, 8):
        assert [_torch_interleaved_peak(p, v, m, r) for r in range(p)] == [16, 16, 16, 16, 15, 13, 11, 9]


def test_torch_cp_ring_moves_keys_and_values_of_every_query_head():
    """torchtitan 9dec370 repeats keys and values to every query head before SDPA (repeat_kv), so the
    ring's chunk is heads / kv_heads times the GQA chunk context parallelism would move: 16 for
    Llama 3.1 405B (128 / 8 heads), 4 for 8B (32 / 8)."""
    from explore.model import context as ctx
    from explore.model import runtime_memory as rt
    from explore.model.workload import ModelSpec
    from explore.scenario import resolve
    for preset, rep in (("llama3-405b", 16.0), ("llama3-8b", 4.0)):
        sc = {"model": {"preset": preset}, "training": {"global_batch": 8},
              "parallelism": {"tp": 8, "cp": 8}, "system": {"accelerator": "h100-sxm-80gb", "devices": 64}}
        m = ModelSpec.from_resolved(resolve(sc))
        args = (m, np.float64(1.0), np.float64(8.0), np.float64(8.0))
        one = lambda x: float(np.asarray(x).ravel()[0])  # noqa: E731
        assert one(rt.repeated_kv_chunk_bytes(*args)) == pytest.approx(rep * one(ctx.kv_chunk_bytes(*args)))
        on, off = (one(rt.cp_gather_bytes(m, 1.0, np.float64(c), 8.0, np.bool_(True))) for c in (8.0, 1.0))
        assert off == 0.0 and on == pytest.approx(13 * one(rt.repeated_kv_chunk_bytes(*args)))


def test_deepspeed_zero3_holds_submodules_not_layers():
    """GPT 530B of Narayanan et al. 2021 (h 20480, 4h MLP, no GQA): a layer has ~12 h^2 parameters and its
    largest submodule is the MLP's h -> 4h projection, 4 h^2 (QKV: 3 h^2). DeepSpeed's ZeRO-3 holds two
    submodules' fp16 weights and one submodule's gradient plus a 5e8-element bucket unsharded; the
    per-layer count holds two layers' and one layer's: the weights differ by 2 B x 2 x (12 - 4) h^2."""
    from explore import validation as V
    from explore.model import runtime_memory as rt
    sc = copy.deepcopy(dict((c[0], c[1]) for c in V.load_cases())["zero3n21_t2_530B_640"])
    h = 20480.0
    out = {}
    for runtime in ("deepspeed", "megatron"):
        sc["parallelism"]["runtime"] = runtime
        out[runtime] = explore.evaluate(sc, keep_invalid=True)
    dw = float(out["megatron"]["memory_bytes_weights"][0] - out["deepspeed"]["memory_bytes_weights"][0])
    dg = float(out["megatron"]["memory_bytes_gradients"][0] - out["deepspeed"]["memory_bytes_gradients"][0])
    assert dw == pytest.approx(2.0 * 2.0 * 8.0 * h * h, rel=2e-3)
    assert dg == pytest.approx(2.0 * (8.0 * h * h - rt.DEEPSPEED_REDUCE_BUCKET_ELEMENTS), rel=2e-3)


def _torch_peak_with_gradients(p, v, m, rank, act_chunk, grad_chunk):
    """Peak of (stored chunk-forward activations + unsharded gradients) on ``rank`` of
    torch.distributed.pipelining, stepping through its order: Schedule1F1B for v = 1 (warm-up of
    min(m, p - rank) forwards, then backward / forward pairs), ScheduleInterleaved1F1B otherwise
    (warm-up as in ``_torch_interleaved_peak``, forward / backward pairs, cool-down; forwards of local
    chunk (op // m_r) % v, backwards of chunk v - 1 - ((op - warm-up) // m_r) % v, in rounds of m_r
    microbatches). A chunk's gradients live from its first backward through its last (FSDP2 under
    pipelining: gradient sync only on the chunk's last microbatch, which reduce-scatters and frees
    them; runtime_memory docstring). At a backward: the activations before it plus the gradients
    after it."""
    m_r = m // max(1, m // p)
    warm = min((v - 1) * m_r + 2 * (p - 1 - rank), m * v) if v > 1 else min(m, p - rank)
    pairs = m * v - warm
    ops = []
    for op in range(m * v + warm):
        f = ("F", (op // m_r) % v) if op < warm + pairs else None
        b = ("B", v - 1 - ((op - warm) // m_r) % v) if op >= warm else None
        ops += [x for x in ((b, f) if v == 1 else (f, b)) if x]
    live, done, peak = [0] * v, [0] * v, 0.0
    for kind, c in ops:
        acts = sum(live) * act_chunk
        if kind == "F":
            live[c] += 1
            acts += act_chunk
        else:
            done[c] += 1
            live[c] -= 1
        grads = grad_chunk * sum(1 for k in range(v) if 0 < done[k] < m or (kind == "B" and k == c))
        peak = max(peak, acts + grads)
    return peak


@pytest.mark.parametrize("p,v,m", [(8, 2, 8), (8, 2, 16), (4, 3, 4), (4, 3, 8), (4, 2, 4), (2, 4, 2),
                                   (2, 4, 6), (8, 1, 8), (8, 1, 16), (4, 2, 12)])
def test_torch_gradients_at_the_peak_match_a_schedule_step_through(p, v, m):
    """Under the torch runtime with unsharded gradients (FSDP2 with pipeline parallelism, as
    torchtitan), the peak of stored activations + gradients over the ranks equals a step-through of
    torch's schedules: with interleaving and one backward round (m = p, torchtitan's default) only
    the rank's last chunk has gradients when the activations peak; with 1F1B, or two rounds or more,
    all of them (docs/validation.md "Memory validated": the interleaved row of torchtitan's Table 5)."""
    from explore.model import runtime_memory as rt
    layers_rank, act_layer, grad_layer = 6 * v, 1.0, 5.0
    f = np.float64
    parts = memory.peak_memory(f(act_layer), f(grad_layer), f(0.0), f(0.0), f(layers_rank * p), f(p), f(v), f(m),
                               f(1), f(8), False, bytes_per_param=(0.0, 1.0, 0.0), per_step_states=True,
                               allocator_overhead=0.0,
                               one_chunk_grads=rt.one_chunk_gradients(f(p), f(v), f(m), np.bool_(True)))
    chunk = layers_rank / v
    want = max(_torch_peak_with_gradients(p, v, m, r, chunk * act_layer, chunk * grad_layer) for r in range(p))
    assert float(parts["activations"] + parts["gradients"]) == pytest.approx(want)
    if (p, v, m) == (8, 2, 8):     # half the gradients of 1F1B's peak, and less in total
        one = memory.peak_memory(f(act_layer), f(grad_layer), f(0.0), f(0.0), f(layers_rank * p), f(p), f(1.0),
                                 f(m), f(1), f(8), False, bytes_per_param=(0.0, 1.0, 0.0), per_step_states=True,
                                 allocator_overhead=0.0)
        assert float(parts["gradients"]) == pytest.approx(0.5 * float(one["gradients"]))
        assert float(parts["activations"] + parts["gradients"]) < float(one["activations"] + one["gradients"])


def test_only_the_torch_runtime_frees_a_chunks_gradients():
    """Llama 3 405B plan (pp 16, m = 16 = p): interleaving (v = 2) halves the gradients at the peak
    under the torch runtime (one chunk's), not under Megatron-Core, whose gradient buffer lives for
    the whole run."""
    sc = _plan(zero=1, virtual_stages=[1, 2])
    mega = explore.evaluate(sc, keep_invalid=True).memory_bytes_gradients.values
    sc["parallelism"]["runtime"] = "torch"
    torch_g = explore.evaluate(sc, keep_invalid=True).memory_bytes_gradients.values
    assert np.all(np.isfinite(mega)) and np.all(np.isfinite(torch_g))
    assert mega[1] == pytest.approx(mega[0], rel=0.05)
    assert torch_g[1] < 0.6 * torch_g[0]
