"""The number of shards on Spark is a setting (``SparkRuntime(shards=)``, by default the
session's cores), not ``spark.sql.shuffle.partitions``; a checkpoint keeps it."""

from __future__ import annotations

import pytest

from cti import AdvanceTimeSettings, Application, CepStream, EventShape, agg, ticks
from cti.errors import BindingError
from cti.events import PointEvent
from cti.io.memory import MemoryInputAdapterFactory
from cti.io.tables import ParquetOutputAdapterFactory, read_parquet_output
from cti.runtime.local import LocalRuntime
from cti.runtime.spark import SparkRuntime

pytestmark = pytest.mark.spark


def counts():
    events = [PointEvent(t, {"k": f"k{t % 5}"}) for t in range(0, 200, 3)]
    s = CepStream.create("s", MemoryInputAdapterFactory(), events, EventShape.POINT,
                         AdvanceTimeSettings.increasing_start_time(), application=Application())
    return s.group_by("k").apply(
        lambda g: g.tumbling_window(ticks(20)).aggregate(n=agg.count()))


@pytest.mark.parametrize("bad", [0, -1, "2", 2.0, True])
def test_shards_must_be_a_whole_number(bad):
    with pytest.raises(ValueError, match=r"shards=\.\.\.\) must be a whole number"):
        SparkRuntime(shards=bad)


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


def test_a_checkpoint_refuses_another_shard_count(spark, tmp_path):
    out = tmp_path / "out"
    query = counts().to(ParquetOutputAdapterFactory(), str(out))
    checkpoint = str(tmp_path / "ckpt")
    query.run(SparkRuntime(spark, checkpoint_location=checkpoint, shards=2))
    first = read_parquet_output(out)
    with pytest.raises(BindingError, match=r"written with 2 shards.*has 3.*shards=2"):
        query.run(SparkRuntime(spark, checkpoint_location=checkpoint, shards=3))
    query.run(SparkRuntime(spark, checkpoint_location=checkpoint, shards=2))  # nothing new
    assert read_parquet_output(out).equals(first)
    assert counts().collect(SparkRuntime(spark, shards=3)) == counts().collect(LocalRuntime())


def test_a_restart_without_shards_takes_the_checkpoints_count(spark, tmp_path):
    """A job restarted on a cluster of another size (no ``shards=``) goes on with the count
    its checkpoint was written with, where the default would be the session's cores."""
    out = tmp_path / "out"
    query = counts().to(ParquetOutputAdapterFactory(), str(out))
    checkpoint = str(tmp_path / "ckpt")
    assert SparkRuntime(spark, checkpoint_location=checkpoint).shard_count == \
        spark.sparkContext.defaultParallelism
    query.run(SparkRuntime(spark, checkpoint_location=checkpoint, shards=3))
    first = read_parquet_output(out)
    restarted = SparkRuntime(spark, checkpoint_location=checkpoint)
    assert restarted.shard_count == 3
    query.run(restarted)  # nothing new: no error, the output as it was
    assert read_parquet_output(out).equals(first)
