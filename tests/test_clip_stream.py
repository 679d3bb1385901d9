"""``clip_event_duration(clip_stream, on=...)`` (SPEC 8) against hand-written loops on random
inputs: each source event ends at the first matching clip event starting strictly after it;
the output CTIs; readings made a signal (``alter_event_duration(MAX_TIME)`` then a clip by
the readings themselves); arrival order below the CTIs and micro-batch boundaries; Spark
against the in-process runner."""

from __future__ import annotations

from typing import Any

import operator_reference as ref
import pytest
from budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from operator_reference import Life
from strategies import batch_sizes, bind, past_the_simplest, spark_splits
from test_operator_properties import (
    SHAPES,
    Case,
    assert_arrival_order_free,
    assert_spark_equals_local,
    check_case,
    explain,
    ingress_outputs,
    input_defs,
    one_stream,
    run_local,
)

from cti import MAX_TIME, Cti, IntervalEvent, InvalidSettingsError, PointEvent, ticks
from cti.errors import UnknownFieldError
from cti.events import EventShape

FAST = settings(max_examples=examples(60), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def clipped(sources: list[Life], clips: list[Life], key: str | None) -> list[Life]:
    """The loop: each source event against every clip event."""
    out = []
    for x in sources:
        end = x.end
        if not x.point:
            for y in clips:
                if (key is None or y.payload[key] == x.payload[key]) and y.start > x.start:
                    end = min(end, y.start)
        out.append(Life(x.start, min(end, MAX_TIME - 1), x.payload, x.point))
    return out


def output_ctis(sources: list[Life], clips: list[Life], key: str | None,
                levels: list[int]) -> list[int]:
    """SPEC 8: each input CTI value c pushed back to the start of a source event (not a point)
    that starts before c and whose end is not known at c (its clipped end is at or after c)."""
    ends = clipped(sources, clips, key)
    out = []
    for c in levels:
        starts = [x.start for x, y in zip(sources, ends, strict=True)
                  if not x.point and x.start < c <= y.end] if c < MAX_TIME else []
        out.append(min([c, *starts]))
    return ref.strictly_increasing(out)


def clip_case() -> st.SearchStrategy[Case]:
    def build(key: str | None):
        return lambda s: s[0].clip_event_duration(s[1], on=key)

    def case(key: str | None) -> Case:
        return Case(f"a.clip_event_duration(b, on={key!r})", 2, build(key),
                    lambda lv, c: clipped(lv[0], lv[1], key),
                    lambda c, lv=None: [], shapes=(SHAPES, SHAPES))

    return st.sampled_from(["k", None]).map(case)


FOREVER = MAX_TIME - 1


def signal(lives: list[Life]) -> list[Life]:
    """The loop: each reading lasts until the next later reading of its key (or forever)."""
    out = []
    for x in lives:
        later = [y.start for y in lives if y.payload["k"] == x.payload["k"] and
                 y.start > x.start]
        out.append(Life(x.start, min(later, default=FOREVER), x.payload, False))
    return out


def signal_case() -> st.SearchStrategy[Case]:
    def plain(s: list[Any]) -> Any:
        return s[0].alter_event_duration(MAX_TIME).clip_event_duration(s[0], on="k")

    def grouped(s: list[Any]) -> Any:
        return s[0].group_by("k").apply(
            lambda g: g.alter_event_duration(MAX_TIME).clip_event_duration(g))

    return st.sampled_from([("signal", plain), ("grouped signal", grouped)]).map(
        lambda named: Case(named[0], 1, named[1], lambda lv, c: signal(lv[0]),
                           lambda c: [], shapes=(SHAPES,), with_shape=False))


def check(case: Case, defs: list) -> None:
    """The engine's lifetimes equal the loop's, and its CTIs the SPEC's (``check_case`` with
    the CTIs computed from the inputs' lifetimes)."""
    streams, ins = ingress_outputs(defs)
    lives = [ref.lifetimes(items) for items in ins]
    in_ctis = [ref.ctis_of(items) for items in ins]
    if case.n_inputs == 2:
        key = "k" if "'k'" in case.text else None
        want = output_ctis(lives[0], lives[1], key, ref.ctis_merged(*in_ctis))
    else:
        forever = [Life(x.start, MAX_TIME, x.payload, False) for x in lives[0]]
        want = output_ctis(forever, lives[0], "k", ref.ctis_unchanged(in_ctis[0]))
    case.ctis = lambda c: want
    check_case(case, defs)


@FAST
@given(data=st.data())
def test_clip_by_a_stream_equals_the_loop(data):
    case = data.draw(clip_case())
    check(case, data.draw(input_defs(2)))


@FAST
@given(data=st.data())
def test_readings_become_a_signal(data):
    case = data.draw(signal_case())
    check(case, data.draw(input_defs(1)))


def any_case() -> st.SearchStrategy[tuple[Case, list]]:
    return st.one_of(clip_case().flatmap(lambda c: st.tuples(st.just(c), input_defs(2))),
                     signal_case().flatmap(lambda c: st.tuples(st.just(c), input_defs(1))))


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_output_does_not_depend_on_arrival_order_below_the_ctis(data):
    case, defs = data.draw(any_case())
    assert_arrival_order_free(data, case, defs)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), sizes=batch_sizes)
def test_output_does_not_depend_on_batch_boundaries(data, sizes):
    case, defs = data.draw(any_case())
    streams = bind(defs)
    assert run_local(case, streams, sizes) == run_local(case, streams), explain(case, defs)


@pytest.mark.spark
@settings(max_examples=examples(1), deadline=None, suppress_health_check=list(HealthCheck))
@given(cases=st.lists(any_case(), min_size=8, max_size=10),
       splits=past_the_simplest(spark_splits))
def test_spark_equals_local(spark, cases, splits):
    assert_spark_equals_local(spark, cases, splits)


def test_a_reading_holds_the_ctis_until_the_next_reading_of_its_key():
    readings = [PointEvent(1, {"k": "x", "v": 1}), PointEvent(2, {"k": "y", "v": 2}),
                PointEvent(4, {"k": "x", "v": 3}), Cti(5), PointEvent(10, {"k": "y", "v": 4}),
                Cti(11)]
    s = one_stream(readings, flush=False)
    out = run_items(s.alter_event_duration(MAX_TIME).clip_event_duration(s, on="k"))
    assert out == [IntervalEvent(1, 4, {"k": "x", "v": 1}), Cti(2),
                   IntervalEvent(2, 10, {"k": "y", "v": 2}), Cti(4)]


def test_clip_settings_are_checked():
    s = one_stream([PointEvent(1, {"k": "x"})])
    with pytest.raises(InvalidSettingsError, match="on= goes with a clip stream"):
        s.clip_event_duration(ticks(3), on="k")
    with pytest.raises(UnknownFieldError, match="'kk'"):
        s.clip_event_duration(s, on="kk")
    with pytest.raises(InvalidSettingsError, match="on= is a payload field name"):
        s.clip_event_duration(s, on=3)


def test_points_are_never_clipped_and_shapes_are_declared():
    s = one_stream([PointEvent(1, {"k": "x"})])
    assert s.clip_event_duration(s, on="k").shape is EventShape.POINT
    assert s.alter_event_duration(ticks(2)).clip_event_duration(s).shape is EventShape.INTERVAL


def run_items(query: Any) -> list[Any]:
    from cti.runtime.local import LocalRuntime

    return query.run(LocalRuntime()).items("output")


def test_a_query_with_a_clip_by_a_stream_spreads_by_its_key():
    """Its output CTIs depend on the events each shard holds (``data_ctis``), tagged with the
    levels every shard computes alike: it spreads, combined after the shards
    (``tests/test_hold.py``)."""
    from cti.operators.sharding import data_ctis, shard_fields

    s = one_stream([PointEvent(1, {"k": "x"})])
    grouped = s.group_by("k").apply(lambda g: g.clip_event_duration(g))
    assert data_ctis(grouped.node) and shard_fields(grouped.node, grouped.inputs()) == ["k"]
    keyed = s.alter_event_duration(MAX_TIME).clip_event_duration(s, on="k")
    assert shard_fields(keyed.node, keyed.inputs()) == ["k"]
    plain = s.group_by("k").apply(lambda g: g.clip_event_duration(ticks(2)))
    assert shard_fields(plain.node, plain.inputs()) == ["k"]
    # Without a key the clip keeps its state for every event together: one shard.
    assert shard_fields(s.clip_event_duration(s).node, [s]) is None
