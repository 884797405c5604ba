"""Pipeline point-to-point under DeepSpeed's pipeline engine (``parallelism.pp_p2p = "serial"``).

The count of blocking transfers on the critical path (explore.model.pipeline_p2p.serial_p2p_transfers) is
checked against an independent event simulation of DeepSpeed's TrainSchedule, written here from the
schedule's published step rule (microsoft/DeepSpeed v0.5.3, deepspeed/runtime/pipe/schedule.py):
stage s runs microbatch k's forward at step s + 2k and its backward at step 2p - 1 - s + 2k; a
forward step first receives the activation from s - 1 and sends the gradient of the previous step's
backward to s - 1, a backward step sends the previous step's forward output to s + 1 and receives
the gradient from s + 1, then computes. Each send or receive is a blocking rendezvous with the
matching call of the neighbour (torch.distributed.broadcast on a two-rank group, engine.py / p2p.py);
both directions between a pair share one communicator, so they are serialized.
"""
import copy

import numpy as np
import pytest

from explore import validation as V
from explore.evaluate import evaluate
from explore.model.pipeline_p2p import serial_p2p_transfers


def _program(m, p, s):
    """Stage s's instruction list: ('F'|'B', k) compute and ('send'|'recv', 'act'|'grad') transfers."""
    by_step = {}
    for k in range(m):
        by_step[s + 2 * k] = ("F", k)
        by_step[2 * p - 1 - s + 2 * k] = ("B", k)
    prog, prev = [], None
    for step in range(2 * (m + p - 1)):
        cur = by_step.get(step)
        forward = (step - s) % 2 == 0
        if forward:
            if cur is not None and s > 0:
                prog.append(("recv", "act"))
            if prev is not None and s > 0:
                prog.append(("send", "grad"))
        else:
            if prev is not None and s < p - 1:
                prog.append(("send", "act"))
            if cur is not None and s < p - 1:
                prog.append(("recv", "grad"))
        if cur is not None:
            prog.append(cur)
        prev = cur
    return prog


def _makespan(m, p, tf, tb, c_act, c_grad):
    """Event simulation: each stage runs its list in order; a transfer starts when both ends have
    reached it and holds both for its duration."""
    progs = [_program(m, p, s) for s in range(p)]
    clock, ptr = [0.0] * p, [0] * p
    waiting = {}                        # (channel, k-th, side) -> (time, stage)
    done = {}                           # (channel, side) -> transfers completed
    moved = True
    while moved:
        moved = False
        for s in range(p):
            while ptr[s] < len(progs[s]):
                op = progs[s][ptr[s]]
                if op[0] in ("F", "B"):
                    clock[s] += tf if op[0] == "F" else tb
                    ptr[s] += 1
                    moved = True
                    continue
                side, kind = op
                src = s if side == "send" else (s - 1 if kind == "act" else s + 1)
                chan = (kind, src)
                k = done.get((chan, side), 0)
                other_side = "recv" if side == "send" else "send"
                other = waiting.get((chan, k, other_side))
                if other is None:
                    waiting.setdefault((chan, k, side), (clock[s], s))
                    break
                t0, peer = other
                end = max(clock[s], t0) + (c_act if kind == "act" else c_grad)
                clock[s] = clock[peer] = end
                ptr[s] += 1
                ptr[peer] += 1
                done[(chan, side)] = k + 1
                done[(chan, other_side)] = done.get((chan, other_side), 0) + 1
                moved = True
    assert ptr == [len(x) for x in progs], "schedule deadlocked"
    return max(clock)


CASES = [(m, p) for p in (2, 3, 4, 5, 7, 12) for m in (1, 2, 3, p, 2 * p + 1, 40)] + [(240, 35), (160, 35)]


@pytest.mark.parametrize("m,p", CASES)
def test_schedule_is_1f1b_and_the_transfer_count_matches_the_simulation(m, p):
    """Without communication the enumerated schedule takes (m + p - 1)(t_f + t_b), as 1F1B; each
    transfer direction then adds serial_p2p_transfers(m, p) transfer times to the step (measured by
    a small transfer time, for two forward/backward ratios)."""
    for tf, tb in ((1.0, 2.0), (1.0, 3.0)):
        base = _makespan(m, p, tf, tb, 0.0, 0.0)
        assert base == pytest.approx((m + p - 1) * (tf + tb))
        eps = 1e-4
        n_act = (_makespan(m, p, tf, tb, eps, 0.0) - base) / eps
        n_grad = (_makespan(m, p, tf, tb, 0.0, eps) - base) / eps
        assert n_act == pytest.approx(float(serial_p2p_transfers(m, p)), abs=1e-6)
        assert n_grad == pytest.approx(n_act, abs=1e-6)


def _p2p_time(sc, **par):
    s = copy.deepcopy(sc)
    s["parallelism"].update(par)
    return float(evaluate(s, keep_invalid=True)["time_s_pp_p2p"][0])


def _small():
    return {"name": "p2p", "model": {"preset": "gpt3-175b"},
            "training": {"global_batch": 64, "precision": "bf16", "flash_attention": True},
            "parallelism": {"tp": 1, "pp": 8, "dp": 1, "microbatch": 1, "virtual_stages": 1, "zero": 0,
                            "recompute": "full", "sequence_parallel": False},
            "system": {"accelerator": "a100-sxm-80gb", "devices": 8, "scale_up": {"size": 8, "link": "nvlink3"},
                       "scale_out": {"topology": "fat-tree", "link": "ib-hdr-200", "nics_per_device": 1.0}}}


def test_step_model_charges_the_simulated_count():
    """Without tensor parallelism (no scattering, no metadata) the serial engine's p2p time is the
    simulated count of transfers each way times two transfers of the batched engine's size: the
    ratio to the batched 2 (m + p - 1) exchanges is (2m + p - 4) / (m + p - 1) = 132 / 71 here."""
    sc = _small()
    m, p = 64, 8
    batched = _p2p_time(sc)
    serial = _p2p_time(sc, pp_p2p="serial")
    assert serial / batched == pytest.approx(2 * serial_p2p_transfers(m, p) / (2 * (m + p - 1)), rel=1e-9)
    assert serial / batched == pytest.approx(132 / 71, rel=1e-9)


def test_whole_gradients_add_the_unscattered_bytes_per_microbatch():
    """pp_scatter_grads false: every tensor rank sends the whole activation gradient (DeepSpeed up to
    v0.5.3) instead of its 1/t share. GPT-3 175B (s 2048, h 12288, Brown et al. 2020 Table 2.1), 64
    microbatches of one sequence, t = 8: 64 x 2 B x 2048 x 12288 x (1 - 1/8) = 2.82 GB more per
    device and step, and the transfer time rises."""
    sc = _small()
    sc["parallelism"].update(tp=8, pp=8, dp=1, pp_p2p="serial")
    sc["system"]["devices"] = 64
    out = {}
    for scatter in (True, False):
        s = copy.deepcopy(sc)
        s["parallelism"]["pp_scatter_grads"] = scatter
        ds = evaluate(s, keep_invalid=True)
        out[scatter] = (float(ds["bytes_scale_out_per_device"][0]), float(ds["time_s_pp_p2p"][0]))
    assert out[False][0] - out[True][0] == pytest.approx(64 * 2 * 2048 * 12288 * (1 - 1 / 8), rel=1e-9)
    assert out[False][1] > 2.0 * out[True][1]


def test_mtnlg22_scenarios_use_deepspeed_pipeline_engine_and_stay_held_out():
    """MT-NLG (Smith et al. 2022 Sec. 2.4, DeepSpeed's pipeline engine as of v0.5.4): serial
    blocking transfers with scattered gradients and autograd's unfused gradient accumulation, every
    other group on the defaults. Held out of every fit; still too fast on all three runs
    (-14.9 / -15.9 / -18.2 %, MAPE 16.3 %; -19.0 / -19.8 / -22.1 % without the accumulation,
    -19.3 / -20.2 / -22.4 % with Megatron's batched exchange as well): a guard against getting
    worse, not a pass mark."""
    assert "mtnlg22" in V.HELD_OUT_GROUPS
    cases = [c for c in V.load_cases() if V.group_of(c[0]) == "mtnlg22"]
    assert len(cases) == 3
    for _, sc, _, _ in cases:
        assert sc["parallelism"]["pp_p2p"] == "serial" and sc["parallelism"]["pp_scatter_grads"] is True
    for rid, sc, _, _ in V.load_cases():
        if V.group_of(rid) != "mtnlg22":
            assert "pp_p2p" not in sc["parallelism"] and "pp_scatter_grads" not in sc["parallelism"]
    e = V.errors(cases)
    assert np.all(e < 0), e
    assert float(np.mean(np.abs(e))) <= 0.17
    assert float(np.max(np.abs(e))) <= 0.19

    def without(keys):
        return [(r, {**sc, "parallelism": {k: v for k, v in sc["parallelism"].items() if k not in keys}}, k, t)
                for r, sc, k, t in cases]
    # the engine's serial transfers make every run slower than Megatron's batched exchange would,
    # by about 0.4 points; the unfused accumulation by about 4 points: neither closes the gap
    gain = V.errors(cases) - V.errors(without(("pp_p2p", "pp_scatter_grads")))
    assert np.all((gain > 0.002) & (gain < 0.01)), gain
    gain = V.errors(cases) - V.errors(without(("grad_accumulation",)))
    assert np.all((gain > 0.035) & (gain < 0.045)), gain
