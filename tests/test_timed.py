"""Time once, events once (``cti.ingress.timed``): a query spread over several shards, each
receiving only its own events and the source's generation points, gives the results of one
shard that saw every row: the same released events (together), the same CTIs, the same counts
of accepted, adjusted and dropped events; and a shard receives no other shard's events. Run
in process, the pieces routed as Spark's source routes them (``cti.engine.batch.routed``) and
each shard's micro-batch in a random row order (Spark promises none)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
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
    CepStream,
    Cti,
    EventShape,
    IntervalEvent,
    PointEvent,
    agg,
)
from cti.engine.batch import piece, routed, routed_frame
from cti.engine.route import routes
from cti.engine.shard import Shard
from cti.errors import BadInputError
from cti.ingress.timed import GEN, PIECE
from cti.io.memory import MemoryInputAdapter, MemoryInputAdapterFactory
from cti.runtime.base import query_inputs

FAST = settings(max_examples=examples(80), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _query(items, shape, count, delay, policy, flush, window, slow=None):
    """A query spread by key over stream ``s`` (with ``slow`` items: unioned with stream
    ``r``, which imports ``s``'s CTIs)."""
    settings_ = AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(count, timedelta(microseconds=delay), flush), None, policy)
    app = Application()
    stream = CepStream.create("s", MemoryInputAdapterFactory(), items, shape, settings_,
                              application=app)
    if slow is not None:
        stream = stream.union(CepStream.create(
            "r", MemoryInputAdapterFactory(), slow, shape,
            AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("s"),
                                policy=policy), application=app))
    if window:
        return stream.group_by("k").apply(
            lambda g: g.tumbling_window(timedelta(microseconds=7)).aggregate(n=agg.count()))
    return stream.group_by("k").apply(lambda g: g.where(lambda p: p["v"] % 3 != 0))


def _run(query, items, shape, shards, batches, seed, with_inputs=False, slow=None):
    """Each shard's outputs over the micro-batches (``batches``: pieces' [start, end) per
    micro-batch), and the rows each shard received; ``with_inputs``: shard 0 passes the
    input's ingress rows on; ``slow``: stream ``r``'s items, half in the first micro-batch,
    the rest in the last."""
    adapters = {"s": MemoryInputAdapter(items, shape)}
    per_batch = [{"s": batch} for batch in batches]
    if slow is not None:
        adapters["r"] = MemoryInputAdapter(slow, shape)
        half = len(slow) // 2
        per_batch[0]["r"] = [(0, half, False)]
        per_batch[-1].setdefault("r", []).append((half, len(slow), True))
    route, outs, received, _ = run_shards(query, adapters, per_batch, shards, seed,
                                          with_inputs)
    return route, outs, received


@st.composite
def cases(draw):
    shape = draw(st.sampled_from([EventShape.POINT, EventShape.INTERVAL]))
    n = draw(st.integers(0, 40))
    t, items = 0, []
    for _ in range(n):
        t += draw(st.integers(0, 4))
        start = max(0, t - draw(st.integers(0, 6)))  # some disorder: violations
        payload = {"k": draw(st.sampled_from("abcde")), "v": draw(st.integers(0, 9))}
        items.append(PointEvent(start, payload) if shape is EventShape.POINT else
                     IntervalEvent(start, start + draw(st.integers(1, 8)), payload))
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=5)))
    bounds = [0, *cuts, n]
    pieces = [(a, b, False) for a, b in zip(bounds, bounds[1:], strict=False)]
    pieces[-1] = (*pieces[-1][:2], True)  # the last piece ends the input
    ends = sorted(set(draw(st.lists(st.integers(1, len(pieces)), max_size=3))) | {len(pieces)})
    batches = [pieces[a:b] for a, b in zip([0, *ends], ends, strict=False)]
    return dict(
        items=items, shape=shape, count=draw(st.sampled_from(
            [1, 2, 3, 5, timedelta(microseconds=1), timedelta(microseconds=3),
             timedelta(microseconds=8)])),  # a CTI every N events, or by time span
        delay=draw(st.integers(0, 5)), flush=draw(st.booleans()),
        policy=draw(st.sampled_from([AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST])),
        window=draw(st.booleans()), batches=batches, shards=draw(st.integers(2, 4)),
        seed=draw(st.integers(0, 1000)), with_inputs=draw(st.booleans()),
        slow=draw(st.none() | st.lists(st.builds(
            lambda t, d, k: (PointEvent(t, {"k": k, "v": 1}) if shape is EventShape.POINT
                             else IntervalEvent(t, t + d, {"k": k, "v": 1})),
            st.integers(0, 60), st.integers(1, 30), st.sampled_from("abcde")), max_size=6)))


@FAST
@given(case=cases())
def test_shards_with_generation_points_equal_one_shard(case):
    slow = case["slow"]
    query = _query(case["items"], case["shape"], case["count"], case["delay"], case["policy"],
                   case["flush"], case["window"], slow)
    args = (case["items"], case["shape"])
    passing = case["with_inputs"]
    _, one, _ = _run(query, *args, 1, case["batches"], case["seed"], passing, slow)
    route, many, received = _run(query, *args, case["shards"], case["batches"], case["seed"],
                                 passing, slow)
    fast = query_inputs(query)[0][0].names.index("s")
    count = case["count"] if isinstance(case["count"], int) else None  # (None: time span)
    assert route.timed == {(0, fast): (count, case["shape"].value)}
    assert released(many[s][b] for s in range(len(many)) for b in range(len(many[s]))) == \
        released(o for o in one[0])
    for b, step in enumerate(one[0]):
        assert many[0][b].ctis == step.ctis
        assert all(many[s][b].ctis == step.ctis for s in range(len(many)))
    one_counts = {k: v for k, v in counts(one).items() if k in ("accepted", "adjusted",
                                                                   "dropped", "cti")}
    reporting = many[:1] if passing else many  # what Spark's progress adds up
    assert {k: v for k, v in counts(reporting).items() if k in one_counts or v} == one_counts
    if passing:  # shard 0 passes on the input's rows as one shard does
        for b, step in enumerate(one[0]):
            assert many[0][b].ingress[0].drop(columns="weight").equals(
                step.ingress[0].drop(columns="weight"))
    # Events once: a shard receives its own events and the generation points, no others'
    # (shard 0 every row where it passes the input on).
    # Every shard gets every row of the slow stream.
    events = len(case["items"])
    got = sum(int((r["kind"].isin(["point", "interval"]) & (r["stream"] == fast)).sum())
              for rs in received[1 if passing else 0:] for r in rs)
    mine = sum(int(((r["own"] == s) & (r["stream"] == fast)).sum())
               for s, rs in enumerate(received) for r in rs if s or not passing)
    assert got == mine
    assert got == events or passing
    assert any((r["kind"] == PIECE).any() for rs in received for r in rs) or not events


def test_a_piece_with_a_cti_goes_whole_and_an_adapter_with_ctis_is_not_events_only():
    items = [PointEvent(1, {"k": "a", "v": 1}), Cti(2), PointEvent(3, {"k": "b", "v": 1})]
    assert not MemoryInputAdapter(items, EventShape.POINT).events_only
    assert MemoryInputAdapter(items[::2], EventShape.POINT).events_only
    query = _query(items, EventShape.POINT, 2, 0, AdvanceTimePolicy.DROP, True, False)
    groups, refs = query_inputs(query)
    route = routes([query], groups, [refs], 2, False)[0]
    parts = list(routed(route, 0, piece(MemoryInputAdapter(items, EventShape.POINT), 0, 0, 3,
                                        True), True))
    assert all(not (p.column("kind").to_numpy(zero_copy_only=False) == PIECE).any()
               for _, p in parts)  # a CTI row: every shard gets the piece whole
    parts = list(routed(route, 0, piece(MemoryInputAdapter(items[::2], EventShape.POINT), 0,
                                        0, 2, True), True))
    kinds = [p.column("kind").to_pylist() for _, p in parts]
    assert sum(k.count("point") for k in kinds) == 2
    assert all(k.count(PIECE) == 1 and k.count(GEN) == 1 for k in kinds)


@pytest.mark.parametrize("count", [1, 1000])
def test_generation_points_are_few_beside_the_events(count):
    """What every shard but the owner receives of a piece: one row per N events."""
    rng = np.random.default_rng(1)
    items = [PointEvent(int(t), {"k": f"k{rng.integers(100)}", "v": 1})
             for t in np.sort(rng.integers(0, 10**6, 10_000))]
    query = _query(items, EventShape.POINT, count, 10, AdvanceTimePolicy.DROP, False, True)
    groups, refs = query_inputs(query)
    route = routes([query], groups, [refs], 4, False)[0]
    parts = dict(routed(route, 0, piece(MemoryInputAdapter(items, EventShape.POINT), 0, 0,
                                        len(items), False), True))
    for part in parts.values():
        kinds = part.column("kind").to_pylist()
        assert kinds.count(GEN) == len(items) // count
        assert kinds.count("point") < len(items) / 2  # its own events only


def _disordered_intervals(tmp_path: Path, every: Any, name: str) -> Any:
    """A Parquet input of 400 intervals with disorder (adjusted and dropped events) as stream
    ``name``, a CTI every ``every`` events or span of time, 3 ticks behind."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cti.io.parquet import ParquetInputAdapterFactory, ParquetInputConfig

    rng = np.random.default_rng(7)
    n = 400
    start = np.maximum.accumulate(rng.integers(0, 5, n)).cumsum() - rng.integers(0, 12, n)
    start = np.maximum(start, 0)
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.table({"start": start, "end": start + rng.integers(1, 9, n),
                             "k": [f"k{i}" for i in rng.integers(0, 9, n)],
                             "v": rng.integers(0, 9, n)}), path)
    settings_ = AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(every, timedelta(microseconds=3), True), None,
        AdvanceTimePolicy.ADJUST)
    return CepStream.create(name, ParquetInputAdapterFactory(),
                            ParquetInputConfig(str(path), "start", "end"),
                            EventShape.INTERVAL, settings_, application=Application())


def _counts_per_key(stream: Any) -> Any:
    return stream.group_by("k").apply(
        lambda g: g.tumbling_window(timedelta(microseconds=20)).aggregate(n=agg.count()))


@pytest.mark.spark
def test_on_spark_shards_with_generation_points_equal_the_in_process_run(spark, tmp_path):
    """In one streaming query over 3 shards, in micro-batches cut anywhere: intervals with
    disorder and a CTI every 4 events, the same with a CTI every 6 ticks of time, and a fast
    stream (a CTI every 3 events) taken from generation points with a slow stream that imports
    its CTIs (every shard gets its rows): each output and the ingress counts in Spark's
    progress equal the in-process run's."""
    from cti.runtime.local import LocalRuntime
    from cti.runtime.spark import SparkRuntime

    counted = _disordered_intervals(tmp_path, 4, "counted")
    spanned = _disordered_intervals(tmp_path, timedelta(microseconds=6), "spanned")
    rng = np.random.default_rng(3)
    fast = [PointEvent(int(t), {"k": f"k{k}", "v": 1}) for t, k in zip(
        np.maximum(np.arange(300) * 2 - rng.integers(0, 9, 300), 0), rng.integers(0, 7, 300),
        strict=True)]
    slow = [PointEvent(t, {"k": f"k{t % 7}", "v": 2}) for t in (3, 150, 90, 400, 598)]
    queries = [_counts_per_key(counted).named("counted_out"),
               _counts_per_key(spanned).named("spanned_out"),
               _query(fast, EventShape.POINT, 3, 4, AdvanceTimePolicy.DROP, True, True,
                      slow).named("imported_out")]
    caps = {"counted": [37, 150, 11], "spanned": [37, 150, 11], "s": [41, 130, 2],
            "r": [41, 130, 2]}
    runtime = SparkRuntime(spark, batch_sizes=caps, shards=3)
    for query, got in zip(queries, runtime.run_queries(queries, with_inputs=False),
                          strict=True):
        want = query.run(LocalRuntime(batch_sizes=[50]))
        assert got[query.name].items == want[query.name].items
        assert any(type(i).__name__ != "Cti" for i in got[query.name].items)
    for stream in (counted, spanned):  # (adjusted and dropped events among them)
        counted_in_process = assert_progress_counts(stream, runtime.progress)
        assert counted_in_process["adjusted"] and counted_in_process["dropped"]


@pytest.mark.spark
def test_on_spark_shards_with_generation_points_and_the_inputs_equal_the_in_process_run(
        spark, tmp_path):
    """As above with the input's own results too (shard 0 then receives every row, to pass it
    on): those equal the in-process run's as well."""
    from cti.runtime.local import LocalRuntime
    from cti.runtime.spark import SparkRuntime

    stream = _disordered_intervals(tmp_path, 4, "s")
    query = _counts_per_key(stream)
    runtime = SparkRuntime(spark, batch_sizes=[37, 150, 11], shards=3)
    got = runtime.run_queries([query], with_inputs=True)[0]
    want = query.run(LocalRuntime(batch_sizes=[50]))
    assert got[query.name].items == want[query.name].items
    assert got["s"].items == want["s"].items
    assert got["s"].metrics == want["s"].metrics
    counted_in_process = assert_progress_counts(stream, runtime.progress)
    assert counted_in_process["adjusted"] and counted_in_process["dropped"]


def test_an_adapter_that_breaks_its_events_only_promise_is_named():
    """A CTI from an adapter that said ``events_only``: the piece that holds it goes whole,
    and the next one, whose generation points would be wrong, is refused by name."""

    class Lying(MemoryInputAdapter):
        events_only = True

    items = [PointEvent(1, {"k": "a", "v": 1}), Cti(2), PointEvent(3, {"k": "b", "v": 1}),
             PointEvent(4, {"k": "c", "v": 1})]
    query = _query(items, EventShape.POINT, 2, 0, AdvanceTimePolicy.DROP, False, False)
    groups, refs = query_inputs(query)
    route = routes([query], groups, [refs], 2, False)[0]
    engine = Shard(query.node, query.inputs(), refs, {0: groups[0].specs()}, route, 0)
    state, adapter = engine.new_state(), Lying(items, EventShape.POINT)
    adapter.events_only = True
    for a, b in ((0, 2), (2, 4)):
        part = dict(routed(route, 0, piece(adapter, 0, a, b, False), True))[0]
        if a == 0:
            engine.step(state, routed_frame(part, 0))
        else:
            with pytest.raises(BadInputError, match=r"stream 's', input #2: .*events_only"):
                engine.step(state, routed_frame(part, 0))


def test_a_query_of_the_slow_stream_alone_counts_the_fast_streams_events_once():
    """A query that reads only the importing stream: the fast stream's events are nobody's
    input, shard 0 counts them; every shard still has its CTIs."""
    fast = [PointEvent(t, {"k": "abc"[t % 3], "v": t}) for t in range(0, 60, 2)]
    slow = [PointEvent(t, {"k": "abc"[t % 3], "v": 1}) for t in (5, 17, 40)]
    whole = _query(fast, EventShape.POINT, 4, 1, AdvanceTimePolicy.DROP, True, False, slow)
    group = query_inputs(whole)[0][0]
    r = group.streams[group.names.index("r")]
    query = r.group_by("k").apply(lambda g: g.where(lambda p: True))
    batches = [[(0, 13, False)], [(13, 30, True)]]
    _, one, _ = _run(query, fast, EventShape.POINT, 1, batches, 0, False, slow)
    route, many, received = _run(query, fast, EventShape.POINT, 3, batches, 0, False, slow)
    assert route.timed and released(o for s in many for o in s) == released(one[0])
    assert counts(many) == counts(one)
    s = group.names.index("s")  # shard 1 gets none of the fast stream's events
    assert sum(int(((r["stream"] == s) & (r["kind"] == "point")).sum())
               for r in received[1]) == 0
