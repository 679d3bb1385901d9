"""Spark DataFrames in and out: a stream bound to a streaming DataFrame gives the same output
as the same rows read as a batch DataFrame in-process, however the input is cut into
micro-batches; a query's output as a streaming DataFrame; started queries stop and resume
from their checkpoint with nothing lost or repeated; mistakes are refused by name."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeSettings,
    Application,
    BadInputError,
    BindingError,
    CepStream,
    Cti,
    EventOrderingPolicy,
    EventShape,
    InvalidSettingsError,
    PointEvent,
    agg,
)
from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
from cti.runtime.local import LocalRuntime

SCHEMA = "t long, k string, v long"
ROWS = [{"t": t, "k": "abc"[i % 3], "v": i}
        for i, t in enumerate([1, 3, 2, 11, 12, 25, 20, 33, 30, 41, 52, 47, 60, 58, 71])]
# No CTI at infinity when the input ends: a live DataFrame never ends, a batch one does.
SETTINGS = AdvanceTimeSettings(AdvanceTimeGenerationSettings(
    2, delay=timedelta(microseconds=4), advance_to_infinity_on_shutdown=False))


def put_files(directory: Path, rows: list[dict], per_file: int, first: int = 0) -> None:
    """Rows in files of ``per_file`` rows, each file newer than the one before."""
    directory.mkdir(exist_ok=True)
    for n in range(0, len(rows), per_file):
        k = first + n // per_file
        path = directory / f"part-{k:04d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows[n:n + per_file]))
        os.utime(path, ns=(10**18 + k * 10**9,) * 2)


def frame(spark, directory: Path, streaming: bool = True, **options):
    reader = spark.readStream if streaming else spark.read
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.schema(SCHEMA).json(str(directory)).selectExpr(
        "*", "_metadata.file_modification_time AS arrived", "_metadata.file_name AS file")


def bind(df, name: str = "s", **kw):
    return CepStream.from_dataframe(name, df, "point", start="t", arrival="arrived",
                                    order_by=["file", "v"], payload=["k", "v"],
                                    advance_time_settings=SETTINGS, application=Application(),
                                    **kw)


def counts(stream):
    return stream.group_by("k").apply(
        lambda g: g.tumbling_window(timedelta(microseconds=10)).aggregate(n=agg.count()))


def test_streaming_dataframe_equals_batch_in_process_whatever_the_micro_batches(spark,
                                                                                tmp_path):
    from cti.runtime.spark import SparkRuntime

    put_files(tmp_path / "in", ROWS, 3)
    expected_in = bind(frame(spark, tmp_path / "in", streaming=False)).run(LocalRuntime())
    expected = counts(bind(frame(spark, tmp_path / "in", streaming=False))).collect(
        LocalRuntime())
    assert any(isinstance(e, PointEvent) for e in expected)
    # One file per micro-batch, over two shards (group_by spreads the query by "k").
    got_in = bind(frame(spark, tmp_path / "in", maxFilesPerTrigger=1)).run(SparkRuntime(spark))
    assert got_in["s"].items == expected_in["s"].items
    assert got_in["s"].metrics == expected_in["s"].metrics
    assert got_in["s"].metrics["dropped"] > 0  # the disorder matters
    query = counts(bind(frame(spark, tmp_path / "in", maxFilesPerTrigger=2)))
    assert query.collect(SparkRuntime(spark, shards=2)) == expected


def test_output_as_a_streaming_dataframe(spark, tmp_path):
    from cti.runtime.spark import SparkRuntime

    put_files(tmp_path / "in", ROWS, 5)
    expected = counts(bind(frame(spark, tmp_path / "in", streaming=False))).collect(
        LocalRuntime())
    out = counts(bind(frame(spark, tmp_path / "in"))).to_dataframe(
        SparkRuntime(spark), payload_schema="k string, n long")
    assert out.isStreaming and out.columns == ["release", "kind", "start", "end", "k", "n"]
    writer = (out.writeStream.format("json").option("path", str(tmp_path / "out"))
              .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    writer.processAllAvailable()
    writer.stop()
    rows = spark.read.json(str(tmp_path / "out")).collect()
    events = sorted((r.start, r.k, r.n) for r in rows if r.kind == "point")
    ctis = sorted(r.start for r in rows if r.kind == "cti")
    assert events == sorted((e.start, e.payload["k"], e.payload["n"])
                            for e in expected if isinstance(e, PointEvent))
    assert ctis == [c.time for c in expected if isinstance(c, Cti)]
    # A bound stream's own output (its ingress output), payload as JSON.
    plain = bind(frame(spark, tmp_path / "in")).to_dataframe(SparkRuntime(spark))
    assert plain.columns == ["release", "kind", "start", "end", "payload"]
    writer = plain.writeStream.format("memory").queryName("cti_plain_output").start()
    writer.processAllAvailable()
    writer.stop()
    got = sorted((r.start, r.payload) for r in spark.table("cti_plain_output").collect()
                 if r.kind == "point")
    want = bind(frame(spark, tmp_path / "in", streaming=False)).collect(LocalRuntime())
    last_cti = max(e.time for e in want if isinstance(e, Cti))
    # Released in CTI blocks, as a query's output: an event waits for a CTI above its start.
    assert got == sorted((e.start, json.dumps(e.payload, separators=(",", ":"), sort_keys=True))
                         for e in want if isinstance(e, PointEvent) and e.start < last_cti)
    assert len(got) < sum(isinstance(e, PointEvent) for e in want)


def test_started_query_stops_and_resumes_from_its_checkpoint(spark, tmp_path):
    from cti.runtime.spark import RunningQuery, SparkRuntime

    put_files(tmp_path / "in", ROWS[:6], 3)
    query = counts(bind(frame(spark, tmp_path / "in"))).to(JsonLinesOutputAdapterFactory(),
                                                          str(tmp_path / "out"))
    runtime = SparkRuntime(spark, checkpoint_location=str(tmp_path / "checkpoint"))
    handle = query.start(runtime)
    assert isinstance(handle, RunningQuery) and handle.is_active
    handle.process_all_available()
    put_files(tmp_path / "in", ROWS[6:10], 2, first=2)  # new files while it runs
    handle.process_all_available()
    assert handle.progress and all("s.accepted" in p for p in handle.progress)
    handle.stop()
    assert not handle.is_active and handle.await_termination(1)
    before = read_json_lines_output(tmp_path / "out")
    put_files(tmp_path / "in", ROWS[10:], 5, first=4)  # arrives while the query is down
    handle = query.start(runtime)  # the same call resumes from the checkpoint
    handle.process_all_available()
    handle.stop()
    after = read_json_lines_output(tmp_path / "out")
    expected = counts(bind(frame(spark, tmp_path / "in", streaming=False))).collect(
        LocalRuntime())
    assert after[:len(before)] == before and len(after) > len(before)
    assert after == expected


def test_bad_rows_and_refusals_name_the_stream_and_column(spark, tmp_path):
    from cti.runtime.spark import SparkRuntime

    put_files(tmp_path / "in", [{"t": 1, "k": "a", "v": 0}, {"k": "a", "v": 1}], 5)
    with pytest.raises(BadInputError, match="'s'.*t is null"):
        bind(frame(spark, tmp_path / "in")).run(SparkRuntime(spark))
    dead = bind(frame(spark, tmp_path / "in"), on_bad_input="dead_letter").run(
        SparkRuntime(spark))["s"]
    assert dead.metrics["invalid"] == 1 and dead.metrics["accepted"] == 1
    df = frame(spark, tmp_path / "in")
    with pytest.raises(InvalidSettingsError, match="'s'.*start column 'time' is not a column"):
        CepStream.from_dataframe("s", df, "point", start="time", order_by="v",
                                 application=Application())
    with pytest.raises(InvalidSettingsError, match="'s'.*start column 'k' is string"):
        CepStream.from_dataframe("s", df, "point", start="k", order_by="v",
                                 application=Application())
    with pytest.raises(InvalidSettingsError, match="arrival= .* order_by="):
        CepStream.from_dataframe("s", df, "point", start="t", application=Application())
    with pytest.raises(InvalidSettingsError, match="interval input needs end="):
        CepStream.from_dataframe("s", df, EventShape.INTERVAL, start="t", order_by="v",
                                 application=Application())
    with pytest.raises(BindingError, match="'s': event_ordering_policy has arrival_clock='wall'"):
        CepStream.from_dataframe("s", df, "point", start="t", order_by="v",
                                 event_ordering_policy=EventOrderingPolicy(arrival_clock="wall"),
                                 application=Application())
    with pytest.raises(InvalidSettingsError, match="'s' reads a streaming DataFrame.*Spark"):
        bind(df).collect(LocalRuntime())
    with pytest.raises(BindingError, match="start\\(\\) needs SparkRuntime"):
        bind(df).to(JsonLinesOutputAdapterFactory(), str(tmp_path / "o")).start(LocalRuntime())
    with pytest.raises(TypeError, match="'s' reads a batch DataFrame"):
        bind(frame(spark, tmp_path / "in", streaming=False)).collect(SparkRuntime(spark))


@settings(max_examples=examples(60), deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 9), st.sampled_from("abc")),
                     min_size=1, max_size=30),
       cuts=st.lists(st.integers(0, 30), max_size=4), shuffle=st.randoms(use_true_random=False),
       first=st.integers(0, 100))
def test_a_micro_batch_is_numbered_the_same_however_spark_splits_it(rows, cuts, shuffle, first):
    """The pieces of a DataFrame input's micro-batch (Spark partitions and Arrow batches, in
    any order, each shard's with only its own payloads) are numbered alike: by the sort key,
    from the stream's next sequence number."""
    import pandas as pd
    import pyarrow as pa

    from cti.engine.batch import IN_ARROW, routed
    from cti.engine.route import QueryRoute
    from cti.io.dataframes import ORDER
    from cti.runtime.spark.packing import pack_unnumbered, unpack

    n = len(rows)
    table = pa.table({
        "stream": pa.array([0] * n, pa.int32()), "seq": pa.array([-1] * n, pa.int64()),
        "arrival": [a for a, _, _ in rows], "kind": ["point"] * n, "start": [s for _, s, _ in rows],
        "end": [-(2**63)] * n, "payload": [json.dumps({"k": k, "i": i})
                                           for i, (_, _, k) in enumerate(rows)],
        "error": pa.nulls(n, pa.string()), "partition": pa.nulls(n, pa.string())},
        schema=IN_ARROW)
    order = pa.table({ORDER + "arrival": table.column("arrival"),
                      ORDER + "hash": pa.array([s * 1000 + ord(k) for _, s, k in rows])})
    route = QueryRoute(0, 2, {(0, 0): "k"}, False)
    bounds = sorted({0, n, *(c % (n + 1) for c in cuts)})
    numbered = {}
    for shard in range(2):
        pieces = []
        for a, b in zip(bounds, bounds[1:], strict=False):
            part = dict(routed(route, 0, table.slice(a, b - a)))[shard]
            pieces.append(pack_unnumbered(part, order.slice(a, b - a)))
        shuffle.shuffle(pieces)
        got = unpack(pd.DataFrame({"group": [0] * len(pieces), "seq": [-1] * len(pieces),
                                   "blob": pieces}), lambda g, i: first)
        assert sorted(got["seq"]) == list(range(first, first + n))
        numbered[shard] = got.sort_values("seq")[["arrival", "start", "own"]].to_numpy().tolist()
    assert numbered[0] == numbered[1]  # every shard numbers the rows the same way
    keys = sorted((a, s * 1000 + ord(k), s) for a, s, k in rows)
    assert [(a, s) for a, s, _ in numbered[0]] == [(a, s) for a, _, s in keys]
