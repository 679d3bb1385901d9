"""A query's output is written in parallel on Spark, one task per shard partition, by output
adapters that take partitions (``partitioned = True``: cti's JSON-lines and Parquet outputs);
each (micro-batch, partition) lands once, a replayed micro-batch replaces its own files, and
an adapter that takes whole batches only still gets each micro-batch whole, once."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cti import AdvanceTimeSettings, Application, CepStream, EventShape, agg, ticks
from cti.events import PointEvent
from cti.io.memory import MemoryInputAdapterFactory
from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
from cti.io.tables import ParquetOutputAdapterFactory, read_parquet_output
from cti.runtime.local import LocalRuntime
from cti.runtime.spark import SparkRuntime

pytestmark = pytest.mark.spark


def source():
    events = [PointEvent(t * 3 + (t * 7) % 5, {"k": f"k{t % 11}", "v": t}) for t in range(240)]
    return CepStream.create("s", MemoryInputAdapterFactory(), events, EventShape.POINT,
                            AdvanceTimeSettings.unordered_start_time(ticks(6)),
                            application=Application())


def counts(stream=None):
    return (stream or source()).group_by("k").apply(
        lambda g: g.hopping_window(ticks(40), ticks(20)).aggregate(n=agg.count(),
                                                                   total=agg.sum("v")))


def snapshots(stream=None):
    """A snapshot window per key over lasting points: its CTIs depend on its events, so it
    has the hold stage after the shards, which writes the output itself at one shard per
    task."""
    lasting = (stream or source()).alter_event_duration(
        lambda e: ticks(4 + e.payload["v"] % 9 * 5))
    return lasting.group_by("k").apply(
        lambda g: g.snapshot_window().aggregate(n=agg.count(), total=agg.sum("v")))


QUERIES = pytest.mark.parametrize("query", [counts, snapshots], ids=["window", "held"])


def _partitions_per_batch(directory: Path, suffix: str) -> dict[str, int]:
    got: dict[str, int] = {}
    for p in directory.glob(f"batch-*{suffix}"):
        batch = p.name[:len("batch-0000000000")]
        got[batch] = got.get(batch, 0) + 1
    return got


def _sorted_rows(table) -> list[str]:
    """A table's rows, sorted (files written in parallel: their order is not the rows')."""
    return sorted(map(str, table.to_pylist()))


# Two tasks for four shards: the shards' rows packed to a writer per task; four tasks: each
# shard writes its own rows in its stateful function.
TASKS = pytest.mark.parametrize("tasks", [None, 4])


@TASKS
def test_parquet_written_in_parallel_each_file_in_output_order(spark, tmp_path, tasks):
    out = tmp_path / "out"
    counts().to(ParquetOutputAdapterFactory(), str(out)).run(
        SparkRuntime(spark, shards=4, parallelism=tasks, batch_sizes=[60]))
    assert max(_partitions_per_batch(out, ".parquet").values()) > 1
    local = tmp_path / "local"
    counts().to(ParquetOutputAdapterFactory(), str(local)).run(LocalRuntime())
    assert _sorted_rows(read_parquet_output(out)) == _sorted_rows(read_parquet_output(local))
    for f in out.glob("batch-*.parquet"):  # a partition's rows in output order: by sync time
        starts = pq.read_table(f).column("start").to_pylist()
        assert starts == sorted(starts), f.name


@QUERIES
def test_json_lines_written_in_parallel_replayed_and_counted(spark, tmp_path, query):
    """Written by four tasks (the shards themselves, or the hold stage) and by two (the
    shards' rows packed to a writer per task): each micro-batch by several tasks, each
    (micro-batch, partition) a file of its own, merged batch by batch exactly the in-process
    output, in order; a micro-batch replayed (as if the run died after the sink wrote it,
    before Spark's commit) replaces its own files; the shards' metric rows reach the query's
    progress alike both ways."""
    want = query().collect(LocalRuntime())
    progress = []
    for tasks in (4, None):
        out, checkpoint = tmp_path / f"out{tasks}", tmp_path / f"checkpoint{tasks}"
        bound = query().to(JsonLinesOutputAdapterFactory(), str(out))
        runtime = SparkRuntime(spark, shards=4, parallelism=tasks, batch_sizes=[60],
                               checkpoint_location=str(checkpoint))
        bound.run(runtime)
        progress.append(runtime.progress)
        per_batch = _partitions_per_batch(out, ".jsonl")
        assert max(per_batch.values()) > 1, per_batch  # several tasks wrote one micro-batch
        assert all("-" in p.stem[len("batch-"):] for p in out.glob("batch-*.jsonl"))
        assert len(per_batch) > 1  # (several micro-batches, each file under its own id)
        assert read_json_lines_output(out) == want
        files = sorted(p.name for p in out.iterdir())
        last = max((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
        last.unlink()
        (checkpoint / "commits" / f".{last.name}.crc").unlink(missing_ok=True)
        bound.run(SparkRuntime(spark, shards=4, parallelism=tasks, batch_sizes=[60],
                               checkpoint_location=str(checkpoint)))
        assert (checkpoint / "commits" / last.name).exists()  # the batch ran again
        assert sorted(p.name for p in out.iterdir()) == files
        assert read_json_lines_output(out) == want
    assert progress[0] == progress[1]
    assert sum(p["s.accepted"] for p in progress[0]) == 240
    assert sum(p["s.cti"] for p in progress[0]) > 0


@QUERIES
@pytest.mark.parametrize(("tasks", "factory", "in_shards"), [
    (4, JsonLinesOutputAdapterFactory(), True), (None, JsonLinesOutputAdapterFactory(), False),
    (4, None, False)])
def test_the_shards_write_themselves_only_a_partitioned_adapter_one_shard_per_task(
        spark, tmp_path, tasks, factory, in_shards, query):
    """The shards (or, for a held query, the hold stage) write the output in their own tasks
    only where the adapter is partitioned and every task runs one shard."""
    runtime = SparkRuntime(spark, shards=4, parallelism=tasks)
    stream = query()
    sink = (factory or _whole_batches_factory(), str(tmp_path), stream.shape)
    partitioned = bool(getattr(sink[0], "partitioned", False))
    got = runtime._query_frame([stream], False, False, str(tmp_path / "checkpoint"),
                               [sink if partitioned else None])[3][0]
    assert got is in_shards


def _whole_batches_factory():
    # Defined in a function, so that Spark's workers get the classes by value (cloudpickle).
    class WholeBatches:
        """A user's adapter that takes whole batches only: one file per batch, created
        exclusively, so a batch written twice, or in parts, fails the run."""

        def __init__(self, directory: str) -> None:
            self.directory = directory

        def write(self, items, batch_id):
            with open(os.path.join(self.directory, f"{batch_id}.txt"), "x") as f:
                f.writelines(repr(i) + "\n" for i in items)

        def close(self):
            pass

    class WholeBatchesFactory:
        def create(self, config, shape):
            return WholeBatches(config)

    return WholeBatchesFactory()


def _written(directory) -> list[str]:
    return [line for p in sorted(directory.glob("*.txt"), key=lambda p: int(p.stem))
            for line in p.read_text().splitlines()]


def test_an_adapter_without_partitions_gets_each_batch_whole(spark, tmp_path):
    counts().to(_whole_batches_factory(), str(tmp_path)).run(
        SparkRuntime(spark, shards=4, batch_sizes=[60]))
    assert _written(tmp_path) == [repr(i) for i in counts().collect(LocalRuntime())]


def test_a_plain_streams_output_is_written_whole_by_its_groups_task(spark, tmp_path):
    """A stream's own output (no query): its group is one key of the stateful stage, so each
    micro-batch's rows are in one partition and reach the adapter whole, once, with no
    gathering shuffle."""
    stream = source()
    stream.to(_whole_batches_factory(), str(tmp_path)).run(
        SparkRuntime(spark, shards=4, batch_sizes=[60]))
    assert _written(tmp_path) == [repr(i) for i in stream.collect(LocalRuntime())]
    assert len(list(tmp_path.glob("*.txt"))) > 1  # several micro-batches


def test_several_queries_in_one_streaming_query_each_to_its_own_adapter(spark, tmp_path):
    """``write_queries``: a windowed query, a held one and a plain stream's own output to
    partitioned adapters, in one streaming query (``cti run``'s outputs), two tasks for four
    shards (each task writes its partition of each query from the packed rows): each adapter
    gets what its query alone gets in process, and the input is read and counted once."""
    s = source()
    bounds = [counts(s).to(JsonLinesOutputAdapterFactory(), str(tmp_path / "counts")),
              snapshots(s).to(JsonLinesOutputAdapterFactory(), str(tmp_path / "held")),
              s.as_query().to(ParquetOutputAdapterFactory(), str(tmp_path / "plain"))]
    runtime = SparkRuntime(spark, shards=4, parallelism=2, batch_sizes=[60])
    runtime.write_queries(bounds)
    for name in ("counts", "held"):
        assert max(_partitions_per_batch(tmp_path / name, ".jsonl").values()) > 1
    assert read_json_lines_output(tmp_path / "counts") == counts().collect(LocalRuntime())
    assert read_json_lines_output(tmp_path / "held") == snapshots().collect(LocalRuntime())
    local = tmp_path / "plain-local"
    source().as_query().to(ParquetOutputAdapterFactory(), str(local)).run(LocalRuntime())
    assert _sorted_rows(read_parquet_output(tmp_path / "plain")) == \
        _sorted_rows(read_parquet_output(local))
    assert sum(p["s.accepted"] for p in runtime.progress) == 240
