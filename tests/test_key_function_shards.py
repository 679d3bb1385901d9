"""``group_by(key=fn)`` spread over shards by the function's value: the source computes each
event's key (``cti.engine.batch.computed_key_shards``) and routes the event, with its payload,
to the one shard that owns the key, as it routes a payload field's value. Checked in process
(each shard's rows, the shards together against one shard that saw every row, points,
intervals and edges, an event-ordering policy over another field) and on Spark against the
in-process run."""

from __future__ import annotations

import json
from datetime import timedelta

import pyarrow as pa
import pytest
from budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shard_runs import counts, released, run_shards
from strategies import past_the_simplest, spark_splits

from cti import (
    AdvanceTimeSettings,
    Application,
    Arriving,
    CepStream,
    EdgeEvent,
    EventOrderingPolicy,
    EventShape,
    IntervalEvent,
    PointEvent,
    agg,
)
from cti.engine.batch import computed_key_shards, owners
from cti.engine.route import routes
from cti.io.memory import MemoryInputAdapter, MemoryInputAdapterFactory
from cti.runtime.base import query_inputs
from cti.runtime.local import LocalRuntime

CASES = settings(max_examples=examples(60), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def bucket(payload: dict) -> str:
    """The tests' key function: a value computed from two fields (none where v is missing)."""
    return f"{payload['k']}-{payload['v'] % 3}"


def _payload(draw: st.DrawFn) -> dict:
    return {"k": draw(st.sampled_from("abcd")), "v": draw(st.integers(0, 9)),
            "o": draw(st.sampled_from("xy"))}


@st.composite
def key_cases(draw: st.DrawFn) -> dict:
    """Events of one shape, cut into micro-batches, over 2-4 shards; maybe an event-ordering
    policy over another field (``o``: each shard keeps every value's timeline)."""
    shape = draw(st.sampled_from([EventShape.POINT, EventShape.INTERVAL, EventShape.EDGE]))
    ordered = shape is EventShape.POINT and draw(st.booleans())
    items, t = [], 0
    for _ in range(draw(st.integers(0, 30))):
        t += draw(st.integers(0, 3))
        p = _payload(draw)
        if shape is EventShape.POINT:  # (arriving at t, maybe later than its time)
            start = max(0, t - draw(st.integers(0, 4))) if ordered else t
            items.append(Arriving(PointEvent(start, p), t) if ordered else PointEvent(t, p))
        elif shape is EventShape.INTERVAL:
            items.append(IntervalEvent(t, t + draw(st.integers(1, 9)), p))
        else:
            items.append(EdgeEvent.start_edge(t, p))
            if draw(st.booleans()):
                items.append(EdgeEvent.end_edge(t, t + draw(st.integers(1, 3)), p))
    if shape is EventShape.EDGE:  # (ends sorted into arrival order by their sync time)
        items.sort(key=lambda e: e.end if e.edge_type.name == "END" else e.start)
    cuts = sorted(set(draw(st.lists(st.integers(0, len(items)), max_size=3))))
    return dict(shape=shape, items=items, ordered=ordered, cuts=cuts,
                shards=draw(st.integers(2, 4)), seed=draw(st.integers(0, 99)),
                size=draw(st.integers(1, 6)))


def _query(case: dict) -> object:
    policy = EventOrderingPolicy(late_arrival_tolerance=timedelta(microseconds=5),
                                 out_of_order_tolerance=timedelta(microseconds=2),
                                 early_arrival_window=None, over="o") if case["ordered"] else None
    settings_ = None if case["ordered"] else AdvanceTimeSettings.unordered_start_time(
        timedelta(microseconds=2))
    s = CepStream.create("s", MemoryInputAdapterFactory(), case["items"], case["shape"],
                         settings_, application=Application(), event_ordering_policy=policy)
    size = timedelta(microseconds=case["size"])
    return s.group_by(key=bucket, name="b").apply(
        lambda g: g.tumbling_window(size).aggregate(n=agg.count(), v=agg.sum("v")))


def _batches(cuts: list[int], n: int) -> list[dict]:
    bounds = [0, *cuts, n]
    return [{"s": [(a, b, i == len(bounds) - 2)]}
            for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))]


@CASES
@given(case=key_cases())
def test_a_key_function_spreads_its_groups_over_the_shards(case):
    query = _query(case)
    adapters = {"s": MemoryInputAdapter(case["items"], case["shape"])}
    batches = _batches(case["cuts"], len(case["items"]))
    _, one, _, _ = run_shards(query, adapters, batches, 1)
    route, many, received, _ = run_shards(query, adapters, batches, case["shards"],
                                          case["seed"])
    assert route.shards == case["shards"]
    for shard, rows_by_batch in enumerate(received):  # a payload: its key's owner's alone
        for rows in rows_by_batch:
            mine = rows[rows["own"] == shard]
            keys = [bucket(json.loads(p)) for p in mine["payload"]]
            assert all(_owner(k, route.shards) == shard for k in keys)
            others = rows[(rows["own"] >= 0) & (rows["own"] != shard)]
            if not case["ordered"]:
                assert others["payload"].isna().all()
    assert released(o for outs in many for o in outs) == released(one[0])
    for b, step in enumerate(one[0]):
        assert all(outs[b].ctis == step.ctis for outs in many)
    assert counts(many) == counts(one)


def _owner(key: str, shards: int) -> int:
    """The shard of a key value (the hash of its JSON, as a field's value is routed)."""
    return int(owners(pa.array([json.dumps({"x": key})]), "x", shards)[0])


def test_equal_keys_meet_in_one_shard_and_a_failing_key_goes_to_shard_0():
    payloads = pa.array(['{"k": "a", "v": 1}', '{"k": "a", "v": 4}', '{"k": "b", "v": 1}',
                         '{"k": "a"}'])
    got = computed_key_shards(payloads, bucket, 7)
    assert got[0] == got[1] == _owner("a-1", 7)  # a-1 both: 1 % 3 == 4 % 3
    assert got[2] == _owner("b-1", 7)
    assert got[3] == 0  # (KeyError: shard 0's group_by raises it, naming the stream)


def test_a_key_functions_query_is_routed_by_the_function():
    query = _query(dict(items=[], shape=EventShape.POINT, ordered=False, size=2))
    groups, refs = query_inputs(query)
    route = routes([query], groups, [refs], 4, False)[0]
    assert route.shards == 4 and list(route.fields.values()) == [bucket]


@pytest.mark.spark
@settings(max_examples=examples(1), deadline=None, suppress_health_check=list(HealthCheck))
@given(cases=st.lists(key_cases(), min_size=6, max_size=8), splits=past_the_simplest(spark_splits))
def test_on_spark_equals_local(spark, cases, splits):
    from cti.runtime.spark import SparkRuntime

    queries = [_query(c).named(f"q{k}") for k, c in enumerate(cases)]
    results = SparkRuntime(spark, batch_sizes=splits, shards=3).run_queries(queries)
    for k, (query, got) in enumerate(zip(queries, results, strict=True)):
        assert got.items(f"q{k}") == query.run(LocalRuntime()).items(f"q{k}"), cases[k]


@pytest.mark.spark
def test_a_failing_key_function_names_the_stream_on_spark(spark):
    from cti.runtime.spark import SparkRuntime

    s = CepStream.create("s", MemoryInputAdapterFactory(),
                         [PointEvent(1, {"k": "a", "v": 1}), PointEvent(2, {"k": "b"})],
                         EventShape.POINT, AdvanceTimeSettings.increasing_start_time(),
                         application=Application())
    q = s.group_by(key=bucket).apply(lambda g: g)
    with pytest.raises(KeyError) as err:
        q.run(SparkRuntime(spark, shards=3))
    assert any("group_by(key=...)" in n and "'s'" in n for n in err.value.__notes__)
