"""A long-running query over Spark's rate source: started, stopped, resumed from its checkpoint.

Spark's ``rate-micro-batch`` source makes 30 rows per micro-batch (``value`` 0, 1, 2, ...), the
rows of micro-batch b stamped ``START + b`` seconds: a steady feed from three sensors
(``value % 3``). ``CepStream.from_dataframe`` binds it (``timestamp`` is both the event time
and the arrival time, ``value`` orders the rows); the query counts each sensor's readings per
2-second tumbling window and writes them to a JSON-lines directory.

``query.start(SparkRuntime(checkpoint_location=...))`` returns a ``RunningQuery`` handle: the
query runs until ``stop()``, reporting cti's metrics per micro-batch in ``progress``. Stopped
after a few micro-batches and started again with the same call, it resumes from the
checkpoint: every window is written once, with all its readings (20 per sensor).

Run: ``python examples/dataframe_rate.py`` (``--runtime local``: the same rows as a batch
DataFrame, in-process).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cti import AdvanceTimeSettings, Application, CepStream, PointEvent, agg, to_datetime
from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
from cti.runtime.local import LocalRuntime
from cti.runtime.spark import SparkRuntime, get_spark

ROWS = 30  # per micro-batch: 10 readings of each sensor per second
START = datetime(2024, 1, 1, tzinfo=UTC)


def counts(frame):
    readings = CepStream.from_dataframe(
        "readings", frame, "point", start="timestamp", arrival="timestamp", order_by="value",
        payload=["sensor", "value"],
        advance_time_settings=AdvanceTimeSettings.increasing_start_time(),
        application=Application())
    return readings.group_by("sensor").apply(
        lambda s: s.tumbling_window(timedelta(seconds=2)).aggregate(readings=agg.count()))


def windows(items) -> Counter:
    """(window end, sensor) -> how many times it was written, and each one's count."""
    found = Counter()
    for e in items:
        if isinstance(e, PointEvent):
            assert e.payload["readings"] == 2 * ROWS // 3, e  # all of the window's readings
            found[(e.start, e.payload["sensor"])] += 1
    return found


def run_for(query, runtime, batches: int) -> int:
    """Start the query, let it run ``batches`` micro-batches (or a few more), stop it; how many
    readings it accepted."""
    handle = query.start(runtime)
    while len(handle.progress) < batches and handle.is_active:
        time.sleep(0.2)
    handle.stop()
    return sum(p["readings.accepted"] for p in handle.progress)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="spark", choices=["spark", "local"])
    args = parser.parse_args()
    spark = get_spark()
    start_ms = int(START.timestamp() * 1000)

    if args.runtime == "local":  # six micro-batches' rows, as one batch DataFrame
        rows = spark.range(6 * ROWS).selectExpr(
            f"timestamp_millis({start_ms} + (id DIV {ROWS}) * 1000) AS timestamp",
            "id AS value", "id % 3 AS sensor")
        found = windows(counts(rows).collect(LocalRuntime()))
        print(f"in-process: {len(found)} (window, sensor) results, 20 readings each")
        return

    work = Path(tempfile.mkdtemp(prefix="cti-dataframe-rate-"))
    rate = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", ROWS)
            .option("startTimestamp", start_ms).option("advanceMillisPerBatch", 1000).load()
            .selectExpr("timestamp", "value", "value % 3 AS sensor"))
    query = counts(rate).to(JsonLinesOutputAdapterFactory(), str(work / "out"))
    runtime = SparkRuntime(spark, checkpoint_location=str(work / "checkpoint"))
    first = run_for(query, runtime, 3)
    before = windows(read_json_lines_output(work / "out"))
    print(f"first run: {first} readings accepted, {len(before)} results written; stopped")
    second = run_for(query, runtime, 3)  # the same call resumes from the checkpoint
    after = windows(read_json_lines_output(work / "out"))
    print(f"resumed: {second} more readings accepted, {len(after)} results in all")
    ends = sorted({end for end, _ in after})
    assert set(after.values()) == {1}, "every (window, sensor) written once"
    assert set(before) <= set(after) and len(after) > len(before)
    assert all(b - a == 2_000_000 for a, b in zip(ends, ends[1:], strict=False)), ends
    assert all((end, s) in after for end in ends for s in range(3))  # no window lost
    print(f"windows ending {to_datetime(ends[0]):%H:%M:%S} to {to_datetime(ends[-1]):%H:%M:%S}"
          ": each sensor's 20 readings, each window once")


if __name__ == "__main__":
    main()
