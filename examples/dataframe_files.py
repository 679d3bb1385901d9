"""A Spark DataFrame in, a Spark DataFrame out: toll-booth entries from a directory of JSON-lines
files read by Spark's own file source, cars per booth per 3 minutes written by Spark's own
Parquet sink.

- ``spark.readStream.json(directory)``: the TollApp entries, split into four files that
  arrive one after the other (``maxFilesPerTrigger=1``: one file per micro-batch). Each row
  arrives at its file's modification time (Spark's ``_metadata.file_modification_time``); the
  file's name and the licence plate order the rows of one file.
- ``CepStream.from_dataframe(...)`` binds the stream to the DataFrame's columns: ``EntryTime``
  is the event time, the rows are points, CTIs are generated with a 5-minute delay.
- ``.to_dataframe(payload_schema=...)`` is the query's output as a streaming DataFrame (one row
  per event and per CTI, times in ticks), written with ``writeStream`` to Parquet.

The result read back from Parquet equals the same query run in-process on the same files read
as a batch DataFrame (``spark.read``), whatever the micro-batches.

Run: ``python examples/dataframe_files.py`` (``--runtime local``: the in-process run only).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from datetime import timedelta
from pathlib import Path

from cti import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeSettings,
    Application,
    CepStream,
    PointEvent,
    agg,
    to_datetime,
)
from cti.runtime.local import LocalRuntime
from cti.runtime.spark import SparkRuntime, get_spark

DATA = Path(__file__).resolve().parents[1] / "data" / "tollapp" / "Entry.json"
SCHEMA = "EntryTime timestamp, TollId long, LicensePlate string, State string, TollAmount double"
# A CTI after every event, 5 minutes behind the latest entry; none at infinity at the end (a
# live directory never ends), so both runs release the same windows.
SETTINGS = AdvanceTimeSettings(AdvanceTimeGenerationSettings(
    1, delay=timedelta(minutes=5), advance_to_infinity_on_shutdown=False))


def write_files(directory: Path) -> None:
    """The entries in four JSON-lines files (a quarter of them each, in order), each modified a
    minute after the one before."""
    rows = json.loads(DATA.read_text(encoding="utf-8"))
    directory.mkdir()
    n = len(rows)
    for k in range(4):
        path = directory / f"entries-{k}.json"
        part = rows[k * n // 4:(k + 1) * n // 4]
        path.write_text("".join(json.dumps(r) + "\n" for r in part))
        os.utime(path, (1_700_000_000 + 60 * k,) * 2)


def cars_per_booth(frame):
    entries = CepStream.from_dataframe(
        "entries", frame, "point", start="EntryTime",
        arrival="arrived", order_by=["file", "LicensePlate"],
        payload=["TollId", "LicensePlate", "TollAmount"],
        advance_time_settings=SETTINGS, application=Application())
    return entries.group_by("TollId").apply(
        lambda booth: booth.tumbling_window(timedelta(minutes=3)).aggregate(
            cars=agg.count(), tolls=agg.sum("TollAmount")))


def with_file_columns(frame):
    return frame.selectExpr("*", "_metadata.file_modification_time AS arrived",
                            "_metadata.file_name AS file")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="spark", choices=["spark", "local"])
    args = parser.parse_args()
    spark = get_spark()
    work = Path(tempfile.mkdtemp(prefix="cti-dataframe-files-"))
    write_files(work / "in")

    batch = with_file_columns(spark.read.schema(SCHEMA).json(str(work / "in")))
    expected = sorted((e.start, e.payload["TollId"], e.payload["cars"])
                      for e in cars_per_booth(batch).collect(LocalRuntime())
                      if isinstance(e, PointEvent))
    print("== cars per booth per 3 minutes (in-process, from a batch DataFrame)")
    for end, booth, cars in expected:
        print(f"  window ending {to_datetime(end):%H:%M} UTC  booth {booth}: {cars} cars")
    if args.runtime == "local":
        return

    live = with_file_columns(spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
                             .json(str(work / "in")))
    out = cars_per_booth(live).to_dataframe(SparkRuntime(spark),
                                            payload_schema="TollId long, cars long, tolls double")
    writer = (out.where("kind != 'cti'").writeStream.format("parquet")
              .option("path", str(work / "out"))
              .option("checkpointLocation", str(work / "checkpoint")).start())
    writer.processAllAvailable()
    batches = len(writer.recentProgress)
    writer.stop()
    rows = spark.read.parquet(str(work / "out")).orderBy("start", "TollId").collect()
    got = [(r.start, r.TollId, r.cars) for r in rows]
    print(f"== the same on Spark: {len(got)} rows in Parquet, columns "
          f"{spark.read.parquet(str(work / 'out')).columns}, {batches} micro-batches")
    assert got == expected, (got, expected)
    print("Spark's output equals the in-process run")


if __name__ == "__main__":
    main()
