"""Durations computed from the event (``alter_event_duration(fn)``, ``alter_event_lifetime(
start_fn, fn)``, ``MAX_TIME``) and ``group_by`` on several fields or a key function, against
hand-written references (``operator_reference``) on random inputs; arrival order below the
CTIs; Spark against the in-process runner; the user's mistakes named."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import operator_reference as ref
import pytest
from budget import examples
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from operator_reference import Life
from strategies import past_the_simplest, spark_splits
from test_operator_properties import (
    Case,
    assert_arrival_order_free,
    assert_spark_equals_local,
    check_case,
    input_defs,
    one_stream,
)

from cti import MAX_TIME, CtiError, InvalidSettingsError, NullKeyError, PointEvent, agg, ticks
from cti.events import EventShape

FAST = settings(max_examples=examples(40), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def duration_of_event(event: Any) -> Any:
    """The duration the tests compute from an event: 1 + v ticks (v in 0..9), forever when
    v is 9."""
    v = event.payload["v"]
    return MAX_TIME if v == 9 else ticks(1 + v)


def _ticks(payload: dict) -> int:
    return MAX_TIME if payload["v"] == 9 else 1 + payload["v"]


def _end(start: int, payload: dict) -> int:
    d = _ticks(payload)
    return MAX_TIME - 1 if d == MAX_TIME else start + d


def computed_duration_case() -> st.SearchStrategy[Case]:
    def reference(lv: list[list[Life]], _: Any) -> list[Life]:
        return [Life(x.start, _end(x.start, x.payload), x.payload, None) for x in lv[0]]

    return st.just(Case("alter_event_duration(e => 1 + v ticks, forever at v 9)", 1,
                        lambda s: s[0].alter_event_duration(duration_of_event), reference,
                        lambda c: ref.ctis_unchanged(c[0]), with_shape=False))


@st.composite
def computed_lifetime_case(draw: st.DrawFn) -> Case:
    off = draw(st.integers(-5, 5))

    def start_fn(t: int) -> int:
        return t + off

    def reference(lv: list[list[Life]], _: Any) -> list[Life]:
        return [Life(x.start + off, _end(x.start + off, x.payload), x.payload, None)
                for x in lv[0]]

    def ctis(c: list[list[int]]) -> list[int]:
        return ref.strictly_increasing(t if t == MAX_TIME else t + off for t in c[0])

    return Case(f"alter_event_lifetime(t + {off}, e => 1 + v ticks)", 1,
                lambda s: s[0].alter_event_lifetime(start_fn, duration_of_event), reference,
                ctis, with_shape=False)


def _count_windows(size: int, key: Any, name: str | None):
    """A tumbling count per group (``key`` gives each payload's group as a dict of the output
    fields it adds)."""
    def reference(lv: list[list[Life]], c: list[list[int]]) -> list[Life]:
        lives = ref.end_open_edges_at_last_cti(lv[0], c[0])
        groups: dict[str, list[Life]] = defaultdict(list)
        for x in lives:
            groups[json.dumps(key(x.payload), sort_keys=True)].append(x)
        out = []
        for g, members in groups.items():
            for x in ref.hopping_window(members, size, size, 0, {"n": ("count", None),
                                                                  "v": ("sum", "v")}):
                out.append(Life(x.start, x.end, {**x.payload, **json.loads(g)}, x.point))
        return out

    return reference


@st.composite
def group_by_fields_case(draw: st.DrawFn) -> Case:
    size = draw(st.integers(1, 8))
    body = lambda g: g.tumbling_window(ticks(size)).aggregate(  # noqa: E731
        n=agg.count(), v=agg.sum("v"))
    if draw(st.booleans()):
        build = lambda s: s[0].group_by("k", "id").apply(body)  # noqa: E731
        key = lambda p: {"k": p["k"], "id": p["id"]}  # noqa: E731
        text = "group_by('k', 'id')"
    else:
        build = lambda s: s[0].group_by(key=lambda p: p["v"] % 3, name="g").apply(  # noqa: E731
            body)
        key = lambda p: {"g": p["v"] % 3}  # noqa: E731
        text = "group_by(key=v % 3, name='g')"
    return Case(f"{text}.apply(tumbling_window({size}).aggregate(n, v))", 1, build,
                _count_windows(size, key, None), lambda c: ref.ctis_unchanged(c[0]),
                window=True)


CASES = {"duration": computed_duration_case, "lifetime": computed_lifetime_case,
         "group_by": group_by_fields_case}


@pytest.mark.parametrize("name", list(CASES))
@FAST
@given(data=st.data())
def test_equals_reference(name, data):
    case = data.draw(CASES[name]())
    check_case(case, data.draw(input_defs(1, finite=case.window)))


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_output_does_not_depend_on_arrival_order_below_the_ctis(data):
    case = data.draw(st.sampled_from(list(CASES)).flatmap(lambda n: CASES[n]()))
    defs = data.draw(input_defs(1, finite=case.window))
    assert_arrival_order_free(data, case, defs)


@pytest.mark.spark
@settings(max_examples=examples(1), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), splits=past_the_simplest(spark_splits))
def test_spark_equals_local(spark, data, splits):
    cases = []
    for _ in range(9):
        case = data.draw(st.sampled_from(list(CASES)).flatmap(lambda n: CASES[n]()))
        cases.append((case, data.draw(input_defs(1, finite=case.window, max_size=8))))
    assert_spark_equals_local(spark, cases, splits)


POINTS = [PointEvent(1, {"k": "x", "v": 3}), PointEvent(2, {"k": "y", "v": None})]


@pytest.mark.parametrize("bad, says", [
    (lambda e: 5, "a bare number is not a duration"),
    (lambda e: ticks(0), "must be positive"),
    (lambda e: "soon", "return a timedelta"),
])
def test_a_wrong_duration_names_the_operator_and_the_event(bad, says):
    with pytest.raises(CtiError) as err:
        run_local_items(one_stream(POINTS).alter_event_duration(bad))
    text = str(err.value)
    assert says in text and "alter_event_duration on stream 'a'" in text
    assert "PointEvent(start=" in text and "'k': 'x'" in text


def test_the_duration_functions_own_error_is_noted():
    with pytest.raises(TypeError) as err:
        run_local_items(one_stream(POINTS).alter_event_lifetime(
            lambda t: t, lambda e: ticks(e.payload["v"] + 1)))
    assert any("alter_event_lifetime on stream 'a'" in n for n in err.value.__notes__)


def test_group_by_settings_are_checked():
    s = one_stream(POINTS)
    for call, says in [(lambda: s.group_by(), "needs a payload field"),
                       (lambda: s.group_by("k", key=len), "not both"),
                       (lambda: s.group_by("k", "k"), "named twice"),
                       (lambda: s.group_by(key=5), "must be a function"),
                       (lambda: s.group_by(key=len, name=""), "name is the payload field")]:
        with pytest.raises(InvalidSettingsError, match=says):
            call()


def test_a_null_key_from_a_key_function_is_named():
    q = one_stream(POINTS).group_by(key=lambda p: p["v"]).apply(lambda g: g)
    with pytest.raises(NullKeyError, match=r"group_by\(key=\.\.\.\).*key function gives null"):
        run_local_items(q)
    dropped = one_stream(POINTS).group_by(key=lambda p: p["v"], nulls="drop").apply(
        lambda g: g)
    assert [i.payload for i in run_local_items(dropped) if hasattr(i, "payload")] == [
        {"k": "x", "v": 3, "key": 3}]


def test_a_forever_duration_ends_at_the_last_finite_time():
    out = [i for i in run_local_items(one_stream(POINTS, EventShape.POINT)
                                      .alter_event_duration(MAX_TIME)) if hasattr(i, "end")]
    assert [(i.start, i.end) for i in out] == [(1, MAX_TIME - 1), (2, MAX_TIME - 1)]


def run_local_items(query: Any) -> list[Any]:
    from cti.runtime.local import LocalRuntime

    return query.run(LocalRuntime()).items("output")


@settings(max_examples=examples(200), deadline=None)
@given(starts=st.lists(st.one_of(st.integers(-(2**63), MAX_TIME - 1),
                                 st.integers(MAX_TIME - 50, MAX_TIME - 1),
                                 st.integers(-50, 50)), min_size=1, max_size=12),
       duration=st.one_of(st.integers(0, 60), st.integers(0, MAX_TIME),
                          st.just(MAX_TIME), st.just(MAX_TIME - 1)))
@example(starts=[MAX_TIME - 5], duration=5)  # (the first end that saturates)
@example(starts=[MAX_TIME - 6, 0], duration=5)  # (the last that does not)
def test_ends_of_one_duration_saturate_below_max_time(starts, duration):
    """``start + duration``, an end at most ``MAX_TIME - 1``; a duration of ``MAX_TIME`` ends
    there, whichever way the ends are worked out (one duration with no end near ``MAX_TIME``:
    a plain sum)."""
    import numpy as np

    from cti.operators import durations

    got = durations.ends(np.asarray(starts, np.int64), duration).tolist()
    assert got == [MAX_TIME - 1 if duration == MAX_TIME else min(s + duration, MAX_TIME - 1)
                   for s in starts]
