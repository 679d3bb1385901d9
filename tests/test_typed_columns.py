"""Typed payload columns (``cti.adapters.FIELD_COLUMN``): a columnar adapter's payload fields
travel as Arrow columns beside the JSON text, and every reader of a field (aggregates'
numbers, group keys, a frame of payloads) gives from the columns exactly what it gives from
the text; a query over a Parquet file (columns) and over the same events from memory (text
only) give the same results, in-process, over several shards and on Spark."""

from __future__ import annotations

import json
import math
from datetime import timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from budget import examples
from hypothesis import event, given, settings
from hypothesis import strategies as st
from shard_runs import released, run_shards

from cti import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeSettings,
    Application,
    Arriving,
    CepStream,
    EventOrderingPolicy,
    EventShape,
    PointEvent,
    agg,
    ticks,
)
from cti.adapters import FIELD_COLUMN
from cti.forms import frame
from cti.forms.json_text import filled_payloads, json_typed, payload_texts
from cti.forms.rows import adapter_item_to_row, payload_to_json
from cti.io.files import CsvInputAdapterFactory, FileInputConfig, JsonLinesInputAdapterFactory
from cti.io.memory import MemoryInputAdapterFactory
from cti.io.parquet import ParquetInputAdapterFactory, ParquetInputConfig, _payloads

# A column's Arrow type and values of it as a Parquet file may hold them.
COLUMNS = {
    pa.int64(): st.integers(-2**63, 2**63 - 1),
    pa.int8(): st.integers(-128, 127),
    pa.uint64(): st.integers(0, 2**63 - 1),
    pa.float64(): st.floats(),
    pa.float32(): st.floats(width=32),
    pa.bool_(): st.booleans(),
    pa.string(): st.text(max_size=4),
    pa.large_string(): st.sampled_from(["a", "b", "é", "\n", "2024-01-01", "12", ""]),
}


@st.composite
def tables(draw):
    """A table of one to three typed columns (nulls among the values)."""
    n = draw(st.integers(1, 300))
    kinds = draw(st.lists(st.sampled_from(sorted(COLUMNS, key=str)), min_size=1, max_size=3))
    return pa.table({f"f{i}": pa.array(draw(st.lists(st.none() | COLUMNS[t], min_size=n,
                                                     max_size=n)), t)
                     for i, t in enumerate(kinds)})


@settings(max_examples=examples(60), deadline=None)
@given(low=st.sampled_from([-2**63, -5, 0, 2**63 - 9]), n=st.integers(60, 300),
       data=st.data(), chunked=st.booleans())
def test_payload_texts_of_integers_of_a_narrow_span_are_their_canonical_json(low, n, data,
                                                                               chunked):
    """Integers that span few values (ranks, small counts) are written once per value and
    taken per row (``_few_integer_texts``): the same texts as ``payload_to_json``'s."""
    values = data.draw(st.lists(st.none() | st.integers(low, low + 8), min_size=n, max_size=n))
    rank = pa.chunked_array([values[:n // 2], values[n // 2:]], pa.int64()) if chunked else \
        pa.array(values, pa.int64())
    small = pa.array([None if v is None else v % 7 for v in values], pa.int8())
    got = payload_texts({"rank": rank, "a": small}, n).to_pylist()
    assert got == [payload_to_json({"rank": v, "a": None if v is None else v % 7})
                   for v in values]


def test_json_typed_gives_the_type_json_loads_gives_back():
    assert json_typed(pa.array([1, None], pa.int8())).type == pa.int64()
    assert json_typed(pa.array([1.5], pa.float32())).type == pa.float64()
    assert json_typed(pa.array(["a"], pa.large_string())).type == pa.string()
    assert json_typed(pa.array([2**63], pa.uint64())) is None  # beyond 64 signed bits
    assert json_typed(pa.array([pd.Timestamp("2024-01-01")])) is None  # a text in JSON
    assert json_typed(pa.array([[1]])) is None


@settings(max_examples=examples(150), deadline=None)
@given(table=tables())
def test_every_field_reader_gives_from_the_columns_what_it_gives_from_the_text(table):
    """The Parquet adapter's payload texts and typed columns of the same rows: numbers,
    values, codes and the frame of payloads are the same read either way; and the text the
    engine writes from the columns (``payload_texts``) is the payload's canonical JSON."""
    texts = _payloads(table, table.column_names)
    typed = {name: json_typed(table.column(name)) for name in table.column_names}
    payloads = np.asarray(texts.to_pylist(), object)
    assert payload_texts(typed, table.num_rows).to_pylist() == [
        payload_to_json(json.loads(p)) for p in payloads]
    ev = frame.make(["point"] * len(payloads), np.arange(len(payloads)),
                    np.arange(len(payloads)) + 1, payloads, [""] * len(payloads))
    event("large frame" if len(ev) >= 256 else "small frame")
    for name, column in typed.items():
        assert [json.dumps(v) for v in column.to_pylist()] == [
            json.dumps(json.loads(p)[name]) for p in payloads]
        got, want = frame.field_numbers(ev, name, column), frame.field_numbers(ev, name)
        for a, b in ((got.ints, want.ints), (got.is_int, want.is_int),
                     (got.is_float, want.is_float), (got.floats[got.is_float],
                                                     want.floats[want.is_float])):
            np.testing.assert_array_equal(a, b)
        codes, values = frame.field_codes(ev, name, column)
        want_codes, want_values = frame.field_codes(ev, name)
        assert [json.dumps(values[c]) for c in codes] == [json.dumps(want_values[c])
                                                         for c in want_codes]
        assert len(set(codes.tolist())) == len(set(want_codes.tolist()))
    pd.testing.assert_frame_equal(frame.payload_frame(payloads, typed),
                                  frame.payload_frame(payloads))


def test_a_frame_of_payloads_keeps_strings_that_look_like_times():
    """Arrow's JSON reader takes ISO-like strings for times; ``json.loads`` does not, and
    neither does the frame a user function gets (from the text or the columns)."""
    texts = np.asarray(['{"at":"2024-01-01","n":1}', '{"at":"2024-01-02T10:00:00","n":2}'],
                       object)
    columns = {"at": pa.array(["2024-01-01", "2024-01-02T10:00:00"]), "n": pa.array([1, 2])}
    for got in (frame.payload_frame(texts), frame.payload_frame(texts, columns)):
        assert got["at"].tolist() == ["2024-01-01", "2024-01-02T10:00:00"]


def _events(seed: int, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    value = rng.integers(-5, 50, n).astype(float)
    value[rng.random(n) < 0.1] = np.nan  # nulls: aggregates skip them
    return pd.DataFrame({
        "t": np.sort(rng.integers(0, 2_000, n)),
        "key": rng.choice(["a", "b", "é", "2024-01-01"], n),
        "value": pd.array([None if math.isnan(v) else int(v) for v in value], "Int64"),
        "x": rng.normal(0, 1, n) * 10.0 ** rng.integers(-3, 4, n),
        "flag": rng.random(n) < 0.5,
    })


def _query(stream):
    """``where`` on a frame, then per key a window's aggregates of an integer and a float
    field (the fields read from the typed columns where the events have them)."""
    kept = stream.where(lambda df: (df["flag"] | (df["x"] > 0)).to_numpy(), frame=True)
    return kept.group_by("key").apply(lambda g: g.tumbling_window(ticks(100)).aggregate(
        n=agg.count(), total=agg.sum("value"), mean=agg.avg("x"), low=agg.min("value"),
        high=agg.max("x")))


def _both(tmp_path, events: pd.DataFrame):
    """The query over a Parquet file of the events, and over the same events from memory;
    and the two inputs' configs."""
    path = tmp_path / "events.parquet"
    pq.write_table(pa.Table.from_pandas(events, preserve_index=False), path)
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(40, timedelta(0), True))
    app = Application()
    columnar = CepStream.create("s", ParquetInputAdapterFactory(), ParquetInputConfig(path, "t"),
                                EventShape.POINT, settings, application=app)
    items = [PointEvent(int(r.t), {"key": r.key, "value": None if pd.isna(r.value)
                                   else int(r.value), "x": float(r.x), "flag": bool(r.flag)})
             for r in events.itertuples(index=False)]
    memory = CepStream.create("s", MemoryInputAdapterFactory(), items, EventShape.POINT,
                              settings, application=Application())
    return _query(columnar), _query(memory), ParquetInputConfig(path, "t"), items


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_query_over_typed_columns_gives_what_it_gives_over_the_text(tmp_path, seed, monkeypatch):
    columnar, memory, _, _ = _both(tmp_path, _events(seed, 700))
    want = memory.collect("local")
    assert want  # (windows with results)
    read = []
    original = frame.payload_frame
    monkeypatch.setattr(frame, "payload_frame", lambda texts, columns=None: (
        read.append(bool(columns)), original(texts, columns))[1])
    assert columnar.collect("local") == want
    assert read and all(read)  # (the frame came from the columns)


def test_several_shards_group_by_the_typed_columns(tmp_path, monkeypatch):
    """Several pieces of a micro-batch, three shards: the shards read every field from the
    typed columns they received (reading one from the payloads' text fails here) and give
    what one shard gives."""
    columnar, memory, config, items = _both(tmp_path, _events(5, 600))
    adapter = ParquetInputAdapterFactory().create(config, EventShape.POINT)
    _, one, _, _ = run_shards(memory, {"s": MemoryInputAdapterFactory().create(
        items, EventShape.POINT)}, [{"s": [(0, 600, True)]}], 1)
    monkeypatch.setattr(frame, "_field_column", _fails)
    monkeypatch.setattr(frame, "_row_values", _fails)
    batches = [{"s": [(0, 150, False), (150, 300, False), (300, 420, False)]},
               {"s": [(420, 500, False), (500, 600, True)]}]
    _, many, _, _ = run_shards(columnar, {"s": adapter}, batches, 3)
    assert released(o for outs in many for o in outs) == released(one[0])


def test_an_event_ordering_stream_reads_the_typed_columns_of_the_events_it_releases(
        tmp_path, monkeypatch):
    """Events reordered by an event-ordering policy (the chunk built from the ingress rows):
    the events of the micro-batch keep their typed columns; the query gives what it gives
    over the same events from memory."""
    events = _events(11, 500)
    rng = np.random.default_rng(11)
    events["arrival"] = events["t"] + rng.integers(0, 30, len(events))
    events = events.sort_values("arrival", kind="stable").reset_index(drop=True)
    path = tmp_path / "arriving.parquet"
    pq.write_table(pa.Table.from_pandas(events, preserve_index=False), path)
    policy = EventOrderingPolicy(late_arrival_tolerance=ticks(40),
                                 out_of_order_tolerance=ticks(30))
    items = [Arriving(PointEvent(int(r.t), {
        "key": r.key, "value": None if pd.isna(r.value) else int(r.value), "x": float(r.x),
        "flag": bool(r.flag)}), int(r.arrival)) for r in events.itertuples(index=False)]
    columnar = _query(CepStream.create(
        "s", ParquetInputAdapterFactory(), ParquetInputConfig(path, "t", arrival_column="arrival"),
        EventShape.POINT, application=Application(), event_ordering_policy=policy))
    memory = _query(CepStream.create("s", MemoryInputAdapterFactory(), items, EventShape.POINT,
                                     application=Application(), event_ordering_policy=policy))
    want = memory.collect("local")
    read = []
    original = frame.payload_frame
    monkeypatch.setattr(frame, "payload_frame", lambda texts, columns=None: (
        read.append(bool(columns)), original(texts, columns))[1])
    assert columnar.collect("local") == want
    assert any(read)


def _file_query(factory, path, items):
    """A keyed window's sum of ``v`` (integer literals in text, numbers) after a frame
    ``where``, over a file and over the same items from memory."""
    def query(stream):
        kept = stream.where(lambda df: (df["k"] != "c").to_numpy(), frame=True)
        return kept.group_by("k").apply(lambda g: g.tumbling_window(ticks(50)).aggregate(
            total=agg.sum("v"), low=agg.min("v")))

    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(30, timedelta(0), True))
    columnar = CepStream.create("s", factory, FileInputConfig(path, "t", file_arrival=False),
                                EventShape.POINT, settings, application=Application())
    memory = CepStream.create("s", MemoryInputAdapterFactory(), items, EventShape.POINT,
                              settings, application=Application())
    return query(columnar), query(memory)


def test_a_csv_files_text_columns_are_read_as_typed_columns(tmp_path, monkeypatch):
    """A CSV file's cells are strings: its typed columns are strings, and a window reads the
    integer literals among them as integers, as from the text."""
    rng = np.random.default_rng(2)
    rows = [(int(t), "abc"[i % 3], str(v) if i % 11 else "n/a")
            for i, (t, v) in enumerate(zip(np.sort(rng.integers(0, 2000, 400)),
                                           rng.integers(-50, 50, 400), strict=True))]
    path = tmp_path / "events.csv"
    path.write_text("t,k,v\n" + "".join(f"{t},{k},{v}\n" for t, k, v in rows))
    items = [PointEvent(t, {"k": k, "v": v}) for t, k, v in rows]
    columnar, memory = _file_query(CsvInputAdapterFactory(), path, items)
    want = memory.collect("local")
    assert want
    monkeypatch.setattr(frame, "_field_column", _fails)
    monkeypatch.setattr(frame, "_row_values", _fails)
    assert columnar.collect("local") == want


def test_a_file_row_built_from_its_record_has_no_typed_columns(tmp_path):
    """``read_frame``'s marker: true on the rows whose payloads the typed columns are, false
    on a row built from its record (its time not in a form read column-wise) and on a
    CTI."""
    path = tmp_path / "events.csv"
    path.write_text("t,c,v\n1,,5\nsoon,,6\n3,true,\n4,,x\n")
    adapter = CsvInputAdapterFactory().create(FileInputConfig(path, "t", cti_column="c"),
                                              EventShape.POINT)
    table = adapter.read_frame(0, 4)
    assert table.column(FIELD_COLUMN).to_pylist() == ['["v"]', None, None, '["v"]']
    # A marked row's payload is its columns (no text); the others' is their text.
    assert [p is None for p in table.column("payload").to_pylist()] == [True, False, True, True]
    written = filled_payloads(table)
    assert written.column("payload").to_pylist() == [
        adapter_item_to_row(0, 0, item).payload for item in adapter.read(0, 4)]
    for row, marked in enumerate(table.column(FIELD_COLUMN).to_pylist()):
        if marked is not None:
            payload = json.loads(written.column("payload")[row].as_py())
            assert table.column(FIELD_COLUMN + "v")[row].as_py() == payload["v"]


def test_files_whose_field_types_differ_are_read_from_the_text(tmp_path):
    """A directory of JSON-lines files where ``v`` is an integer in one and a string in
    another: no typed columns (the files' types do not agree), the same results."""
    folder = tmp_path / "in"
    folder.mkdir()
    items = []
    for f, cast in enumerate((int, str)):
        lines = [{"t": 100 * f + i, "k": "ab"[i % 2], "v": cast(i)} for i in range(60)]
        (folder / f"part-{f}.json").write_text("".join(json.dumps(r) + "\n" for r in lines))
        items += [PointEvent(r["t"], {"k": r["k"], "v": r["v"]}) for r in lines]
    columnar, memory = _file_query(JsonLinesInputAdapterFactory(), folder, items)
    assert columnar.collect("local") == memory.collect("local")


def _fails(*args, **kwargs):
    raise AssertionError("a payload field read from the payloads' text")


@pytest.mark.spark
def test_spark_over_typed_columns_gives_what_local_gives_over_the_text(spark, tmp_path):
    from cti.runtime.spark import SparkRuntime

    columnar, memory, _, _ = _both(tmp_path, _events(9, 500))
    want = memory.collect("local")
    for shards in (1, 3):
        got = SparkRuntime(spark, batch_sizes=[120], shards=shards).run_queries(
            [columnar], with_inputs=False)[0]
        assert got["output"].items == want, shards


LIFETIMES = [
    lambda s: s.alter_event_duration(ticks(40)),
    lambda s: s.alter_event_lifetime(lambda t: t - 5, ticks(40)),
    lambda s: s.alter_event_duration(ticks(9)).to_point_event_stream().alter_event_duration(
        ticks(40)),
    lambda s: s.shift_event_time(ticks(3)).alter_event_duration(ticks(40)),
]


@pytest.mark.parametrize("lifetime", LIFETIMES)
def test_a_join_reads_its_keys_from_the_typed_columns(tmp_path, monkeypatch, lifetime):
    """Two Parquet inputs joined on a key, one side's lifetimes changed first (which passes
    the typed columns on): the join's keys come from the typed columns (a key read from the
    payloads' text fails here), the same pairs as from memory."""
    rng = np.random.default_rng(8)
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(25, timedelta(0), True))

    def side(name: str, n: int):
        t = np.sort(rng.integers(0, 1000, n))
        keys = rng.choice(["a", "b", "é", "q\""], n)
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({"t": t, "k": keys, name: np.arange(n)}), path)
        items = [PointEvent(int(a), {"k": str(k), name: i})
                 for i, (a, k) in enumerate(zip(t, keys, strict=True))]
        return (CepStream.create(name, ParquetInputAdapterFactory(), ParquetInputConfig(
            path, "t"), EventShape.POINT, settings, application=app),
                CepStream.create(name, MemoryInputAdapterFactory(), items, EventShape.POINT,
                                 settings, application=memory_app))

    app, memory_app = Application(), Application()
    (left, left_memory), (right, right_memory) = side("l", 300), side("r", 200)
    want = left_memory.join(lifetime(right_memory), on="k").collect("local")
    assert len(want) > 50
    monkeypatch.setattr(frame, "_field_column", _fails)
    monkeypatch.setattr(frame, "_row_values", _fails)
    assert left.join(lifetime(right), on="k").collect("local") == want


def test_a_union_passes_the_typed_columns_on_where_both_sides_have_them(tmp_path, monkeypatch):
    """Two Parquet inputs in a union, then a keyed window: its fields come from the typed
    columns; a Parquet input in a union with a memory input (no columns) reads the text. The
    same results as from memory either way."""
    events = _events(13, 400)
    half = len(events) // 2
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(40, timedelta(0), True))
    app = Application()

    def parquet(name: str, part: pd.DataFrame):
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), path)
        return CepStream.create(name, ParquetInputAdapterFactory(), ParquetInputConfig(
            path, "t"), EventShape.POINT, settings, application=app)

    def memory(name: str, part: pd.DataFrame, application: Application):
        items = [PointEvent(int(r.t), {"key": r.key, "value": None if pd.isna(r.value)
                                       else int(r.value), "x": float(r.x), "flag": bool(r.flag)})
                 for r in part.itertuples(index=False)]
        return CepStream.create(name, MemoryInputAdapterFactory(), items, EventShape.POINT,
                                settings, application=application)

    first, second = events.iloc[:half], events.iloc[half:]
    other = Application()
    want = _query(memory("a", first, other).union(memory("b", second, other))).collect("local")
    mixed = _query(parquet("a", first).union(memory("b", second, app)))
    assert mixed.collect("local") == want
    both = _query(parquet("c", first).union(parquet("d", second)))
    monkeypatch.setattr(frame, "_field_column", _fails)
    monkeypatch.setattr(frame, "_row_values", _fails)
    assert both.collect("local") == want


def test_a_query_that_reads_only_fields_never_writes_a_payloads_text(tmp_path, monkeypatch):
    """A frame ``where``, a ``group_by`` and a window's built-in aggregates over a Parquet
    input read the typed columns alone: the adapter writes no payload text, and neither does
    the engine (writing one fails here), in one shard or three; the results are the ones from
    memory."""
    import cti.forms.json_text
    import cti.io.parquet

    columnar, memory, config, items = _both(tmp_path, _events(3, 600))
    want = memory.collect("local")
    _, one, _, _ = run_shards(memory, {"s": MemoryInputAdapterFactory().create(
        items, EventShape.POINT)}, [{"s": [(0, 600, True)]}], 1)

    def no_text(*args, **kwargs):
        raise AssertionError("a payload's JSON text written")

    for module in (cti.forms.json_text, frame):
        monkeypatch.setattr(module, "payload_texts", no_text)
    monkeypatch.setattr(cti.io.parquet, "_payloads", no_text)
    assert columnar.collect("local") == want
    adapter = ParquetInputAdapterFactory().create(config, EventShape.POINT)
    batches = [{"s": [(0, 200, False), (200, 450, False)]}, {"s": [(450, 600, True)]}]
    _, many, _, _ = run_shards(columnar, {"s": adapter}, batches, 3)
    assert released(o for outs in many for o in outs) == released(one[0])


def test_each_stream_of_a_query_reads_its_own_fields(tmp_path):
    """Two Parquet inputs of different fields in one query (their rows in one batch, each
    one's typed columns null on the other's rows): a frame of one side's payloads has that
    side's fields alone, and a join merges each side's own payloads, as from memory."""
    rng = np.random.default_rng(4)
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(20, timedelta(0), True))
    seen: list[list[str]] = []

    def side(name: str, n: int, app: Application, columnar: bool):
        t = np.sort(rng.integers(0, 500, n))
        keys = rng.choice(["a", "b"], n)
        values = rng.integers(0, 9, n)
        path = tmp_path / f"{name}.parquet"
        if columnar:
            pq.write_table(pa.table({"t": t, "k": keys, name: values}), path)
            stream = CepStream.create(name, ParquetInputAdapterFactory(), ParquetInputConfig(
                path, "t"), EventShape.POINT, settings, application=app)
        else:
            stream = CepStream.create(name, MemoryInputAdapterFactory(), [
                PointEvent(int(a), {"k": str(k), name: int(v)})
                for a, k, v in zip(t, keys, values, strict=True)], EventShape.POINT, settings,
                application=app)
        return stream.where(lambda df: (seen.append(sorted(df.columns)),
                                        (df[name] >= 0).to_numpy())[1], frame=True)

    def query(columnar: bool, seed: int):
        nonlocal rng
        rng = np.random.default_rng(seed)
        app = Application()
        left, right = side("l", 200, app, columnar), side("r", 150, app, columnar)
        return left.join(right.alter_event_duration(ticks(30)), on="k").collect("local")

    want = query(False, 4)
    seen.clear()
    got = query(True, 4)
    assert got == want and len(got) > 20
    assert seen and {tuple(s) for s in seen} == {("k", "l"), ("k", "r")}


TEXT_READERS = [
    lambda s: s.where(lambda p: p["flag"] or (p["x"] > 0)),
    lambda s: s.select(lambda p: {"key": p["key"], "twice": (p["value"] or 0) * 2}),
    lambda s: s.alter_event_duration(ticks(30)).clip_event_duration(ticks(12)),
    lambda s: s.shift_event_time(ticks(4)).tumbling_window(ticks(100)).aggregate(
        keys=agg.udf(lambda ps: sorted({p["key"] for p in ps})), n=agg.count()),
    lambda s: s.alter_event_duration(ticks(20)).group_by("key").apply(
        lambda g: g.hopping_window(ticks(60), ticks(30)).aggregate(
            first=agg.incremental(lambda: None, lambda a, p: a if a is not None else p["x"],
                                  lambda a: a))),
    lambda s: s.to_point_event_stream().union(s.where(lambda df: df["flag"].to_numpy(),
                                                      frame=True)),
]


@pytest.mark.parametrize("query", TEXT_READERS)
def test_an_operator_that_reads_the_payloads_gets_their_text(tmp_path, query):
    """Operators that hand a user function each payload, pair events by it or pass events
    on whose payloads are their typed columns: the same results over Parquet (no payload
    text from the adapter) as from memory."""
    events = _events(6, 400)
    path = tmp_path / "events.parquet"
    pq.write_table(pa.Table.from_pandas(events, preserve_index=False), path)
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(30, timedelta(0), True))
    columnar = CepStream.create("s", ParquetInputAdapterFactory(), ParquetInputConfig(path, "t"),
                                EventShape.POINT, settings, application=Application())
    items = [PointEvent(int(r.t), {"key": r.key, "value": None if pd.isna(r.value)
                                   else int(r.value), "x": float(r.x), "flag": bool(r.flag)})
             for r in events.itertuples(index=False)]
    memory = CepStream.create("s", MemoryInputAdapterFactory(), items, EventShape.POINT,
                              settings, application=Application())
    want = query(memory).collect("local")
    assert want
    assert query(columnar).collect("local") == want


def test_stacked_chunks_keep_their_columns_only_where_they_agree():
    """Chunks one under the other (a union, a merged run of pieces): with their typed
    columns where every chunk with events has the same ones, payload texts left out and
    all; else every payload's text written and no columns (in either order)."""
    def chunk(fields: dict[str, list]) -> frame.Chunk:
        n = len(next(iter(fields.values())))
        return frame.Chunk(frame.make(["point"] * n, range(n), range(1, n + 1), [None] * n,
                                      [""] * n), [], {k: pa.array(v) for k, v in fields.items()})

    a, b, c = chunk({"k": ["x", "y"]}), chunk({"k": ["z"]}), chunk({"v": [1]})
    same = frame.Chunk.stacked([a, frame.Chunk.empty(), b], [3])
    assert same.columns["k"].to_pylist() == ["x", "y", "z"] and same.ctis == [3]
    assert same.raw_events["payload"].isna().all()
    assert same.events["payload"].tolist() == ['{"k":"x"}', '{"k":"y"}', '{"k":"z"}']
    for chunks in ([a, c], [c, a]):
        mixed = frame.Chunk.stacked(chunks, [])
        assert mixed.columns == {}
        assert sorted(mixed.raw_events["payload"]) == ['{"k":"x"}', '{"k":"y"}', '{"v":1}']
