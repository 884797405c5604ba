"""Terms evaluated at their cardinality (explore.model.cardinality) give the same designs."""
import copy

import numpy as np
import pytest

import explore
from explore.model import cardinality as card

BASE = explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml")


def test_unique_rows_match_numpy_unique():
    rng = np.random.default_rng(3)
    n = 5000
    cols = [rng.choice([1, 2, 4, 8], n), rng.choice([0.5, 1.0, 2.5], n),
            rng.choice(["a100", "h100"], n), rng.random(n) < 0.5, np.full(n, 7.0),
            np.broadcast_to(np.array(["x"]), (n,))]
    rows = card.UniqueRows(cols, n)
    table = np.rec.fromarrays([c.astype(str) for c in cols])
    want, inv = np.unique(table, return_inverse=True)
    assert rows.k == len(want) == 4 * 3 * 2 * 2
    # same partition: rows share a label exactly when numpy says they are equal
    pairs = set(zip(rows.inverse.tolist(), inv.ravel().tolist()))
    assert len(pairs) == rows.k
    for c in cols:                       # every row equals its representative
        assert np.array_equal(np.asarray(c)[rows.index][rows.inverse], np.asarray(c))


def test_unique_rows_give_up_on_distinct_batches():
    n = 1000
    rows = card.UniqueRows([np.arange(n) * 1.5, np.arange(n) % 7], n)
    assert rows.inverse is None and rows.k == n


@pytest.mark.parametrize("values", [np.array([3, 3, 9, 3]), np.array([0.5, 2.0, 0.5, 0.25]),
                                    np.array(["b", "a", "b", "c"], dtype=object)])
def test_codes_label_equal_values_equally(values):
    code, m = card.codes(values)
    assert m >= len(set(values.tolist()))
    for i in range(len(values)):
        for j in range(len(values)):
            assert (code[i] == code[j]) == (values[i] == values[j])


def _batch_vs_single(sc, n):
    batch = explore.evaluate(sc)
    for i in range(n):
        one = copy.deepcopy(sc)
        for t in ("parallelism", "training", "datacenter"):
            for k, v in list(one.get(t, {}).items()):
                if isinstance(v, np.ndarray):
                    one[t][k] = v[i].item()
        so = one["system"]["scale_out"]
        for k, v in list(so.items()):
            if isinstance(v, np.ndarray):
                so[k] = v[i].item()
        for k, v in list(one["system"].items()):
            if isinstance(v, np.ndarray):
                one["system"][k] = v[i].item()
        single = explore.evaluate(one)
        for k in batch.data_vars:
            a, b = batch[k].values[i], single[k].values[0]
            if isinstance(a, float) or np.issubdtype(np.asarray(a).dtype, np.floating):
                np.testing.assert_allclose(a, b, rtol=1e-12, err_msg=f"design {i} {k}")
            else:
                assert a == b, (i, k, a, b)
    return batch


def test_step_model_shared_across_economics_equals_one_at_a_time():
    """A batch that differs only in datacenter economics shares one step-model evaluation per
    plan (STEP_FREE); each design must still equal its own evaluation."""
    sc = copy.deepcopy(BASE)
    n = 24
    rng = np.random.default_rng(0)
    sc["datacenter"] = dict(sc.get("datacenter", {}))
    sc["datacenter"]["pue"] = rng.choice([1.1, 1.3, 1.5], n)
    sc["datacenter"]["electricity_usd_per_kwh"] = rng.choice([0.04, 0.1], n)
    sc["datacenter"]["restart_s"] = rng.choice([300.0, 900.0], n)
    sc["parallelism"]["tp"] = np.tile([8, 4], n // 2)
    sc["parallelism"]["dp"] = np.tile([16, 32], n // 2)
    sc["parallelism"]["zero"] = np.repeat([0, 1], n // 2)
    batch = _batch_vs_single(sc, n)
    assert len(np.unique(batch["step_time_s"].values)) == 4
    assert len(np.unique(batch["cost_per_token_usd"].values)) > 2


def test_network_bom_per_hardware_equals_one_at_a_time():
    """Repeated hardware (fabric, NICs, oversubscription) under different plans: the bill of
    materials is computed once per hardware combination and gathered."""
    sc = copy.deepcopy(BASE)
    n = 16
    so = sc["system"]["scale_out"]
    so["topology"] = np.array(["fat-tree", "dragonfly"] * (n // 2))
    so["oversubscription"] = np.repeat([1.0, 2.0], n // 2)
    sc["parallelism"]["tp"] = np.tile([8, 8, 4, 4], n // 4)
    sc["parallelism"]["pp"] = np.tile([8, 16, 16, 8], n // 4)
    sc["parallelism"]["dp"] = np.tile([16, 8, 16, 32], n // 4)
    _batch_vs_single(sc, n)
