"""One query spread over shards on Spark: each shard gets its own keys' events, and the CTIs.

The readings of Stream Analytics' sample sensor feed (219 readings of 3 devices, ``dspl`` names
the device) as point events at ``time``, a CTI every 10 readings 30 s behind the newest
(``AdvanceTimeGenerationSettings(10, delay)``), readings behind the CTI dropped. The query
counts each device's readings and averages their temperature per minute
(``group_by("dspl")``), and writes to a JSON-lines output folder.

On Spark, ``SparkRuntime(shards=3)`` spreads the query over three shards by device. The input
is an adapter that yields only events (``events_only``, docs/adapters.md), so each shard
receives only its own devices' readings, plus one row per 10 readings from which it computes
every CTI itself (docs/spark-runtime.md, "Time once, events once"); the output folder gets one
file per shard and micro-batch, written in parallel, and ``read_json_lines_output`` merges
them back into the output's order. The result is the same with one shard, and in process.

The shards are fixed for a checkpoint's life; the tasks that run them are not. The last part
reads the readings from a live JSON-lines file: it runs on 4 shards and 4 tasks until half the
readings are in, stops, and restarts from its checkpoint on 2 tasks
(``SparkRuntime(parallelism=2)``: the checkpoint's state is re-spread first) once the rest
have come; the output is the same (docs/spark-runtime.md, "Parallelism").

Run: ``python examples/scale_out.py`` (embedded Spark, 1 and 3 shards; ``--runtime local``
runs in process only).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

from cti import (
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Application,
    CepStream,
    Cti,
    EventShape,
    PointEvent,
    agg,
    to_datetime,
    to_ticks,
)
from cti.io.memory import MemoryInputAdapterFactory
from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
from cti.runtime.local import LocalRuntime

DATA = Path(__file__).resolve().parents[1] / "data" / "sensors" / "SampleSensorData.json"


def readings() -> list[PointEvent]:
    """The readings in file order (``time`` has 7 fractional digits: cut to microseconds)."""
    rows = json.loads(DATA.read_text(encoding="utf-8-sig"))
    out = []
    for row in rows:
        whole, _, fraction = row["time"].removesuffix("Z").partition(".")
        t = datetime.fromisoformat(f"{whole}.{(fraction + '000000')[:6]}+00:00")
        out.append(PointEvent(to_ticks(t), {"dspl": row["dspl"], "temp": row["temp"]}))
    return out


SETTINGS = AdvanceTimeSettings(
    AdvanceTimeGenerationSettings(10, delay=timedelta(seconds=30),
                                  advance_to_infinity_on_shutdown=True),
    policy=AdvanceTimePolicy.DROP)


def by_device(sensors: CepStream):
    """Readings and mean temperature per device and minute."""
    return sensors.group_by("dspl").apply(
        lambda g: g.tumbling_window(timedelta(minutes=1)).aggregate(
            n=agg.count(), temp=agg.avg("temp")))


def per_minute():
    """The sensor stream and the query over it."""
    sensors = CepStream.create("sensors", MemoryInputAdapterFactory(), readings(),
                               EventShape.POINT, SETTINGS, application=Application())
    return sensors, by_device(sensors)


def per_minute_live(path: Path):
    """The same query over the readings of a live JSON-lines file (``t`` in ticks)."""
    from cti.io.files import FileInputConfig, JsonLinesInputAdapterFactory

    config = FileInputConfig(str(path), start_column="t", time_format="ticks", live=True)
    sensors = CepStream.create("sensors", JsonLinesInputAdapterFactory(), config,
                               EventShape.POINT, SETTINGS, application=Application())
    return by_device(sensors)


def append_readings(path: Path, part: list[PointEvent]) -> None:
    with path.open("a") as f:
        f.writelines(json.dumps({"t": e.start, **e.payload}) + "\n" for e in part)


def written(runtime, folder: Path) -> list:
    """Run the query into a JSON-lines output folder; what the folder holds, in order."""
    _, query = per_minute()
    query.to(JsonLinesOutputAdapterFactory(), str(folder)).run(runtime)
    return read_json_lines_output(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="spark", choices=["spark", "local"])
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cti-scale-out-"))
    sensors, _ = per_minute()
    accepted = sensors.run(LocalRuntime())["sensors"].metrics["accepted"]
    want = written(LocalRuntime(batch_sizes=[40]), root / "local")
    events = [i for i in want if not isinstance(i, Cti)]
    assert sum(e.payload["n"] for e in events) == accepted  # every kept reading counted once
    for e in events[:6]:
        print(f"{to_datetime(e.start):%H:%M} {e.payload['dspl']:24} n={e.payload['n']:2} "
              f"temp={e.payload['temp']:.1f}")
    print(f"... {len(events)} (device, minute) rows of {accepted} readings kept "
          f"({len(readings()) - accepted} dropped behind a CTI)")
    if args.runtime == "spark":
        from cti.runtime.spark import SparkRuntime

        for shards in (1, 3):
            folder = root / f"spark-{shards}"
            got = written(SparkRuntime(batch_sizes=[40], shards=shards), folder)
            assert got == want, f"{shards} shards differ from the in-process run"
            files = sorted(p.name for p in folder.glob("batch-*.jsonl"))
            print(f"spark, {shards} shard(s): the same {len(got)} items; {len(files)} files, "
                  f"e.g. {', '.join(files[:3])}")
        # Stop half-way on 4 tasks, restart on 2: the checkpoint's state is re-spread.
        live, folder, checkpoint = root / "live.jsonl", root / "live-out", root / "checkpoint"
        half = len(readings()) // 2
        append_readings(live, readings()[:half])
        query = per_minute_live(live).to(JsonLinesOutputAdapterFactory(), str(folder))
        query.run(SparkRuntime(batch_sizes=[40], shards=4, parallelism=4,
                               checkpoint_location=str(checkpoint)))
        append_readings(live, readings()[half:])  # the rest, while the job is down
        query.run(SparkRuntime(batch_sizes=[40], parallelism=2,
                               checkpoint_location=str(checkpoint)))
        got = read_json_lines_output(folder)
        # A live input has no end, so no final CTI: the last minutes stay open.
        assert got == per_minute_live(live).collect(LocalRuntime()), \
            "the restart on 2 tasks differs from the in-process run"
        print(f"spark, 4 shards: stopped on 4 tasks, restarted on 2: the same {len(got)} items "
              "as in process (the last minutes still open: a live input has no end)")
    print(f"runtime: {args.runtime}")


if __name__ == "__main__":
    main()
