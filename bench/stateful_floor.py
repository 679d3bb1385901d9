"""What any stateful Python stage costs a small micro-batch, beside plain Spark's join.

    python bench/stateful_floor.py [--events 20000] [--keys 1000] [--batches 20]
                                   [--reference 10000] [--rounds 3]

Over the same Parquet files as ``bench/run.py --query reference`` (one file per micro-batch),
in one Spark session, alternating for ``--rounds`` rounds after a warm-up of each:

- ``plain``: plain Spark's stream-static join of the bench (``run._native_run``), to the
  ``noop`` sink;
- ``floor``: the same files into the least a query with a stateful Python stage does: rows
  hashed to two slots, ``applyInPandasWithState`` per slot with a function that only counts
  the rows into a one-number state and yields one row, to the ``noop`` sink. No source in
  Python, no engine, no join, no metrics;
- ``grouped``: the same without the state (``applyInPandas``: the shuffle and the Python
  stage), and ``python``: the rows through Python without a shuffle (``mapInArrow``, one
  row out per batch of rows): where ``floor``'s time goes.

cti's Spark runtime is a stage of this kind and more, so ``floor``'s time over ``plain``'s is a
bound below what cti-spark can reach on the same micro-batches. Prints each run and one JSON
line with the medians.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import run as bench  # noqa: E402

HDFS_STORE = ("org.apache.spark.sql.execution.streaming.state."
              "HDFSBackedStateStoreProvider")


def _count(key: tuple, frames: Iterator[Any], state: Any) -> Iterator[Any]:
    """The stateful function: the slot's rows counted into its state, one row out."""
    import pandas as pd

    seen = sum(len(f) for f in frames) + (state.get[0] if state.exists else 0)
    state.update((seen,))
    yield pd.DataFrame({"slot": [int(key[0])], "seen": [seen]})


def _grouped(key: tuple, frame: Any) -> Any:
    """``grouped``'s function: the slot's rows counted, one row out."""
    import pandas as pd

    return pd.DataFrame({"slot": [int(key[0])], "seen": [len(frame)]})


def _batches(batches: Iterator[Any]) -> Iterator[Any]:
    """``python``'s function: each Arrow batch of rows counted, one row out."""
    import pyarrow as pa

    for b in batches:
        yield pa.RecordBatch.from_pydict({"slot": pa.array([0], pa.int32()),
                                          "seen": pa.array([b.num_rows], pa.int64())})


def floor_run(spark: Any, data: Path, variant: str = "floor"
              ) -> tuple[float, list[dict[str, Any]]]:
    """The ``variant`` query (``floor``, ``grouped``, ``python``) over ``data``: seconds
    taken and its progress reports."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    t0 = time.perf_counter()
    rows = (spark.readStream.schema("time LONG, key STRING, value LONG")
            .option("maxFilesPerTrigger", 1).parquet(str(data)))
    slotted = rows.withColumn("slot", F.pmod(F.hash("key"), F.lit(2)))
    out = "slot INT, seen LONG"
    if variant in ("floor", "floor-hdfs"):
        counted = slotted.groupBy("slot").applyInPandasWithState(
            _count, out, "seen LONG", "append", GroupStateTimeout.NoTimeout)
    elif variant == "grouped":
        counted = slotted.groupBy("slot").applyInPandas(_grouped, out)
    else:
        counted = rows.mapInArrow(_batches, out)
    store = {"spark.sql.streaming.stateStore.providerClass": HDFS_STORE}
    return bench.drained(counted, t0, store if variant == "floor-hdfs" else None)


def _line(elapsed: float, progress: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = bench.progress_seconds(progress)
    return {"run_s": round(elapsed, 3), "batches": len(seconds),
            "median_batch_s": round(statistics.median(seconds[1:]), 4) if seconds[1:] else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=20_000)
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--reference", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-floor-"))
    try:
        data = root / "events"
        bench.generate(args.events, args.keys, 1, args.batches, data)
        bench.generate_reference(args.reference, data)
        spark = bench.start_spark()
        systems = {"plain": lambda: bench._native_run(spark, data, query="reference"),
                   **{v: lambda v=v: floor_run(spark, data, v)
                      for v in ("floor", "floor-hdfs", "grouped", "python")}}
        for run in systems.values():  # (warm-up: the JIT, the first query's start)
            run()
        lines: dict[str, list[dict[str, Any]]] = {name: [] for name in systems}
        for r in range(args.rounds):
            for name, run in systems.items():
                lines[name].append(_line(*run()))
                print(f"[floor] round {r} {name}: {json.dumps(lines[name][-1])}",
                      file=sys.stderr)
        summary = {name: {"run_s": statistics.median(x["run_s"] for x in runs),
                          "median_batch_s": statistics.median(x["median_batch_s"] for x in runs)}
                   for name, runs in lines.items()}
        summary["ratio"] = round(summary["floor"]["run_s"] / summary["plain"]["run_s"], 3)
        print(json.dumps(summary))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
