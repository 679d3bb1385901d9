"""User-defined operators over windows (``windowed.apply_operator(fn, time_sensitive)``) and
time-sensitive aggregates (``agg.udf(fn, time_sensitive=True)``) against hand-written loops
over every window on random inputs (hopping: ``operator_reference.windows_overlapping``;
snapshot: the tick-by-tick brute force; count: every n distinct starts); output CTIs;
arrival order below the CTIs; Spark against the in-process runner; the user's mistakes."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import attrs
import operator_reference as ref
import pytest
from budget import examples
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from operator_reference import Life
from strategies import batch_sizes, bind, describe, past_the_simplest, spark_splits
from test_operator_properties import (
    Case,
    assert_arrival_order_free,
    assert_spark_equals_local,
    check_case,
    explain,
    ingress_outputs,
    input_defs,
    one_stream,
    replay_defs,
    run_local,
)
from test_snapshot_window import snapshot_ctis, snapshot_members

from cti import (
    Cti,
    CtiError,
    EventShape,
    IntervalEvent,
    PointEvent,
    WindowOutputPolicy,
    agg,
    ticks,
)
from cti.runtime.local import LocalRuntime

FAST = settings(max_examples=examples(40), deadline=None,
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


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_output_does_not_depend_on_arrival_order_below_the_ctis(data):
    case = data.draw(window_operator_case())
    defs = data.draw(input_defs(1, finite=True))
    assert_arrival_order_free(data, case, defs)


@pytest.mark.spark
@settings(max_examples=examples(1), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), splits=past_the_simplest(spark_splits))
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


# ---- snapshot and count windows ---------------------------------------------------------------

def counted(events: list[Any], window: Any) -> int:
    """A time-sensitive aggregate: how many events, and the window's length (capped: a
    snapshot window may reach MAX_TIME)."""
    assert all(window.start <= e.start < e.end <= window.end for e in events)
    return len(events) * 1000 + min(window.end - window.start, 999)


def snapshot_windows(lives: list[Life], group: bool
                     ) -> list[tuple[int, int, str, list[tuple[int, int, dict]]]]:
    """Every snapshot window (``test_snapshot_window``'s tick-by-tick brute force) and group,
    with its members' lifetimes clipped to it (each member covers its whole window)."""
    out = []
    for ws, we, payloads in snapshot_members(lives, "k" if group else None):
        g = json.dumps(payloads[0]["k"]) if group else ""
        out.append((ws, we, g, [(ws, we, p) for p in payloads]))
    return out


def count_windows(lives: list[Life], n: int, group: bool
                  ) -> list[tuple[int, int, str, list[tuple[int, int, dict]]]]:
    """Every count window (``n`` consecutive distinct starts of a group) with its members'
    lifetimes clipped to ``[first start, last start + 1)``."""
    groups: dict[str, list[Life]] = defaultdict(list)
    for x in lives:
        groups[json.dumps(x.payload["k"]) if group else ""].append(x)
    out = []
    for g, members in groups.items():
        starts = sorted({x.start for x in members})
        for i in range(len(starts) - n + 1):
            ws, we = starts[i], starts[i + n - 1] + 1
            chosen = set(starts[i:i + n])
            out.append((ws, we, g, [(x.start, min(x.end, we), x.payload)
                                    for x in members if x.start in chosen]))
    return out


def count_clipped_ctis(lives: list[Life], n: int, group: bool, ctis: list[int]) -> list[int]:
    """A time-sensitive operator's CTIs over count windows: each CTI c at the start of the
    earliest window not complete at c (each group's window over its last ``n - 1`` distinct
    starts below c)."""
    out = []
    for c in ctis:
        t = c
        if c < ref.MAX_TIME and n > 1:
            groups: dict[str, set[int]] = defaultdict(set)
            for x in lives:
                if x.start < c:
                    groups[json.dumps(x.payload["k"]) if group else ""].add(x.start)
            for starts in groups.values():
                below = sorted(starts)
                t = min(t, below[max(len(below) - n + 1, 0)])
        out.append(t)
    return ref.strictly_increasing(out)


@st.composite
def snapshot_count_operator_case(draw: st.DrawFn, grouped: bool | None = None) -> Case:
    """A user-defined operator (or time-sensitive aggregate) over snapshot or count windows;
    ``case.data_ctis(lives, ctis, edges)`` gives its output CTIs."""
    count = draw(st.booleans())
    n = draw(st.integers(1, 3))
    kind = draw(st.sampled_from(["operator", "time_sensitive", "udf"]))
    clip = not count and draw(st.booleans())
    group = draw(st.booleans()) if grouped is None else grouped
    policy = (WindowOutputPolicy.CLIP_TO_WINDOW_END if clip
              else WindowOutputPolicy.POINT_ALIGN_TO_WINDOW_END)

    def body(s: Any) -> Any:
        w = s.count_window(n) if count else s.snapshot_window(policy)
        if kind == "operator":
            return w.apply_operator(top_two)
        if kind == "time_sensitive":
            return w.apply_operator(pieces, time_sensitive=True)
        return w.aggregate(cover=agg.udf(counted, time_sensitive=True), n=agg.count())

    def build(s: list[Any]) -> Any:
        return s[0].group_by("k").apply(body) if group else body(s[0])

    def reference(lv: list[list[Life]], c: list[list[int]]) -> list[Life]:
        lives = lv[0]  # (an edge never closed: clipped to each window's end)
        windows = count_windows(lives, n, group) if count else snapshot_windows(lives, group)
        out = []
        for ws, we, g, members in windows:
            extra = {"k": json.loads(g)} if group else {}
            if kind == "time_sensitive":  # (forever: to the last finite time)
                members = [(s, min(e, ref.MAX_TIME - 1), p) for s, e, p in members]
                out += [Life(s, e, {"id": p["id"], "k": p["k"], "v": e - s, **extra},
                             e - s == 1) for s, e, p in members]
                continue
            if not clip and we == ref.MAX_TIME:
                continue  # (no point at infinity)
            if kind == "operator":
                payloads = top_two([p for _, _, p in members])
            else:
                payloads = [{"cover": counted([PointEvent(s, p) if e - s == 1 else
                                               IntervalEvent(s, min(e, ref.MAX_TIME - 1), p)
                                               for s, e, p in members],
                                              _Window(ws, we)), "n": len(members)}]
            for p in payloads:
                p = {**p, **extra}
                out.append(Life(ws, we, p, False) if clip else Life(we, we + 1, p, True))
        return out

    def data_ctis(lives: list[Life], c: list[int], edges: bool) -> list[int]:
        if kind == "time_sensitive" and count:
            return count_clipped_ctis(lives, n, group, c)
        if (clip or kind == "time_sensitive") and not count:
            return snapshot_ctis(lives, edges, c, "k" if group else None)
        return ref.ctis_unchanged(c)

    window = f"count_window({n})" if count else f"snapshot_window({policy.name})"
    text = f"{'group_by(k).apply(' if group else ''}{window}.{kind}"
    case = Case(text, 1, build, reference, lambda c: [], window=True)
    case.data_ctis = data_ctis  # type: ignore[attr-defined]
    return case


@attrs.frozen
class _Window:
    start: int
    end: int


def check_data_case(case: Case, defs: list) -> None:
    """``check_case`` with output CTIs that depend on the events (``case.data_ctis``)."""
    from test_operator_properties import check_shape, check_well_formed

    streams, ins = ingress_outputs(defs)
    lives = [ref.lifetimes(items) for items in ins]
    msg = explain(case, defs, ins)
    note(msg)
    query = case.build(streams)
    out = query.run(LocalRuntime()).items("output")
    check_well_formed(out, msg)
    check_shape(out, query.shape, msg)
    problem = ref.diff(case.reference(lives, [ref.ctis_of(ins[0])]), ref.lifetimes(out))
    assert not problem, f"{problem}\n{msg}\noutput: {out}"
    want = case.data_ctis(lives[0], ref.ctis_of(ins[0]),  # type: ignore[attr-defined]
                          defs[0].shape is EventShape.EDGE)
    assert ref.ctis_of(out) == want, (ref.ctis_of(out), want, msg)


@FAST
@given(data=st.data())
def test_snapshot_and_count_operators_equal_the_loop_over_windows(data):
    case = data.draw(snapshot_count_operator_case())
    check_data_case(case, data.draw(input_defs(1, max_size=10)))


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), sizes=batch_sizes)
def test_snapshot_and_count_operators_do_not_depend_on_arrival_order_or_batches(data, sizes):
    case = data.draw(snapshot_count_operator_case())
    defs = data.draw(input_defs(1, finite=True, max_size=10))
    streams, ins = ingress_outputs(defs)
    whole = run_local(case, streams)
    replay = data.draw(replay_defs(defs, ins))
    assert run_local(case, bind(replay)) == whole, \
        explain(case, defs, ins) + "\nreplayed as:\n" + describe(replay)
    assert run_local(case, bind(defs), sizes) == whole, explain(case, defs) + f"\n{sizes}"


@pytest.mark.spark
@settings(max_examples=examples(1), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), splits=past_the_simplest(spark_splits))
def test_snapshot_and_count_operators_on_spark_equal_local(spark, data, splits):
    cases = [(case, data.draw(input_defs(1, finite=True, max_size=8)))
             for case in [data.draw(snapshot_count_operator_case(grouped=True))
                          for _ in range(8)]]
    assert_spark_equals_local(spark, cases, splits)


def test_count_window_operator_ctis_go_back_to_the_earliest_open_window():
    """Starts 1, 3, 4 before the CTI at 6: windows {1, 3} and {3, 4} are complete; the one
    over {4, next} is not, and a time-sensitive output of it may start at 4 (so may the
    outputs of {3, 4}: the part at 4 waits for a CTI above it)."""
    items = [PointEvent(t, {"id": str(t), "k": "x", "v": t}) for t in (1, 3, 4)] + [Cti(6)]
    q = one_stream(items, flush=False).count_window(2).apply_operator(pieces,
                                                                      time_sensitive=True)
    out = q.run(LocalRuntime()).items("output")
    assert [i for i in out if isinstance(i, Cti)] == [Cti(4)]
    assert sorted(i.start for i in out if isinstance(i, PointEvent)) == [1, 3, 3]


@pytest.mark.parametrize("body, held", [
    (lambda g: g.count_window(2).apply_operator(top_two), False),
    (lambda g: g.snapshot_window(WindowOutputPolicy.POINT_ALIGN_TO_WINDOW_END
                                 ).apply_operator(top_two), False),
    (lambda g: g.count_window(2).apply_operator(pieces, time_sensitive=True), True),
    (lambda g: g.snapshot_window().apply_operator(top_two), True),
])
def test_operators_whose_ctis_depend_on_the_events_spread_and_are_held(body, held):
    """Every such query spreads over the shards by the group's key; one whose output CTIs
    depend on the events it holds has its shards' output held until their CTIs are combined
    (docs/spark-runtime.md, "Output CTIs that depend on the events")."""
    from cti.engine.route import routes
    from cti.runtime.base import query_inputs

    query = one_stream(POINTS).group_by("k").apply(body)
    groups, refs = query_inputs(query)
    route = routes([query], groups, [refs], 4, False)[0]
    assert route.shards == 4 and route.held == held
