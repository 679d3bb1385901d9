"""A window's ``sum``, ``avg``, ``min`` and ``max`` take each value on its own
(``cti.forms.numbers``): integers (booleans, integer literals) stay integers, floats are
floats, anything else is skipped; a result is an integer where every number it took is one
(and a sum, where it fits in 64 bits).
So a window gives the same payload, types included, however the input is cut into
micro-batches and whatever else shares them."""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction

import numpy as np
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti import AdvanceTimeSettings, Application, CepStream, EventShape, PointEvent, agg, ticks
from cti.forms import frame
from cti.forms.numbers import value_numbers
from cti.io.memory import MemoryInputAdapterFactory
from cti.runtime.local import LocalRuntime

VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-2**40, 2**40), st.sampled_from([2**63 - 1, -2**63]),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12),
    st.sampled_from([float("nan"), 0.5, -0.0, 2.0, 1e-300]),
    st.sampled_from(["12", " 7 ", "-3", "1.5", "1e3", "abc", "", "99999999999999999999",
                     ".5", "1e400", "inf", "nan", "0x10"]),
    st.just([1]))


def number(v):
    """The rule, written out: an integer, a float, or None."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v if -2**63 <= v < 2**63 else float(v)
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if isinstance(v, str):
        if re.fullmatch(r"\s*[+-]?[0-9]+\s*", v):
            return number(int(v))
        if re.fullmatch(r"\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*", v):
            return float(v)
        return None
    return None


def expected(values: list) -> dict:
    nums = [x for x in map(number, values) if x is not None]
    whole = all(isinstance(x, int) for x in nums)
    if math.inf in nums:  # ("1e400": the only infinity drawn)
        total = math.inf
    else:
        exact = sum(map(Fraction, nums), Fraction(0))
        total = int(exact) if whole and -2**63 <= exact < 2**63 else float(exact)
    return {"n": len(values), "total": total,
            "mean": float(total) / len(nums) if nums else None,
            "low": (min(nums) if whole else float(min(nums)) + 0.0) if nums else None,
            "high": (max(nums) if whole else float(max(nums)) + 0.0) if nums else None}


def _query(values: list, keys: int):
    events = [PointEvent(t, {"k": t % keys, "v": v}) for t, v in enumerate(values)]
    s = CepStream.create("s", MemoryInputAdapterFactory(), events, EventShape.POINT,
                         AdvanceTimeSettings.increasing_start_time(), application=Application())
    return s.group_by("k").apply(lambda g: g.tumbling_window(ticks(8)).aggregate(
        n=agg.count(), total=agg.sum("v"), mean=agg.avg("v"), low=agg.min("v"),
        high=agg.max("v")))


def _texts(items) -> list[str]:
    return [json.dumps(e.payload, sort_keys=True) for e in items if hasattr(e, "payload")]


@settings(max_examples=examples(80), deadline=None)
@given(values=st.lists(VALUES, min_size=1, max_size=40), keys=st.integers(1, 3),
       sizes=st.lists(st.integers(1, 7), min_size=1, max_size=3))
def test_a_windows_numbers_are_its_values_own_whatever_the_micro_batches(values, keys, sizes):
    query = _query(values, keys)
    whole = query.collect(LocalRuntime())
    assert _texts(query.collect(LocalRuntime(batch_sizes=sizes))) == _texts(whole)
    for e in whole:
        if hasattr(e, "payload"):
            mine = [v for t, v in enumerate(values)
                    if t % keys == e.payload["k"] and e.start - 8 <= t < e.start]
            want = expected(mine)
            got = {name: e.payload[name] for name in want}
            assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


def test_a_large_micro_batchs_numbers_read_by_arrow_are_each_values_own():
    """A field Arrow's JSON reader gives as floats because a float is among its integers:
    the integers (and the floats written whole, ``2.0``) are read again one by one."""
    rng = np.random.default_rng(4)
    values = [int(v) for v in rng.integers(-100, 100, 3000)]
    for i in rng.choice(3000, 40, replace=False).tolist():
        values[i] = [1.5, 2.0, None, "8"][i % 4]
    ev = frame.make(["point"] * len(values), np.arange(3000), np.arange(3000) + 1,
                    np.asarray([json.dumps({"v": v}) for v in values], object), [""] * 3000)
    got = frame.field_numbers(ev, "v")
    want = value_numbers(values)
    for a, b in ((got.ints, want.ints), (got.is_int, want.is_int), (got.is_float, want.is_float)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got.floats[got.is_float], want.floats[want.is_float])
    assert _texts(_query(values, 4).collect("local")) == _texts(
        _query(values, 4).collect(LocalRuntime(batch_sizes=[7, 100])))


@settings(max_examples=examples(80), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-1, 1), st.integers(5, 6)),
                min_size=1, max_size=60), st.booleans())
def test_payload_texts_made_once_per_distinct_row_are_the_row_by_row_ones(rows, grouped):
    """A window's payload texts where every number is an integer and the keys a
    ``Categorical`` (made for each distinct row and taken) are the ones made row by row; they
    are made so wherever the values span no more numbers than there are rows."""
    import pandas as pd

    from cti.forms.numbers import Numbers
    from cti.operators import window

    keys = pd.Categorical.from_codes([k for k, _, _ in rows],
                                     categories=['["a"]', '["b"]', '[2]', '["d\\"e"]'])
    ones = np.ones(len(rows), bool)
    columns = {"n": Numbers.of_ints(np.asarray([v for _, v, _ in rows]), ones),
               "total": Numbers.of_ints(np.asarray([t for _, _, t in rows]) * 10**15, ones)}
    field = "key" if grouped else None
    got = window._distinct_texts(columns, field, keys)
    spans = [len(keys.categories)] if grouped else []
    spans += [int(c.ints.max()) - int(c.ints.min()) + 1 for c in columns.values()]
    assert (got is not None) == (math.prod(spans) <= len(rows))
    if got is not None:
        assert got.to_pylist() == window._texts(columns, field, keys).to_pylist()


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(-2, 2)), min_size=1, max_size=40),
       st.booleans())
def test_payload_texts_of_few_combinations_are_the_row_by_row_ones(rows, grouped):
    """Many results per combination of values (a count per key over a few keys, as the
    snapshot window's): a text made for each combination of the values' spans, used or not
    (``window.FEW_COMBOS``), each row pointing at its own; the texts the same as row by row."""
    import pandas as pd

    from cti.forms.numbers import Numbers
    from cti.operators import window

    rows = rows * (window.FEW_COMBOS * 15)  # (at least FEW_COMBOS rows per combination)
    keys = pd.Categorical.from_codes([k for k, _ in rows], categories=['["a"]', '[2]', '["c"]'])
    columns = {"count": Numbers.of_ints(np.asarray([v for _, v in rows]),
                                        np.ones(len(rows), bool))}
    field = "key" if grouped else None
    got = window._distinct_texts(columns, field, keys)
    assert got.to_pylist() == window._texts(columns, field, keys).to_pylist()
