"""Payload fields read column-wise: a float's JSON text written by Arrow (``json_text.float_texts``)
is ``json.dumps``'s, an aggregate's numbers read from a large frame by Arrow
(``frame.field_numbers``) are those of the values parsed one by one (``value_numbers``), and
a shard groups by the typed column its rows came with, over several pieces of a micro-batch."""

from __future__ import annotations

import json
from datetime import timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from shard_runs import released, run_shards

from cti import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeSettings,
    Application,
    CepStream,
    EventShape,
    agg,
)
from cti.forms import frame
from cti.forms.json_text import float_texts
from cti.forms.numbers import Numbers, value_numbers
from cti.forms.rows import payload_from_json, payload_to_json
from cti.io.parquet import ParquetInputAdapterFactory, ParquetInputConfig

NUMBERS = st.one_of(
    st.integers(-5, 5), st.integers(-2**64, 2**64), st.sampled_from([2**63 - 1, 2**63, -2**63]),
    st.floats(), st.sampled_from([1.0, -0.0, 2.0**63, 1e16, 1e-5, 0.1]),
)
OTHERS = st.one_of(st.none(), st.booleans(), st.sampled_from(["12", "x", "1.5", ""]),
                   st.just([1]))


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(), st.floats(width=32)), max_size=50))
def test_float_texts_are_json_dumps_texts(values):
    texts = float_texts(pa.array(values, pa.float64())).to_pylist()
    assert texts == ["null" if v is None else json.dumps(v) for v in values]


def test_float_texts_of_random_bit_patterns_are_json_dumps_texts():
    rng = np.random.default_rng(7)
    values = np.concatenate([
        rng.integers(-2**63, 2**63 - 1, 50_000, dtype=np.int64).view(np.float64),
        rng.integers(-10**17, 10**17, 20_000).astype(np.float64),  # whole numbers
        rng.normal(0, 1, 20_000) * 10.0 ** rng.integers(-8, 20, 20_000),
    ])
    chunks = pa.chunked_array([values[:1000], values[1000:]])
    assert float_texts(chunks).to_pylist() == [json.dumps(float(v)) for v in values]


def _frame(values: list, missing: set[int]) -> pd.DataFrame:
    payloads = [payload_to_json({} if i in missing else {"v": v, "n": i})
                for i, v in enumerate(values)]
    n = len(values)
    return frame.make(["point"] * n, range(n), range(1, n + 1), payloads, [""] * n)


def _one_by_one(ev: pd.DataFrame) -> Numbers:
    return value_numbers([payload_from_json(p).get("v") for p in ev["payload"]])


def _same(got: Numbers, want: Numbers) -> None:
    for a, b in ((got.ints, want.ints), (got.is_int, want.is_int),
                 (got.is_float, want.is_float)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got.floats[got.is_float], want.floats[want.is_float])


@settings(max_examples=examples(60), deadline=None)
@given(st.data(), st.integers(0, 700))
def test_numbers_of_a_field_equal_those_parsed_one_by_one(data, n):
    pool = data.draw(st.lists(NUMBERS, min_size=1, max_size=4))
    if data.draw(st.booleans()):
        pool += data.draw(st.lists(OTHERS, min_size=1, max_size=2))
    picks = data.draw(st.lists(st.integers(0, len(pool) - 1), min_size=n, max_size=n))
    missing = set(data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=3))) if n else set()
    ev = _frame([pool[i] for i in picks], missing)
    _same(frame.field_numbers(ev, "v"), _one_by_one(ev))


@pytest.mark.parametrize("values", [
    [0.5, 1.25, None, float("nan"), 3.75],  # floats, none whole: a null, a NaN
    [1, 2, None, -7],                        # integers with a null
    [None],                                  # all null
    [True, False, None],                     # booleans: integers
    ["12", "x", "1.5"],                      # strings: integer and decimal literals
])
def test_a_large_frame_of_numbers_is_read_by_arrow(values, monkeypatch):
    ev = _frame(values * 300, {5})
    want = _one_by_one(ev)
    monkeypatch.setattr(frame, "_row_values", lambda *a: pytest.fail("read one by one"))
    _same(frame.field_numbers(ev, "v"), want)


def test_a_field_no_payload_has_is_no_number():
    ev = _frame([1] * 300, set(range(300)))
    got = frame.field_numbers(ev, "v")
    assert not got.is_int.any() and not got.is_float.any()


def test_a_shard_reads_the_spreading_field_from_its_typed_columns_not_the_payloads(
        tmp_path, monkeypatch):
    """Several pieces of a columnar input in one micro-batch (as Spark's source sends them):
    the shards group by the field's typed column that came with the rows (reading a field from
    the payloads' text fails here), and give what one shard gives."""
    rng = np.random.default_rng(3)
    n = 600
    path = tmp_path / "events.parquet"
    pq.write_table(pa.table({"t": np.sort(rng.integers(0, 400, n)),
                             "k": rng.choice(["a", "b", "c", "d", "e"], n),
                             "v": rng.integers(0, 9, n)}), path)
    config = ParquetInputConfig(path, "t")
    query = CepStream.create(
        "s", ParquetInputAdapterFactory(), config, EventShape.POINT,
        AdvanceTimeSettings(AdvanceTimeGenerationSettings(20, timedelta(0), True)),
        application=Application()).group_by("k").apply(
        lambda g: g.tumbling_window(timedelta(microseconds=50)).aggregate(n=agg.count()))
    adapter = ParquetInputAdapterFactory().create(config, EventShape.POINT)
    batches = [{"s": [(0, 150, False), (150, 300, False), (300, 420, False)]},
               {"s": [(420, 500, False), (500, n, True)]}]
    _, one, _, _ = run_shards(query, {"s": adapter}, [{"s": [(0, n, True)]}], 1)
    monkeypatch.setattr(frame, "_field_column", _fails)
    monkeypatch.setattr(frame, "_row_values", _fails)
    _, many, _, _ = run_shards(query, {"s": adapter}, batches, 3)
    assert released(o for outs in many for o in outs) == released(one[0])


def _fails(*args, **kwargs):
    raise AssertionError("a payload field read from the payloads")
