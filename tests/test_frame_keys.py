"""Group keys of event frames (``cti.forms.frame``): a large frame's keys, read column-wise by
Arrow, equal the keys built payload by payload, for values of any JSON type."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.forms import frame
from cti.forms.rows import payload_from_json

VALUES = st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b", "é", 'q"', "", "a\\b", "\x7f",
                                                       "\n", "a b"]),
                   st.booleans(), st.sampled_from([1.0, 2.5]), st.none(),
                   st.just([1, "x"]), st.just({"b": 1, "a": "é"}), st.text(max_size=3))
KEYS = st.sampled_from(["", '["x"]', "[1]"])


def _frame(values: list, keys: list[str], missing: set[int]) -> frame.pd.DataFrame:
    payloads = [json.dumps({} if i in missing else {"k": v, "n": i}, sort_keys=True,
                           separators=(",", ":")) for i, v in enumerate(values)]
    n = len(values)
    return frame.make(["point"] * n, range(n), range(1, n + 1), payloads, keys)


def _one_by_one(ev: frame.pd.DataFrame) -> list[str]:
    return [json.dumps([*(json.loads(k) if k else []), payload_from_json(p).get("k")],
                       sort_keys=True, separators=(",", ":"))
            for k, p in zip(ev["key"], ev["payload"], strict=True)]


@settings(max_examples=examples(40), deadline=None)
@given(st.data(), st.integers(0, 600))
def test_keys_of_large_and_small_frames_equal_keys_built_one_by_one(data, n):
    kind = data.draw(st.sampled_from(["one type", "mixed"]))
    pool = data.draw(st.lists(VALUES, min_size=1, max_size=5))
    if kind == "one type":
        pool = [v for v in pool if isinstance(v, int) and not isinstance(v, bool)] or [1, 2]
    values = [pool[i] for i in data.draw(st.lists(st.integers(0, len(pool) - 1),
                                                  min_size=n, max_size=n))]
    keys = data.draw(st.lists(KEYS, min_size=n, max_size=n))
    missing = set(data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=3))) if n else set()
    ev = _frame(values, keys, missing)
    codes, keys = frame.key_codes_with(ev, *frame.field_codes(ev, "k"))
    assert list(keys[codes]) == _one_by_one(ev)


def test_a_large_frame_of_one_type_is_read_by_arrow():
    ev = _frame([i % 7 for i in range(1000)], [""] * 1000, {3})
    assert frame._field_column(ev, "k") is not None  # the column-wise path is the one tested
    codes, values = frame.field_codes(ev, "k")
    assert sorted(v for v in values if v is not None) == list(range(7))
    assert values[codes[3]] is None and len(np.unique(codes)) == 8


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4) | st.sampled_from(['q"', "a\\b", "\x7f", "\n", "é", "\u2028", "a b"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner,
                                                                 max_size=2),
    max_leaves=4)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(JSON_VALUES, min_size=1, max_size=8), KEYS)
def test_a_key_of_any_json_value_is_its_canonical_json_text(values, parent):
    ev = _frame(values, [parent] * len(values), set())
    codes, keys = frame.key_codes_with(ev, *frame.field_codes(ev, "k"))
    assert list(keys[codes]) == _one_by_one(ev)


def _fails(*args):
    pytest.fail("a field read from the payloads")


# A typed payload column's type and its values (``cti.adapters.FIELD_COLUMN``).
TYPED = {pa.int64(): st.integers(-3, 3), pa.float64(): st.sampled_from([1.0, 2.5, -0.0]),
         pa.bool_(): st.booleans(), pa.string(): st.sampled_from(["a", "é", 'q"', "", "\n"])}


@settings(max_examples=examples(60), deadline=None)
@given(st.data(), st.booleans())
def test_a_group_by_given_its_fields_typed_column_gives_what_it_reads_from_the_payloads(
        data, where):
    """A chunk that carries its payloads' typed columns (``Chunk.columns``, as a shard's
    input chunk from a columnar adapter does) gives a ``group_by`` on a field, straight or
    after a ``where``, the same output as the same chunk without them, and never reads the
    payloads for it."""
    from cti import AdvanceTimeSettings, Application, CepStream, EventShape, agg, ticks
    from cti.io.memory import MemoryInputAdapterFactory
    from cti.operators.machine import QueryMachine
    from cti.operators.output import ordered

    kind = data.draw(st.sampled_from(sorted(TYPED, key=str)))
    rows = data.draw(st.lists(st.tuples(st.none() | TYPED[kind], st.integers(0, 30),
                                        st.booleans()), min_size=1, max_size=40))
    stream = CepStream.create("s", MemoryInputAdapterFactory(), [], EventShape.POINT,
                              AdvanceTimeSettings.increasing_start_time(),
                              application=Application())
    source = stream.where(lambda p: p["keep"]) if where else stream
    query = source.group_by("k", nulls="group").apply(  # null: a group of its own
        lambda g: g.tumbling_window(ticks(10)).aggregate(n=agg.count()))
    payloads = [json.dumps({"k": v, "keep": keep, "n": i}, sort_keys=True,
                           separators=(",", ":")) for i, (v, _, keep) in enumerate(rows)]
    events = frame.make(["point"] * len(rows), [t for _, t, _ in rows],
                        [t + 1 for _, t, _ in rows], payloads, [""] * len(rows))
    columns = {"k": pa.array([v for v, _, _ in rows], kind),
               "keep": pa.array([keep for _, _, keep in rows]),
               "n": pa.array(range(len(rows)), pa.int64())}
    plain, plain_ctis = QueryMachine(query.node, query.inputs()).step(
        [frame.Chunk(events, [5, 40])])
    read = frame._field_column, frame._row_values  # with the columns, group_by reads no
    frame._field_column = frame._row_values = _fails  # payload: fail if it does
    try:
        given_out, given_ctis = QueryMachine(query.node, query.inputs()).step(
            [frame.Chunk(events, [5, 40], columns)])
    finally:
        frame._field_column, frame._row_values = read
    assert given_ctis == plain_ctis
    assert ordered(given_out).to_dict("list") == ordered(plain).to_dict("list")


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(-2**62, 2**62) | st.integers(-5, 5), max_size=60), st.integers(0, 3))
def test_integer_codes_by_counting_are_a_factorisation(values, spread):
    """``frame.dense_codes`` (counting where the range is narrow, hashing where not) gives
    codes and uniques as ``pd.factorize`` does: each value is the unique of its code, and the
    uniques are distinct."""
    values = np.asarray([v * 10**spread if abs(v) < 6 else v for v in values], np.int64)
    codes, uniques = frame.dense_codes(values)
    assert codes.dtype.kind == "i" and len(codes) == len(values)
    assert (uniques[codes] == values).all()
    assert len(set(uniques.tolist())) == len(uniques) == len(set(values.tolist()))


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["point", "interval", "edge_start"]),
                          st.integers(0, 40), st.integers(1, 15), st.integers(0, 3),
                          st.integers(0, 9)), max_size=40),
       st.lists(st.integers(0, 60), max_size=3))
def test_a_window_given_its_key_codes_gives_what_it_gives_without(rows, ctis):
    """``Chunk.keys`` (each event's key code, as a ``group_by`` hands it on) changes nothing a
    window computes: the same output rows and the same state, step after step."""

    from cti import agg
    from cti.operators import plan, window

    node = plan.Window(plan.Input(None), 10, 5, 0,
                       plan.WindowOutputPolicy.POINT_ALIGN_TO_WINDOW_END,
                       {"n": agg.count(), "s": agg.sum("v"), "lo": agg.min("v")})
    key_texts = np.asarray(['["a"]', '["b",1]', "[2]", '[null]'], object)
    events = frame.make(
        [k for k, *_ in rows], [s for _, s, *_ in rows],
        [frame.MAX_TIME if k == "edge_start" else s + 1 if k == "point" else s + d
         for k, s, d, *_ in rows],
        [json.dumps({"v": v}) for *_, v in rows], key_texts[[c for *_, c, _ in rows]])
    codes = np.asarray([c for *_, c, _ in rows], np.int64)
    plain, given_keys = window.new_state(), window.new_state()
    for step in range(2):  # the same events twice, then the CTIs: partials are merged
        last = step == 1
        a = window.window(node, frame.Chunk(events, sorted(set(ctis)) if last else []), plain)
        b = window.window(node, frame.Chunk(events, sorted(set(ctis)) if last else [],
                                            keys=(codes, key_texts)), given_keys)
        assert a.ctis == b.ctis  # the same rows (their order is the release's to decide)
        assert sorted(a.events.itertuples(index=False)) == sorted(
            b.events.itertuples(index=False))
    assert plain["open"] == given_keys["open"]
    pa_, pb = plain["partials"].take(None), given_keys["partials"].take(None)
    assert (pa_ is None) == (pb is None)
    if pa_ is not None:
        order = ["key", "k"]
        frame.pd.testing.assert_frame_equal(pa_.sort_values(order).reset_index(drop=True),
                                            pb.sort_values(order).reset_index(drop=True))
