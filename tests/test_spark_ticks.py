"""Clock ticks on Spark (``arrival_clock="wall"``): the source records them in its offsets (so
in Spark's offset log), a replayed micro-batch reads the same ones, and the output equals the
in-process runtime's given the same ticks. The source's tick rules are checked on the reader
itself, without Spark; the Spark runs are few and small."""

from __future__ import annotations

import functools
import itertools
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle
from test_ordering_properties import S

from cti import (
    AdvanceTimeImportSettings,
    AdvanceTimeSettings,
    Application,
    Arriving,
    CepStream,
    Cti,
    EdgeEvent,
    EventOrderingPolicy,
    EventShape,
    PointEvent,
)
from cti.forms.rows import CLOCK
from cti.io.memory import MemoryInputAdapter, MemoryInputAdapterFactory
from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
from cti.runtime.local import LocalRuntime
from cti.runtime.spark.source import CtiAdapterStreamReader, Ticking, encode_sources

# The adapters below travel to Spark's Python workers by value: they cannot import this module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class LiveFactory(MemoryInputAdapterFactory):
    """The memory adapter, never complete: a live input that may deliver more later."""

    def create(self, config: Any, shape: EventShape) -> MemoryInputAdapter:
        adapter = MemoryInputAdapter(config, shape)
        adapter.is_complete = lambda: False  # type: ignore[method-assign]
        return adapter


def _fast_and_slow(clock: str = "wall") -> tuple[CepStream, CepStream]:
    """A fast stream (a point every 10 ticks, arrival = time) and a live reference stream that
    delivers one edge start and goes silent, importing the fast stream's CTIs."""
    app = Application()
    fast = CepStream.create(
        "fast", MemoryInputAdapterFactory(),
        [Arriving(PointEvent(10 * t, {"id": t}), 10 * t) for t in range(1, 60)], EventShape.POINT,
        AdvanceTimeSettings.increasing_start_time(), application=app)
    slow = CepStream.create(
        "slow", LiveFactory(), [Arriving(EdgeEvent.start_edge(5, {"id": 3}), 0)],
        EventShape.EDGE, AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("fast"),
                                             arrival_clock=clock), application=app)
    return fast, slow


def _counter() -> Any:
    """A picklable clock for the driver's source: 95, 195, 295, ... one value per trigger."""
    return functools.partial(next, itertools.count(95, 100))


def _replay_clock(ticks: list[int]) -> Any:
    """LocalRuntime's clock giving Spark's recorded ticks, in order."""
    return iter(ticks).__next__


# ---- the source's tick rules, on the reader (no Spark) ------------------------------------------

def _reader(streams: list[tuple], interval: int | None = None, clock: Any = None
            ) -> CtiAdapterStreamReader:
    return CtiAdapterStreamReader(encode_sources(streams, [[10]] * len(streams),
                                                 ticking=Ticking(clock, interval)))


def _source_streams(group: Any) -> list[tuple]:
    return [(0, i, s.factory, s.config, s.shape, spec.arrival_clock == "wall")
            for i, (s, spec) in enumerate(zip(group.streams, group.specs(), strict=True))]


def _rows(reader: CtiAdapterStreamReader, start: dict, end: dict) -> list[tuple]:
    """The rows read from ``start`` to ``end``, partition by partition (Arrow batches: their
    rows as tuples)."""
    return [tuple(row.values()) for p in reader.partitions(start, end)
            for batch in reader.read(p) for row in batch.to_pylist()]


def _drive(reader: CtiAdapterStreamReader, triggers: int) -> list[list[tuple]]:
    """``triggers`` triggers as Spark runs them: each moved offset is read, partition by
    partition, and becomes the next start; a trigger that moves nothing ends the list."""
    start, batches = reader.initialOffset(), []
    for _ in range(triggers):
        end = reader.latestOffset(start)
        if end == start:
            break
        batches.append(_rows(reader, start, end))
        start = end
    return batches


def test_a_silent_live_wall_clock_stream_ticks_with_its_group_and_once_when_all_is_quiet():
    _, slow = _fast_and_slow()
    reader = _reader(_source_streams(slow.ingress_group()), clock=_counter())
    batches = _drive(reader, 20)
    # 59 fast rows and the end of input: 6 batches of 10; then one batch of the quiet tick,
    # and then nothing more: processing all available input ends.
    assert len(batches) == 7
    ticks = [[r for r in b if r[3] == CLOCK] for b in batches]
    assert ticks[0] == []  # the slow stream delivered its row
    # (stream, seq, arrival) of each tick: before the slow stream's next row, at the clock.
    assert [[(t[0], t[1], t[2]) for t in b] for b in ticks[1:]] == \
        [[(1, 1, 95 + 100 * k)] for k in range(1, 7)]
    assert all(r[3] != CLOCK for b in batches[:6] for r in b if r[0] == 0)


def test_the_data_clock_and_a_complete_input_never_tick():
    fast, slow = _fast_and_slow("data")
    assert not any(r[3] == CLOCK for b in _drive(
        _reader(_source_streams(slow.ingress_group()), clock=_counter()), 20) for r in b)
    wall_complete = [(0, 0, fast.factory, fast.config, fast.shape, True)]
    assert not any(r[3] == CLOCK for b in _drive(_reader(wall_complete, clock=_counter()), 20)
                   for r in b)


def test_a_long_running_query_ticks_again_after_the_interval():
    _, slow = _fast_and_slow()
    streams = [_source_streams(slow.ingress_group())[1]]  # the silent stream alone
    reader = _reader(streams, interval=250, clock=_counter())
    start = reader.initialOffset()
    seen, read = [], []
    for _ in range(12):  # the clock moves 100 a trigger
        end = reader.latestOffset(start)
        if end != start:
            seen.append(end["0"]["tick"])
            read.append([(r[3], r[2]) for r in _rows(reader, start, end)])
            start = end
    # Its row (at 95), the quiet tick (195), then one at least 250 after the last: 495, 795...
    assert seen == [None, 195, 495, 795, 1095]
    assert read[1:] == [[(CLOCK, t)] for t in seen[1:]]


class TwoPartitions(LiveFactory):
    def declare_partitions(self, config: Any, shape: EventShape) -> list[str]:
        return ["p0", "p1"]


def _idle_partition() -> CepStream:
    """A live event-ordering stream (L = 10 s) of two declared partitions: three events on p0
    at 100-102 s, p1 silent."""
    policy = EventOrderingPolicy(late_arrival_tolerance=timedelta(seconds=10),
                                 early_arrival_window=None, arrival_clock="wall")
    items = [Arriving(PointEvent(t * S, {"id": t}), t * S, "p0") for t in (100, 101, 102)]
    return CepStream.create("s", TwoPartitions(), items, EventShape.POINT,
                            application=Application(), event_ordering_policy=policy)


# ---- Spark -------------------------------------------------------------------------------------

@pytest.mark.spark
def test_imported_ctis_at_recorded_ticks_on_spark_equal_in_process(spark, tmp_path):
    """The silent reference stream's imported CTIs, and a join of the two streams (spread over
    shards: every shard's ingress needs the ticks), on Spark and in-process given Spark's
    recorded ticks: the same items, diagnostics and metrics."""
    from cti.runtime.spark import SparkRuntime

    fast, slow = _fast_and_slow()
    checkpoint = str(tmp_path / "query")
    spark_runtime = SparkRuntime(spark, checkpoint_location=checkpoint, batch_sizes=[10],
                                 clock=_counter())
    joined = fast.join(slow, on="id")
    got = joined.run(spark_runtime)
    ticks = [t for _, _, _, t in SparkRuntime.recorded_ticks(checkpoint)]
    assert len(ticks) == 6  # five batches beside the fast stream's, one when all is quiet
    local = LocalRuntime(batch_sizes=[10], clock=_replay_clock(ticks))
    want = joined.run(local)
    assert [t.arrival for t in local.ticks] == ticks
    for name in ("fast", "slow", joined.name):
        assert (got[name].items, got[name].diagnostics) == (want[name].items,
                                                             want[name].diagnostics), name
    slow_ctis = [i.time for i in got["slow"].items if isinstance(i, Cti)]
    assert slow_ctis and slow_ctis[-1] > 100  # imported while it delivered nothing
    assert [i for i in got[joined.name].items if not isinstance(i, Cti)]


@pytest.mark.spark
def test_an_idle_partition_and_a_restart_replay_the_recorded_ticks(spark, tmp_path):
    """A declared partition that never delivers: the quiet tick moves the arrival clock, so
    the CTI passes the buffered events (as in-process with the same tick). Then the last
    micro-batch is made to run again from the checkpoint, with a clock far ahead: it reads
    the recorded tick, so the output is the same, without duplicates."""
    from cti.runtime.spark import SparkRuntime

    stream = _idle_partition()
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run(clock: Any) -> list:
        stream.to(JsonLinesOutputAdapterFactory(), str(out)).run(
            SparkRuntime(spark, checkpoint_location=str(checkpoint), clock=clock))
        return read_json_lines_output(out)

    first = run(functools.partial(int, 120 * S))
    ticks = SparkRuntime.recorded_ticks(str(checkpoint))
    assert [t for *_, t in ticks] == [120 * S]
    want = stream.run(LocalRuntime(clock=lambda: 120 * S))["s"].items
    assert first == want
    assert [i.start for i in first if not isinstance(i, Cti)] == [100 * S, 101 * S, 102 * S]
    assert first[-1] == Cti(110 * S)

    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    assert last == ticks[-1][0]  # the tick's batch was the last one
    for name in (str(last), f".{last}.crc"):  # as if it failed before its commit
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    lost = list(Path(out).glob(f"batch-*{last}.jsonl"))
    assert len(lost) == 1
    lost[0].unlink()  # and its output lost: the replay writes it again
    again = run(functools.partial(int, 10**6 * S))
    assert again == first
    assert SparkRuntime.recorded_ticks(str(checkpoint)) == ticks


@pytest.mark.spark
def test_a_long_running_query_ticks_every_interval(spark, tmp_path):
    """``start()``: the silent stream ticks again whenever ``tick_interval`` has passed on the
    clock (here one second more on each trigger, ticks 5 s apart), and each tick moves the
    CTI on (``A - L``) with no input."""
    from cti.runtime.spark import SparkRuntime

    out, checkpoint = tmp_path / "out", str(tmp_path / "checkpoint")
    runtime = SparkRuntime(spark, checkpoint_location=checkpoint,
                           clock=functools.partial(next, itertools.count(110 * S, S)),
                           tick_interval=timedelta(seconds=5))
    handle = _idle_partition().to(JsonLinesOutputAdapterFactory(), str(out)).start(runtime)
    try:
        deadline = time.monotonic() + 120
        while len(SparkRuntime.recorded_ticks(checkpoint)) < 4 and time.monotonic() < deadline:
            time.sleep(0.5)
        handle.process_all_available()
    finally:
        handle.stop()
    ticks = [t for *_, t in SparkRuntime.recorded_ticks(checkpoint)]
    assert len(ticks) >= 4
    assert all(b - a >= 5 * S for a, b in zip(ticks, ticks[1:], strict=False))
    ctis = [i.time for i in read_json_lines_output(out) if isinstance(i, Cti)]
    assert {t - 10 * S for t in ticks[:3]} <= set(ctis)
