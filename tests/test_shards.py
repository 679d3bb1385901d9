"""The number of shards on Spark is a setting (``SparkRuntime(shards=)``, by default the
session's cores), not ``spark.sql.shuffle.partitions``; a checkpoint keeps it. Shards land
evenly on their tasks (Spark's hash partitioning checked): by default as many tasks as the
cores (a divisor of the shards), ``parallelism`` of them if asked, never more than shards."""

from __future__ import annotations

import pytest

from cti import AdvanceTimeSettings, Application, CepStream, EventShape, agg, ticks
from cti.errors import BindingError
from cti.events import PointEvent
from cti.io.memory import MemoryInputAdapterFactory
from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
from cti.io.tables import ParquetOutputAdapterFactory, read_parquet_output
from cti.runtime.local import LocalRuntime
from cti.runtime.spark import SparkRuntime
from cti.runtime.spark.partitioning import default_tasks, partition_of, shard_slots

pytestmark = pytest.mark.spark


def counts():
    events = [PointEvent(t, {"k": f"k{t % 5}"}) for t in range(0, 200, 3)]
    s = CepStream.create("s", MemoryInputAdapterFactory(), events, EventShape.POINT,
                         AdvanceTimeSettings.increasing_start_time(), application=Application())
    return s.group_by("k").apply(
        lambda g: g.tumbling_window(ticks(20)).aggregate(n=agg.count()))


@pytest.mark.parametrize("bad", [0, -1, "2", 2.0, True])
@pytest.mark.parametrize("name", ["shards", "parallelism"])
def test_shards_and_parallelism_must_be_whole_numbers(bad, name):
    with pytest.raises(ValueError, match=rf"{name}=\.\.\.\) must be a whole number"):
        SparkRuntime(**{name: bad})


def test_more_tasks_than_shards_are_refused():
    with pytest.raises(ValueError, match=r"parallelism=3\) is more than its shards=2"):
        SparkRuntime(shards=2, parallelism=3)


def test_default_shards_are_the_cores_not_the_shuffle_partitions(spark, tmp_path):
    conf = spark.conf
    before = conf.get("spark.sql.shuffle.partitions")
    conf.set("spark.sql.shuffle.partitions", "200")
    try:
        runtime = SparkRuntime(spark)
        assert runtime.shard_count == spark.sparkContext.defaultParallelism
        with counts().to(ParquetOutputAdapterFactory(), str(tmp_path)).start(runtime) as q:
            q.process_all_available()
            stateful = q.last_progress["stateOperators"]
        # The stateful stage runs one task per shard, not 200.
        assert {op["numShufflePartitions"] for op in stateful} == {runtime.shard_count}
        assert conf.get("spark.sql.shuffle.partitions") == "200"  # the user's setting, kept
    finally:
        conf.set("spark.sql.shuffle.partitions", before)


def test_a_checkpoint_keeps_its_shard_count(spark, tmp_path):
    """A checkpoint's shard count holds for good: a restart with another count is refused (a
    shard's state belongs to its keys), as is one on more tasks than those shards; a restart
    without ``shards=`` (a cluster of another size) goes on with the recorded count, where the
    default would be the session's cores."""
    out = tmp_path / "out"
    query = counts().to(ParquetOutputAdapterFactory(), str(out))
    checkpoint = str(tmp_path / "ckpt")
    assert SparkRuntime(spark, checkpoint_location=checkpoint).shard_count == \
        spark.sparkContext.defaultParallelism != 3
    query.run(SparkRuntime(spark, checkpoint_location=checkpoint, shards=3))
    first = read_parquet_output(out)
    local = tmp_path / "local"
    counts().to(ParquetOutputAdapterFactory(), str(local)).run(LocalRuntime())
    # (3 shards write their rows in parallel files: the same rows as in process)
    assert sorted(tuple(r.values()) for r in first.to_pylist()) == sorted(
        tuple(r.values()) for r in read_parquet_output(local).to_pylist())
    with pytest.raises(BindingError, match=r"written with 3 shards.*has 2.*shards=3"):
        query.run(SparkRuntime(spark, checkpoint_location=checkpoint, shards=2))
    with pytest.raises(BindingError, match=r"parallelism=4\) is more than the 3 shards"):
        query.run(SparkRuntime(spark, checkpoint_location=checkpoint, parallelism=4))
    restarted = SparkRuntime(spark, checkpoint_location=checkpoint)
    assert restarted.shard_count == 3
    query.run(restarted)  # nothing new: no error, the output as it was
    assert read_parquet_output(out).equals(first)


@pytest.mark.parametrize("shards", [2, 3, 4, 8, 16])
def test_each_shard_has_its_own_partition_by_sparks_own_hash(spark, shards):
    """Shard s travels under a slot that Spark's hash partitioning sends to partition s:
    checked with Spark's ``hash()``, the function its ``HashPartitioning`` uses."""
    for query in (0, 1, 5):
        slots = shard_slots(query, shards, shards)
        assert [slot % shards for slot in slots] == list(range(shards))
        rows = spark.createDataFrame([(query, s) for s in slots], "q int, s int").selectExpr(
            f"pmod(hash(q, s), {shards}) AS p").collect()
        assert [r.p for r in rows] == list(range(shards))
        # Half as many tasks (a divisor of the count) still get two shards each.
        if shards % 2 == 0:
            assert sorted(partition_of(query, s, shards // 2) for s in slots) == sorted(
                list(range(shards // 2)) * 2)


def test_four_shards_write_from_four_tasks(spark, tmp_path):
    """A query on 4 shards and 4 tasks: its parallel output has a file per shard partition
    (with the shard numbers as Spark's keys, 2 of the 4 partitions would get them all). By
    default on the session's 2 cores, 2 tasks, each running 2 shards."""
    events = [PointEvent(t, {"k": f"k{t % 40}"}) for t in range(400)]
    s = CepStream.create("s", MemoryInputAdapterFactory(), events, EventShape.POINT,
                         AdvanceTimeSettings.increasing_start_time(), application=Application())
    query = s.group_by("k").apply(lambda g: g.tumbling_window(ticks(100)).aggregate(
        n=agg.count()))
    want = query.collect(LocalRuntime())
    for tasks, runtime in ((4, SparkRuntime(spark, shards=4, parallelism=4)),
                           (2, SparkRuntime(spark, shards=4))):
        out = tmp_path / f"out-{tasks}"
        query.to(JsonLinesOutputAdapterFactory(), str(out)).run(runtime)
        written = {int(p.stem.rsplit("-", 1)[1]) for p in out.glob("batch-*.jsonl")}
        assert written == set(range(tasks))
        assert read_json_lines_output(out) == want


@pytest.mark.parametrize(("shards", "cores", "tasks"), [
    (1, 2, 1), (2, 2, 2), (4, 2, 2), (8, 2, 2), (64, 8, 8), (256, 100, 64), (9, 4, 3),
    (3, 2, 3), (7, 4, 7)])
def test_default_tasks_are_the_largest_divisor_of_the_shards_up_to_the_cores(
        shards, cores, tasks):
    assert default_tasks(shards, cores) == tasks
