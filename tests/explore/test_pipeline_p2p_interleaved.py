"""Pipeline point-to-point under Megatron-Core's interleaved schedule with ``overlap_p2p_comm``
(``parallelism.pp_p2p = "overlapped"`` / ``"overlapped_send_wait"``).

The closed form explore.model.pipeline_p2p.overlapped_p2p_transfers is checked against an event
simulation written here from the program order of forward_backward_pipelining_with_interleaving
(NVIDIA/Megatron-LM megatron/core/pipeline_parallel/schedules.py at 92c8482e6d / 23265d2db3 /
addc601f57, overlap_p2p_comm_warmup_flush off): the virtual-microbatch table of get_schedule_table
(groups of microbatch_group_size_per_vp_stage = p microbatches, every chunk in turn); rank r runs
(p - r - 1) 2 + (v - 1) p warm-up forwards, each followed by a blocking send_forward_recv_forward;
then steady 1F1B pairs whose sends and next receives are posted non-blocking after each pass
(pp_post_forward / pp_post_backward), each receive waited before the pass that consumes it
(pp_pre_forward / pp_pre_backward), a backward send when the next backward send is posted and, from
addc601f57 with deallocate_pipeline_outputs, a forward send right after it is posted; then the
cool-down's backwards, each followed by a blocking send_backward_recv_backward. A transfer is a
rendezvous: it completes ``hop`` after both its send and its receive are posted.
"""
import copy

import pytest

from explore.evaluate import evaluate
from explore.model.pipeline_p2p import overlapped_p2p_transfers


def _makespan(p, v, m, f, b, hop, send_wait):
    table = [(k, c) for g in range(0, m, p) for c in range(v) for k in range(g, min(g + p, m))]
    total = m * v
    progs = []
    for r in range(p):
        w = min((p - r - 1) * 2 + (v - 1) * p, total)
        fwd = [("F", c, k) for k, c in table]
        bwd = [("B", v - 1 - c, k) for k, c in table]
        ops = [(fwd[i], "warm") for i in range(w)]
        for i in range(total - w):
            ops += [(fwd[w + i], "steady"), (bwd[i], "steady")]
        ops += [(bwd[i], "cool") for i in range(total - w, total)]
        progs.append(ops)

    def src(r, op):        # the message an op consumes
        kind, c, k = op
        if kind == "F":
            return None if r == 0 and c == 0 else (("F", r - 1, c, k) if r else ("F", p - 1, c - 1, k))
        return None if r == p - 1 and c == v - 1 else (("B", r + 1, c, k) if r < p - 1 else ("B", 0, c + 1, k))

    def dst(r, op):        # the message an op produces
        kind, c, k = op
        last = (kind == "F" and r == p - 1 and c == v - 1) or (kind == "B" and r == 0 and c == 0)
        return None if last else (kind, r, c, k)

    posted_s, posted_r, done = {}, {}, {}
    known = lambda k: k in posted_s and k in posted_r
    arrive = lambda k: max(posted_s[k], posted_r[k]) + hop
    nxt = []
    for r in range(p):
        d = {}
        for kind in "FB":
            idx = [i for i, (op, _) in enumerate(progs[r]) if op[0] == kind]
            d.update(zip(idx, idx[1:]))
        nxt.append(d)
        first = src(r, progs[r][0][0])
        if first:
            posted_r[first] = 0.0                          # the initial blocking recv_forward
    cur, ptr, pend, prev_bsend = [0.0] * p, [0] * p, [[] for _ in range(p)], [None] * p
    left = sum(map(len, progs))
    while left:
        moved = False
        for r in range(p):
            while ptr[r] < len(progs[r]):
                i = ptr[r]
                op, phase = progs[r][i]
                need = src(r, op)
                if any(not known(k) for k in pend[r]) or (need and not known(need)):
                    break
                if op[0] == "B" and need is None and ("F", r, op[1], op[2]) not in done:
                    break
                start = max([cur[r], arrive(need) if need else 0.0] + [arrive(k) for k in pend[r]])
                if op[0] == "B":
                    start = max(start, done.get(("F", r, op[1], op[2]), 0.0))
                end = start + (f if op[0] == "F" else b)
                done[(op[0], r, op[1], op[2])] = end
                out = dst(r, op)
                if out:
                    posted_s[out] = end
                nin = src(r, progs[r][nxt[r][i]][0]) if i in nxt[r] else None
                if nin:
                    posted_r[nin] = end
                if phase != "steady":                      # blocking send_*_recv_*
                    waits = [k for k in (out, nin) if k]
                    if phase == "warm" and i + 1 < len(progs[r]) and progs[r][i + 1][1] != "warm":
                        first_b = next(o for o, _ in progs[r] if o[0] == "B")
                        if src(r, first_b):                # the first backward's receive, non-blocking
                            posted_r[src(r, first_b)] = end
                elif op[0] == "F":
                    waits = [out] if (out and send_wait) else []
                else:
                    waits = [prev_bsend[r]] if prev_bsend[r] else []
                    prev_bsend[r] = out
                    if i + 1 < len(progs[r]) and progs[r][i + 1][1] == "cool" and out:
                        waits.append(out)                  # the cool-down waits every steady handle
                pend[r], cur[r] = waits, end
                ptr[r] += 1
                left -= 1
                moved = True
        assert moved, "deadlock"
    return max(max([cur[r]] + [arrive(k) for k in pend[r]]) for r in range(p))


CASES = [(p, v, m) for p in (2, 3, 4, 8) for v in (2, 3, 4) for m in (p, 2 * p, 3 * p)]


@pytest.mark.parametrize("send_wait", [False, True])
@pytest.mark.parametrize("p,v,m", CASES)
def test_closed_form_matches_the_event_simulation(p, v, m, send_wait):
    """Exposed transfers = (makespan with a small hop - makespan without) / hop, for a backward twice
    and three times the forward."""
    for f, b in ((1.0, 2.0), (1.0, 3.0)):
        base = _makespan(p, v, m, f, b, 0.0, send_wait)
        for hop in (0.01, 0.1):
            n = (_makespan(p, v, m, f, b, hop, send_wait) - base) / hop
            assert n == pytest.approx(float(overlapped_p2p_transfers(m, p, v, send_wait)), abs=1e-6)


def _scenario():
    return {"name": "p2p-vp", "model": {"preset": "llama3-70b"},
            "training": {"global_batch": 64, "precision": "bf16", "flash_attention": True},
            "parallelism": {"tp": 4, "pp": 4, "dp": 1, "microbatch": 1, "virtual_stages": 4, "zero": 1,
                            "recompute": "none", "sequence_parallel": True},
            "system": {"accelerator": "h100-sxm-80gb", "devices": 16, "scale_up": {"size": 8, "link": "nvlink4"},
                       "scale_out": {"topology": "fat-tree", "link": "ib-ndr-400", "nics_per_device": 1.0}}}


def _p2p(**par):
    s = copy.deepcopy(_scenario())
    s["parallelism"].update(par)
    return float(evaluate(s, keep_invalid=True)["time_s_pp_p2p"][0])


def test_step_model_charges_the_closed_form_ratio():
    """m = 64, p = 4, v = 4: batched 2 (v m + p - 1) = 518, overlapped 2 (p v - 1) = 30, with the
    forward sends waited 30 + v (m - p) - 1 = 269; v = 1 stays batched (batch_p2p_comm)."""
    batched = _p2p()
    assert _p2p(pp_p2p="overlapped") / batched == pytest.approx(30 / 518, rel=1e-9)
    assert _p2p(pp_p2p="overlapped_send_wait") / batched == pytest.approx(269 / 518, rel=1e-9)
    assert _p2p(pp_p2p="overlapped", virtual_stages=1) == pytest.approx(_p2p(virtual_stages=1), rel=1e-12)
