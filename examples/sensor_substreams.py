"""Sensor readings from three devices: one watermark for the stream vs one per device (SPEC 7).

The data is Stream Analytics' sample sensor feed (219 readings; ``dspl`` names the device,
``time`` is when it measured). Readings of each device arrive partly out of order. The file has
no arrival time, so this example stamps each reading with the *running maximum* of ``time`` in
file order: what a gateway that replays the file in order, stamping each reading with its
clock driven by the data, would record. With that clock nothing is ever early.

The same readings are bound twice as point streams, with the same tolerances:

- ``watermark``: one timeline for the stream (Stream Analytics' default): a reading more than
  ``out_of_order_tolerance`` behind the newest reading of *any* device is moved forward.
- ``substreams``: ``over="dspl"`` (``TIMESTAMP BY time OVER dspl``): each device has its own
  timeline, so a reading is only compared with the newest reading of its own device.

Run: ``python examples/sensor_substreams.py`` (in-process; ``--runtime spark`` runs both streams
in one Spark streaming query and also prints the metrics Spark reports per micro-batch).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cti import (
    Application,
    Arriving,
    CepStream,
    Cti,
    EventOrderingPolicy,
    EventShape,
    PointEvent,
    RunResult,
    StreamResult,
    to_datetime,
    to_ticks,
)
from cti.io.memory import MemoryInputAdapterFactory
from cti.runtime.local import LocalRuntime

DATA = Path(__file__).resolve().parents[1] / "data" / "sensors"
LATE = timedelta(seconds=60)  # a reading may arrive up to a minute after it was measured
OUT_OF_ORDER = timedelta(seconds=30)  # and up to 30 s behind newer ones (of its timeline)
S = 1_000_000  # ticks per second


def parse_time(text: str) -> datetime:
    """``2014-12-11T02:24:56.8850110Z``: 7 fractional digits, trimmed to microseconds."""
    text = text.removesuffix("Z")
    whole, _, fraction = text.partition(".")
    return datetime.fromisoformat(f"{whole}.{(fraction + '000000')[:6]}+00:00")


def readings() -> list[Arriving]:
    """The readings in file order, each arriving at the running max of ``time`` so far."""
    rows = json.loads((DATA / "SampleSensorData.json").read_text(encoding="utf-8-sig"))
    items, clock = [], None
    for n, row in enumerate(rows):
        t = to_ticks(parse_time(row["time"]))
        clock = t if clock is None else max(clock, t)
        items.append(Arriving(PointEvent(t, {"n": n, **row}), clock))
    return items


def bind(name: str, items: list[Arriving], app: Application, over: str | None) -> CepStream:
    policy = EventOrderingPolicy(late_arrival_tolerance=LATE, out_of_order_tolerance=OUT_OF_ORDER,
                                 early_arrival_window=None, over=over)
    return CepStream.create(name, MemoryInputAdapterFactory(), items, EventShape.POINT,
                            application=app, event_ordering_policy=policy)


def show(t: int | None) -> str:
    return "-" if t is None else to_datetime(t).strftime("%H:%M:%S.%f")[:-3]


def secs(ticks: int | None) -> str:
    return "-" if ticks is None else f"{ticks / S:.1f}s"


def per_device(res: StreamResult, devices: list[str]) -> dict[str, dict[str, Any]]:
    """Per device: readings adjusted (by final reason), dropped, and how far they were moved."""
    out = {d: {"adjusted": Counter(), "dropped": 0, "moved": 0} for d in devices}
    for d in res.diagnostics:
        row = out[d.payload["dspl"]]
        if d.status == "adjusted":
            row["adjusted"][d.reason] += 1
            row["moved"] += d.start - d.original_start
        elif d.status == "dropped":
            row["dropped"] += 1
    return out


def report(res: StreamResult, devices: list[str]) -> None:
    print(f"\n== {res.name}: {res.metrics}")
    print(f"   {'device':24} {'adjusted':>8} {'(final rule: late/out_of_order)':>32} "
          f"{'dropped':>7} {'moved in total':>15}")
    for dev, row in per_device(res, devices).items():
        adj = row["adjusted"]
        print(f"   {dev:24} {sum(adj.values()):8} {adj['late']:>21}/{adj['out_of_order']:<10} "
              f"{row['dropped']:7} {secs(row['moved']):>15}")
    snap = res.ordering
    print(f"   arrival clock {show(snap['arrival_clock'])}, policy CTI {show(snap['cti'])}")
    for tid, tl in snap["timelines"].items():
        label = json.loads(tid) if tid.startswith('"') else (tid or "(the whole stream)")
        print(f"   timeline {label:24} watermark {show(tl['watermark'])} "
              f"delay {secs(tl['watermark_delay']):>6}  input {tl['input']:3} "
              f"late {tl['late']:3} out_of_order {tl['out_of_order']:3}")
    stuck = res.not_progressing
    print("   not progressing:", ", ".join(f"{k} since {show(v['last_arrival'])}"
                                           for k, v in stuck.items()) or "none (every timeline "
          f"delivered within the last {LATE.seconds} s of the arrival clock)")


def check(res: StreamResult, n_input: int) -> None:
    """What must hold whatever the tolerances."""
    m = res.metrics
    events = [i for i in res.items if not isinstance(i, Cti)]
    assert m["accepted"] + m["adjusted"] + m["dropped"] == n_input, m
    seen = sorted([e.payload["n"] for e in events] + [d.payload["n"] for d in res.dropped])
    assert seen == list(range(n_input)), "every reading is output or reported dropped, once"
    timelines = res.ordering["timelines"].values()
    for status in ("accepted", "adjusted", "dropped"):
        assert sum(tl[status] for tl in timelines) == m[status]
    by_device: dict[str, list[int]] = {}
    for e in events:
        by_device.setdefault(e.payload["dspl"], []).append(e.start)
    for dev, starts in by_device.items():
        assert starts == sorted(starts), f"{res.name}: {dev} out of timestamp order"
    ctis = [i.time for i in res.items if isinstance(i, Cti)]
    assert ctis == sorted(set(ctis)), "CTIs strictly increase"


def print_spark_progress(progress: list[dict[str, Any]], names: list[str]) -> None:
    """Spark's observedMetrics["cti"]: one dict per micro-batch, ``<stream>.<metric>``; the
    counts are the batch's own, ``late``/``out_of_order`` by the rule that set the timestamp."""
    print(f"\n== Spark observedMetrics, {len(progress)} micro-batches")
    for name in names:
        for k, batch in enumerate(progress):
            counts = " ".join(f"{m}={batch.get(f'{name}.{m}') or 0}" for m in
                              ("accepted", "adjusted", "dropped", "late", "out_of_order", "cti"))
            print(f"   {name:10} batch {k}: {counts}; watermark "
                  f"{show(batch.get(f'{name}.watermark'))}, arrival clock "
                  f"{show(batch.get(f'{name}.arrival_clock'))}, watermark_delay "
                  f"{secs(batch.get(f'{name}.watermark_delay'))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="local", choices=["local", "spark"])
    args = parser.parse_args()

    items = readings()
    devices = sorted({i.item.payload["dspl"] for i in items})
    app = Application("sensors")
    streams = [bind("watermark", items, app, None), bind("substreams", items, app, "dspl")]
    groups = [s.ingress_group() for s in streams]  # no imports: one group per stream
    local: list[RunResult] = [LocalRuntime().run(g) for g in groups]
    results = local
    runtime = None
    if args.runtime == "spark":
        from cti.runtime.spark import SparkRuntime

        runtime = SparkRuntime(batch_sizes=[100])  # micro-batches of at most 100 readings
        results = runtime.run_groups(groups)  # both streams in one streaming query
        for spark_res, local_res in zip(results, local, strict=True):
            assert spark_res == local_res, "Spark and in-process results agree"

    print(f"{len(items)} readings from {len(devices)} devices, arrival = running max of `time`; "
          f"late_arrival_tolerance {LATE.seconds} s, out_of_order_tolerance "
          f"{OUT_OF_ORDER.seconds} s, no early rule, action ADJUST")
    watermark, substreams = results[0]["watermark"], results[1]["substreams"]
    for res in (watermark, substreams):
        report(res, devices)
        check(res, len(items))

    adjusted_w = {d.payload["n"] for d in watermark.adjusted}
    adjusted_s = {d.payload["n"] for d in substreams.adjusted}
    # A device's newest reading is never newer than the stream's newest, so its watermark is
    # never higher: whatever substreams adjust, the single watermark adjusts too.
    assert adjusted_s <= adjusted_w
    print(f"\nsubstreams adjusted {len(adjusted_s)} readings, the single watermark "
          f"{len(adjusted_w)} ({len(adjusted_w - adjusted_s)} only there: readings that were "
          "in order for their device but behind another device's newest)")
    if runtime is not None:
        print_spark_progress(runtime.progress, [s.name for s in streams])
    print(f"runtime: {args.runtime}")


if __name__ == "__main__":
    main()
