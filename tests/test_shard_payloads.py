"""Events once for edges: a reference stream's edge events travel with their payloads to the
shard that owns them only (``cti.engine.batch.routed``); the other shards get their times (a
start may make a CTI) and neither pair nor judge them; each shard reports its own edges'
counts. A stream with an event-ordering policy over a key gives every shard its events' keys,
since each keeps every key's watermark, unless the query is spread by that key: then each
key's events and timeline are its owner's, and the others get the events' times alone.
Checked in process against one shard that saw every row, and on Spark against the in-process
run."""

from __future__ import annotations

import json
from datetime import timedelta

import pandas as pd
import pyarrow as pa
import pytest
from budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shard_runs import assert_progress_counts, counts, released, run_shards

from cti import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Application,
    Arriving,
    CepStream,
    Cti,
    EdgeEvent,
    EventOrderingPolicy,
    EventShape,
    IntervalEvent,
    PointEvent,
    agg,
)
from cti.adapters import InvalidInput
from cti.engine.batch import owners
from cti.errors import BadInputError, CtiViolationError
from cti.ingress.state import GroupState
from cti.io.memory import MemoryInputAdapter, MemoryInputAdapterFactory
from cti.runtime.base import query_inputs
from cti.runtime.local import LocalRuntime
from cti.runtime.spark import SparkRuntime

KEYS = "abcde"
CASES = settings(max_examples=examples(60), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def reference_cases(draw):
    """A fast point stream and a slow edge stream (versions of each key's reference row,
    importing the fast stream's CTIs), cut into pieces over micro-batches. The fast events
    may carry arrival times (then its adapter yields more than events: each piece goes whole
    to every shard, which runs the group's ingress on it)."""
    t, fast = 0, []
    arriving = draw(st.booleans())
    for _ in range(draw(st.integers(0, 30))):
        t += draw(st.integers(0, 3))
        event = PointEvent(max(0, t - draw(st.integers(0, 4))),
                           {"k": draw(st.sampled_from(KEYS)), "v": draw(st.integers(0, 9))})
        fast.append(Arriving(event, t) if arriving else event)
    edges = []  # (sync time, item): each key's versions, the last maybe left open
    for k in draw(st.lists(st.sampled_from(KEYS), max_size=4, unique=True)):
        starts = sorted(set(draw(st.lists(st.integers(0, 70), min_size=1, max_size=4))))
        for j, a in enumerate(starts):
            payload = {"k": k, "ver": j}
            edges.append((a, EdgeEvent.start_edge(a, payload)))
            end = starts[j + 1] if j + 1 < len(starts) else (
                a + draw(st.integers(1, 20)) if draw(st.booleans()) else None)
            if end is not None:
                edges.append((end, EdgeEvent.end_edge(a, end, payload)))
    edges = [item for _, item in sorted(edges, key=lambda e: e[0])]
    return dict(
        fast=fast, edges=edges,
        every=draw(st.sampled_from([1, 3, timedelta(microseconds=2),
                                    timedelta(microseconds=5)])),
        policy=draw(st.sampled_from([AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST])),
        fast_cuts=sorted(draw(st.lists(st.integers(0, len(fast)), max_size=3))),
        edge_cuts=sorted(draw(st.lists(st.integers(0, len(edges)), max_size=3))),
        shards=draw(st.integers(2, 4)), seed=draw(st.integers(0, 1000)))


def _reference_join(fast, edges, every, policy, names=("s", "r")):
    """The fast points joined by key with the edges, which import the points' CTIs (the
    streams named ``names``)."""
    app = Application()
    s = CepStream.create(names[0], MemoryInputAdapterFactory(), fast, EventShape.POINT,
                         AdvanceTimeSettings(AdvanceTimeGenerationSettings(
                             every, timedelta(0), True), None, policy), application=app)
    r = CepStream.create(names[1], MemoryInputAdapterFactory(), edges, EventShape.EDGE,
                         AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings(names[0]),
                                             policy=policy), application=app)
    return s.join(r, on="k")


def _batches(cuts, n, name):
    """A stream's rows cut at ``cuts``: one piece per micro-batch, the last ends the input."""
    bounds = [0, *cuts, n]
    return [{name: [(a, b, i == len(bounds) - 2)]}
            for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))]


def _merged(*per_stream):
    out = [{} for _ in range(max(map(len, per_stream)))]
    for batches in per_stream:
        for i, batch in enumerate(batches):
            out[i] |= batch
    return out


@CASES
@given(case=reference_cases())
def test_edges_reach_their_owner_alone_and_the_shards_equal_one(case):
    query = _reference_join(case["fast"], case["edges"], case["every"], case["policy"])
    adapters = {"s": MemoryInputAdapter(case["fast"], EventShape.POINT),
                "r": MemoryInputAdapter(case["edges"], EventShape.EDGE)}
    batches = _merged(_batches(case["fast_cuts"], len(case["fast"]), "s"),
                      _batches(case["edge_cuts"], len(case["edges"]), "r"))
    _, one, _, _ = run_shards(query, adapters, batches, 1)
    route, many, received, states = run_shards(query, adapters, batches, case["shards"],
                                               case["seed"])
    assert route.shards == case["shards"]
    assert released(o for outs in many for o in outs) == released(one[0])
    for b, step in enumerate(one[0]):
        assert all(outs[b].ctis == step.ctis for outs in many)
    assert counts(many) == counts(one)
    group = query_inputs(query)[0][0]
    index = group.names.index("r")
    seen = set()
    for shard, rows_by_batch in enumerate(received):
        rows = pd.concat(rows_by_batch, ignore_index=True)
        edge = (rows["kind"].isin(["edge_start", "edge_end"]) & (rows["stream"] == index)
                ).to_numpy()
        # (every edge's time where its piece goes whole; of a piece of edge starts sent as
        # its progress, its own alone: ``cti.ingress.progress``)
        assert rows["seq"][edge].is_unique
        seen |= set(rows["seq"][edge])
        own, kept = rows["own"].to_numpy()[edge], rows["payload"].notna().to_numpy()[edge]
        assert ((own == shard) == kept).all()  # a payload: the owner's alone
        open_edges = GroupState.from_data(states[shard]["ingress"][0], []).streams[
            index].open_edges
        assert all(_owner(payload, route.shards) == shard for _, payload in open_edges)
    assert seen == set(range(len(case["edges"])))


def _owner(payload: str, shards: int) -> int:
    return int(owners(pa.array([payload]), "k", shards)[0])


@st.composite
def substream_cases(draw):
    """Events of several keys arriving in order, their times up to 6 behind or 40 ahead of
    the arrival (late, out of order, early), some without the key (bad input, dead-lettered),
    cut into micro-batches."""
    arrival, items = 0, []
    for _ in range(draw(st.integers(0, 30))):
        arrival += draw(st.integers(0, 4))
        t = max(0, arrival + draw(st.integers(-6, 40)))
        key = draw(st.sampled_from([*KEYS, ""] if items else KEYS))  # (the first: its fields)
        items.append(Arriving(PointEvent(t, {**({"k": key} if key else {}),
                                             "d": draw(st.integers(0, 3)), "v": 1}), arrival))
    return dict(items=items, over=draw(st.sampled_from(["k", "d", None])),
                purge=draw(st.booleans()),
                cuts=sorted(draw(st.lists(st.integers(0, len(items)), max_size=3))),
                shards=draw(st.integers(2, 4)), seed=draw(st.integers(0, 1000)),
                action=draw(st.sampled_from([AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST])))


def _substreams(items, action, over="k", purge=False, name="s"):
    """Each value of ``over`` its own timeline (None: the stream one timeline), a tumbling
    count per key ``k`` (of the stream ``name``)."""
    policy = EventOrderingPolicy(
        late_arrival_tolerance=timedelta(microseconds=5),
        out_of_order_tolerance=timedelta(microseconds=3),
        early_arrival_window=timedelta(microseconds=30), action=action, over=over,
        purge_idle_timelines=purge)
    s = CepStream.create(name, MemoryInputAdapterFactory(), items, EventShape.POINT,
                         event_ordering_policy=policy, application=Application(),
                         on_bad_input="dead_letter")
    return s.group_by("k", nulls="group").apply(
        lambda g: g.tumbling_window(timedelta(microseconds=10)).aggregate(n=agg.count()))


@CASES
@given(case=substream_cases())
def test_substreams_over_the_shards_equal_one_shard(case):
    query = _substreams(case["items"], case["action"], case["over"], case["purge"])
    adapters = {"s": MemoryInputAdapter(case["items"], EventShape.POINT)}
    batches = _batches(case["cuts"], len(case["items"]), "s")
    _, one, _, _ = run_shards(query, adapters, batches, 1)
    route, many, received, states = run_shards(query, adapters, batches, case["shards"],
                                               case["seed"])
    assert route.shards == case["shards"]
    keys = sorted({"k", case["over"] or "k"})
    for shard, rows_by_batch in enumerate(received):  # others' events: their keys alone
        for rows in rows_by_batch:
            others = rows[(rows["own"] != shard) & (rows["kind"] == "point")]
            if case["over"] is None:  # one timeline: others' events by their times alone
                assert others["payload"].isna().all()
            elif case["over"] == "k":  # spread by the substream key: their times alone
                keyless = ["k" not in case["items"][q].item.payload for q in others["seq"]]
                assert [None if p is None else json.loads(p) for p in others["payload"]] \
                    == [{} if no else None for no in keyless]
            else:
                assert [sorted(json.loads(p)) for p in others["payload"]] == [
                    [f for f in keys if f in case["items"][q].item.payload]
                    for q in others["seq"]]
        timelines = GroupState.from_data(states[shard]["ingress"][0], []).streams[
            0].ordering.timelines
        if case["over"] == "k":  # each key's timeline on its owner alone
            assert all(_owner(json.dumps({"k": json.loads(t)}), case["shards"]) == shard
                       for t in timelines)
    assert released(o for outs in many for o in outs) == released(one[0])
    for b, step in enumerate(one[0]):
        assert all(outs[b].ctis == step.ctis for outs in many)
    assert counts(many) == counts(one)


def test_on_spark_edges_substreams_and_dead_letters_over_three_shards_equal_in_process(spark):
    fast = [PointEvent(t, {"k": KEYS[t % 5], "v": t}) for t in range(0, 120, 2)]
    edges = []
    for i, k in enumerate(KEYS):
        edges += [(i, EdgeEvent.start_edge(i, {"k": k, "ver": 0})),
                  (40 + i, EdgeEvent.end_edge(i, 40 + i, {"k": k, "ver": 0})),
                  (40 + i, EdgeEvent.start_edge(40 + i, {"k": k, "ver": 1}))]
    edges.append((45, Arriving(EdgeEvent.start_edge(25, {"k": "a", "ver": 9}), 45)))  # late
    edges = [item for _, item in sorted(edges, key=lambda e: e[0])]
    arrivals = [Arriving(PointEvent(max(0, a + (a * 7) % 13 - 6), {"k": KEYS[a % 5], "v": 1}),
                         a) for a in range(0, 90, 3)]
    bad = [InvalidInput("unreadable", f"ts=,k={KEYS[t % 5]}") if t % 9 == 4 else
           PointEvent(t, {"k": KEYS[t % 5], "v": t}) for t in range(60)]
    queries = [_reference_join(fast, edges, 4, AdvanceTimePolicy.ADJUST, ("s0", "r0")),
               _reference_join(fast, edges, timedelta(microseconds=7), AdvanceTimePolicy.DROP,
                               ("s1", "r1")),
               _substreams(arrivals, AdvanceTimePolicy.ADJUST, name="s2"),
               _dead_lettering(bad, 2, name="s3")]
    queries = [q.named(f"q{k}") for k, q in enumerate(queries)]
    runtime = SparkRuntime(spark, shards=3, batch_sizes=[20, 7])  # one streaming query
    for query, got in zip(queries, runtime.run_queries(queries, with_inputs=False),
                          strict=True):
        assert got.items(query.name) == query.collect(LocalRuntime())
        for stream in query.inputs():  # the counts in Spark's progress: each event once
            assert_progress_counts(stream, runtime.progress)


def _bad_streams():
    """Two streams that break a rule at input #21: an event behind its adapter's CTI on a
    stream with no policy, and an arrival time that goes back."""
    points = [PointEvent(t, {"k": f"k{t % 7}", "v": t}) for t in range(40)]
    behind = points[:20] + [Cti(30)] + points[20:]
    arriving = [Arriving(p, p.start) for p in points]
    arriving[21] = Arriving(points[21], 3)
    return [CepStream.create("s", MemoryInputAdapterFactory(), behind, EventShape.POINT,
                             application=Application()),
            CepStream.create("s", MemoryInputAdapterFactory(), arriving, EventShape.POINT,
                             AdvanceTimeSettings.increasing_start_time(),
                             application=Application())]


def _error(query, runtime):
    with pytest.raises((BadInputError, CtiViolationError)) as raised:
        query.collect(runtime)
    return type(raised.value), str(raised.value)


def test_bad_input_on_several_shards_is_named_by_its_owner_as_on_one(spark):
    """Every shard judges every event's times, but only the owner has its payload: the first
    bad event's owner raises, naming it whole, and the others raise nothing (before, any shard
    could, naming ``payload=None``). On Spark with 4 tasks: the in-process run's error."""
    for stream in _bad_streams():
        query = stream.group_by("k").apply(
            lambda g: g.tumbling_window(timedelta(microseconds=10)).aggregate(n=agg.count()))
        want = _error(query, LocalRuntime())
        assert "input #21" in want[1] and '"v":' in want[1], want
        for run in range(2):  # (the same error every run)
            assert _error(query, SparkRuntime(spark, shards=4, parallelism=4)) == want, run


@st.composite
def bad_input_cases(draw):
    """A keyed point stream that dead-letters its bad rows: rows the adapter could not read
    (their payload the raw text, no JSON) and intervals on the point stream; cut into
    micro-batches."""
    items = []
    for i in range(draw(st.integers(1, 30))):
        k, t = draw(st.sampled_from(KEYS)), draw(st.integers(0, 40))
        items.append(draw(st.sampled_from([
            PointEvent(t, {"k": k, "n": i}), PointEvent(t, {"k": k, "n": i}),
            IntervalEvent(t, t + 3, {"k": k, "n": i}),
            InvalidInput("unreadable", f"ts=,k={k},n={i}")])))
    return dict(items=items, cuts=sorted(draw(st.lists(st.integers(0, len(items)),
                                                       max_size=3))),
                every=draw(st.integers(1, 4)), shards=draw(st.integers(2, 4)),
                seed=draw(st.integers(0, 1000)))


def _dead_lettering(items, every, name="s"):
    """A count per key of a point stream (``name``) that dead-letters its bad rows."""
    s = CepStream.create(name, MemoryInputAdapterFactory(), items, EventShape.POINT,
                         AdvanceTimeSettings(AdvanceTimeGenerationSettings(every),
                                             policy=AdvanceTimePolicy.DROP),
                         application=Application(), on_bad_input="dead_letter")
    return s.group_by("k").apply(
        lambda g: g.tumbling_window(timedelta(microseconds=10)).aggregate(n=agg.count()))


class _Unchecked(MemoryInputAdapter):
    """Its items as they are: an interval on a point stream reaches the engine (ingress
    checks the shape), as from an adapter that does not check it."""

    def read(self, start, end):
        return self.items[start:end]


@CASES
@given(case=bad_input_cases())
def test_dead_letters_over_the_shards_equal_one_shard(case):
    query = _dead_lettering(case["items"], case["every"])
    adapters = {"s": _Unchecked(case["items"], EventShape.POINT)}
    batches = _batches(case["cuts"], len(case["items"]), "s")
    _, one, _, _ = run_shards(query, adapters, batches, 1)
    _, many, _, _ = run_shards(query, adapters, batches, case["shards"], case["seed"])
    assert released(o for outs in many for o in outs) == released(one[0])
    assert counts(many) == counts(one)

    def dead(outs):  # the dead letters reported, with the payload each is reported with
        rows = pd.concat([o.ingress[0] for o in outs], ignore_index=True)
        rows = rows[(rows["status"] == "invalid") & (rows["weight"] > 0)]
        return sorted(zip(rows["in_seq"], rows["payload"], rows["reason"], strict=True))

    assert dead(o for outs in many for o in outs) == dead(one[0])
