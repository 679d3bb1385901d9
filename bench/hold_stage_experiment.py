"""Experiment for "Output CTIs that depend on the events" (docs/spark-runtime.md): what a hold
stage after the shards costs, and does PySpark 4.3 run it chained after cti's stateful stage?

The bench's hopping-window query (spread over the shards by key) runs its operators as usual
(``SparkRuntime.query_frame``); its packed output rows then go, in one narrow ``mapInArrow``,
to a stage keyed by slot (``transformWithStateInPandas``): each row to the slot of its own
partition, and one small "level" row from each to every slot (``P`` per row: the ``S^2`` CTI
rows of the design). The stage keeps each slot's latest blob in a ``ValueState`` (as held
events would be) and emits what it got; the output goes to Spark's no-op sink. Against the
same query without the stage, at each shard count: seconds (and each micro-batch's: with
``--batches B`` the input comes in B micro-batches) and Spark's shuffle bytes.

    python bench/hold_stage_experiment.py --events 200000 --keys 100 --shards 1,4 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

sys.path.insert(0, str(Path(__file__).resolve().parent))

import data_ctis  # noqa: E402  (the query and data)
import run as bench  # noqa: E402

_ROUTED = pa.schema([("slot", pa.int32()), ("blob", pa.binary())])


def _routed(tasks: int, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each packed output row to its own partition's slot, and a level row to every slot."""
    from pyspark import TaskContext

    mine = TaskContext.get().partitionId()
    for batch in batches:
        blobs = batch.column(0).to_pylist()
        slots = [mine] * len(blobs) + [s for _ in blobs for s in range(tasks)]
        values = blobs + [None] * (len(blobs) * tasks)
        yield pa.RecordBatch.from_pydict({"slot": slots, "blob": values}, schema=_ROUTED)


class Hold(StatefulProcessor):
    """Keeps a slot's latest blob (as held events), reports rows and bytes received."""

    def init(self, handle: Any) -> None:
        from pyspark.sql.types import BinaryType, StructField, StructType

        self.held = handle.getValueState("held", StructType([StructField("b", BinaryType())]))

    def handleInputRows(self, key: tuple, rows: Iterator[pd.DataFrame], timerValues: Any
                        ) -> Iterator[pd.DataFrame]:
        n = size = levels = 0
        for frame in rows:
            blobs = [b for b in frame["blob"] if b is not None]
            n += len(blobs)
            size += sum(len(b) for b in blobs)
            levels += int(frame["blob"].isna().sum())
            if blobs:
                self.held.update((blobs[-1],))
        yield pd.DataFrame({"slot": [int(key[0])], "blobs": [n], "bytes": [size],
                            "levels": [levels]})

    def close(self) -> None:
        pass


def measure(spark: Any, data: Path, shards: int, hold: bool, repeat: int = 1,
            batches: int = 1, events: int = 0) -> dict[str, Any]:
    """A warm-up and ``repeat`` timed runs of the query, with or without the hold stage: the
    median seconds (and each run's), Spark's shuffle bytes and task run time per run."""
    from pyspark.sql import functions as F

    from cti.runtime.spark import SparkRuntime
    from cti.runtime.spark.partitioning import default_tasks

    seen: list[list[float]] = []

    def once() -> float:
        sizes = [-(-events // batches)] * batches if batches > 1 else None
        runtime = SparkRuntime(spark, shards=shards, batch_sizes=sizes)
        frame, _, _ = runtime.query_frame([data_ctis.build("hopping", data)])
        blobs = frame.where(F.col("role") == "op").select("blob")
        if hold:
            tasks = default_tasks(shards, max(1, spark.sparkContext.defaultParallelism))
            blobs = blobs.mapInArrow(partial(_routed, tasks), "slot int, blob binary").groupBy(
                "slot").transformWithStateInPandas(
                Hold(), "slot int, blobs long, bytes long, levels long", "Append", "None")
        checkpoint = tempfile.mkdtemp(prefix="bench-hold-")
        try:
            t0 = time.perf_counter()
            query = runtime._start(blobs.writeStream.format("noop").outputMode("append"),
                                   checkpoint)
            try:
                query.processAllAvailable()
            finally:
                query.stop()
            seen.append(bench.progress_seconds(query.recentProgress))
            return time.perf_counter() - t0
        finally:
            shutil.rmtree(checkpoint, ignore_errors=True)

    once()
    before = bench.stage_metrics(spark)
    runs = [once() for _ in range(repeat)]
    metrics = bench.per_run(bench.task_metrics(before, bench.stage_metrics(spark), 0.0), repeat)
    return {"shards": shards, "hold_stage": hold, "run_s": round(sorted(runs)[repeat // 2], 3),
            "runs_s": [round(r, 3) for r in runs], "batches_s": seen[-1],
            "shuffle_bytes": metrics["shuffle_bytes"],
            "task_run_s": metrics["task_run_s"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--keys", type=int, default=100)
    p.add_argument("--shards", default="1,4")
    p.add_argument("--repeat", type=int, default=3, help="timed runs (their median)")
    p.add_argument("--batches", type=int, default=1, help="micro-batches per run")
    args = p.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # (SPARK-NOTES: TWS needs it)
    root = Path(tempfile.mkdtemp(prefix="bench-hold-data-"))
    try:
        data = root / "events"
        bench.generate(args.events, args.keys, 0, 1, data)
        spark = bench.start_spark()
        for shards in map(int, args.shards.split(",")):
            for hold in (False, True):
                print(json.dumps({"events": args.events, "keys": args.keys,
                                  **measure(spark, data, shards, hold, args.repeat, args.batches,
                                           args.events)}), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
