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


def test_unique_rows_number_the_distinct_rows_in_order_of_their_first_rows():
    """Each distinct row is represented by its first row, labels in order of those first rows
    (numpy's row-wise unique gives the first rows, return_index), with and without the hashed relabel."""
    rng = np.random.default_rng(7)
    n = 6000
    for cols in ([rng.choice([1, 2, 4, 8], n), rng.choice(["a", "bb", "c"], n)],
                 [rng.integers(0, 40, n), rng.integers(0, 40, n) * 1000.5, rng.integers(0, 30, n), rng.random(n) < 0.3]):
        rows = card.UniqueRows(cols, n)
        table = np.rec.fromarrays([np.asarray(c).astype(str) for c in cols])
        _, first = np.unique(table, return_index=True)
        assert np.array_equal(rows.index, np.sort(first))
        assert np.array_equal(rows.inverse[rows.index], np.arange(rows.k))
        seen = np.maximum.accumulate(rows.inverse)      # a new row only ever takes the next label
        assert np.all(np.diff(seen) <= 1) and seen[0] == 0


def test_unique_rows_leave_batches_of_more_than_most_distinct_rows_unshared():
    """``most``: rows with more distinct values than that are left unshared (as all-distinct); at or
    below it the partition is numpy's row-wise unique, with dependent columns (one value per value of
    the columns before them) skipped without changing it."""
    rng = np.random.default_rng(9)
    n = 6000
    a, b = rng.integers(0, 60, n), rng.integers(0, 90, n)       # ~3,600 distinct pairs of 5,400 possible
    cols = [a, b, a * 1000 + b, rng.choice(["x", "y"], n)]      # a*1000+b: a function of (a, b)
    want = len(np.unique(np.column_stack([a, b, cols[3] == "x"]), axis=0))
    rows = card.UniqueRows(cols, n)
    assert rows.k == want and rows.inverse is not None
    assert card.UniqueRows(cols, n, most=want).k == want          # at most: shared
    unshared = card.UniqueRows(cols, n, most=0.5 * want)
    assert unshared.inverse is None and unshared.k == n


def test_unique_rows_give_up_on_distinct_batches():
    n = 1000
    rows = card.UniqueRows([np.arange(n) * 1.5, np.arange(n) % 7], n)
    assert rows.inverse is None and rows.k == n


def test_unique_rows_with_dependent_columns_beyond_the_dense_table():
    """Columns whose mixed-radix key space exceeds DENSE * n although the rows repeat (a product
    column as devices = tp x pp x dp, a wide integer range): relabelled by hashing, the rows are
    still found shared, with the same partition as numpy's row-wise unique."""
    rng = np.random.default_rng(5)
    n = 2000
    tp, pp, dp = rng.choice([1, 2, 4, 8], n), rng.choice([1, 3, 5, 96], n), rng.choice([1, 7, 64], n)
    cols = [tp, pp, dp, tp * pp * dp, dp * rng.choice([10, 1000], n)]
    radix = 1
    for c in cols:
        radix *= len(np.unique(c))
    assert radix > card.DENSE * n                   # the dense table alone would give up
    rows = card.UniqueRows(cols, n)
    want, inv = np.unique(np.column_stack(cols), axis=0, return_inverse=True)
    assert rows.k == len(want) < n
    assert len(set(zip(rows.inverse.tolist(), inv.ravel().tolist()))) == rows.k
    for c in cols:
        assert np.array_equal(c[rows.index][rows.inverse], c)


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


# --- issue 10 (comm) fields: the step model's sharing key must tell them apart ---------------

def _shared_rows(sc):
    """The step-model sharing of ``explore.evaluate`` for ``sc``: (distinct rows, batch size)."""
    from explore.evaluate import STEP_FREE
    from explore.scenario import resolve
    r = resolve(sc)
    v = {k: card.fit(a, r.n) for k, a in r.values.items()}
    rows = card.UniqueRows([a for k, a in v.items() if k not in STEP_FREE], r.n)
    return rows.k, r.n


def _bucket_batch():
    """Eight designs: ZeRO 0 or 1, each with two plans that differ only in
    parallelism.grad_bucket_params (gradient reduction not overlapped, so every bucket's
    latency is exposed); economics vary too, so the step model is shared (4 distinct rows of 8)."""
    sc = copy.deepcopy(BASE)
    n = 8
    sc["parallelism"]["overlap_grad_reduce"] = False
    sc["parallelism"]["grad_bucket_params"] = np.tile([1e6, 1e9], n // 2)
    sc["datacenter"] = dict(sc.get("datacenter", {}))
    sc["datacenter"]["pue"] = np.tile([1.1, 1.1, 1.4, 1.4], n // 4)
    sc["parallelism"]["zero"] = np.repeat([0, 1], n // 2)
    return sc, n


def test_designs_differing_only_in_grad_bucket_params_get_their_own_step_time():
    sc, n = _bucket_batch()
    k, _ = _shared_rows(sc)
    assert k == 4                                   # the batch is shared: 8 designs, 4 step models
    batch = _batch_vs_single(sc, n)                 # each design equals its own evaluation
    t = batch["step_time_s"].values
    assert len(set(t.tolist())) == 4
    small, large = t[0:4:2], t[1:4:2]               # ZeRO 0: 1e6 vs 1e9 parameters per bucket
    assert small[0] == small[1] and large[0] == large[1]
    # 1e6-parameter buckets: a 175B model over tp 8 x pp 8 holds ~2.7e9 parameters per rank, so
    # ~2,700 all-reduces per step instead of about one, each paying at least NCCL's 8.4 us base
    # latency per call (src/graph/tuning.cc, Simple ring): at least ~23 ms more per step
    assert small[0] - large[0] > 2_700 * 8.4e-6


def test_sharing_key_without_grad_bucket_params_would_be_caught(monkeypatch):
    """The check above has teeth: drop the field from the sharing key (as if it were an
    economics input) and the plans differing only in it wrongly share step times."""
    import importlib
    ev = importlib.import_module("explore.evaluate")     # the module (explore.evaluate is also a function)
    sc, n = _bucket_batch()
    monkeypatch.setattr(ev, "STEP_FREE", ev.STEP_FREE + ("parallelism.grad_bucket_params",))
    t = explore.evaluate(sc)["step_time_s"].values
    assert len(set(t.tolist())) == 2                # one per ZeRO stage: the buckets are lost


def test_designs_differing_only_in_matmul_peak_fraction_get_their_own_step_time(monkeypatch):
    """Two catalog accelerators equal in every figure but the measured matmul peak fraction
    (issue 10, SystemSpec.matmul_peak_fraction): a shared batch keeps their step times apart."""
    from hwmodels.parts import load_catalog
    acc = load_catalog()["accelerators"]
    base = acc["a100-sxm-80gb"]
    monkeypatch.setitem(acc, "a100-sxm-80gb-half-mamf",
                        {**base, "matmul_peak_fraction": base["matmul_peak_fraction"] / 2})
    sc = copy.deepcopy(BASE)
    n = 8
    sc["system"]["accelerator"] = np.array(["a100-sxm-80gb", "a100-sxm-80gb-half-mamf"] * (n // 2))
    sc["datacenter"] = dict(sc.get("datacenter", {}))
    sc["datacenter"]["pue"] = np.repeat([1.1, 1.4], n // 2)
    k, _ = _shared_rows(sc)
    assert k == 2
    batch = _batch_vs_single(sc, n)
    t = batch["step_time_s"].values
    assert len(set(t[0::2].tolist())) == 1 and len(set(t[1::2].tolist())) == 1
    # half the GEMM rate: the GEMM-bound 175B step is much slower (not twice: comm, bubble, memory ops)
    assert t[1] > 1.3 * t[0]


@pytest.mark.parametrize("make", [
    lambda rng, n: rng.choice(["none", "selective", "full"], n),            # <U9: 9 uint32 words
    lambda rng, n: rng.choice(["bf16", "fp8"], n),                          # <U4: 2 uint64 words
    lambda rng, n: rng.choice([0.5, 1.0, 2.0, 4.0, 1.05, 1.2], n),          # non-integral floats
    lambda rng, n: np.repeat(rng.choice([1.5, 2.5, 3.5], n // 12 + 1), 12)[:n],   # runs, as a grid
    lambda rng, n: rng.random(n),                                           # too many values
])
def test_long_columns_are_labelled_as_numpy_unique_does(make):
    """The compiled scan (long columns) gives the same partition as np.unique; a column with
    more than FEW values falls back to np.unique."""
    rng = np.random.default_rng(11)
    n = 3 * card.FAST_MIN
    a = make(rng, n)
    code, m = card.codes(a)
    want, inv = np.unique(a, return_inverse=True)
    assert m == len(want) and code.min() == 0 and code.max() == m - 1
    assert len(set(zip(code.tolist(), inv.ravel().tolist()))) == m


def _tiled(sc, reps):
    if isinstance(sc, dict):
        return {k: _tiled(v, reps) for k, v in sc.items()}
    if isinstance(sc, np.ndarray) and sc.ndim == 1 and sc.size > 1:
        return np.tile(sc, reps)
    return sc


@pytest.mark.parametrize("keep_invalid", [False, True])
@pytest.mark.parametrize("reason_codes", [False, True])
def test_repeated_designs_evaluated_once_equal_the_distinct_batch(keep_invalid, reason_codes):
    """A batch whose designs repeat (economics constant) runs the whole model once per distinct
    design and gathers each metric back (evaluate's ``whole`` path, incl. NaN of invalid designs
    and constant metrics): equal, bit for bit, to the batch of the distinct designs (which has
    no repeats, so is evaluated row by row) tiled."""
    rng = np.random.default_rng(4)
    n = 300
    sc = copy.deepcopy(BASE)
    tp, pp, dp = rng.choice([1, 2, 4, 8], n), rng.choice([1, 2, 8, 96], n), rng.choice([1, 4, 16], n)
    mb = rng.choice([1, 2], n)
    sc["parallelism"].update(tp=tp, pp=pp, dp=dp, microbatch=mb, zero=rng.integers(0, 4, n),
                             recompute=rng.choice(["none", "full"], n))
    sc["training"]["global_batch"] = dp * mb * 8 + rng.choice([0, 1], n)   # some break a rule
    sc["system"]["devices"] = tp * pp * dp
    kw = dict(keep_invalid=keep_invalid, reason_codes=reason_codes)
    distinct = explore.evaluate(sc, **kw)
    repeated = explore.evaluate(_tiled(sc, 4), **kw)
    valid = distinct["valid"].values
    assert valid.any() and (~valid).any() and (distinct["reason"].values != distinct["reason"].values[0]).any()
    for k in distinct.data_vars:
        np.testing.assert_array_equal(repeated[k].values, np.tile(distinct[k].values, 4), err_msg=k)


def test_varying_lists_the_non_constant_columns_of_nested_specs():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Inner:
        dims: tuple
        fixed: np.ndarray

    @dataclasses.dataclass(frozen=True)
    class Outer:
        a: np.ndarray
        b: np.ndarray
        wide: np.ndarray
        inner: Inner
        name: str = "x"

    n = 5
    a = np.arange(n, dtype=float)
    dim = np.array([1, 2, 1, 2, 1])
    wide = np.arange(2 * n).reshape(n, 2)
    spec = Outer(a=a, b=np.broadcast_to(3.0, (n,)), wide=wide,
                 inner=Inner(dims=(np.ones(1), dim), fixed=np.array([7.0])))
    cols = card.varying(n, spec)
    # a, the two columns of ``wide``, the tuple's second member; not the constants or the string
    assert len(cols) == 4
    for got, want in zip(cols, [a, wide[:, 0], wide[:, 1], dim]):
        np.testing.assert_array_equal(got, want)
    assert card.varying(1, spec) == []


def test_layer_compute_shared_over_distinct_inputs_equals_unshared(monkeypatch):
    """The step model with its layer compute times per distinct inputs equals it evaluated at
    every row (sharing off), bit for bit, on a batch with repeated (microbatch, tp, sp)."""
    sc = copy.deepcopy(explore.load_scenario("studies/scenarios/gpt3-175b-1024-a100.toml"))
    rng = np.random.default_rng(1)
    n = 400
    tp = rng.choice([1, 2, 4, 8], n)
    dp = rng.choice([1, 2, 4], n)
    mb = rng.choice([1, 2], n)
    sc["parallelism"].update(tp=tp, pp=8, dp=dp, microbatch=mb, sequence_parallel=rng.random(n) < 0.5,
                             zero=rng.integers(0, 3, n))
    sc["training"]["global_batch"] = dp * mb * 16
    sc["system"]["devices"] = tp * 8 * dp
    shared = explore.evaluate(sc)
    import explore.model.step as step
    monkeypatch.setattr(step, "sharing_allowed", lambda c=None: False)
    unshared = explore.evaluate(sc)
    assert np.isfinite(shared["step_time_s"].values).sum() > 50
    for k in ("step_time_s", "time_s_compute", "time_s_tp_comm"):
        np.testing.assert_array_equal(shared[k].values, unshared[k].values)


@pytest.mark.parametrize("keep_invalid", [False, True])
def test_designs_timed_after_their_validity_equal_one_at_a_time(monkeypatch, keep_invalid):
    """explore.evaluate checks validity first (plan rules, memory, link budget, goodput) and runs the
    step time only for the designs it returns (``_metrics``'s ``at``): a batch where most designs do
    not fit in memory or break a plan rule gives each design what its own evaluation gives (a
    single design is timed whole), and the step model saw fewer designs than the batch holds."""
    import importlib
    ev = importlib.import_module("explore.evaluate")
    rng = np.random.default_rng(12)
    n = 40
    sc = copy.deepcopy(BASE)
    tp, pp = rng.choice([1, 2, 8], n), rng.choice([1, 8, 16, 32], n)
    dp = rng.choice([1, 4, 8], n)
    sc["parallelism"].update(tp=tp, pp=pp, dp=dp, zero=rng.integers(0, 4, n),
                             microbatch=rng.choice([1, 2], n), recompute=rng.choice(["none", "full"], n))
    sc["training"]["global_batch"] = dp * rng.choice([8, 15, 16], n)   # 15: a plan rule breaks at microbatch 2
    sc["system"]["devices"] = tp * pp * dp
    seen = []
    step_model = ev.step_model
    monkeypatch.setattr(ev, "step_model", lambda *a, **k: seen.append(np.size(a[1].tp)) or step_model(*a, **k))
    full = explore.evaluate(sc, keep_invalid=keep_invalid)
    reason = full["reason"].values
    no_fit = reason == "does not fit in accelerator memory"
    rule = reason == "training.global_batch must be divisible by dp*microbatch"
    assert full["valid"].values.sum() >= 5 and no_fit.sum() >= 5 and rule.sum() >= 5
    assert (rule | no_fit).sum() == (~full["valid"].values).sum()
    returned = full["valid"].values if not keep_invalid else ~rule
    assert seen == [returned.sum() + 1]       # timed: the designs returned and one more (the NaN slot)
    for i in range(n):
        one = copy.deepcopy(sc)
        for t, k in (("parallelism", "tp"), ("parallelism", "pp"), ("parallelism", "dp"), ("parallelism", "zero"),
                     ("parallelism", "microbatch"), ("parallelism", "recompute"), ("training", "global_batch"),
                     ("system", "devices")):
            one[t][k] = one[t][k][i].item()
        single = explore.evaluate(one, keep_invalid=keep_invalid)
        assert single["step_time_s"].size == 1
        for k in full.data_vars:
            a, b = full[k].values[i], single[k].values[0]
            if np.asarray(a).dtype.kind == "f":
                assert (np.isnan(a) and np.isnan(b)) or a == b, (i, k, a, b)
            else:
                assert a == b, (i, k, a, b)
