"""Reference data without timestamps: rows as open-ended edges from a load time, joined with a
fast stream whose CTIs the reference stream imports, on both runtimes."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from cti import (
    MAX_TIME,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Application,
    Arriving,
    CepStream,
    EdgeEvent,
    EventShape,
    InvalidInput,
    PointEvent,
)
from cti.adapters import FIELD_COLUMN
from cti.errors import InvalidSettingsError
from cti.io.memory import MemoryInputAdapterFactory
from cti.io.reference import (
    ReferenceDataConfig,
    ReferenceDataInputAdapterFactory,
    reference_data,
)

ROWS = [{"plate": "A", "expired": "1"}, {"plate": "B", "expired": "0"}]
CARS = [Arriving(PointEvent(t, {"plate": p}), t) for t, p in [(10, "A"), (20, "B"), (30, "C"),
                                                               (40, "A")]]


def bind(factory, config):
    app = Application()
    cars = CepStream.create("cars", MemoryInputAdapterFactory(), CARS, EventShape.POINT,
                            AdvanceTimeSettings.increasing_start_time(), application=app)
    ref = CepStream.create("ref", factory, config, EventShape.EDGE, AdvanceTimeSettings(
        import_settings=AdvanceTimeImportSettings("cars"), policy=AdvanceTimePolicy.ADJUST),
        application=app)
    return cars.join(ref.where(lambda r: r["expired"] == "1"), on="plate")


def test_rows_become_open_edges_from_the_load_time():
    items = reference_data(ROWS, 5)
    assert items == [Arriving(EdgeEvent.start_edge(5, r), 5) for r in ROWS]
    assert all(i.item.end == MAX_TIME for i in items)
    with pytest.raises(InvalidSettingsError, match="finite"):
        reference_data(ROWS, MAX_TIME)


@pytest.mark.parametrize("runtime", ["local", "spark"])
def test_join_with_reference_data_from_memory_and_file(runtime, tmp_path, request):
    if runtime == "spark":
        request.getfixturevalue("spark")
    path = tmp_path / "ref.json"
    path.write_text(json.dumps(ROWS))
    from_file = bind(ReferenceDataInputAdapterFactory(), ReferenceDataConfig(path, 5))
    from_memory = bind(MemoryInputAdapterFactory(), reference_data(ROWS, 5))
    for query in (from_file, from_memory):
        events = [e for e in query.collect(runtime) if isinstance(e, PointEvent)]
        assert [(e.start, e.payload["plate"]) for e in events] == [(10, "A"), (40, "A")]


@pytest.mark.parametrize("runtime", ["local", "spark"])
def test_batch_sizes_by_name_cap_the_events_and_the_table_comes_whole(runtime, request):
    """``batch_sizes={"cars": [1]}``: the cars come one per micro-batch, the reference rows
    (not named) all in the first; the output is the uncapped run's."""
    from cti.runtime.local import LocalRuntime

    if runtime == "spark":
        from cti.runtime.spark import SparkRuntime

        make = lambda sizes: SparkRuntime(request.getfixturevalue("spark"),  # noqa: E731
                                          batch_sizes=sizes)
    else:
        make = LocalRuntime
    rows = [{"plate": p, "expired": "1"} for p in "ABCDEFGH"]
    query = bind(MemoryInputAdapterFactory(), reference_data(rows, 5))
    whole = query.collect(make(None))
    capped = make({"cars": [1]})
    assert query.collect(capped) == whole
    assert [e.payload["plate"] for e in whole if isinstance(e, PointEvent)] == ["A", "B", "C",
                                                                                 "A"]
    if runtime == "local":  # every micro-batch through the engine, one car each
        machine_batches = []
        original = LocalRuntime._input_pieces

        def spy(self, *args, **kwargs):
            for pieces in original(self, *args, **kwargs):
                machine_batches.append(sum(p.num_rows for p in pieces))
                yield pieces

        LocalRuntime._input_pieces = spy
        try:
            query.collect(LocalRuntime({"cars": [1]}))
        finally:
            LocalRuntime._input_pieces = original
        assert machine_batches[0] == 1 + len(rows) + 1  # a car, every row and their end
        assert len(machine_batches) == len(CARS) + 1  # then one car each, and the cars' end


def test_file_options_and_bad_rows(tmp_path):
    path = tmp_path / "ref.csv"
    path.write_text("plate,expired,extra\nA,1,x\nB,0\n")
    adapter = ReferenceDataInputAdapterFactory().create(
        ReferenceDataConfig(path, 7, format="csv", payload_columns=["plate", "expired"]),
        EventShape.EDGE)
    first, second = adapter.read(0, adapter.latest_offset())
    assert first == Arriving(EdgeEvent.start_edge(7, {"plate": "A", "expired": "1"}), 7)
    assert isinstance(second, InvalidInput) and "line 3" in second.reason
    with pytest.raises(InvalidSettingsError, match="EDGE"):
        ReferenceDataInputAdapterFactory().create(ReferenceDataConfig(path, 7), EventShape.POINT)
    with pytest.raises(InvalidSettingsError, match="format"):
        ReferenceDataConfig(path, 7, format="xml")


@pytest.mark.parametrize("fmt, text, columns, arrow", [
    ("csv", "plate,expired,note\nA,1,x\nB,0\nC,1,caf\u00e9 \"q\"\nD,0,\n", None, False),
    ("csv", "plate,expired\nA,1\nB,0,9\nC,1\n", ["plate", "note"], False),
    # plain files, read by Arrow (``csv_table``): text Arrow writes as JSON, and text it does
    # not (built row by row), all columns or some
    ("csv", "plate,expired,note\nA,1,x y\nB,0,\nC,1,z\nD,0,w\n", ["note", "plate"], True),
    ("csv", "plate,expired\nA,1\nB,0\nC,caf\u00e9\nD,\\\n", None, True),
    ("json", '{"plate": "A", "tags": [1, {"b": null}]}\nnot json\n{"plate": 2.5}\n[1]\n', None,
     False),
    ("json", '{"k": 1, "ok": true, "s": "x y"}\n{"k": -5, "ok": false, "s": ""}\n'
             '{"s": "z", "ok": true, "k": 12345678901234567890}\n{"k": 3, "ok": true}\n', None,
     False),
    # JSON lines of flat rows, read by Arrow (``json_table``)
    ("json", '{"k": 1, "ok": true, "s": "x y"}\n{"k": -5, "ok": false, "s": ""}\n\n'
             '{"s": "caf\\u00e9", "ok": true, "k": 7}\n{"k": 3, "ok": true, "s": "z"}\n', None,
     True),
    ("json", '{"k": 1, "s": "a"}\n{"k": 2, "s": "b"}\n{"k": 3, "s": "c"}\n{"k": 4, "s": "d"}\n',
     ["s"], True),
])
def test_the_columnar_read_gives_the_rows_one_by_one_gives(tmp_path, fmt, text, columns,
                                                          arrow):
    """The engine reads a reference file by ``read_frame``: the same input rows (payloads,
    times, bad rows and their rules) as ``read``, item by item, for any range; where Arrow
    read the file, the payloads as typed columns, their text written from those
    (``text_rows``)."""
    from cti.engine.batch import _in_table, read_rows, rows_table, text_rows

    path = tmp_path / f"ref.{fmt}"
    path.write_bytes(text.encode() + b"E,\xff\n" * (fmt == "csv" and not arrow))
    adapter = ReferenceDataInputAdapterFactory().create(
        ReferenceDataConfig(path, 7, format=fmt, payload_columns=columns), EventShape.EDGE)
    assert (adapter._table() is not None) == arrow
    n = adapter.latest_offset()
    for start, end in [(0, n), (1, n), (0, 2), (2, 2)]:
        one_by_one = rows_table(read_rows(3, adapter, start, end))
        columnar = _in_table(adapter.read_frame(start, end), 3, start)
        assert text_rows(columnar).to_pylist() == one_by_one.to_pylist(), (start, end)
        if arrow and end > start:
            assert columnar.column("payload").null_count == end - start
            fields = [json.loads(r["payload"]) for r in one_by_one.to_pylist()]
            for name in fields[0]:
                assert columnar.column(FIELD_COLUMN + name).to_pylist() == [
                    f[name] for f in fields]
    assert one_by_one.num_rows == 0 and n >= 4


@pytest.mark.parametrize("call, make", [
    ("reference_data: load_time", lambda t: reference_data([{"a": 1}], t)),
    ("ReferenceDataConfig: load_time", lambda t: ReferenceDataConfig("devices.csv", t)),
])
def test_a_naive_load_time_is_refused_naming_the_call(call, make):
    """The message names the call and its parameter (it once read ``time:``)."""
    with pytest.raises(InvalidSettingsError, match=re.escape(
            f"{call}: naive datetime 2014-12-11T00:00:00 has no time zone")) as caught:
        make(datetime(2014, 12, 11))
    assert "Application(time_zone" not in str(caught.value)  # (no application applies)
    assert make(datetime(2014, 12, 11, tzinfo=UTC)) is not None


def test_on_spark_a_large_table_loads_in_pieces_with_the_same_output(spark):
    """A stream that imports its CTIs comes at most ``reference_rows_per_batch`` rows per
    micro-batch unless ``batch_sizes`` names it: the table in pieces, the output the whole
    table's in one micro-batch, and the in-process runtime's."""
    from cti.runtime.spark import SparkRuntime

    rows = [{"plate": p, "expired": "1"} for p in "ABCDEFGH"]
    query = bind(MemoryInputAdapterFactory(), reference_data(rows, 5))
    whole = SparkRuntime(spark, reference_rows_per_batch=None)
    pieces = SparkRuntime(spark, reference_rows_per_batch=3)
    named = SparkRuntime(spark, batch_sizes={"ref": [5]}, reference_rows_per_batch=3)
    expected = query.collect("local")
    assert query.collect(whole) == expected
    assert query.collect(pieces) == expected
    assert query.collect(named) == expected
    assert [p["ref.accepted"] for p in whole.progress][:1] == [len(rows)]
    assert [p["ref.accepted"] for p in pieces.progress][:3] == [3, 3, 2]
    assert [p["ref.accepted"] for p in named.progress][:2] == [5, 3]  # (batch_sizes first)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "100"])
def test_reference_rows_per_batch_is_a_whole_number(bad):
    from cti.runtime.spark import SparkRuntime

    with pytest.raises(ValueError, match="reference_rows_per_batch"):
        SparkRuntime(reference_rows_per_batch=bad)
