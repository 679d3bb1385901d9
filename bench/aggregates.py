"""Benchmark: a keyed tumbling window's aggregates over a numeric field, in-process.

    python bench/aggregates.py [--events 1000000] [--keys 10] [--nulls 0.01] [--repeat 3]

The events (points 1 ms apart; ``key`` among ``--keys``; ``fvalue`` a float64, ``ivalue`` an
int64, ``--nulls`` of each null) are written once to a Parquet file. For each aggregate
(``count``, ``avg``/``max`` of the float, ``avg``/``sum`` of the integer) the query
``group_by("key")`` -> ``tumbling_window(1 s)`` -> ``aggregate`` runs on the in-process runtime
over that file (the Parquet adapter gives the payloads as typed columns, which the window
reads), into an output adapter that counts. The yardstick is pandas over the same file: one
``groupby(key, window)`` of the same aggregate (no CTIs, no micro-batches, no payloads: the
floor for the arithmetic). Each line of output is one JSON object: the system, the aggregate,
the median seconds of ``--repeat`` runs, events/s and the results; the last line the process's
peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

WINDOW_US = 1_000_000
AGGREGATES = {"count": ("count", None), "avg_float": ("avg", "fvalue"),
              "max_float": ("max", "fvalue"), "avg_int": ("avg", "ivalue"),
              "sum_int": ("sum", "ivalue")}


def generate(path: Path, events: int, keys: int, nulls: float, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    fvalue = rng.normal(20, 5, events)
    ivalue = rng.integers(0, 1000, events)
    pq.write_table(pa.table({
        "t": np.arange(events, dtype=np.int64) * 1000,
        "key": pa.array([f"k{i}" for i in rng.integers(0, keys, events)]),
        "fvalue": pa.array(fvalue, mask=rng.random(events) < nulls),
        "ivalue": pa.array(ivalue, mask=rng.random(events) < nulls),
    }), path)


class _Counting:
    """An output adapter (and its factory) that counts the events it is given."""

    rows = 0

    def create(self, config: str, shape: object) -> _Counting:
        return self

    def write(self, items: list, batch_id: int) -> None:
        _Counting.rows += sum(1 for i in items if hasattr(i, "payload"))

    def write_frame(self, frame: pd.DataFrame, batch_id: int) -> None:
        _Counting.rows += int((frame["kind"] != "cti").sum())

    def close(self) -> None:
        pass


def run_cti(path: Path, op: str, field: str | None) -> tuple[float, int]:
    from cti import (
        AdvanceTimeGenerationSettings,
        AdvanceTimeSettings,
        Application,
        CepStream,
        EventShape,
        agg,
        ticks,
    )
    from cti.io.parquet import ParquetInputAdapterFactory, ParquetInputConfig

    t0 = time.perf_counter()
    stream = CepStream.create(
        "events", ParquetInputAdapterFactory(), ParquetInputConfig(path, "t"),
        EventShape.POINT, AdvanceTimeSettings(AdvanceTimeGenerationSettings(
            1000, timedelta(0), advance_to_infinity_on_shutdown=True)),
        application=Application())
    made = agg.count() if op == "count" else getattr(agg, op)(field)
    query = stream.group_by("key").apply(
        lambda g: g.tumbling_window(ticks(WINDOW_US)).aggregate(value=made))
    _Counting.rows = 0
    query.to(_Counting(), "count").run("local")
    return time.perf_counter() - t0, _Counting.rows


def run_pandas(path: Path, op: str, field: str | None) -> tuple[float, int]:
    t0 = time.perf_counter()
    df = pq.read_table(path).to_pandas()
    window = df["t"] // WINDOW_US
    grouped = df.groupby([df["key"], window])
    out = grouped.size() if op == "count" else getattr(grouped[field], {
        "avg": "mean"}.get(op, op))()
    return time.perf_counter() - t0, len(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--nulls", type=float, default=0.01)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--aggregates", default=",".join(AGGREGATES))
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-agg-") as tmp:
        path = Path(tmp) / "events.parquet"
        generate(path, opts.events, opts.keys, opts.nulls)
        for name in opts.aggregates.split(","):
            op, field = AGGREGATES[name]
            for system, run in (("cti-local", run_cti), ("pandas", run_pandas)):
                runs = [run(path, op, field) for _ in range(opts.repeat)]
                seconds = statistics.median(s for s, _ in runs)
                print(json.dumps({"system": system, "aggregate": name, "events": opts.events,
                                  "keys": opts.keys, "run_s": round(seconds, 3),
                                  "events_per_s": round(opts.events / seconds),
                                  "results": runs[0][1]}), flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(json.dumps({"peak_rss_mb": peak}), flush=True)


if __name__ == "__main__":
    main()
