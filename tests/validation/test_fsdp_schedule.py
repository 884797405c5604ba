"""FSDP1's stream schedule, event by event, against the step model's closed form (foundry23).

``fsdp1_step`` replays one training step of PyTorch 2.1 FSDP (FSDP1) as its code issues the work
(torch/distributed/fsdp/_runtime_utils.py of pytorch/pytorch v2.1): a compute stream and one NCCL
stream per process group (ProcessGroupNCCL runs every collective of a communicator on that
communicator's stream, so all-gathers and reduce-scatters of the same group queue behind each other
in the order the host issues them). The host is taken to run ahead of the GPU (the rate limiter,
``limit_all_gathers``, blocks it only on the free event of the unit two back, which leaves a layer of
work queued). The order the code issues:

* forward: ``_root_pre_forward`` makes the gather stream wait for the compute stream, the root
  unit (embedding, tied head, final norm) gathers, then each unit's pre-forward waits for its own
  gather and issues the next unit's (``forward_prefetch``); the root is not resharded after the
  forward (``_post_forward_reshard``: ``not state._is_root``);
* backward (``BACKWARD_PRE``): the root's pre-backward hook prefetches the last layer's gather (FULL_SHARD);
  each unit's pre-backward waits for its gather and issues the next one's, its post-backward
  issues the reduce-scatter once its gradient is computed (``_post_backward_hook``:
  ``post_backward`` stream waits for the compute stream); the root's reduce-scatter follows the
  embedding's backward; ``_post_backward_final_callback`` makes the step wait for the last one.

The replay is a different derivation from the step model's (a per-layer event timeline against a
closed-form bound over the whole step); they must agree on the exposed time.
"""
import numpy as np
import pytest

from explore import validation as V
from explore import validation_fsdp as F
from explore.evaluate import Resolved, evaluate, fit, resolve
from explore.model import calibration as cal
from explore.model.fabric import Fabric
from explore.model.plan import ParallelPlan
from explore.model.system import build_system
from explore.model.workload import ModelSpec, layer_params


def fsdp1_step(layers, fwd, bwd, head_fwd, head_bwd, emb_bwd, ag_layer, rs_layer, ag_root, rs_root,
               full_shard):
    """(step wall time, compute time) of one step replayed on a compute and a NCCL stream."""
    nccl = 0.0

    def on_nccl(ready, dur):
        nonlocal nccl
        nccl = max(nccl, ready) + dur
        return nccl
    # forward
    c = on_nccl(0.0, ag_root)                        # root gathers first, nothing to hide under
    ag = {0: on_nccl(0.0, ag_layer)}                 # root's pre-forward prefetches unit 0
    for i in range(layers):
        c = max(c, ag[i])
        if i + 1 < layers:
            ag[i + 1] = on_nccl(0.0, ag_layer)       # forward_prefetch: issued at unit i's pre-forward
        c += fwd
    c += head_fwd
    # backward
    agb = {}
    if full_shard:
        agb[layers - 1] = on_nccl(0.0, ag_layer)     # root's pre-backward hook prefetches (BACKWARD_PRE)
    c += head_bwd
    for i in reversed(range(layers)):
        if full_shard:
            c = max(c, agb[i])
            if i > 0:
                agb[i - 1] = on_nccl(0.0, ag_layer)  # pre-backward prefetch, queued behind the RS before it
        c += bwd
        on_nccl(c, rs_layer)                         # post-backward: waits for the gradient
    c += emb_bwd
    end = on_nccl(c, rs_root)                        # the root's gradient is complete last
    compute = layers * (fwd + bwd) + head_fwd + head_bwd + emb_bwd
    return max(c, end), compute


def test_replay_counts_a_hand_timeline():
    """Two layers, SHARD_GRAD_OP, by hand: AG root 0-2, AG0 2-3, F0 3-7 (AG1 3-4), F1 7-11, head
    forward and backward 11-13, B1 13-19 (RS1 19-21), B0 19-25 (RS0 25-27), embedding 25-25.5,
    RS root after RS0 27-30: wall 30, compute 2 x (4 + 6) + 1 + 1 + 0.5 = 22.5."""
    wall, comp = fsdp1_step(2, 4.0, 6.0, 1.0, 1.0, 0.5, 1.0, 2.0, 2.0, 3.0, False)
    assert (wall, comp) == (30.0, 22.5)
    # a reduce-scatter plus the next gather longer than a layer's backward is exposed each layer
    wall, comp = fsdp1_step(4, 1.0, 2.0, 0.0, 0.0, 0.0, 1.5, 1.5, 0.0, 0.0, True)
    assert wall - comp > 4 * 0.5


RUNS = ("foundry23_h100_1b_512", "foundry23_h100_1b_128", "foundry23_h100_3b_512", "foundry23_h100_7b_512",
        "foundry23_h100_7b_128", "foundry23_h100_13b_512", "foundry23_h100_70b_512")


@pytest.mark.parametrize("run_id", RUNS)
def test_step_model_exposes_what_the_replay_exposes(run_id):
    """The step model's exposed data-parallel time (dp + ZeRO-3 parts) equals the replay's, within
    0.1 %, with the model's own per-call times; and the replay shows every per-layer gather and
    reduce-scatter hidden (its exposure is the two ends alone), although they share one stream."""
    sc = next(c[1] for c in V.load_cases() if c[0] == run_id)
    r = resolve(sc)
    r = Resolved(r.n, {k: fit(a, r.n) for k, a in r.values.items()}, r.name)
    m, plan, s = ModelSpec.from_resolved(r), ParallelPlan.from_resolved(r), build_system(r)
    fab = Fabric(s, cal.DEFAULT)
    n, L = float(np.ravel(plan.dp)[0]), int(np.ravel(m.layers)[0])
    b, sq, h, V_ = float(np.ravel(plan.microbatch)[0]), m.seq_len, m.hidden, m.vocab
    lay = float(np.ravel(layer_params(m))[0])
    rb = float(np.ravel(plan.grad_reduce_bytes)[0])
    t1 = lambda x: float(np.ravel(x)[0])  # noqa: E731
    ag_l, rs_l = t1(fab.all_gather(np.array(lay * 2.0), 1.0, n)), t1(fab.reduce_scatter(np.array(lay * rb), 1.0, n))
    ag_r, rs_r = t1(fab.all_gather(np.array(V_ * h * 2.0), 1.0, n)), t1(fab.reduce_scatter(np.array(V_ * h * rb), 1.0, n))
    ds = evaluate(sc, keep_invalid=True)
    compute = float(ds["time_s_compute"][0])
    exposed = float(ds["time_s_dp_comm"][0]) + float(ds["time_s_zero3_comm"][0])
    # the output layer's backward GEMMs at the dense bf16 peak (a lower bound on their time) and the
    # embedding's dense gradient (cal.EMBEDDING_GRAD_BYTES_PER_PARAM at the modelled HBM rate)
    head_bwd = 4.0 * b * sq * h * V_ / 989.4e12
    emb_bwd = cal.EMBEDDING_GRAD_BYTES_PER_PARAM * V_ * h / (3.35e12 * cal.DEFAULT.hbm_efficiency)
    assert ag_l < head_bwd and emb_bwd < rs_l       # the regime of every run here
    per_layer = (compute - head_bwd - emb_bwd) / L
    full = "FULL_SHARD" in next(row for row in V.load_rows() if row["run_id"] == run_id)["zero_or_sharding"]
    wall, comp = fsdp1_step(L, per_layer / 3.0, 2.0 * per_layer / 3.0, 0.0, head_bwd, emb_bwd,
                            ag_l, rs_l, ag_r, rs_r, full)
    replay = float(np.ravel(wall - comp)[0])
    assert replay == pytest.approx(ag_r + ag_l + rs_l - emb_bwd + rs_r, rel=1e-9)   # the ends alone
    assert exposed == pytest.approx(replay, rel=1e-3), (run_id, exposed, replay)
