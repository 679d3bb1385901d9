"""Arrival progress once (``cti.ingress.progress``): a query spread over several shards, whose
reference stream imports a fast stream's CTIs, each shard receiving that stream's own events
and the other shards' arrival progress (not their rows) where a piece allows it, gives the
results of one shard that saw every row: the same released events (together), the same CTIs
on every shard, the same counts, the same state of the stream (its time, arrival order, rows
held back, CTIs waiting); and a shard receives no row of another shard's events of a piece
sent as progress. Run in process, the pieces routed as Spark's source routes them
(``cti.engine.batch.routed``), each shard's micro-batch in a random row order."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest
from budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import event as noted
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
    EdgeEvent,
    EventShape,
    IntervalEvent,
    PointEvent,
)
from cti.engine.batch import piece, routed
from cti.engine.route import routes
from cti.errors import BadInputError
from cti.events import EdgeType
from cti.ingress.columns import STARTS
from cti.ingress.progress import OTHERS, RUN, SPAN
from cti.ingress.state import GroupState
from cti.io.memory import MemoryInputAdapter, MemoryInputAdapterFactory
from cti.io.reference import reference_data
from cti.runtime.base import query_inputs

KEYS = "abcde"
CASES = settings(max_examples=examples(60), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
EVENTS = {"point", "interval", "edge_start", "edge_end"}


def _reference_event(draw, shape, t):
    """A reference event at ``t`` with a key."""
    payload = {"k": draw(st.sampled_from(KEYS)), "v": draw(st.integers(0, 9))}
    if shape is EventShape.POINT:
        return PointEvent(t, payload)
    if shape is EventShape.INTERVAL:
        return IntervalEvent(t, t + draw(st.integers(1, 30)), payload)
    return EdgeEvent.start_edge(t, payload)


def _arriving(draw, events, arrivals):
    """The events with arrival times: none; in order (each at or after its sync time and
    the arrival before it); or any (going back: bad input)."""
    if arrivals == "none":
        return events
    out, clock = [], 0
    for item in events:
        clock = max(clock, item.sync_time) + draw(st.integers(0, 3)) \
            if arrivals == "in order" else draw(st.integers(0, 80))
        out.append(Arriving(item, clock))
    return out


@st.composite
def cases(draw):
    """A fast point stream (a CTI every N events or every time span; with arrival times,
    then not taken from generation points) and a reference stream of points, intervals or
    edge starts (some ending: pieces with an end go whole), maybe with arrival times (in
    order, or going back: then its pieces go whole), maybe a second reference stream down a
    chain; each stream cut into pieces, spread over micro-batches, its input ended or not (a
    reference piece may come before the fast events that pass it: its rows wait)."""
    t, fast = 0, []
    fast_arriving = draw(st.booleans())
    for _ in range(draw(st.integers(0, 30))):
        t += draw(st.integers(0, 4))
        event = PointEvent(max(0, t - draw(st.integers(0, 5))),
                           {"k": draw(st.sampled_from(KEYS)), "v": draw(st.integers(0, 9))})
        fast.append(Arriving(event, t) if fast_arriving else event)
    shape = draw(st.sampled_from([EventShape.POINT, EventShape.INTERVAL, EventShape.EDGE,
                                  EventShape.EDGE]))
    ref, clock = [], 0
    for _ in range(draw(st.integers(0, 25))):
        clock += draw(st.integers(0, 6))
        ref.append(_reference_event(draw, shape, max(0, clock - draw(st.integers(0, 8)))))
    for _ in range(draw(st.integers(0, 2)) if shape is EventShape.EDGE and ref else 0):
        at = draw(st.integers(0, len(ref) - 1))  # an end (its piece goes whole)
        if ref[at].edge_type is EdgeType.START:
            ref.insert(draw(st.integers(at + 1, len(ref))), EdgeEvent.end_edge(
                ref[at].start, ref[at].start + draw(st.integers(1, 9)), ref[at].payload))
    ref = _arriving(draw, ref, draw(st.sampled_from(["none", "in order", "any"])))
    chain = [] if not draw(st.booleans()) else [
        _reference_event(draw, EventShape.POINT, draw(st.integers(0, 70)))
        for _ in range(draw(st.integers(0, 6)))]
    n_batches = draw(st.integers(1, 4))

    def spread(n):  # a stream's pieces: [start, end) cut anywhere, in order over batches
        cuts = sorted(draw(st.lists(st.integers(0, n), max_size=4)))
        bounds = [0, *cuts, n]
        ends = draw(st.booleans())
        pieces = [(a, b, ends and i == len(bounds) - 2) for i, (a, b) in
                  enumerate(zip(bounds, bounds[1:], strict=False))]
        at = sorted(draw(st.lists(st.integers(0, n_batches - 1), min_size=len(pieces),
                                  max_size=len(pieces))))
        return [[p for p, b in zip(pieces, at, strict=True) if b == batch]
                for batch in range(n_batches)]

    streams = {"s": spread(len(fast)), "r": spread(len(ref))}
    if chain:
        streams["c"] = spread(len(chain))
    batches = [{name: pieces[b] for name, pieces in streams.items() if pieces[b]}
               for b in range(n_batches)]
    return dict(fast=fast, ref=ref, chain=chain, shape=shape, batches=batches,
                every=draw(st.sampled_from([1, 3, timedelta(microseconds=2),
                                            timedelta(microseconds=6)])),
                policy=draw(st.sampled_from([AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST])),
                shards=draw(st.integers(2, 4)), seed=draw(st.integers(0, 1000)),
                with_inputs=draw(st.booleans()))


def _query(case):
    """The fast stream joined on key with the reference stream, or with the end of a chain
    through it."""
    app = Application()
    s = CepStream.create("s", MemoryInputAdapterFactory(), case["fast"], EventShape.POINT,
                         AdvanceTimeSettings(AdvanceTimeGenerationSettings(
                             case["every"], timedelta(microseconds=1), True), None,
                             case["policy"]), application=app)
    r = CepStream.create("r", MemoryInputAdapterFactory(), case["ref"], case["shape"],
                         AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("s"),
                                             policy=case["policy"]), application=app)
    if not case["chain"]:
        return s.join(r, on="k")
    c = CepStream.create("c", MemoryInputAdapterFactory(), case["chain"], EventShape.POINT,
                         AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("r"),
                                             policy=case["policy"]), application=app)
    return s.join(c, on="k")  # (r, in the middle of the chain, read by no query)


def _adapters(case):
    out = {"s": MemoryInputAdapter(case["fast"], EventShape.POINT),
           "r": MemoryInputAdapter(case["ref"], case["shape"])}
    if case["chain"]:
        out["c"] = MemoryInputAdapter(case["chain"], EventShape.POINT)
    return out


def _state(states, shard, index):
    return GroupState.from_data(states[shard]["ingress"][0], []).streams[index]


def _pending(st):
    """The rows a stream holds back, as (merge arrival, how many rows) per arrival."""
    held = {}
    for (arrival, _, _), row in st.pending:
        held[arrival] = held.get(arrival, 0) + (row.end if row.kind == OTHERS else 1)
    return held


@CASES
@given(case=cases())
def test_shards_with_reference_progress_equal_one_shard(case):
    query = _query(case)
    passing = case["with_inputs"]
    one, error = _outcome(query, case, 1)
    got, error_many = _outcome(query, case, case["shards"])
    assert error_many == error  # (bad input: its owner raises the one shard's error)
    if error is not None:
        noted("bad input raised")
        return
    _, one, _, one_states = one
    route, many, received, states = got
    group = query_inputs(query)[0][0]
    progressed = group.names.index("c" if case["chain"] else "r")
    assert route.referenced == {(0, progressed): STARTS[group.specs()[progressed].shape]}
    assert released(o for outs in many for o in outs) == released(one[0])
    for b, step in enumerate(one[0]):
        assert all(outs[b].ctis == step.ctis for outs in many)
    assert counts(many[:1] if passing else many) == counts(one)
    # The stream's state on every shard is the one shard's: its time, its arrival order, the
    # rows it holds back and the CTIs that wait (an edge stream numbers its owner's rows).
    want = _state(one_states, 0, progressed)
    for shard in range(route.shards):
        got = _state(states, shard, progressed)
        for field in ("cti", "next_in_seq", "last_arrival", "data_arrival", "last_key", "eos",
                      "imported", "max_start"):
            assert getattr(got, field) == getattr(want, field), field
        assert _pending(got) == _pending(want)
        if any(row.kind == OTHERS for _, row in got.pending):
            noted("rows of other shards held as units")
        if group.specs()[progressed].shape is not EventShape.EDGE:
            assert got.out_seq == want.out_seq
    # Events once: of a piece sent as progress, a shard receives its own events alone.
    sent_whole = _whole_pieces(route, group, _adapters(case), case["batches"], progressed)
    progress = any((r["kind"] == SPAN).any() for rs in received for r in rs)
    noted(f"pieces as progress: {progress}, pieces whole: {bool(sent_whole)}")
    for shard, rows_by_batch in enumerate(received):
        if passing and shard == 0:
            continue
        rows = pd.concat(rows_by_batch, ignore_index=True)
        ev = (rows["stream"] == progressed) & rows["kind"].isin(EVENTS)
        others = ev & (rows["own"] != shard) & ~rows["seq"].isin(sent_whole)
        assert not others.any()


def _outcome(query, case, shards):
    """``run_shards`` over ``shards`` shards, or the message of the bad input it raises."""
    try:
        return run_shards(query, _adapters(case), case["batches"], shards,
                          case["seed"] if shards > 1 else 0, case["with_inputs"]), None
    except BadInputError as exc:
        return None, str(exc)


def _whole_pieces(route, group, adapters, batches, index):
    """The sequence numbers of stream ``index``'s rows in the pieces sent whole."""
    name = group.names[index]
    adapter = adapters[name]
    whole = []
    for batch in batches:
        for a, b, eos in batch.get(name, []):
            parts = dict(routed(route, 0, piece(adapter, index, a, b, eos), adapter.events_only,
                                lambda: adapter.arrivals_in_order))
            if not (parts[route.shards - 1]["kind"].to_numpy(zero_copy_only=False)
                    == SPAN).any():
                whole += range(a, b)
    return whole


def _reference_route(shards=3):
    """A join of a fast stream with reference rows loaded at time 5 (open edges arriving at
    5), over ``shards`` shards; the rows, their adapter and the route."""
    rows = [{"k": f"k{i % 50}", "v": i} for i in range(400)]
    items = reference_data(rows, 5)
    app = Application()
    s = CepStream.create("s", MemoryInputAdapterFactory(), [PointEvent(10, {"k": "k1"})],
                         EventShape.POINT, AdvanceTimeSettings.increasing_start_time(),
                         application=app)
    r = CepStream.create("r", MemoryInputAdapterFactory(), items, EventShape.EDGE,
                         AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("s"),
                                             policy=AdvanceTimePolicy.ADJUST), application=app)
    query = s.join(r, on="k")
    groups, refs = query_inputs(query)
    return query, items, routes([query], groups, [refs], shards, False)[0]


def test_reference_rows_loaded_at_one_time_are_one_run_per_piece():
    """What a shard receives of a piece of reference data: its own rows, one ``run`` row and
    the ``span`` row; every row reaches one shard."""
    _, items, route = _reference_route()
    adapter = MemoryInputAdapter(items, EventShape.EDGE)
    assert adapter.arrivals_in_order and not adapter.events_only
    parts = dict(routed(route, 0, piece(adapter, 1, 0, len(items), True), False,
                        lambda: True))
    owned = 0
    for shard, part in parts.items():
        kinds = part.column("kind").to_pylist()
        assert kinds.count(RUN) == 1 and kinds.count(SPAN) == 1 and kinds.count("eos") == 1
        own = np.asarray(part.column("own"))[np.asarray(kinds) == "edge_start"]
        assert (own == shard).all()
        owned += len(own)
    assert owned == len(items)
    # Without the adapter's word that its arrivals never go back, every shard gets every row.
    parts = dict(routed(route, 0, piece(adapter, 1, 0, len(items), True), False,
                        lambda: False))
    assert all(part.num_rows == len(items) + 1 for part in parts.values())


def test_an_adapter_whose_arrivals_go_back_after_saying_they_do_not_is_named():
    """Pieces sent as progress on the adapter's word that its arrivals never go back: a
    piece that arrives before the stream's earlier rows is refused by name."""
    query, items, route = _reference_route(2)

    class Lying(MemoryInputAdapter):
        pass

    back = [*items[:200], *reference_data([{"k": "k1", "v": -1}], 1)]
    adapter = Lying(back, EventShape.EDGE)
    adapter.arrivals_in_order = True
    adapters = {"s": MemoryInputAdapter([PointEvent(10, {"k": "k1"})], EventShape.POINT),
                "r": adapter}
    with pytest.raises(BadInputError, match=r"stream 'r', input #200: .*arrivals_in_order"):
        run_shards(query, adapters, [{"r": [(0, 200, False)]}, {"r": [(200, 201, True)]}], 2)


@pytest.mark.spark
def test_on_spark_a_join_with_a_reference_file_over_three_shards_equals_in_process(spark,
                                                                                  tmp_path):
    """A fast stream (a CTI every 3 events, some dropped behind it) joined with a CSV
    reference file (its rows sent as their owner's events and each piece's progress), 3
    shards, micro-batches cut anywhere: the output and the counts in Spark's progress equal
    the in-process run's."""
    from cti.io.reference import ReferenceDataConfig, ReferenceDataInputAdapterFactory
    from cti.runtime.local import LocalRuntime
    from cti.runtime.spark import SparkRuntime

    path = tmp_path / "ref.csv"
    path.write_text("k,v\n" + "".join(f"k{i % 40},{i}\n" for i in range(600)))
    rng = np.random.default_rng(5)
    fast = [PointEvent(int(t), {"k": f"k{k}"}) for t, k in zip(
        np.maximum(np.arange(300) * 3 + 10 - rng.integers(0, 9, 300), 10),
        rng.integers(0, 45, 300), strict=True)]
    app = Application()
    s = CepStream.create("s", MemoryInputAdapterFactory(), fast, EventShape.POINT,
                         AdvanceTimeSettings(AdvanceTimeGenerationSettings(
                             3, timedelta(microseconds=2), True), None,
                             AdvanceTimePolicy.DROP), application=app)
    r = CepStream.create("r", ReferenceDataInputAdapterFactory(), ReferenceDataConfig(
        path, 5, "csv"), EventShape.EDGE, AdvanceTimeSettings(
        import_settings=AdvanceTimeImportSettings("s"), policy=AdvanceTimePolicy.ADJUST),
        application=app)
    query = s.join(r, on="k")
    groups, refs = query_inputs(query)  # (what the source sends of the file's pieces)
    route = routes([query], groups, [refs], 3, False)[0]
    adapter = ReferenceDataInputAdapterFactory().create(r.config, EventShape.EDGE)
    parts = dict(routed(route, 0, piece(adapter, 1, 0, 250, False), False,
                        lambda: adapter.arrivals_in_order))
    assert sum(part.num_rows for part in parts.values()) == 250 + 3 * 2  # (a run, a span)
    runtime = SparkRuntime(spark, shards=3, batch_sizes={"s": [41, 130, 2], "r": [250, 7]})
    got = query.collect(runtime)
    assert got == query.collect(LocalRuntime())
    assert any(not isinstance(item, type(got[-1])) for item in got)  # (events, not CTIs alone)
    for stream in (s, r):
        assert_progress_counts(stream, runtime.progress)
