"""Bounded ingress state for long runs: recorded wall-clock ticks for silent streams
(``arrival_clock="wall"``, ``clock_row``), purged idle timelines (``purge_idle_timelines``),
and imported CTIs that cannot act again not queued. Purging and ticks never change what the
rules give: purging changes no output at all; a tick is input, the same on every replay."""

from __future__ import annotations

import dataclasses
import importlib.util
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pandas as pd
import pytest
from budget import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from ingress_machine import IngressMachine
from strategies import batch_sizes, bind, past_the_simplest, stream_defs
from test_ordering_properties import S, _evolve, cases
from test_vectorized_ingress import frame, same_step

from cti import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimeSettings,
    Application,
    Arriving,
    CepStream,
    Cti,
    EdgeEvent,
    EventOrderingPolicy,
    EventShape,
    InvalidSettingsError,
    PointEvent,
)
from cti.engine.batch import read_rows
from cti.forms.rows import InRow, clock_row, eos_row
from cti.io.memory import MemoryInputAdapter, MemoryInputAdapterFactory
from cti.runtime.local import LocalRuntime
from cti.runtime.spark.schema import in_row_to_tuple, out_rows_to_pandas

SOAK = Path(__file__).resolve().parents[1] / "bench" / "soak.py"


class LiveFactory(MemoryInputAdapterFactory):
    """The memory adapter, never complete: a live input that may deliver more later."""

    def create(self, config: Any, shape: EventShape) -> MemoryInputAdapter:
        adapter = MemoryInputAdapter(config, shape)
        adapter.is_complete = lambda: False  # type: ignore[method-assign]
        return adapter


def _rows(group: Any, eos: bool = True) -> list[list[InRow]]:
    """Each stream's input rows, with the end of input when ``eos``."""
    out = []
    for i, s in enumerate(group.streams):
        adapter = s.factory.create(s.config, s.shape)
        n = adapter.latest_offset()
        out.append(read_rows(i, adapter, 0, n) + ([eos_row(i, n)] if eos else []))
    return out


# ---- settings -----------------------------------------------------------------------------------

def test_arrival_clock_is_validated_when_the_settings_are_built():
    for build in (lambda: EventOrderingPolicy(arrival_clock="system"),
                  lambda: AdvanceTimeSettings(AdvanceTimeGenerationSettings(1),
                                              arrival_clock="now")):
        with pytest.raises(InvalidSettingsError, match="arrival_clock must be 'data' or 'wall'"):
            build()
    assert EventOrderingPolicy().arrival_clock == "data"
    assert EventOrderingPolicy(arrival_clock="wall").arrival_clock == "wall"
    assert not EventOrderingPolicy().purge_idle_timelines


# ---- purging never changes the output -----------------------------------------------------------

LOCAL = settings(max_examples=examples(150), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])


@LOCAL
@given(case=cases(), data=st.data())
def test_purging_idle_timelines_never_changes_the_output(case, data):
    """Random events and policies (substreams, partitioned, combined), random clock ticks and
    batch cuts: with and without purging, the same output rows (events, CTIs, diagnostics);
    only the per-timeline metrics of purged timelines leave the snapshot."""
    rows = _rows(case.bind().ingress_group(), eos=data.draw(st.booleans()))[0]
    # Clock ticks at random places, anywhere from the past to well ahead of the data.
    for _ in range(data.draw(st.integers(0, 4))):
        at = data.draw(st.integers(0, len(rows)))
        if at < len(rows) or not rows or rows[-1].kind != "eos":
            nxt = rows[at].seq if at < len(rows) else sum(r.kind != "clock" for r in rows)
            rows.insert(at, clock_row(0, nxt, data.draw(st.integers(0, 60)) * S))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(rows)), max_size=4)))
    batches = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True)]
    outputs, snapshots = [], []
    for purge in (False, True):
        policy = _evolve(case.policy, purge_idle_timelines=purge)
        spec = attrs.evolve(case.bind().ingress_group().specs()[0], ordering=policy)
        machine = IngressMachine([spec])
        got = [r for b in batches for r in machine.process(b)]
        outputs.append([r for r in got if r.status != "metrics"])
        snapshots.append(machine.state.streams[0].ordering)
        if purge and (policy.over or policy.partitioned):
            ost = machine.state.streams[0].ordering
            limit = ost.A - policy.late_arrival_tolerance
            # What is left can still change something: its max lifts its watermark.
            assert all(tl.max is not None and tl.max > limit
                       for tid, tl in ost.timelines.items()
                       if tid not in spec.declared_partitions)
            event(f"timelines purged: {min(ost.purged, 1)}")
    assert outputs[1] == outputs[0], case
    assert snapshots[1].A == snapshots[0].A
    assert snapshots[1].rule_cti == snapshots[0].rule_cti


# ---- state stays flat while keys come and go ----------------------------------------------------

def _soak() -> Any:
    spec = importlib.util.spec_from_file_location("bench_soak", SOAK)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_state_stays_bounded_while_substream_keys_come_and_go():
    """bench/soak.py scaled down: 200,000 events over 20,000 keys that come and go. The live
    timelines and the checkpointed (pickled) state stay under bounds set by the keys in use
    at a time (about 1,000), not by the 20,000 that have come and gone."""
    lines: list[dict[str, Any]] = []
    summary = _soak().soak(200_000, 20_000, 10_000, seed=1, report=lines.append)
    assert summary["events"] == 200_000
    assert max(line["timelines"] for line in lines) < 2_000
    assert lines[-1]["purged"] > 15_000  # nearly every key came, went and was forgotten
    quarter = lines[len(lines) // 4]["state_bytes"]
    assert max(line["state_bytes"] for line in lines) < 1.3 * quarter
    # A silent batch (one clock tick a second on) releases everything and purges every key.
    silent = [line for line in lines[1:] if line["events"] == lines[lines.index(line) - 1]
              ["events"]]
    assert silent and all(line["timelines"] == 0 and line["buffered"] == 0 for line in silent)


# ---- wall-clock ticks for a silent stream -------------------------------------------------------

def _fast_and_slow(clock: str) -> tuple[CepStream, CepStream]:
    app = Application()
    fast = CepStream.create(
        "fast", MemoryInputAdapterFactory(),
        [Arriving(PointEvent(10 * t, {"id": t}), 10 * t) for t in range(1, 60)], EventShape.POINT,
        AdvanceTimeSettings.increasing_start_time(), application=app)
    slow = CepStream.create(
        "slow", LiveFactory(), [Arriving(EdgeEvent.start_edge(5, {"id": "r1"}), 0)],
        EventShape.EDGE, AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("fast"),
                                             arrival_clock=clock), application=app)
    return fast, slow


def test_a_silent_importing_stream_takes_its_imported_ctis_at_the_recorded_ticks():
    ticks = iter(range(95, 10**6, 100))  # the clock of each batch the slow stream is silent in
    runtime = LocalRuntime(batch_sizes=[10], clock=lambda: next(ticks))
    res = runtime.run(_fast_and_slow("wall")[1].ingress_group())
    fast_ctis = [i.time for i in res["fast"].items if isinstance(i, Cti)]
    slow_ctis = [i.time for i in res["slow"].items if isinstance(i, Cti)]
    last_tick = runtime.ticks[-1].arrival
    assert [t.kind for t in runtime.ticks] == ["clock"] * len(runtime.ticks)
    # Every CTI the fast stream made before the last tick (arrival = time here), no later one.
    assert slow_ctis == [t for t in fast_ctis if t < last_tick]
    # Without the wall clock the silent stream holds them all until it delivers again.
    still = LocalRuntime(batch_sizes=[10]).run(_fast_and_slow("data")[1].ingress_group())
    assert [i for i in still["slow"].items if isinstance(i, Cti)] == []


def test_ticks_keep_the_imported_queue_short_and_a_replay_gives_the_same_output():
    _, slow = _fast_and_slow("wall")
    group = slow.ingress_group()
    fast_rows, slow_rows = _rows(group, eos=False)
    batches = []
    for k in range(0, len(fast_rows), 10):
        tick = [clock_row(1, len(slow_rows), fast_rows[min(k + 9, len(fast_rows) - 1)].arrival)]
        batches.append(fast_rows[k:k + 10] + (slow_rows if k == 0 else tick))
    machine, replayed = IngressMachine(group.specs()), IngressMachine(group.specs())
    first, again = [], []
    for batch in batches:
        first += machine.process(batch)
        assert len(machine.state.streams[1].imported) <= 10
        again += replayed.process(batch)
        again += replayed.process(batch)  # delivered twice: the rows and the tick change nothing
    assert [r for r in again if r.status != "metrics"] == [r for r in first
                                                          if r.status != "metrics"]


def test_a_tick_advances_an_idle_partition_and_data_behind_it_is_not_bad_input():
    """Combined partitions: a declared partition that never delivers holds the CTI at A - L;
    ticks move A, so the CTI and the buffered events go on without data. A later event whose
    own arrival is behind the tick is merged at the tick, not rejected."""
    class TwoPartitions(LiveFactory):
        def declare_partitions(self, config: Any, shape: EventShape) -> list[str]:
            return ["p0", "p1"]

    policy = EventOrderingPolicy(late_arrival_tolerance=timedelta(seconds=10),
                                 early_arrival_window=None, arrival_clock="wall")
    items = [Arriving(PointEvent(t * S, {"id": t}), t * S, "p0") for t in (100, 101, 102)]
    stream = CepStream.create("s", TwoPartitions(), items, EventShape.POINT,
                              application=Application(), event_ordering_policy=policy)
    machine = IngressMachine(stream.ingress_group().specs())
    rows = _rows(stream.ingress_group(), eos=False)[0]
    out = machine.process(rows)
    assert [r.start for r in out if r.status == "cti"] == [90 * S, 91 * S, 92 * S]  # A - L
    assert [r for r in out if r.status == "accepted"] == []  # p1 holds the events back
    out = machine.process([clock_row(0, 3, 120 * S)])  # A - L = 110 s passes the events
    assert [r.start for r in out if r.status == "accepted"] == [100 * S, 101 * S, 102 * S]
    assert [r.start for r in out if r.status == "cti"] == [110 * S]
    behind = InRow(0, 3, 103 * S, "point", 103 * S, None, '{"id":4}', partition="p0")
    out = machine.process([behind])
    assert [(r.status, r.reason, r.start) for r in out if r.kind == "point"] == \
        [("adjusted", "out_of_order", 110 * S)]


def test_imported_ctis_the_importer_has_passed_are_not_queued():
    """A stream that generates its own CTIs ahead of the ones it imports: the imported ones
    could never move its time, so a silent importer queues none of them."""
    app = Application()
    CepStream.create("fast", MemoryInputAdapterFactory(),
                     [Arriving(PointEvent(t, {}), t) for t in range(1, 50)], EventShape.POINT,
                     AdvanceTimeSettings.increasing_start_time(), application=app)
    ahead = CepStream.create(
        "ahead", LiveFactory(), [Arriving(PointEvent(1000, {}), 0)], EventShape.POINT,
        AdvanceTimeSettings(AdvanceTimeGenerationSettings(1), AdvanceTimeImportSettings("fast")),
        application=app)
    group = ahead.ingress_group()
    machine = IngressMachine(group.specs())
    machine.process([r for rows in _rows(group, eos=False) for r in rows])
    assert machine.state.streams[1].cti == 1000
    assert len(machine.state.streams[1].imported) == 0


@settings(max_examples=examples(50), deadline=None, suppress_health_check=list(HealthCheck))
@given(defs=stream_defs(second_stream=True), sizes=batch_sizes, data=st.data())
def test_ticks_take_the_same_course_vectorised_and_in_the_row_machine(defs, sizes, data):
    """A fast stream and one importing its CTIs, with clock ticks for either at random: the
    vectorised group path (which hands the fast stream's CTIs to the same queue) and the row
    machine give the same output and the same state, batch after batch."""
    group = bind(defs)[0].ingress_group()
    inputs = _rows(group, eos=data.draw(st.booleans()))
    rows_machine, mixed = IngressMachine(group.specs()), IngressMachine(group.specs())
    pos, k, used = [0] * len(inputs), 0, 0
    while any(p < len(rows) for p, rows in zip(pos, inputs, strict=True)) and k < 20:
        size = sizes[k % len(sizes)]
        batch = []
        for i, rows in enumerate(inputs):
            batch += rows[pos[i]:pos[i] + size]
            if data.draw(st.booleans()):
                batch.append(clock_row(i, min(pos[i] + size, len(rows)),
                                       data.draw(st.integers(0, 60))))
        pos = [p + size for p in pos]
        k += 1
        step = same_step(rows_machine, mixed, batch)
        if step is None:
            return
        used += step
    event(f"vectorised group batches: {min(used, 2)}")


# ---- Spark --------------------------------------------------------------------------------------

class _State:
    """Spark's ``GroupState`` as ``ingress_function`` uses it."""

    def __init__(self) -> None:
        self.value: tuple | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple:
        assert self.value is not None
        return self.value

    def update(self, value: tuple) -> None:
        self.value = value


def test_the_spark_ingress_function_takes_ticks_through_its_pickled_state():
    """Spark's stateful ingress function, batch by batch with the state pickled in between, on
    the fast stream and the silent reference stream with ticks: the row machine's output."""
    from cti.runtime.spark.ingress import ingress_function

    _, slow = _fast_and_slow("wall")
    group = slow.ingress_group()
    fast_rows, slow_rows = _rows(group, eos=False)
    batches = [fast_rows[k:k + 10] + (slow_rows if k == 0 else [
        clock_row(1, len(slow_rows), fast_rows[min(k + 9, len(fast_rows) - 1)].arrival)])
        for k in range(0, len(fast_rows), 10)]
    run, state, machine = ingress_function([group.specs()]), _State(), IngressMachine(group.specs())
    for batch in batches:
        got = pd.concat(list(run((0,), iter([frame([in_row_to_tuple(r) for r in batch])]),
                                 state)), ignore_index=True).drop(columns="group")
        want = out_rows_to_pandas(machine.process(batch))
        order = ["stream", "seq"]
        pd.testing.assert_frame_equal(
            got.sort_values(order, kind="stable").reset_index(drop=True),
            want.sort_values(order, kind="stable").reset_index(drop=True), check_dtype=False)
    assert sum(1 for r in machine.state.streams[1].imported) <= 10


@pytest.mark.spark
@settings(max_examples=examples(1), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=st.lists(cases(max_size=12), min_size=20, max_size=25),
       sizes=past_the_simplest(st.lists(st.integers(2, 8), min_size=1, max_size=3)))
def test_purging_on_spark_equals_in_process(spark, batch, sizes):
    """~25 random cases with purging, each its own ingress group, in ONE Spark query: items,
    diagnostics, metrics and ordering snapshot (with the purged count) equal in-process."""
    from cti.runtime.spark import SparkRuntime

    batch = [dataclasses.replace(c, policy=_evolve(c.policy, purge_idle_timelines=True))
             for c in batch]
    streams = [c.bind(f"c{i}") for i, c in enumerate(batch)]
    groups = [s.ingress_group() for s in streams]
    results = SparkRuntime(spark, batch_sizes=sizes).run_groups(groups)
    for case, stream, group, got in zip(batch, streams, groups, results, strict=True):
        g, e = got[stream.name], LocalRuntime().run(group)[stream.name]
        assert (g.items, g.diagnostics, g.metrics, g.ordering) == \
            (e.items, e.diagnostics, e.metrics, e.ordering), case
