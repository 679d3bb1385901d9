"""Experiment for "time once, events once": can a time-keeping stateful stage per ingress group
feed a shard stage in the same micro-batch, and is the source read once?

One Python streaming source yields, per input partition, 1,000 time rows (role ``t``) and 1,000
event rows (role ``e``, each with its owning shard). The time rows go to a stage keyed by group
(``applyInPandasWithState``) that emits one CTI row per shard; its output is unioned with the
event rows into a stage keyed by shard (``transformWithStateInPandas``), which reports how many
events and CTI rows it got. Every ``read`` call leaves a file in ``LOG``, so the run prints how
often each input partition was read. ``--reuse`` repartitions the source by shard first.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/time_stage_experiment.py [--reuse]

Findings (docs/spark-runtime.md, "Scaling out"): the chain runs and both inputs meet in one
micro-batch, but each partition is read twice; ``--reuse`` fails in PySpark 4.3.0 with a
``ClassCastException`` (ColumnarBatchRow to UnsafeRow) in the shard stage.
"""

from __future__ import annotations

import glob
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.state import GroupStateTimeout
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

LOG = os.path.join(tempfile.gettempdir(), "cti-time-stage-reads")
ROWS = "role string, grp int, shard int, v long"


class _Reader(DataSourceStreamReader):
    def initialOffset(self) -> dict:
        return {"n": 0}

    def latestOffset(self) -> dict:
        return {"n": 2}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition(i) for i in range(start["n"], end["n"])]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        open(f"{LOG}/{partition.value}-{os.getpid()}-{time.time_ns()}", "w").close()
        for k in range(1000):
            yield ("t", 0, k % 4, partition.value * 1000 + k)
            yield ("e", 0, k % 4, partition.value * 1000 + k)

    def commit(self, end: dict) -> None:
        pass


class _Source(DataSource):
    @classmethod
    def name(cls) -> str:
        return "time_stage_experiment"

    def schema(self) -> str:
        return ROWS

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _Reader()


def _time_stage(key: tuple, frames: Iterator[pd.DataFrame], state: Any
                ) -> Iterator[pd.DataFrame]:
    n = sum(len(f) for f in frames)
    yield pd.DataFrame({"role": ["c"] * 4, "grp": [0] * 4, "shard": [0, 1, 2, 3], "v": [n] * 4})


class _Shard(StatefulProcessor):
    def init(self, handle: Any) -> None:
        pass

    def handleInputRows(self, key: tuple, rows: Iterator[pd.DataFrame], timerValues: Any
                        ) -> Iterator[pd.DataFrame]:
        events = ctis = 0
        for frame in rows:
            events += int((frame["role"] == "e").sum())
            ctis += int((frame["role"] == "c").sum())
        yield pd.DataFrame({"shard": [int(key[0])], "events": [events], "ctis": [ctis]})

    def close(self) -> None:
        pass


def main() -> None:
    os.makedirs(LOG, exist_ok=True)
    for f in glob.glob(f"{LOG}/*"):
        os.remove(f)
    spark = (SparkSession.builder.master("local[2]")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
             .config("spark.sql.streaming.stateStore.providerClass",
                     "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(_Source)
    src = spark.readStream.format("time_stage_experiment").load()
    reuse = "--reuse" in sys.argv
    if reuse:
        src = src.repartition(2, "shard")
    times = src.where("role = 't'").groupBy("grp").applyInPandasWithState(
        _time_stage, ROWS, "n long", "append", GroupStateTimeout.NoTimeout)
    if reuse:
        times = times.repartition(2, "shard")
    out = times.unionByName(src.where("role = 'e'")).groupBy("shard").transformWithStateInPandas(
        _Shard(), "shard int, events long, ctis long", "Append", "None")
    query = (out.writeStream.format("memory").queryName("time_stage").outputMode("append")
             .option("checkpointLocation", tempfile.mkdtemp()).start())
    try:
        query.processAllAvailable()
        print(sorted(spark.table("time_stage").collect()))
        print("reads per input partition:",
              sorted(os.path.basename(f).split("-")[0] for f in glob.glob(f"{LOG}/*")))
        query.explain()
    finally:
        query.stop()


if __name__ == "__main__":
    main()
