"""Benchmark: hopping-window count per key with bounded disorder (or another query of
``bench/queries.py``: snapshot and count windows, TopK, long windows, a join with reference
data), on three systems.

    python bench/run.py --events 200000 --keys 100 [--systems cti-spark,spark-native,cti-local]
                        [--batches 1] [--seed 0] [--cti-input parquet|memory] [--key-rate HZ]
                        [--query window[,snapshot,count,topk] | long-window | reference]
                        [--reference R]

The events are generated once (deterministic from the seed) into Parquet files; each system
then runs in its own subprocess, so its peak memory is its own. Each prints one JSON line on
stdout; progress goes to stderr. See bench/README.md for what is measured and how.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.measure import (  # noqa: E402  (the repository on the path first)
    TreeMemory,
    per_run,
    sampler_cpu_s,
    stage_metrics,
    task_metrics,
    tree_cpu_s,
)
from bench.queries import (  # noqa: E402
    ALONE,
    FLOOR,
    HOP,
    NATIVE,
    QUERIES,
    WINDOW,
    cti_query,
    native_query,
    windows,
)

SYSTEMS = ("cti-spark", "spark-native", "cti-local")  # run by default
YARDSTICKS = ("arrow-floor",)  # run only when named in --systems
BASE_TICKS = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z in microseconds
MEAN_STEP_US = 1_000  # events ~1 ms apart on average (without --key-rate)
MAX_DISORDER_US = 50_000  # each event up to 50 ms earlier than its ordered time
DELAY_US = 2 * MAX_DISORDER_US  # watermark / CTI delay: > max disorder, so nothing is late
CTI_EVERY = 1_000  # a CTI every 1000 events
CTI_SPAN = timedelta(seconds=1)  # or (--cti-by span) a CTI every second of event time
LATE = timedelta(seconds=1)  # --cti-by order...: the late-arrival tolerance (> max disorder)
WARMUP_EVENTS = 200  # the Spark systems' warm-up query (excluded from events_per_s)
EOS_KEY = None  # the end-of-stream row (spark-native only) has a NULL key
EOS_AFTER_US = 7_200_000_000  # its time: 2 hours after the last event, past every window


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# ---- data -----------------------------------------------------------------------------------


def generate(n: int, keys: int, seed: int, batches: int, out: Path,
             key_rate: float | None = None) -> None:
    """Write ``n`` point events as ``batches`` Parquet files ``out/part-XXXXX.parquet``.

    Columns: ``time`` (int64 ticks, microseconds since the epoch), ``key`` (string ``k<i>``),
    ``value`` (int64). Times are an ordered sequence minus a jitter uniform in [0, 50 ms]. Its
    steps are uniform in [0, 2 ms] (1,000 events per second, shared by all keys), or, with
    ``key_rate``, uniform in [0, 2 / (keys * key_rate) s] (``key_rate`` events per second per
    key, so each key's events per window do not depend on the number of keys). The last file
    ends with one end-of-stream row (NULL key, time 2 hours after the last event): only
    spark-native reads it, to push its watermark past every window (Spark has no "advance to
    infinity on shutdown"); its own windows end after it, so they never close and never reach
    the output. The cti systems skip it.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    if key_rate is None:
        steps = rng.integers(0, 2 * MEAN_STEP_US + 1, n, dtype=np.int64)
    else:
        steps = rng.uniform(0, 2e6 / (keys * key_rate), n)
    ordered = BASE_TICKS + np.round(np.cumsum(steps)).astype(np.int64)
    times = ordered - rng.integers(0, MAX_DISORDER_US + 1, n, dtype=np.int64)
    key_ids = rng.integers(0, keys, n)
    key_names = np.char.add("k", key_ids.astype(str)).astype(object)
    values = rng.integers(0, 1_000, n, dtype=np.int64)
    out.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, n, batches + 1).astype(int)
    now = time.time() - batches - 10
    for b in range(batches):
        lo, hi = bounds[b], bounds[b + 1]
        t, k, v = times[lo:hi], list(key_names[lo:hi]), values[lo:hi]
        if b == batches - 1:
            t = np.append(t, int(times.max()) + EOS_AFTER_US)
            k = [*k, EOS_KEY]
            v = np.append(v, 0)
        table = pa.table({"time": pa.array(t, pa.int64()), "key": pa.array(k, pa.string()),
                          "value": pa.array(v, pa.int64())})
        path = out / f"part-{b:05d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (now + b, now + b))  # file streams take files in modification order
    # The cti systems read the same events (no end-of-stream row) from one file, with their
    # arrival times for an event-ordering policy (--cti-by order...): the ordered time.
    pq.write_table(pa.table({"time": pa.array(times, pa.int64()),
                             "key": pa.array(list(key_names), pa.string()),
                             "value": pa.array(values, pa.int64()),
                             "arrival": pa.array(ordered, pa.int64())}), cti_file(out))


def cti_file(data: Path) -> Path:
    return data.parent / f"{data.name}-cti.parquet"


def reference_file(data: Path) -> Path:
    return data.parent / f"{data.name}-reference.csv"


def generate_reference(rows: int, data: Path) -> None:
    """``rows`` reference rows (``--query reference``) beside ``data``, a CSV file with a
    header: ``key`` (``k<i>``, the events' keys first) and ``owner``, some text as a
    registration list holds (about 60 bytes a row)."""
    with open(reference_file(data), "w") as f:
        f.write("key,owner\n")
        f.writelines(f"k{i},Owner {i} of 221B Baker Street; registered {2000 + i % 25}\n"
                     for i in range(rows))


def load_events(data: Path) -> list[Any]:
    """The events of every data file as cti ``PointEvent``s, in file order (EOS row skipped)."""
    import pyarrow.parquet as pq

    from cti import PointEvent

    events: list[Any] = []
    for path in sorted(data.glob("part-*.parquet")):
        cols = pq.read_table(path).to_pydict()
        events += [PointEvent(t, {"key": k, "value": v})
                   for t, k, v in zip(cols["time"], cols["key"], cols["value"], strict=True)
                   if k is not EOS_KEY]
    return events


# ---- systems (each runs in its own child process) -------------------------------------------


def start_spark() -> Any:
    """A local[2] session with 2 shuffle partitions and UI off."""
    from cti.runtime.spark import get_spark

    return get_spark(master="local[2]", shuffle_partitions=2)


def _native_run(spark: Any, data: Path, where: str = "none", query: str = "window"
                ) -> tuple[float, list[dict[str, Any]]]:
    """One spark-native streaming query over ``data``: seconds taken and its progress reports.
    ``where`` other than "none": the filter ``WHERE_KEEPS``, as a column expression.
    ``query``: a query of ``bench/queries.py`` that plain Spark has (``native_query``; for
    "reference" the reference rows are a static DataFrame, Spark's stream-static join)."""
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    rows = (spark.readStream.schema("time LONG, key STRING, value LONG")
            .option("maxFilesPerTrigger", 1).parquet(str(data)))
    if where != "none":  # (not the end-of-stream row, whose time ends the windows)
        rows = rows.filter(F.col("key").isNull() | (F.col("value") % 3 != 0))
    static = spark.read.option("header", True).csv(str(reference_file(data))) \
        if query == "reference" else None
    return drained(native_query(query, rows, DELAY_US // 1000, static), t0)


def drained(frame: Any, t0: float, conf: dict[str, str] | None = None
            ) -> tuple[float, list[dict[str, Any]]]:
    """A streaming DataFrame run to the ``noop`` sink until all available input is processed
    (a fresh checkpoint; ``conf``: session settings while the query starts): seconds since
    ``t0`` and its progress reports."""
    spark, conf = frame.sparkSession, conf or {}
    checkpoint = tempfile.mkdtemp(prefix="bench-noop-ckpt-")
    try:
        before = {key: spark.conf.get(key, None) for key in conf}
        for key, value in conf.items():
            spark.conf.set(key, value)
        try:
            query = (frame.writeStream.format("noop").outputMode("append")
                     .option("checkpointLocation", checkpoint).start())
        finally:
            for key, value in before.items():
                if value is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, value)
        try:
            query.processAllAvailable()
            elapsed = time.perf_counter() - t0
            progress = query.recentProgress
        finally:
            query.stop()
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    return elapsed, progress


def batch_times(seconds: list[float]) -> dict[str, Any]:
    """The micro-batch fields of a result line from each micro-batch's seconds (of the median
    run): ``first_batch_s``, ``median_batch_s`` (the median of those after the first: what a
    micro-batch costs once the query holds its state), ``first10_batch_s`` and
    ``last10_batch_s`` (the medians of the first and of the last ten: whether a micro-batch
    costs more as the query holds more) and ``timed_batches``."""
    import statistics

    def median(part: list[float]) -> float | None:
        return round(statistics.median(part), 4) if part else None

    return {"first_batch_s": round(seconds[0], 4) if seconds else None,
            "median_batch_s": median(seconds[1:]),
            "first10_batch_s": median(seconds[:10]), "last10_batch_s": median(seconds[-10:]),
            "timed_batches": len(seconds)}


def progress_seconds(progress: list[dict[str, Any]]) -> list[float]:
    """Each micro-batch's seconds in a streaming query's progress reports
    (``durationMs.triggerExecution``)."""
    return [p["durationMs"].get("triggerExecution", 0) / 1000 for p in progress
            if "durationMs" in p]


def run_spark_native(root: Path, opts: argparse.Namespace) -> dict[str, Any]:
    """Structured Streaming over the Parquet files: watermark + groupBy(key, window).count(),
    or (``--query reference``) a stream-static join with the reference rows."""
    t0 = time.perf_counter()
    spark = start_spark()
    session = time.perf_counter() - t0
    _native_run(spark, root / "warmup", opts.where, opts.query)
    startup = time.perf_counter() - t0
    log(f"spark-native: session {session:.1f} s, with warm-up query {startup:.1f} s")
    before, cpu, sampler = stage_metrics(spark), tree_cpu_s(), sampler_cpu_s()
    runs = [_native_run(spark, root / "events", opts.where, opts.query)
            for _ in range(opts.repeat)]
    metrics = per_run(task_metrics(before, stage_metrics(spark), tree_cpu_s() - cpu,
                                   sampler_cpu_s() - sampler), opts.repeat)
    elapsed, progress = _median(runs)
    return {
        "startup_s": startup, "session_s": session, "run_s": elapsed,
        "runs_s": [round(r[0], 3) for r in runs], **metrics,
        "output_rows": sum(max(p["sink"].get("numOutputRows", 0), 0) for p in progress),
        "micro_batches": len(progress),
        "data_batches": sum(1 for p in progress if p["numInputRows"] > 0),
        **batch_times(progress_seconds(progress)),
    }


def _check_cti_api() -> None:
    """Raise NotImplementedError if cti's operator API (docs/operators.md) is not there yet."""
    from cti import CepStream

    try:
        from cti import agg  # noqa: F401
    except ImportError as exc:
        raise NotImplementedError(f"cti has no operator API yet ({exc})") from exc
    if not hasattr(CepStream, "group_by"):
        raise NotImplementedError("cti has no operator API yet (CepStream.group_by is missing)")


class CountingOutputAdapter:
    """Counts the events (not CTIs) of each batch into ``<dir>/batch-<id>.count``, or of each
    partition of a batch into ``<dir>/batch-<id>-<partition>.count`` (the factory is
    ``partitioned``: on Spark each shard task counts its own results, as plain Spark's no-op
    sink takes each partition where it is, with no task that gathers a micro-batch)."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)

    def write(self, items: list[Any], batch_id: int, partition: int | None = None) -> None:
        from cti import Cti

        self._save(sum(1 for item in items if not isinstance(item, Cti)), batch_id, partition)

    def write_frame(self, frame: Any, batch_id: int, partition: int | None = None) -> None:
        """The columnar form of ``write`` (cti's output adapters may have both)."""
        self._save(int((frame["kind"] != "cti").sum()), batch_id, partition)

    def write_table(self, table: Any, batch_id: int, partition: int | None = None) -> None:
        """The Arrow form, which the runtimes prefer (as cti's Parquet and Delta outputs)."""
        import pyarrow.compute as pc

        self._save(int(pc.sum(pc.not_equal(table.column("kind"), "cti")).as_py() or 0),
                   batch_id, partition)

    def _save(self, n: int, batch_id: int, partition: int | None) -> None:
        name = f"batch-{batch_id:06d}" + ("" if partition is None else f"-{partition:05d}")
        tmp = self.directory / f".{name}.{os.getpid()}"
        tmp.write_text(str(n))
        tmp.replace(self.directory / f"{name}.count")  # a replay replaces

    def close(self) -> None:
        pass


class CountingOutputAdapterFactory:
    """``create(directory, shape)``: a ``CountingOutputAdapter`` (no rows through the driver);
    ``partitioned`` (docs/adapters.md, "Parallel output")."""

    partitioned = True

    def create(self, config: str, shape: Any) -> CountingOutputAdapter:
        return CountingOutputAdapter(config)


class GatheredCountingOutputAdapterFactory(CountingOutputAdapterFactory):
    """The counting adapter as one that takes whole micro-batches (``--output gathered``): on
    Spark each micro-batch's results meet in one task first, a stage of their own."""

    partitioned = False


OUTPUTS = {"partitioned": CountingOutputAdapterFactory,
           "gathered": GatheredCountingOutputAdapterFactory}


def _counted(directory: Path) -> int:
    return sum(int(p.read_text()) for p in directory.glob("batch-*.count"))


def _cti_source(data: Path, cti_input: str, cti_by: str = "count"
                ) -> tuple[Any, Any, float]:
    """The input factory and config for the cti systems, and seconds spent loading.

    ``parquet``: cti's ``ParquetInputAdapterFactory`` over the same events (read inside the run,
    like spark-native; on Spark in columnar batches), with their arrival times where an
    event-ordering policy makes the CTIs (``cti_by`` "order..."). ``memory``:
    ``MemoryInputAdapterFactory`` with the events loaded first (not timed).
    """
    if cti_input == "parquet":
        from cti.io.parquet import ParquetInputAdapterFactory, ParquetInputConfig

        arrival = "arrival" if cti_by.startswith("order") else None
        return (ParquetInputAdapterFactory(),
                ParquetInputConfig(cti_file(data), "time", arrival_column=arrival,
                                   payload_columns=("key", "value")), 0.0)
    from cti.io.memory import MemoryInputAdapterFactory

    t0 = time.perf_counter()
    events = load_events(data)
    return MemoryInputAdapterFactory(), events, time.perf_counter() - t0


def _cti_run(factory: Any, config: Any, runtime: Any, where: str = "none", cti_by: str = "count",
             reference: Path | None = None, query: str = "window", output: str = "partitioned"
             ) -> tuple[float, int, list[float]]:
    """Run the cti query into a counting adapter: seconds taken, output events and each
    micro-batch's seconds (the runtime's ``batch_seconds``).

    Point events with a CTI every ``CTI_EVERY`` events (``cti_by`` "span": every ``CTI_SPAN``
    of event time) ``DELAY_US`` behind the latest start, policy DROP; or (``cti_by`` "order",
    "order-by-key") with the CTIs of an event-ordering policy over their arrival times (an
    out-of-order tolerance of ``DELAY_US``, a late-arrival tolerance of ``LATE``;
    "order-by-key": each key its own substream); then (``where`` "row" or "frame": first the
    events whose value is not a multiple of 3, by a function of each payload or of a frame of
    them) the query ``query`` of ``bench/queries.py`` (``cti_query``); for "reference"
    (``reference``, a reference data file) the events joined with its rows on ``key``: a slow
    stream of edges from a load time before the first event, which imports the events' CTIs
    (``cti.io.reference``), as ``examples/toll_booth.py`` joins its registrations. ``output``:
    the counting adapter's kind (``OUTPUTS``).
    """
    from cti import (
        AdvanceTimeGenerationSettings,
        AdvanceTimePolicy,
        AdvanceTimeSettings,
        Application,
        CepStream,
        EventOrderingPolicy,
        EventShape,
    )

    out = Path(tempfile.mkdtemp(prefix="bench-cti-out-"))
    try:
        t0 = time.perf_counter()
        if cti_by.startswith("order"):
            settings, ordering = None, EventOrderingPolicy(
                late_arrival_tolerance=LATE, out_of_order_tolerance=timedelta(
                    microseconds=DELAY_US), action=AdvanceTimePolicy.DROP,
                over="key" if cti_by == "order-by-key" else None)
        else:
            settings, ordering = AdvanceTimeSettings(
                AdvanceTimeGenerationSettings(CTI_EVERY if cti_by == "count" else CTI_SPAN,
                                              delay=timedelta(microseconds=DELAY_US),
                                              advance_to_infinity_on_shutdown=True),
                policy=AdvanceTimePolicy.DROP), None
        stream = CepStream.create("events", factory, config, EventShape.POINT, settings,
                                  application=Application(), event_ordering_policy=ordering)
        if where == "row":
            stream = stream.where(lambda p: p["value"] % 3 != 0)
        elif where == "frame":
            stream = stream.where(lambda df: df["value"] % 3 != 0, frame=True)
        rows = None
        if reference is not None:
            from cti import AdvanceTimeImportSettings
            from cti.io.reference import ReferenceDataConfig, ReferenceDataInputAdapterFactory

            rows = CepStream.create(
                "reference", ReferenceDataInputAdapterFactory(),
                ReferenceDataConfig(reference, BASE_TICKS - 3_600_000_000, "csv"),
                EventShape.EDGE, AdvanceTimeSettings(
                    import_settings=AdvanceTimeImportSettings("events"),
                    policy=AdvanceTimePolicy.ADJUST), application=stream.application)
        counts = cti_query(query, stream, rows)
        counts.to(OUTPUTS[output](), str(out)).run(runtime)
        elapsed = time.perf_counter() - t0
        return elapsed, _counted(out), list(runtime.batch_seconds)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _reference(data: Path, opts: argparse.Namespace) -> Path | None:
    """The reference data file of ``data`` where the query joins with it."""
    return reference_file(data) if opts.query == "reference" else None


def _batch_sizes(opts: argparse.Namespace) -> dict[str, list[int]] | None:
    """Micro-batch sizes that cut the events into ``--batches`` parts (None: one batch); the
    reference rows (``--query reference``) are not named: in process they come whole, as plain
    Spark's static table is read whole, on cti's Spark runtime in its pieces of
    ``SparkRuntime.reference_rows_per_batch``."""
    return {"events": [max(1, -(-opts.events // opts.batches))]} if opts.batches > 1 else None


def run_cti_local(root: Path, opts: argparse.Namespace) -> dict[str, Any]:
    """The cti query on the in-process runtime."""
    from cti.runtime.local import LocalRuntime

    _check_cti_api()
    # The warm-up query the Spark systems run too (imports, first use of each code path).
    _cti_run(*_cti_source(root / "warmup", opts.cti_input, opts.cti_by)[:2], LocalRuntime(),
             opts.where, opts.cti_by, _reference(root / "warmup", opts), opts.query, opts.output)
    factory, config, load = _cti_source(root / "events", opts.cti_input, opts.cti_by)
    runs = [_cti_run(factory, config, LocalRuntime(_batch_sizes(opts)), opts.where, opts.cti_by,
                     _reference(root / "events", opts), opts.query, opts.output)
            for _ in range(opts.repeat)]
    elapsed, rows, seconds = _median(runs)
    return {"startup_s": 0.0, "load_s": load, "run_s": elapsed,
            "runs_s": [round(r[0], 3) for r in runs], "output_rows": rows,
            **batch_times(seconds)}


def run_cti_spark(root: Path, opts: argparse.Namespace) -> dict[str, Any]:
    """The cti query on the Spark runtime (the same session settings as spark-native), with
    ``--shards`` shards (None: the runtime's default) and the timed runs' Spark metrics."""
    from cti.runtime.spark import SparkRuntime

    _check_cti_api()
    t0 = time.perf_counter()
    spark = start_spark()
    session = time.perf_counter() - t0
    shards = opts.shards[0] if opts.shards else None
    _cti_run(*_cti_source(root / "warmup", opts.cti_input, opts.cti_by)[:2],
             SparkRuntime(spark, shards=shards), opts.where, opts.cti_by,
             _reference(root / "warmup", opts), opts.query, opts.output)
    startup = time.perf_counter() - t0
    log(f"cti-spark: session {session:.1f} s, with warm-up query {startup:.1f} s")
    factory, config, load = _cti_source(root / "events", opts.cti_input, opts.cti_by)
    before, cpu, sampler = stage_metrics(spark), tree_cpu_s(), sampler_cpu_s()
    runs = [_cti_run(factory, config, SparkRuntime(spark, batch_sizes=_batch_sizes(opts),
                                                   shards=shards), opts.where, opts.cti_by,
                     _reference(root / "events", opts), opts.query, opts.output)
            for _ in range(opts.repeat)]
    metrics = per_run(task_metrics(before, stage_metrics(spark), tree_cpu_s() - cpu,
                                   sampler_cpu_s() - sampler), opts.repeat)
    elapsed, rows, seconds = _median(runs)
    return {"shards": shards, "startup_s": startup, "session_s": session, "load_s": load,
            "run_s": elapsed, "runs_s": [round(r[0], 3) for r in runs], "output_rows": rows,
            **metrics, **batch_times(seconds)}


def _floor_run(data: Path) -> tuple[float, int, int, list[float]]:
    """The least work the count needs, in one process with Arrow: each micro-batch's file read,
    every event given its windows, counted per (key, window) together with the partials carried
    from earlier files, and the windows the watermark (as spark-native's) has passed emitted
    in (window, key) order; the rest at the end. No disorder handling, CTIs or payloads:
    seconds taken, windows emitted, the sum of their counts and each file's seconds."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    hop, size = HOP // timedelta(microseconds=1), WINDOW // timedelta(microseconds=1)
    t0 = time.perf_counter()
    carried = pa.table({"key": pa.array([], pa.string()), "start": pa.array([], pa.int64()),
                        "n": pa.array([], pa.int64())})
    emitted, counted, high, seconds = 0, 0, None, []
    for path in sorted(data.glob("part-*.parquet")):
        began = time.perf_counter()
        table = pq.read_table(path, columns=["time", "key"])
        table = table.filter(pc.is_valid(table.column("key")))  # not the end-of-stream row
        times = table.column("time").to_numpy()
        keys = table.column("key").combine_chunks()
        first = times // hop * hop  # the latest window start at or before each event
        copies = size // hop  # each event is in this many windows
        counts = pa.concat_tables([carried, pa.table({
            "key": pa.concat_arrays([keys] * copies),
            "start": np.concatenate([first - i * hop for i in range(copies)]),
            "n": np.ones(len(times) * copies, np.int64)})]).group_by(
            ["key", "start"]).aggregate([("n", "sum")]).rename_columns(["key", "start", "n"])
        if len(times):
            high = int(times.max()) if high is None else max(high, int(times.max()))
        closed = pc.less_equal(pc.add(counts.column("start"), size),
                               (high if high is not None else -2**62) - DELAY_US)
        windows, n = _emitted(counts.filter(closed))
        emitted, counted = emitted + windows, counted + n
        carried = counts.filter(pc.invert(closed))
        seconds.append(time.perf_counter() - began)
    windows, n = _emitted(carried)  # the end of the input closes the rest
    return time.perf_counter() - t0, emitted + windows, counted + n, seconds


def _emitted(closed: Any) -> tuple[int, int]:
    """Closed windows' counts (an Arrow table: key, start, n) in the order a sink gets them,
    (window, key): how many windows, and the sum of their counts."""
    import pyarrow.compute as pc

    done = closed.sort_by([("start", "ascending"), ("key", "ascending")])
    return done.num_rows, pc.sum(done.column("n")).as_py() or 0


def run_arrow_floor(root: Path, opts: argparse.Namespace) -> dict[str, Any]:
    """A yardstick, not a system: ``_floor_run`` over the same micro-batch files."""
    runs = [_floor_run(root / "events") for _ in range(opts.repeat)]
    elapsed, rows, _counted, seconds = _median(runs)
    return {"startup_s": 0.0, "run_s": elapsed, "runs_s": [round(r[0], 3) for r in runs],
            "output_rows": rows, **batch_times(seconds)}


def _median(runs: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """The run with the median time (the lower middle one of an even count)."""
    return sorted(runs, key=lambda r: r[0])[(len(runs) - 1) // 2]


RUNNERS: dict[str, Callable[[Path, argparse.Namespace], dict[str, Any]]] = {
    "cti-spark": run_cti_spark,
    "spark-native": run_spark_native,
    "cti-local": run_cti_local,
    "arrow-floor": run_arrow_floor,
}


def line_head(system: str, opts: argparse.Namespace, query: str) -> dict[str, Any]:
    """The fields every result line of ``system`` running ``query`` starts with."""
    line: dict[str, Any] = {"system": system, "events": opts.events, "keys": opts.keys,
                            "batches": opts.batches, "key_rate": opts.key_rate,
                            "where": opts.where, "cti_by": opts.cti_by, "query": query,
                            "output": opts.output,
                            "reference": opts.reference,
                            "load_avg_1m": round(os.getloadavg()[0], 2)}
    if system.startswith("cti-"):
        line["cti_input"] = opts.cti_input
    return line


def child(system: str, root: Path, opts: argparse.Namespace) -> dict[str, Any]:
    """Run one system in this process; its result line."""
    memory = TreeMemory(log=os.environ.get("CTI_BENCH_MEMLOG")).start()
    line = line_head(system, opts, opts.query)
    try:
        result = RUNNERS[system](root, opts)
    except NotImplementedError as exc:
        memory.stop()
        return {**line, "error": str(exc)}
    except Exception as exc:  # report, do not crash: the other systems still run
        traceback.print_exc()
        memory.stop()
        return {**line, "error": f"{type(exc).__name__}: {str(exc)[:500]}"}
    mem = memory.stop()
    line["events_per_s"] = round(opts.events / result["run_s"]) if result["run_s"] > 0 else None
    line.update(mem)
    line.update({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()})
    return line


# ---- driver ---------------------------------------------------------------------------------


def run_system(system: str, root: Path, args: argparse.Namespace, shards: int | None = None,
               query: str = "window") -> dict[str, Any]:
    """Run ``system`` on ``query`` in a child process (cti-spark with ``shards`` shards) and
    return its JSON line (or an error line)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", system, "--data", str(root),
           "--events", str(args.events), "--keys", str(args.keys),
           "--batches", str(args.batches), "--seed", str(args.seed),
           "--repeat", str(args.repeat),
           "--cti-input", args.cti_input, "--where", args.where, "--cti-by", args.cti_by,
           "--query", query, "--output", args.output]
    if query == "reference":
        cmd += ["--reference", str(args.reference)]
    if args.key_rate is not None:
        cmd += ["--key-rate", str(args.key_rate)]
    if shards is not None:
        cmd += ["--shards", str(shards)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, check=False)
    for raw in reversed(proc.stdout.splitlines()):
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(parsed, dict) and parsed.get("system") == system:
            return parsed
    return {**line_head(system, args, query),
            "error": f"child exited with {proc.returncode} without a result (see stderr)"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--events", type=int, default=200_000, help="number of events N")
    p.add_argument("--keys", type=int, default=100, help="number of distinct keys K")
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help=f"comma-separated, from {', '.join(SYSTEMS + YARDSTICKS)} (default: "
                        "the first three)")
    p.add_argument("--batches", type=int, default=1, help="micro-batches B")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1,
                   help="timed runs R per system (same process, after the warm-up); run_s is "
                        "their median")
    p.add_argument("--cti-input", choices=("parquet", "memory"), default="parquet",
                   help="cti systems' input adapter: the Parquet files (default) or "
                        "MemoryInputAdapterFactory with PointEvent objects")
    p.add_argument("--key-rate", type=float, default=None, metavar="HZ",
                   help="events per second per key (default: 1,000 events per second in all, "
                        "shared by the keys)")
    p.add_argument("--shards", default=None, metavar="S[,S...]",
                   help="cti-spark's shard counts (SparkRuntime(shards=S)), comma-separated: "
                        "one run and one line per count (default: the runtime's default)")
    p.add_argument("--where", choices=("none", "row", "frame"), default="none",
                   help="filter the events first (value %% 3 != 0): cti by a function of each "
                        "payload (row) or of a frame of them (frame), plain Spark by a column "
                        "expression either way")
    p.add_argument("--cti-by", choices=("count", "span", "order", "order-by-key"),
                   default="count",
                   help="the cti systems' CTIs: every 1,000 events (count), every second of "
                        "event time (span), or by an event-ordering policy over the events' "
                        "arrival times (order; order-by-key: each key its own substream; "
                        "needs --cti-input parquet)")
    p.add_argument("--query", default="window", metavar="Q[,Q...]",
                   help="the queries (bench/queries.py), each system running each on the same "
                        "data: a hopping-window count per key (window), a snapshot window "
                        "(snapshot), a count window (count), TopK over the hopping window "
                        "(topk); or, alone, 1-hour windows every 5 minutes (long-window: "
                        "without --key-rate each micro-batch spans 5 minutes of event time), or "
                        "the events joined on key with reference rows that have no time "
                        "(reference: edges from a load time on the cti systems, a "
                        "stream-static join on plain Spark)")
    p.add_argument("--reference", type=int, default=None, metavar="R",
                   help="--query reference: how many reference rows (default: --keys); the "
                        "first --keys of them have the events' keys")
    p.add_argument("--output", choices=tuple(OUTPUTS), default="partitioned",
                   help="the cti systems' counting output adapter: partitioned (default: on "
                        "Spark each shard's task counts its own results, as plain Spark's no-op "
                        "sink takes each partition where it is) or gathered (it takes whole "
                        "micro-batches: on Spark they meet in one task first)")
    p.add_argument("--child", choices=SYSTEMS + YARDSTICKS, help=argparse.SUPPRESS)
    p.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if min(args.events, args.keys, args.batches, args.repeat) < 1:
        p.error("--events, --keys, --batches and --repeat must be >= 1")
    if args.key_rate is not None and not args.key_rate > 0:
        p.error("--key-rate must be > 0")
    _check_queries(p, args)
    if args.cti_by.startswith("order") and args.cti_input != "parquet":
        p.error(f"--cti-by {args.cti_by} needs --cti-input parquet (the events' arrival times)")
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS + YARDSTICKS]
    if unknown or not systems:
        p.error(f"unknown systems {unknown}; choose from {', '.join(SYSTEMS + YARDSTICKS)}")
    args.system_list = systems
    try:
        args.shards = [int(x) for x in args.shards.split(",")] if args.shards else []
    except ValueError:
        p.error(f"--shards must be comma-separated integers, not {args.shards!r}")
    if any(x < 1 for x in args.shards):
        p.error("--shards must be >= 1")
    return args


def _check_queries(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``args.query_list`` from ``--query``, checked with the options that go with it; a
    long-window query without ``--key-rate`` gets the key rate that makes each micro-batch
    span one hop (5 minutes) of event time."""
    queries = [q.strip() for q in args.query.split(",") if q.strip()]
    unknown = [q for q in queries if q not in QUERIES]
    if unknown or not queries or len(set(queries)) < len(queries):
        p.error(f"--query: distinct queries from {', '.join(QUERIES)}, not {args.query!r}")
    if len(queries) > 1 and set(queries) & set(ALONE):
        p.error(f"--query {' and '.join(ALONE)} run alone (each on data of its own)")
    args.query_list = queries
    if args.query != "reference" and args.reference is not None:
        p.error("--reference R goes with --query reference")
    if args.query == "reference":
        args.reference = args.keys if args.reference is None else args.reference
        if args.reference < args.keys:
            p.error(f"--reference must be at least --keys ({args.keys}): every event has its "
                    "row")
    if "arrow-floor" in args.systems and not set(queries) & set(FLOOR):
        p.error(f"arrow-floor counts windows: it has no --query {args.query}")
    if args.query == "long-window" and args.key_rate is None:
        span_s = args.batches * windows(args.query)[1].total_seconds()
        args.key_rate = args.events / (args.keys * span_s)


def _skipped(system: str, query: str) -> str | None:
    """Why ``system`` does not run ``query`` (None: it does)."""
    if system == "spark-native" and query not in NATIVE:
        return f"plain Spark has no equivalent of --query {query}"
    if system == "arrow-floor" and query not in FLOOR:
        return f"arrow-floor has no --query {query}"
    return None


def run_all(tmp: Path, args: argparse.Namespace) -> None:
    """Each query on each system (cti-spark once per shard count): a JSON line each on
    stdout, a skipped line where the system has no such query."""
    for query in args.query_list:
        for system in args.system_list:
            if reason := _skipped(system, query):
                print(json.dumps({**line_head(system, args, query), "skipped": reason}),
                      flush=True)
                continue
            for shards in (args.shards or [None]) if system == "cti-spark" else [None]:
                log(f"running {system} on {query}{f' with {shards} shards' if shards else ''}")
                line = run_system(system, tmp, args, shards, query)
                log(f"{system} {query}: {line.get('events_per_s', line.get('error'))}")
                print(json.dumps(line), flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        line = child(args.child, args.data, args)
        print(json.dumps(line), flush=True)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="cti-bench-"))
    try:
        t0 = time.perf_counter()
        generate(args.events, args.keys, args.seed, args.batches, tmp / "events", args.key_rate)
        generate(WARMUP_EVENTS, min(args.keys, 10), args.seed + 1, 1, tmp / "warmup")
        if args.query == "reference":
            generate_reference(args.reference, tmp / "events")
            generate_reference(min(args.keys, 10), tmp / "warmup")
        log(f"generated {args.events} events, {args.keys} keys, {args.batches} file(s) "
            f"in {time.perf_counter() - t0:.1f} s under {tmp}")
        run_all(tmp, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
