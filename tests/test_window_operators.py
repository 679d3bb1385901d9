"""User-defined operators over windows (``windowed.apply_operator(fn, time_sensitive)``) and
time-sensitive aggregates (``agg.udf(fn, time_sensitive=True)``) against hand-written loops
over every window on random inputs (``operator_reference.windows_overlapping``); output CTIs;
arrival order below the CTIs; Spark against the in-process runner; the user's mistakes."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import operator_reference as ref
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from operator_reference import Life
from strategies import bind, describe
from test_operator_properties import (
    Case,
    assert_spark_equals_local,
    check_case,
    explain,
    ingress_outputs,
    input_defs,
    one_stream,
    replay_defs,
    run_local,
)

from cti import CtiError, IntervalEvent, PointEvent, WindowOutputPolicy, agg, ticks
from cti.runtime.local import LocalRuntime

FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def top_two(payloads: list[dict]) -> list[dict]:
    """An operator: the two largest v (ties by id), each with its rank."""
    best = sorted(payloads, key=lambda p: (-p["v"], p["id"]))[:2]
    return [{"id": p["id"], "k": p["k"], "v": p["v"], "rank": i + 1} for i, p in enumerate(best)]


def pieces(events: list[Any], window: Any) -> list[Any]:
    """A time-sensitive operator: each event's part in the window, with its length."""
    assert all(window.start <= e.start < e.end <= window.end for e in events)
    return [type(e)(*((e.start,) if isinstance(e, PointEvent) else (e.start, e.end)),
                    {"id": e.payload["id"], "k": e.payload["k"], "v": e.end - e.start})
            for e in events]


def covered(events: list[Any], window: Any) -> int:
    """A time-sensitive aggregate: the ticks of the window the events cover, summed."""
    return sum(e.end - e.start for e in events) * 1000 + (window.end - window.start)


def per_window(lives: list[Life], size: int, hop: int, group: bool
               ) -> dict[tuple[int, int, str], list[tuple[int, int, dict]]]:
    """Every (window, group) with its events' lifetimes clipped to it."""
    out: dict[tuple[int, int, str], list[tuple[int, int, dict]]] = defaultdict(list)
    for x in lives:
        for ws, we in ref.windows_overlapping(x.start, x.end, size, hop, 0):
            g = json.dumps(x.payload["k"]) if group else ""
            out[(ws, we, g)].append((max(x.start, ws), min(x.end, we), x.payload))
    return out


@st.composite
def window_operator_case(draw: st.DrawFn) -> Case:
    size = draw(st.integers(1, 10))
    hop = draw(st.sampled_from([size, draw(st.integers(1, size))]))
    kind = draw(st.sampled_from(["operator", "time_sensitive", "udf"]))
    clip = draw(st.booleans())
    group = draw(st.booleans())
    policy = (WindowOutputPolicy.CLIP_TO_WINDOW_END if clip
              else WindowOutputPolicy.POINT_ALIGN_TO_WINDOW_END)

    def body(s: Any) -> Any:
        w = s.hopping_window(ticks(size), ticks(hop), output_policy=policy)
        if kind == "operator":
            return w.apply_operator(top_two)
        if kind == "time_sensitive":
            return w.apply_operator(pieces, time_sensitive=True)
        return w.aggregate(cover=agg.udf(covered, time_sensitive=True), n=agg.count())

    def build(s: list[Any]) -> Any:
        return s[0].group_by("k").apply(body) if group else body(s[0])

    def reference(lv: list[list[Life]], c: list[list[int]]) -> list[Life]:
        lives = ref.end_open_edges_at_last_cti(lv[0], c[0])
        out = []
        for (ws, we, g), members in per_window(lives, size, hop, group).items():
            extra = {"k": json.loads(g)} if group else {}
            if kind == "time_sensitive":
                out += [Life(s, e, {"id": p["id"], "k": p["k"], "v": e - s, **extra},
                             e - s == 1) for s, e, p in members]
                continue
            if kind == "operator":
                payloads = top_two([p for _, _, p in members])
            else:
                payloads = [{"cover": sum(e - s for s, e, _ in members) * 1000 + we - ws,
                             "n": len(members)}]
            for p in payloads:
                p = {**p, **extra}
                out.append(Life(ws, we, p, False) if clip else Life(we, we + 1, p, True))
        return out

    def ctis(c: list[list[int]]) -> list[int]:
        if clip or kind == "time_sensitive":
            return ref.ctis_window_clipped(c[0], size, hop, 0)
        return ref.ctis_unchanged(c[0])

    text = (f"{'group_by(k).apply(' if group else ''}hopping_window({size}, {hop}, "
            f"{policy.name}).{kind}")
    return Case(text, 1, build, reference, ctis, window=True)


@FAST
@given(data=st.data())
def test_equals_the_loop_over_windows(data):
    case = data.draw(window_operator_case())
    check_case(case, data.draw(input_defs(1, finite=data.draw(st.booleans()))))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_output_does_not_depend_on_arrival_order_below_the_ctis(data):
    case = data.draw(window_operator_case())
    defs = data.draw(input_defs(1, finite=True))
    streams, ins = ingress_outputs(defs)
    replay = data.draw(replay_defs(defs, ins))
    assert run_local(case, bind(replay)) == run_local(case, streams), \
        explain(case, defs, ins) + "\nreplayed as:\n" + describe(replay)


@pytest.mark.spark
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), splits=st.one_of(st.none(), st.lists(st.integers(1, 5), min_size=1,
                                                            max_size=3)))
def test_spark_equals_local(spark, data, splits):
    cases = [(case, data.draw(input_defs(1, finite=True, max_size=8)))
             for case in [data.draw(window_operator_case()) for _ in range(8)]]
    assert_spark_equals_local(spark, cases, splits)


POINTS = [PointEvent(1, {"k": "x", "v": 3}), PointEvent(7, {"k": "y", "v": 4})]


@pytest.mark.parametrize("fn, sensitive, says", [
    (lambda evs, w: [IntervalEvent(w.start, w.end + 1, {})], True, "lies outside its window"),
    (lambda evs, w: [{"v": 1}], True, "must return PointEvent or IntervalEvent"),
    (lambda ps: [5], False, "must return payloads"),
])
def test_wrong_outputs_name_the_operator(fn, sensitive, says):
    q = one_stream(POINTS).tumbling_window(ticks(5)).apply_operator(fn, time_sensitive=sensitive)
    with pytest.raises(CtiError, match=says) as err:
        q.run(LocalRuntime())
    assert "apply_operator" in str(err.value) and "stream 'a'" in str(err.value)


def test_the_operators_own_error_is_noted():
    q = one_stream(POINTS).tumbling_window(ticks(5)).apply_operator(lambda ps: 1 / 0)
    with pytest.raises(ZeroDivisionError) as err:
        q.run(LocalRuntime())
    assert any("apply_operator on stream 'a'" in n for n in err.value.__notes__)


def test_udf_settings_are_checked():
    from cti import InvalidSettingsError

    with pytest.raises(InvalidSettingsError, match="not a frame"):
        agg.udf(len, frame=True, time_sensitive=True)
    with pytest.raises(InvalidSettingsError, match="must be a function"):
        one_stream(POINTS).tumbling_window(ticks(5)).apply_operator(3)
