"""explore.allocator: opt-in (LIGHTPATH_MALLOC=reuse or an explicit call); glibc accepts the
settings; LIGHTPATH_MALLOC=default leaves malloc alone; results do not depend on it."""
import os
import subprocess
import sys

import numpy as np
import pytest

from explore import allocator

CODE = ("import sys, numpy as np, explore; from explore import allocator;"
        "ds = explore.evaluate(explore.load_scenario('studies/scenarios/gpt3-175b-1024-a100.toml'));"
        "np.save(sys.argv[1], np.array([float(ds.step_time_s[0]), float(ds.cost_per_token_usd[0])]));"
        "print(allocator._done)")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_settings_accepted_and_opt_out_gives_the_same_results(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    runs = {}
    for mode in ("reuse", "", "default"):
        out = tmp_path / f"r{mode}.npy"
        p = subprocess.run([sys.executable, "-c", CODE, str(out)], capture_output=True, text=True,
                           env={**env, "LIGHTPATH_MALLOC": mode}, check=True)
        runs[mode] = (p.stdout.strip(), np.load(out))
    # applied only when asked for (importing lightpath leaves the process's malloc alone)
    assert runs["reuse"][0] == "True" and runs[""][0] == "False" and runs["default"][0] == "False"
    assert np.array_equal(runs["reuse"][1], runs["default"][1]) and np.array_equal(runs[""][1], runs["reuse"][1])
