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


def per_minute():
    """Readings and mean temperature per device and minute."""
    settings = AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(10, delay=timedelta(seconds=30),
                                      advance_to_infinity_on_shutdown=True),
        policy=AdvanceTimePolicy.DROP)
    sensors = CepStream.create("sensors", MemoryInputAdapterFactory(), readings(),
                               EventShape.POINT, settings, application=Application())
    return sensors, sensors.group_by("dspl").apply(
        lambda g: g.tumbling_window(timedelta(minutes=1)).aggregate(
            n=agg.count(), temp=agg.avg("temp")))


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
    print(f"runtime: {args.runtime}")


if __name__ == "__main__":
    main()
