"""The data-parallel streams' windows (explore/model/step.py, explore/model/overlap.py)."""
import copy
from pathlib import Path

import explore

SCENARIO = Path(__file__).resolve().parents[1] / "validation" / "scenarios" / "mcore_h100_weak_32B.toml"


def test_parameter_gather_hides_under_the_first_forward_only():
    """Megatron-Core's overlapped parameter gather (distributed optimizer, core_r0.8.0
    optimizer/distrib_optimizer.py) is dispatched after the optimizer step and waited on in the
    first forward's pre-hooks, while the gradient reduce-scatter runs under the last backward: two
    windows at the two ends of the step, so overlapping the gather can save at most one
    microbatch's forward, which is at most half of that microbatch's compute (its backward takes at
    least as long). On the Megatron-Core 32B row (the gather 0.21 s, each forward 0.06-0.12 s) the
    saving stays under that bound at microbatch 1 and 2; it was 0.206 s at both when the gather
    could hide anywhere before the compute's last forward slot."""
    base = explore.load_scenario(str(SCENARIO))
    for mb in (1, 2):
        got = {}
        for on in (True, False):
            sc = copy.deepcopy(base)
            sc["parallelism"]["overlap_param_gather"] = on
            sc["parallelism"]["microbatch"] = mb
            ds = explore.evaluate(sc)
            got[on] = (float(ds["step_time_s"].values.ravel()[0]), float(ds["time_s_compute"].values.ravel()[0]))
        microbatches = base["training"]["global_batch"] / (base["parallelism"]["dp"] * mb)
        saving = got[False][0] - got[True][0]
        assert 0.0 < saving <= got[True][1] / microbatches / 2.0 + 1e-12, (mb, saving)


def test_param_gather_bytes_is_monotone_and_broadcasts():
    """parallelism.param_gather_bytes (fp8_param_gather: 1, 16-bit weights: 2) sets the size of
    every data-parallel parameter gather: the ZeRO-1 gather of the NeMo Mixtral 8x7B FP8 row and
    the ZeRO-3 per-layer gathers of torchtitan 405B; a swept axis gives a non-decreasing step,
    and the default 2 equals the scalar evaluation."""
    import numpy as np
    frontier = Path(__file__).resolve().parents[1] / "validation" / "frontier_scenarios"
    for rid in ("nemo2502_b200_mixtral8x7b_fp8_64", "torchtitan_405b_fp8_512_interleaved"):
        base = explore.load_scenario(str(frontier / f"{rid}.toml"))
        sc = copy.deepcopy(base)
        sc["parallelism"]["param_gather_bytes"] = [1.0, 1.5, 2.0, 4.0]
        t = explore.evaluate(sc, keep_invalid=True)["step_time_s"].values.ravel()
        assert t.shape == (4,) and np.all(np.diff(t) > 0), (rid, t)
        two = copy.deepcopy(base)
        two["parallelism"]["param_gather_bytes"] = 2.0
        assert float(explore.evaluate(two, keep_invalid=True)["step_time_s"].values.ravel()[0]) == \
            float(t[2])
