"""Output CTIs that depend on the events, spread over shards (``cti.engine.hold``): under
``group_by``, a snapshot window that clips to its windows, TopK over one, a time-sensitive
operator over a count window; a clip by another stream by its key, and unions and joins below
such operators. Each shard's output CTIs carry the CTI they answer, one every shard computes
alike; the query's CTI at a tag is the least of the shards' levels there, and each event
leaves by the first such CTI above its sync time. In process (``tests/shard_runs.py``): over
2-4 shards that way, the output equals one shard's, micro-batch by micro-batch (CTIs, events
and their release). On Spark (the hold stage after the shards): the same output as the
in-process runtime, many small queries in one streaming query; a restart with events held
across the stop, on as many tasks or re-spread over fewer; that such a plan really spreads,
and that another query's output passes the hold stage spread."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
import test_operator_properties as props
from budget import examples
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from shard_runs import run_shards
from strategies import bind, past_the_simplest, spark_splits
from test_window_operators import pieces

from cti import agg, ticks
from cti.engine.hold import HoldState, combine, combined, hold_step, tagged_table
from cti.io.memory import MemoryInputAdapter
from cti.operators.output import OUTPUT_ARROW, ordered_table, step_table
from cti.operators.sharding import data_ctis, shard_fields
from cti.time import MAX_TIME, MIN_TIME

KINDS = ("snapshot", "sliding", "top_k", "count")


@st.composite
def held_case(draw: st.DrawFn) -> props.Case:
    """A query spread by ``group_by("k")`` whose output CTIs depend on its events; maybe a
    filter and a shift inside the group, and a filter above it (operators that keep tags)."""
    kind = draw(st.sampled_from(KINDS))
    n, k, d = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 8))
    shift = draw(st.sampled_from([None, -2, 3]))
    keep = draw(st.booleans())
    above = draw(st.booleans())

    def body(g: Any) -> Any:
        if kind == "snapshot":
            out = g.snapshot_window().aggregate(n=agg.count(), v=agg.sum("v"),
                                                id=agg.udf(props._udf_ids))
        elif kind == "sliding":
            out = g.alter_event_duration(ticks(d)).snapshot_window().aggregate(
                v=agg.max("v"))
        elif kind == "top_k":
            out = g.snapshot_window().top_k(k, [["v", "desc"]])
        else:
            out = g.count_window(n).apply_operator(pieces, time_sensitive=True)
        if keep:
            out = out.where(lambda p: p.get("v", 0) != 3)
        return out if shift is None else out.shift_event_time(ticks(shift))

    def build(s: list[Any]) -> Any:
        q = s[0].group_by("k").apply(body)
        return q.where(lambda p: p.get("v", 0) != 5) if above else q

    text = (f"group_by(k).apply({kind}(n={n}, k={k}, d={d}){'.where' if keep else ''}"
            f"{f'.shift({shift})' if shift is not None else ''}){'.where' if above else ''}")
    return props.Case(text, 1, build, lambda lv, c: [], lambda c: [], window=True)


def _batches(cuts: list[int], n: int) -> list[dict]:
    bounds = [0, *cuts, n]
    return [{"a": [(a, b, i == len(bounds) - 2)]}
            for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))]


def _rows(table: pa.Table) -> list[tuple]:
    return [tuple(r.values()) for r in ordered_table(table).to_pylist()]


@settings(max_examples=examples(60), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=held_case(), defs=props.input_defs(1, max_size=14), shards=st.integers(2, 4),
       seed=st.integers(0, 99), data=st.data())
def test_the_least_level_per_tag_over_the_shards_is_one_shards_output(case, defs, shards,
                                                                     seed, data):
    items = defs[0].items
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(items)), max_size=3))))
    query = case.build(bind(defs))
    note(props.explain(case, defs) + f"\ncuts {cuts}, {shards} shards")
    adapters = {"a": MemoryInputAdapter(list(items), defs[0].shape)}
    batches = _batches(cuts, len(items))
    _, one, _, _ = run_shards(query, adapters, batches, 1)
    route, many, _, _ = run_shards(query, adapters, batches, shards, seed)
    assert route.shards == shards and route.held  # (spread, and combined after the shards)
    got = combined([[tagged_table(o.events, o.ctis, o.tags) for o in outs] for outs in many])
    for b, (step, table) in enumerate(zip(one[0], got, strict=True)):
        assert _rows(table) == _rows(step_table(step.events, step.ctis)), f"micro-batch {b}"


MEETING = ("clip", "signal", "grouped signal", "union below", "group union", "group join")


@st.composite
def meeting_case(draw: st.DrawFn) -> tuple[props.Case, int]:
    """A query spread by key where two streams (or a stream and itself) meet and its output
    CTIs depend on its events: a clip by another stream on ``k`` (StreamInsight's signal:
    readings made to last until the next reading of their key), or a union or join below a
    snapshot window that clips to its windows, inside ``group_by("k")`` or below it. Returns
    it and its number of input streams."""
    kind = draw(st.sampled_from(MEETING))
    d, above = draw(st.sampled_from([None, 3, MAX_TIME])), draw(st.booleans())

    def snapshot(g: Any) -> Any:
        return g.snapshot_window().aggregate(n=agg.count(), v=agg.sum("v"))

    def build(s: list[Any]) -> Any:
        a = s[0] if d is None else s[0].alter_event_duration(d if d == MAX_TIME else ticks(d))
        if kind == "clip":
            q = a.clip_event_duration(s[1], on="k")
        elif kind == "signal":
            q = s[0].alter_event_duration(MAX_TIME).clip_event_duration(s[0], on="k")
        elif kind == "grouped signal":
            q = s[0].group_by("k").apply(
                lambda g: g.alter_event_duration(MAX_TIME).clip_event_duration(g))
        elif kind == "union below":
            q = a.union(s[1]).group_by("k").apply(snapshot)
        elif kind == "group union":
            q = a.group_by("k").apply(lambda g: snapshot(g.union(g.shift_event_time(ticks(2)))))
        else:
            q = a.group_by("k").apply(lambda g: snapshot(g.join(
                g.where(lambda p: p["v"] % 2 == 0), select=lambda x, y: x)))
        return q.where(lambda p: p.get("v", 0) != 5) if above else q

    n = 2 if kind in ("clip", "union below") else 1
    text = f"{kind}(d={d}){'.where' if above else ''}"
    return props.Case(text, n, build, lambda lv, c: [], lambda c: [], window=True), n


def _cut(draw: st.DrawFn, n: int, batches: int) -> list[tuple[int, int, bool]]:
    """A stream of ``n`` rows read in ``batches`` micro-batches (some pieces empty)."""
    cuts = sorted(draw(st.lists(st.integers(0, n), min_size=batches - 1,
                                max_size=batches - 1)))
    bounds = [0, *cuts, n]
    return [(a, b, i == batches - 1) for i, (a, b) in enumerate(zip(bounds, bounds[1:],
                                                                     strict=False))]


@settings(max_examples=examples(60), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=meeting_case(), data=st.data(), shards=st.integers(2, 4), seed=st.integers(0, 99))
def test_where_streams_meet_the_least_level_per_tag_is_one_shards_output(case, data, shards,
                                                                        seed):
    """Every shard gives each output CTI the tag of the level it answers, the same on every
    shard (the inputs' CTIs merged, each value once): over 2-4 shards, combined per tag, the
    output equals one shard's, micro-batch by micro-batch (CTIs, events, releases)."""
    case, n = case
    defs = data.draw(props.input_defs(n, max_size=12))
    batches = data.draw(st.integers(1, 4))
    reads = {d.name: _cut(data.draw, len(d.items), batches) for d in defs}
    query = case.build(bind(defs))
    note(props.explain(case, defs) + f"\nreads {reads}, {shards} shards")
    adapters = {d.name: MemoryInputAdapter(list(d.items), d.shape) for d in defs}
    steps = [{name: [pieces[b]] for name, pieces in reads.items()} for b in range(batches)]
    _, one, _, _ = run_shards(query, adapters, steps, 1)
    route, many, _, _ = run_shards(query, adapters, steps, shards, seed)
    assert route.shards == shards and route.held
    got = combined([[tagged_table(o.events, o.ctis, o.tags) for o in outs] for outs in many])
    for b, (step, table) in enumerate(zip(one[0], got, strict=True)):
        assert _rows(table) == _rows(step_table(step.events, step.ctis)), f"micro-batch {b}"


def test_data_cti_plans_spread_where_their_tags_are_the_same_on_every_shard():
    defs = [props.StreamDef("a", props.POINT, (), None), props.StreamDef("b", props.POINT, (),
                                                                         None)]
    a, b = bind(defs)
    snap = a.group_by("k").apply(lambda g: g.snapshot_window().aggregate(n=agg.count()))
    assert data_ctis(snap.node) and shard_fields(snap.node, snap.inputs()) == ["k"]
    count = a.group_by("k").apply(
        lambda g: g.count_window(2).apply_operator(pieces, time_sensitive=True))
    assert data_ctis(count.node) and shard_fields(count.node, count.inputs()) == ["k"]
    # A clip by another stream: its levels are both inputs' CTIs, the same on every shard.
    clipped = a.clip_event_duration(b, on="k")
    assert data_ctis(clipped.node) and shard_fields(clipped.node, clipped.inputs()) == [
        "k", "k"]
    below = a.union(b).group_by("k").apply(lambda g: g.snapshot_window().aggregate(
        n=agg.count()))
    assert shard_fields(below.node, below.inputs()) == ["k", "k"]
    # A union of CTIs that differ over the shards (one's CTI would release the other's
    # pending ones, which no tag names): one shard. The same above a clip.
    union = a.group_by("k").apply(lambda g: g.snapshot_window().aggregate(n=agg.count())
                                  .union(g.snapshot_window().aggregate(n=agg.count())))
    assert shard_fields(union.node, union.inputs()) is None
    twice = a.group_by("k").apply(
        lambda g: g.alter_event_duration(MAX_TIME).clip_event_duration(g).union(g))
    assert shard_fields(twice.node, twice.inputs()) is None
    nested = a.group_by("k").apply(lambda g: g.snapshot_window().aggregate(n=agg.count())
                                   .group_by("n").apply(lambda h: h.union(h)))
    assert shard_fields(nested.node, nested.inputs()) is None


def test_levels_combine_by_tag_and_events_wait_for_the_least():
    """Shard 0 answers input CTIs 10 and 20 with 4 and 15; shard 1 answers 20 with 12 (its
    level at 10 is its old one, 3). The query's CTIs: 3 at tag 10, 12 at 20. Shard 0's event
    at 13 (released by its own 15) waits for a later CTI; its event at 5 leaves by 12."""
    gs, levels = combine([MIN_TIME, 3], MIN_TIME, {0: ([4, 15], [10, 20]), 1: ([12], [20])})
    assert (gs, levels) == ([3, 12], [15, 12])
    state = HoldState([MIN_TIME, 3])
    events = pa.table({"release": [15, 15], "kind": ["point", "point"], "start": [5, 13],
                       "end": [6, 14], "payload": ["{}", "{}"]}, schema=OUTPUT_ARROW)
    out, gs = hold_step(state, {0: ([4, 15], [10, 20]), 1: ([12], [20])}, events)
    assert gs == [3, 12] and out.column("release").to_pylist() == [12]
    assert state.held.column("start").to_pylist() == [13] and state.cti == 12
    out, gs = hold_step(state, {1: ([30], [40])}, OUTPUT_ARROW.empty_table())
    assert gs == [15] and out.column("release").to_pylist() == [15]


def _payload_buffer(column: Any) -> tuple[int, int]:
    """The address range of the bytes of a string column's chunks (its data buffers)."""
    spans = [(b.address, b.address + b.size) for c in column.chunks
             for b in c.buffers()[2:] if b is not None and b.size]
    return min(a for a, _ in spans), max(b for _, b in spans)


def test_a_shards_rows_come_by_sync_time_and_leave_the_hold_as_slices_of_them():
    """``tagged_table`` orders a shard's events by sync time (an edge end's by its end), its
    CTI rows last; the hold lets the head of each micro-batch's rows leave as a slice of
    them (their payload texts not copied) and keeps the rest, again a slice, as its chunk."""
    import pandas as pd

    events = pd.DataFrame({"release": [50] * 4, "kind": ["point", "edge_end", "point", "point"],
                           "start": [9, 1, 2, 7], "end": [10, 5, 3, 8],
                           "payload": ['{"a":1}', '{"a":2}', '{"a":3}', '{"a":4}']})
    table = tagged_table(events, [50], [60])
    assert table.column("start").to_pylist() == [2, 1, 7, 9, 50]  # sync 2, 5, 7, 9; the CTI
    assert table.column("end").to_pylist()[-1] == 60  # (its tag)
    state = HoldState([MIN_TIME, MIN_TIME])
    rows = table.slice(0, 4)
    rows = pa.Table.from_batches([pa.record_batch(rows.combine_chunks().to_batches()[0])])
    out, gs = hold_step(state, {0: ([8], [60]), 1: ([8], [60])}, rows)
    assert gs == [8] and out.column("start").to_pylist() == [2, 1, 7]
    low, high = _payload_buffer(rows.column("payload"))
    for part in (out, state.held):  # both slices of the rows given: no text copied
        a, b = _payload_buffer(part.column("payload"))
        assert low <= a and b <= high
    assert state.held.column("start").to_pylist() == [9]
    out, gs = hold_step(state, {0: ([70], [80]), 1: ([70], [80])}, OUTPUT_ARROW.empty_table())
    assert gs == [70] and out.column("release").to_pylist() == [70] and not state.held.num_rows


@pytest.mark.spark
@settings(max_examples=examples(1), deadline=None, suppress_health_check=list(HealthCheck))
@given(cases=st.lists(st.one_of(
    st.tuples(held_case(), props.input_defs(1, max_size=10)),
    meeting_case().flatmap(lambda c: st.tuples(st.just(c[0]), props.input_defs(c[1],
                                                                              max_size=10)))),
    min_size=8, max_size=12),
       splits=past_the_simplest(spark_splits))
def test_spread_queries_on_spark_equal_local(spark, cases, splits):
    """Held queries of one stream and of streams that meet, many in one streaming query over
    3 shards, equal the in-process run."""
    props.assert_spark_equals_local(spark, cases, splits, shards=3)


def _restart_stream(path: Any) -> Any:
    """Points of a live JSON-lines file (``RESTART_ROWS``)."""
    from cti import AdvanceTimeSettings, Application, CepStream, EventShape
    from cti.io.files import FileInputConfig, JsonLinesInputAdapterFactory

    config = FileInputConfig(path, start_column="t", time_format="ticks", live=True)
    return CepStream.create("s", JsonLinesInputAdapterFactory(), config, EventShape.POINT,
                            AdvanceTimeSettings.unordered_start_time(ticks(1)),
                            application=Application())


def _restart_snapshots(path: Any) -> Any:
    """Points whose lifetime is their ``d``, a snapshot window per key clipped to its windows:
    key ``a``'s long event keeps the query's CTI at its start while the other keys' shards
    release their windows."""
    return _restart_stream(path).alter_event_duration(lambda e: ticks(e.payload["d"])).group_by(
        "k").apply(lambda g: g.snapshot_window().aggregate(n=agg.count(), total=agg.sum("v")))


def _restart_signal(path: Any) -> Any:
    """Each reading lasting until the next of its key (a clip by the stream itself on ``k``):
    key ``a``'s first reading keeps the query's CTI at its start until its next (at 82)."""
    s = _restart_stream(path)
    return s.alter_event_duration(MAX_TIME).clip_event_duration(s, on="k")


RESTART_ROWS = sorted([{"t": 10, "k": "a", "v": 1, "d": 60}, {"t": 82, "k": "a", "v": 2, "d": 1}]
                      + [{"t": t, "k": "bcdefg"[n % 6], "v": n, "d": 2}
                         for n, t in enumerate(range(12, 90, 3))], key=lambda r: r["t"])


@pytest.mark.spark
@pytest.mark.parametrize("query, settings_", [
    (_restart_snapshots, ({"shards": 4, "parallelism": 4}, {"parallelism": 2})),
    (_restart_signal, ({"shards": 4}, {}))], ids=["re-spread", "signal"])
def test_a_restart_keeps_the_events_held_across_the_stop(spark, tmp_path, query, settings_):
    """Over 4 shards (on the same 2 tasks: the signal; or 4 tasks, then 2: Spark's offline
    state repartitioning moves the hold stage's state with the shards'): the first run ends
    with the query's CTI held at key ``a``'s start (10) while the shards of the other keys
    have released their windows (or readings), which wait in the hold stage's state; after the
    restart they leave, and the whole output is the uninterrupted in-process run's, with no
    duplicates. The restart's tasks both wrote output: the events stay spread."""
    from restarts import run_twice_from_checkpoint

    from cti.engine.batch import owners
    from cti.runtime.local import LocalRuntime

    keys = pa.array([json.dumps({"k": k}) for k in "abcdefg"])
    owner = owners(keys, "k", 4)
    assert len(set(owner[1:]) - {owner[0]}) >= 1  # (another key's shard than a's)
    before, after = run_twice_from_checkpoint(
        spark, tmp_path, RESTART_ROWS, 12, query, (5, 6), settings_)
    events = [e for e in before if hasattr(e, "payload")]
    ctis = [c.time for c in before if not hasattr(c, "payload")]
    assert ctis and max(ctis) <= 10 and not events  # (everything the shards released waits)
    assert after == query(tmp_path / "in.jsonl").collect(LocalRuntime())
    done = [json.dumps(e.payload, sort_keys=True) + str(e.start) for e in after
            if hasattr(e, "payload")]
    assert len(done) == len(set(done)) and done
    tasks = {int(p.stem.rsplit("-", 1)[1]) for p in (tmp_path / "out").glob("batch-*")
             if "payload" in p.read_text()}  # (the restart's: the first run wrote no events)
    assert tasks == {0, 1}, tasks


def _points() -> Any:
    """Points of 7 keys."""
    from cti import AdvanceTimeSettings, Application, CepStream, EventShape, PointEvent
    from cti.io.memory import MemoryInputAdapterFactory

    events = [PointEvent(t * 3 + (t * 7) % 5, {"k": f"k{t % 7}", "v": t}) for t in range(90)]
    return CepStream.create("s", MemoryInputAdapterFactory(), events, EventShape.POINT,
                            AdvanceTimeSettings.unordered_start_time(ticks(6)),
                            application=Application())


def _snapshots(s: Any = None) -> Any:
    """A snapshot window per key (clipped to its windows) over lasting points, spread."""
    s = _points() if s is None else s
    return s.alter_event_duration(lambda e: ticks(4 + e.payload["v"] % 9 * 5)).group_by(
        "k").apply(lambda g: g.snapshot_window().aggregate(n=agg.count(), total=agg.sum("v")))


@pytest.mark.spark
def test_the_sinks_that_take_whole_batches_and_dataframes_get_the_held_output(spark,
                                                                              tmp_path):
    """An adapter that takes whole batches gets each micro-batch whole, once, after the hold
    stage; ``to_dataframe()`` gives the same rows: both the in-process output."""
    from test_parallel_output import _whole_batches_factory, _written

    from cti.events import Cti
    from cti.runtime.local import LocalRuntime
    from cti.runtime.spark import SparkRuntime

    want = _snapshots().collect(LocalRuntime())
    _snapshots().to(_whole_batches_factory(), str(tmp_path)).run(
        SparkRuntime(spark, shards=4, batch_sizes=[25]))
    assert _written(tmp_path) == [repr(i) for i in want]
    out = _snapshots().to_dataframe(SparkRuntime(spark, shards=4))
    writer = (out.writeStream.format("memory").queryName("held_out")
              .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    writer.processAllAvailable()
    writer.stop()
    rows = spark.table("held_out").collect()
    assert sorted(r.start for r in rows if r.kind == "cti") == [
        c.time for c in want if isinstance(c, Cti)]
    assert sorted((r.start, r.end, r.payload) for r in rows if r.kind != "cti") == sorted(
        (e.start, e.end, json.dumps(e.payload, separators=(",", ":"))) for e in want
        if not isinstance(e, Cti))


@pytest.mark.spark
def test_another_querys_output_stays_spread_through_the_hold_stage(spark):
    """A query whose CTIs do not depend on its events, in the same streaming query as a held
    one: its shards' output rows pass through the hold stage in their shards' partitions
    (both of the 2 tasks), not all in one; and its output is the in-process run's."""
    from pyspark.sql import functions as F

    from cti.runtime.local import LocalRuntime
    from cti.runtime.spark import SparkRuntime
    from cti.runtime.spark.runtime import query_results

    def queries() -> list[Any]:
        s = _points()
        return [_snapshots(s).named("held"), s.group_by("k").apply(
            lambda g: g.tumbling_window(ticks(10)).aggregate(n=agg.count())).named("other")]

    runtime = SparkRuntime(spark, shards=4, parallelism=2)
    frame, groups, refs = runtime.query_frame(queries())
    rows = list(runtime._run_to_memory(frame.select(F.spark_partition_id().alias("task"), "*")))
    tasks = {r.task for r in rows if r.query == 1 and r.role == "op"}
    assert tasks == {0, 1}, tasks
    got = query_results([r[1:] for r in rows], queries(), groups, refs, with_inputs=False)
    want = [q.run(LocalRuntime()) for q in queries()]
    assert [r.items(n) for r, n in zip(got, ("held", "other"), strict=True)] == [
        r.items(n) for r, n in zip(want, ("held", "other"), strict=True)]
