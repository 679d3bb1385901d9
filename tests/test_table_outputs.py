"""Delta and Parquet outputs: a query's events as typed columns, read back, exactly once.

On both runtimes the table holds the query's events (CTIs left out) with start and end as UTC
timestamps and each payload field as its own column. A batch delivered again with the same id
(Spark replays the last micro-batch when its commit is missing from the checkpoint) does not
duplicate rows: the Delta commit's transaction records the batch, a Parquet batch file is
replaced.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeSettings,
    Application,
    CepStream,
    Cti,
    EdgeEvent,
    EventShape,
    PointEvent,
    agg,
)
from cti.errors import InvalidSettingsError
from cti.events import kind_of
from cti.forms.rows import payload_to_json
from cti.io.delta import DeltaOutputAdapterFactory, DeltaOutputConfig, committed_batch
from cti.io.memory import MemoryInputAdapterFactory
from cti.io.tables import ParquetOutputAdapterFactory, read_parquet_output
from cti.runtime.local import LocalRuntime
from cti.time import MAX_TIME


def query():
    rng = random.Random(3)
    times = sorted(rng.randrange(0, 2_000_000) for _ in range(200))
    events = [PointEvent(t, {"k": rng.choice("abc"), "v": n, "m": {"x": n / 4}})
              for n, t in enumerate(times)]
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(
        20, delay=timedelta(milliseconds=300), advance_to_infinity_on_shutdown=True))
    s = CepStream.create("s", MemoryInputAdapterFactory(), events, EventShape.POINT, settings,
                         application=Application())
    counts = s.group_by("k").apply(
        lambda g: g.tumbling_window(timedelta(milliseconds=500)).aggregate(n=agg.count()))
    return counts.union(s.where(lambda p: p["v"] % 5 == 0).select(
        lambda p: {"k": p["k"], "v": p["v"], "m": p["m"]}))


def expected() -> pd.DataFrame:
    """The query's events from ``collect`` as the table's rows (start, end in ticks)."""
    rows = [{"kind": "point", "start": e.start, **e.payload}
            for e in query().collect(LocalRuntime()) if hasattr(e, "payload")]
    return _canonical(pd.DataFrame(rows))


def _canonical(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["m"] = df["m"].map(lambda m: None if not isinstance(m, dict) else m["x"])
    df["v"] = df["v"].astype("Int64")
    df["n"] = df["n"].astype("Int64")
    cols = ["kind", "start", "k", "v", "n", "m"]
    return df[cols].sort_values(cols, na_position="first").reset_index(drop=True)


def _table_rows(table: pa.Table) -> pd.DataFrame:
    df = table.to_pandas()
    assert str(df["start"].dtype) == "datetime64[us, UTC]"
    assert df["end"].isna().all()  # points have no end
    df["start"] = df["start"].astype("int64")
    return _canonical(df)


def runtimes(request, checkpoint: Path | None = None):
    if request.param == "spark":
        from cti.runtime.spark import SparkRuntime

        return SparkRuntime(request.getfixturevalue("spark"), batch_sizes=[60],
                            checkpoint_location=str(checkpoint) if checkpoint else None)
    return LocalRuntime(batch_sizes=[60])


@pytest.fixture(params=["local", "spark"])
def runtime_name(request):
    return request


def _read_delta(path: Path) -> pa.Table:
    from deltalake import DeltaTable

    return DeltaTable(str(path)).to_pyarrow_table()


def test_delta_and_parquet_hold_the_query_events(runtime_name, tmp_path):
    want = expected()
    assert len(want) > 50 and want["n"].notna().any() and want["v"].notna().any()
    query().to(DeltaOutputAdapterFactory(), DeltaOutputConfig(tmp_path / "delta")).run(
        runtimes(runtime_name))
    query().to(ParquetOutputAdapterFactory(), str(tmp_path / "parquet")).run(
        runtimes(runtime_name))
    delta = _read_delta(tmp_path / "delta")
    assert delta.schema.field("v").type == pa.int64()
    assert pa.types.is_struct(delta.schema.field("m").type)
    pd.testing.assert_frame_equal(_table_rows(delta), want)
    pd.testing.assert_frame_equal(_table_rows(read_parquet_output(tmp_path / "parquet")), want)
    batches = len(list((tmp_path / "parquet").glob("batch-*.parquet")))
    assert batches > 1 and committed_batch(str(tmp_path / "delta")) >= batches - 1


def test_a_rerun_of_the_same_batches_adds_nothing(tmp_path):
    """The in-process runtime numbers its batches from 0 on every run: running the same query
    into the same table again replays every batch, and every one is skipped or replaced."""
    for _ in range(2):
        query().to(DeltaOutputAdapterFactory(), DeltaOutputConfig(tmp_path / "delta")).run(
            LocalRuntime(batch_sizes=[60]))
        query().to(ParquetOutputAdapterFactory(), str(tmp_path / "parquet")).run(
            LocalRuntime(batch_sizes=[60]))
    pd.testing.assert_frame_equal(_table_rows(_read_delta(tmp_path / "delta")), expected())
    pd.testing.assert_frame_equal(_table_rows(read_parquet_output(tmp_path / "parquet")),
                                  expected())


def test_spark_replays_a_micro_batch_without_duplicates(spark, tmp_path):
    """The last micro-batch's commit removed from the checkpoint (as if the driver died after
    the sink wrote it): the restarted query runs that batch again, with the same id."""
    from cti.runtime.spark import SparkRuntime

    checkpoint = tmp_path / "checkpoint"
    delta = DeltaOutputConfig(tmp_path / "delta", app_id="replay-test")

    def run():
        query().to(DeltaOutputAdapterFactory(), delta).run(
            SparkRuntime(spark, batch_sizes=[60], checkpoint_location=str(checkpoint)))

    run()
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    last = int(commits[-1].name)
    version_before = _delta_version(tmp_path / "delta")
    assert committed_batch(str(tmp_path / "delta"), "replay-test") == last  # it wrote rows
    commits[-1].unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    run()
    assert sorted(int(p.name) for p in (checkpoint / "commits").glob("[0-9]*"))[-1] == last
    assert _delta_version(tmp_path / "delta") == version_before  # the replay committed nothing
    pd.testing.assert_frame_equal(_table_rows(_read_delta(tmp_path / "delta")), expected())


def _delta_version(path: Path) -> int:
    from deltalake import DeltaTable

    return DeltaTable(str(path)).version()


def test_replayed_batch_is_skipped_and_new_fields_are_merged(tmp_path):
    adapter = DeltaOutputAdapterFactory().create(str(tmp_path / "t"), EventShape.EDGE)
    adapter.write([EdgeEvent.start_edge(1, {"a": 1})], 0)
    adapter.write([EdgeEvent.start_edge(1, {"a": 1})], 0)  # replayed
    adapter.write([EdgeEvent.end_edge(1, 5, {"a": 1, "b": "x"})], 1)
    adapter.write([EdgeEvent.end_edge(1, 5, {"a": 1, "b": "x"})], 1)  # replayed
    df = _read_delta(tmp_path / "t").to_pandas().sort_values("kind")
    assert list(df["kind"]) == ["edge_end", "edge_start"]
    assert list(df["b"].fillna("-")) == ["x", "-"]
    ends = df.set_index("kind")["end"]
    assert pd.isna(ends["edge_start"]) and ends["edge_end"].value // 1000 == 5
    assert committed_batch(str(tmp_path / "t")) == 1
    assert EdgeEvent.start_edge(1, {}).end == MAX_TIME


def test_parquet_replay_replaces_its_file(tmp_path):
    adapter = ParquetOutputAdapterFactory().create(str(tmp_path), EventShape.POINT)
    adapter.write([PointEvent(1, {"a": 1}), PointEvent(2, {"a": 2})], 0)
    adapter.write([PointEvent(1, {"a": 1}), PointEvent(2, {"a": 2})], 0)
    assert read_parquet_output(tmp_path).column("a").to_pylist() == [1, 2]
    assert [p.name for p in tmp_path.iterdir()] == ["batch-0000000000.parquet"]


def test_mistakes_are_named(tmp_path):
    adapter = DeltaOutputAdapterFactory().create(str(tmp_path / "t"), EventShape.POINT)
    with pytest.raises(InvalidSettingsError, match="'start'"):
        adapter.write([PointEvent(1, {"start": 1})], 0)
    adapter.write([PointEvent(1, {"a": 1})], 0)
    with pytest.raises(InvalidSettingsError, match="do not fit"):
        adapter.write([PointEvent(2, {"a": "text"})], 1)
    with pytest.raises(InvalidSettingsError, match="DeltaOutputConfig"):
        DeltaOutputAdapterFactory().create(42, EventShape.POINT)
    with pytest.raises(InvalidSettingsError, match="app_id"):
        DeltaOutputConfig("x", app_id="")


def test_partitions_of_a_batch_commit_in_parallel_each_once(tmp_path):
    """Four partitions of the first batch commit at once (the table does not exist yet, and
    two bring fields the others lack): every row lands once, a replay of any partition adds
    nothing, and the batch counts as committed."""
    import threading

    from deltalake import DeltaTable

    adapter = DeltaOutputAdapterFactory().create(str(tmp_path / "t"), EventShape.POINT)
    parts = [[PointEvent(p * 10 + i, {"p": p, **({"x": f"x{i}"} if p % 2 else {})})
              for i in range(3)] for p in range(4)]
    start = threading.Barrier(4)
    errors = []

    def write(p):
        start.wait()
        try:
            adapter.write(parts[p], 0, partition=p)
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    version = DeltaTable(str(tmp_path / "t")).version()
    for p in range(4):
        adapter.write(parts[p], 0, partition=p)  # replayed
    table = DeltaTable(str(tmp_path / "t"))
    assert table.version() == version
    df = table.to_pandas().sort_values("start")
    assert list(df["start"].astype("int64")) == sorted(e.start for p in parts for e in p)
    assert list(df["x"].fillna("-")) == [e.payload.get("x", "-") for p in parts for e in p]
    assert committed_batch(str(tmp_path / "t")) == 0
    adapter.write([PointEvent(99, {"p": 9})], 1, partition=2)
    assert committed_batch(str(tmp_path / "t")) == 1


def _kinds_rows(draw_rows: list[tuple[str, int, int, dict]]) -> list:
    """Stream items of (kind, start, length, payload) rows; a CTI after each third."""
    from cti import EdgeType, IntervalEvent

    items: list = []
    for i, (kind, start, length, payload) in enumerate(draw_rows):
        if kind == "point":
            items.append(PointEvent(start, payload))
        elif kind == "interval":
            items.append(IntervalEvent(start, start + length, payload))
        elif kind == "edge_start":
            items.append(EdgeEvent(EdgeType.START, start, MAX_TIME, payload))
        else:
            items.append(EdgeEvent(EdgeType.END, start, start + length, payload))
        if i % 3 == 2:
            items.append(Cti(start))
    return items


@settings(max_examples=examples(40), deadline=None)
@given(rows=st.lists(st.tuples(
    st.sampled_from(["point", "interval", "edge_start", "edge_end"]),
    st.integers(-10**12, 10**12), st.integers(1, 10**6),
    st.fixed_dictionaries({"k": st.sampled_from(["a", "é", "x\"y"]),
                           "v": st.integers(-2**53, 2**53) | st.floats(allow_nan=False)})),
    min_size=1, max_size=12))
def test_table_frame_and_items_write_the_same(rows, tmp_path_factory):
    """Each shipped output writes a batch the same whether it comes as an Arrow table (what
    the runtimes give an adapter with ``write_table``), as a frame or as items."""
    from cti.io.outputs import JsonLinesOutputAdapterFactory, frame_rows, items_frame
    from cti.operators.output import items_of_frame

    items = _kinds_rows(rows)
    frame = pd.DataFrame({
        "kind": ["cti" if isinstance(i, Cti) else kind_of(i) for i in items],
        "start": [i.time if isinstance(i, Cti) else i.start for i in items],
        "end": [i.time if isinstance(i, Cti) else i.end for i in items],
        "payload": [None if isinstance(i, Cti) else payload_to_json(i.payload) for i in items]})
    assert items_of_frame(frame) == items
    root = tmp_path_factory.mktemp("out")
    for name, factory in [("jsonl", JsonLinesOutputAdapterFactory()),
                          ("parquet", ParquetOutputAdapterFactory())]:
        written = []
        for way in ("table", "frame", "items"):
            adapter = factory.create(str(root / f"{name}-{way}"), EventShape.POINT)
            if way == "table":
                adapter.write_table(frame_rows(frame), 0)
            elif way == "frame":
                adapter.write_frame(frame, 0)
            else:
                adapter.write(items, 0)
            written.append(sorted((p.name, p.read_bytes() if name == "jsonl" else
                                   pq.read_table(p).to_pylist())
                                  for p in (root / f"{name}-{way}").iterdir()))
        assert written[0] == written[1] == written[2], name
    assert len(items_frame(items)) == len(rows)
