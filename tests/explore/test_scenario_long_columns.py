"""Long integer columns (explore.scenario._coerce checks their range on the extremes): the same
resolved values as the element-wise path, and an out-of-range value is named as before."""
import copy

import numpy as np
import pytest

import explore
from explore.scenario import ScenarioError, resolve

BASE = explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml")


def _scenario(n, tp):
    sc = copy.deepcopy(BASE)
    sc["parallelism"]["tp"] = tp
    sc["parallelism"]["zero"] = np.arange(n) % 4
    sc["training"]["global_batch"] = np.full(n, 1536, dtype=np.int32)     # an int field from int32
    sc["datacenter"]["pue"] = np.full(n, 1, dtype=np.int64)               # a float field from ints
    return sc


def test_long_int_columns_resolve_as_short_ones():
    n = 5000
    tp = np.random.default_rng(1).choice([1, 2, 4, 8], n)
    long = resolve(_scenario(n, tp)).values
    short = resolve(_scenario(8, tp[:8].copy()) | {}).values     # < 4096: element-wise path
    for k in ("parallelism.tp", "parallelism.zero", "training.global_batch", "datacenter.pue"):
        assert long[k].dtype == short[k].dtype, k
        np.testing.assert_array_equal(long[k][:8], short[k][:8], err_msg=k)
    assert long["datacenter.pue"].dtype == np.float64 and long["parallelism.tp"].dtype == np.int64


@pytest.mark.parametrize("bad, want", [(0, "value 0 is out of range"), (-5, "value -5 is out of range"),
                                       (2**60, "value 1.152921504606847e+18 is out of range")])
def test_long_int_column_out_of_range_names_the_first_bad_value(bad, want):
    n = 5000
    tp = np.full(n, 2)
    tp[4000] = bad
    tp[4500] = bad * 2 if bad > 0 else bad - 1     # a later, more extreme offender is not named
    with pytest.raises(ScenarioError, match="parallelism.tp: " + want.replace("+", r"\+")):
        resolve(_scenario(n, tp))


def test_one_value_checked_once_is_shared_read_only_and_typed():
    """A scalar field value (from a file or a default) is checked once per (field, value, type) and
    shared: the arrays are equal to a fresh check and read-only, and a value equal to a cached one but
    of another type (True for 1, 1 for True) is still refused by its own check."""
    from explore.scenario import _coerce_any, field_spec
    a, b = resolve(BASE).values, resolve(copy.deepcopy(BASE)).values
    for k in a:
        assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k
    assert a["model.layers"] is b["model.layers"] and not a["model.layers"].flags.writeable
    fresh = _coerce_any("model.layers", int(a["model.layers"][0]), field_spec("model.layers"))
    assert np.array_equal(fresh, a["model.layers"]) and fresh.dtype == a["model.layers"].dtype
    for table, key, bad, why in (("model", "layers", True, "is not a number"),
                                 ("parallelism", "sequence_parallel", 1, "is not a boolean"),
                                 ("training", "precision", "fp9", "is not allowed")):
        sc = copy.deepcopy(BASE)
        sc[table][key] = bad
        for _ in range(2):                      # refused every time (an error is not cached)
            with pytest.raises(ScenarioError, match=why):
                resolve(sc)
