"""Snapshot windows (SPEC 8) against a tick-by-tick brute force over random points,
intervals and edges (``test_operator_properties``' random inputs), and the properties every
operator has: output CTIs as the rule says, a well-formed canonical output, the same output
whatever the arrival order below the CTIs and however the input is cut into micro-batches,
and the same output on Spark.

The brute force knows nothing of endpoints: at every tick it computes the set of active
events, and a window is a maximal run of ticks with the same non-empty set.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import operator_reference as ref
import pytest
import test_operator_properties as props
from budget import examples
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from operator_reference import Life
from strategies import batch_sizes, bind, describe, past_the_simplest, spark_splits

from cti import MAX_TIME, EventShape, IntervalEvent, PointEvent, WindowOutputPolicy, agg, ticks
from cti.errors import InvalidSettingsError
from cti.runtime.local import LocalRuntime

CLIP, POINT_ALIGN = WindowOutputPolicy.CLIP_TO_WINDOW_END, \
    WindowOutputPolicy.POINT_ALIGN_TO_WINDOW_END
EDGE = EventShape.EDGE


# ---- the brute force --------------------------------------------------------------------------

def snapshot_members(lives: Sequence[Life], group_by: str | None
                     ) -> list[tuple[int, int, list[dict]]]:
    """Tick by tick, per group: a window per maximal run of ticks with the same non-empty set
    of active events (``start <= t < end``), as (start, end, the members' payloads); after the
    last finite endpoint the events that never end are active up to MAX_TIME."""
    groups: dict[str, list[Life]] = defaultdict(list)
    for x in lives:
        groups[ref.canon({"g": x.payload[group_by]}) if group_by else ""].append(x)
    out = []
    for members in groups.values():
        times = [t for x in members for t in (x.start, x.end) if t < MAX_TIME]
        runs: list[tuple[int, int, tuple[int, ...]]] = []
        for t in range(min(times), max(times) + 1):
            active = tuple(i for i, x in enumerate(members) if x.start <= t < x.end)
            if runs and runs[-1][2] == active and runs[-1][1] == t:
                runs[-1] = (runs[-1][0], t + 1, active)
            else:
                runs.append((t, t + 1, active))
        if runs and runs[-1][2] and all(members[i].end == MAX_TIME for i in runs[-1][2]):
            runs[-1] = (runs[-1][0], MAX_TIME, runs[-1][2])
        out += [(start, end, [members[i].payload for i in active])
                for start, end, active in runs if active]
    return out


def snapshot_reference(lives: Sequence[Life], specs: dict[str, ref.Aggregate], clip: bool,
                       group_by: str | None) -> list[Life]:
    """The aggregates of each window of ``snapshot_members``: an interval per window, or a
    point at its end (none at infinity)."""
    out = []
    for start, end, payloads in snapshot_members(lives, group_by):
        if not clip and end == MAX_TIME:
            continue
        payload = {group_by: payloads[0][group_by]} if group_by else {}
        payload |= {n: ref.aggregate_value(kind, f, payloads) for n, (kind, f) in specs.items()}
        out.append(Life(start, end, payload, False) if clip else Life(end, end + 1, payload, True))
    return out


def snapshot_ctis(lives: Sequence[Life], edges: bool, ctis: Sequence[int],
                  group_by: str | None) -> list[int]:
    """CLIP_TO_WINDOW_END's output CTIs from what is certain at each input CTI c (events with
    sync time below c): c goes back to the start of the window open at c (the last endpoint
    below c, or at c where a point or interval ends there) of every group with an event
    active across c (an edge whose end is not below c counts as active); unchanged if
    none."""
    out = []
    for c in ctis:
        if c == MAX_TIME:
            out.append(c)
            continue
        starts: dict[str, list[int]] = defaultdict(list)
        for x in lives:
            if x.start >= c:
                continue
            g = ref.canon({"g": x.payload[group_by]}) if group_by else ""
            end_known = x.end < c or (not edges and x.end <= c)
            if not end_known:  # active across c: its window starts at the last endpoint
                starts[g].append(x.start)
        t = c
        for g in starts:
            ends = [e for x in lives if x.start < c and (
                not group_by or ref.canon({"g": x.payload[group_by]}) == g)
                for e in (x.start, x.end) if e < c or (not edges and e == c and e != x.start)]
            t = min(t, max(ends))
        out.append(t)
    return ref.strictly_increasing(out)


# ---- random queries ---------------------------------------------------------------------------

@st.composite
def snapshot_case(draw: st.DrawFn, grouped: bool | None = None) -> props.Case:
    """A snapshot window (maybe after alter_event_duration: a sliding window; maybe under
    group_by("k")) with an integer aggregate of v, a udf of the ids and more aggregates."""
    clip = draw(st.booleans())
    group = draw(st.booleans()) if grouped is None else grouped
    duration = draw(st.one_of(st.none(), st.integers(1, 12)))
    udf = draw(st.booleans())  # (without one, only adding aggregates: summed along windows)
    names = draw(st.lists(st.sampled_from(sorted(props.AGGREGATES)), min_size=0 if udf else 1,
                          max_size=3, unique=True))
    incremental = udf and draw(st.booleans())
    specs: dict[str, ref.Aggregate] = {"id": ("udf", props._udf_ids)} if udf else {}
    specs |= {n: props.AGGREGATES[n][1] for n in names}
    if incremental:
        specs["inc"] = ("sum", "v")

    def aggs() -> dict[str, Any]:
        out: dict[str, Any] = {"id": agg.udf(props._udf_ids)} if udf else {}
        out |= {n: props.AGGREGATES[n][0]() for n in names}
        if incremental:
            out["inc"] = agg.incremental(lambda: 0, lambda s, p: s + p["v"])
        return out

    policy = CLIP if clip else POINT_ALIGN

    def inner(s: Any) -> Any:
        return s if duration is None else s.alter_event_duration(ticks(duration))

    def windowed(s: Any) -> Any:
        return s.snapshot_window(policy).aggregate(**aggs())

    def build(s: list[Any]) -> Any:
        if group:
            return inner(s[0]).group_by("k").apply(windowed)
        return windowed(inner(s[0]))

    text = (f"{'' if duration is None else f'alter_event_duration({duration}).'}"
            f"{'group_by(k).apply(' if group else ''}snapshot_window({policy.name})"
            f".aggregate({', '.join(specs)}){')' if group else ''}")
    case = props.Case(text, 1, build, lambda lv, c: [], lambda c: [], window=True)
    case.inner = inner  # type: ignore[attr-defined]
    case.check = (specs, clip, "k" if group else None, duration)  # type: ignore[attr-defined]
    return case


def check_snapshot(case: props.Case, defs: list) -> list[Any]:
    """The engine's output against the brute force, its CTIs against the rule."""
    streams = bind(defs)
    specs, clip, group, duration = case.check  # type: ignore[attr-defined]
    feed = case.inner(streams[0]).collect("local")  # type: ignore[attr-defined]
    lives = ref.lifetimes(feed)
    msg = props.explain(case, defs) + f"\nsnapshot input: {feed}"
    note(msg)
    query = case.build(streams)
    out = query.run(LocalRuntime()).items("output")
    props.check_well_formed(out, msg)
    props.check_shape(out, query.shape, msg)
    problem = ref.diff(snapshot_reference(lives, specs, clip, group), ref.lifetimes(out))
    assert not problem, f"{problem}\n{msg}\noutput: {out}"
    edges = defs[0].shape is EDGE and duration is None
    want = snapshot_ctis(lives, edges, ref.ctis_of(feed), group) if clip else \
        ref.ctis_unchanged(ref.ctis_of(feed))
    assert ref.ctis_of(out) == want, (ref.ctis_of(out), want, msg)
    return out


@settings(max_examples=examples(150), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_snapshot_equals_the_tick_by_tick_brute_force(data):
    case = data.draw(snapshot_case())
    finite = data.draw(st.booleans())
    check_snapshot(case, data.draw(props.input_defs(1, max_size=14, finite=finite)))


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_snapshot_output_does_not_depend_on_arrival_order_below_the_ctis(data):
    case = data.draw(snapshot_case())
    defs = data.draw(props.input_defs(1, max_size=14))
    streams, ins = props.ingress_outputs(defs)
    whole = props.run_local(case, streams)
    replay = data.draw(props.replay_defs(defs, ins))
    msg = props.explain(case, defs, ins) + "\nreplayed as:\n" + describe(replay)
    assert props.run_local(case, bind(replay)) == whole, msg


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), sizes=batch_sizes)
def test_snapshot_output_does_not_depend_on_batch_boundaries(data, sizes):
    case = data.draw(snapshot_case())
    defs = data.draw(props.input_defs(1, max_size=14))
    streams = bind(defs)
    whole = props.run_local(case, streams)
    assert props.run_local(case, streams, sizes) == whole, props.explain(case, defs) + \
        f"\nbatches {sizes}"


@pytest.mark.spark
@settings(max_examples=examples(1), deadline=None, suppress_health_check=list(HealthCheck))
@given(cases=st.lists(st.tuples(snapshot_case(grouped=True), props.input_defs(1, max_size=10)),
                      min_size=6, max_size=8),
       splits=past_the_simplest(spark_splits))
def test_snapshot_on_spark_equals_local(spark, cases, splits):
    """Spread over shards by the group key (``group_by("k")``), as the hopping window is."""
    props.assert_spark_equals_local(spark, cases, splits)


# ---- examples that pin the rules --------------------------------------------------------------

def test_clipped_ctis_go_back_to_the_window_open_at_the_cti():
    """SPEC 8: pushed back to the start of the window open at the CTI; unchanged where no
    event is active across it. At CTI 6 the window [4, 8) is open ([2, 8) and [4, 9) active);
    at 12 nothing is active; at 14 [13, 20) is open, but a start exactly at 14 is not certain
    at 14 (it may arrive after the CTI), so the window [13, ...) counts."""
    items = [IntervalEvent(2, 8, {"v": 1}), IntervalEvent(4, 9, {"v": 2}), props.Cti(6),
             props.Cti(12), IntervalEvent(13, 20, {"v": 4}), IntervalEvent(14, 15, {"v": 8}),
             props.Cti(14)]
    s = props.one_stream(items, EventShape.INTERVAL)
    out = props.run_items(s.snapshot_window().aggregate(total=agg.sum("v")))
    assert ref.ctis_of(out) == [4, 12, 13, MAX_TIME]
    assert ref.lifetimes(out) == [Life(2, 4, {"total": 1}), Life(4, 8, {"total": 3}),
                                  Life(8, 9, {"total": 2}), Life(13, 14, {"total": 4}),
                                  Life(14, 15, {"total": 12}), Life(15, 20, {"total": 4})]


def test_point_align_gives_a_point_at_each_window_end_and_keeps_the_ctis():
    items = [IntervalEvent(3, 4, {"v": 1}), IntervalEvent(3, 6, {"v": 2}), props.Cti(5)]
    s = props.one_stream(items, EventShape.INTERVAL)
    out = props.run_items(s.snapshot_window(POINT_ALIGN).aggregate(n=agg.count()))
    assert out == [PointEvent(4, {"n": 2}), props.Cti(5), PointEvent(6, {"n": 1}),
                   props.Cti(MAX_TIME)]


@pytest.mark.parametrize(("build", "message"), [
    (lambda s: s.snapshot_window("clip"), "output_policy must be a WindowOutputPolicy"),
    (lambda s: s.snapshot_window().aggregate(), "at least one named aggregate"),
    (lambda s: s.snapshot_window().aggregate(x=agg.sum("nope")), "nope"),
])
def test_mistakes_fail_loudly(build: Callable[[Any], Any], message: str):
    from cti import UnknownFieldError

    s = props.one_stream([PointEvent(1, {"v": 1})])
    with pytest.raises((InvalidSettingsError, UnknownFieldError), match=message):
        build(s)


def test_each_window_once_where_another_keys_endpoint_lies_between_a_keys_equal_ones():
    """Key a's two starts at 2 lie apart when the endpoints are sorted by time (key b's start
    at 2 comes between them): the windows are still found once each, by start time."""
    import numpy as np

    from cti.forms import frame
    from cti.operators import snapshot

    held = frame.framed({"id": np.arange(3), "code": np.array([0, 1, 0]),
                         "start": np.array([2, 2, 2]), "lo": np.array([2, 2, 2]),
                         "end": np.array([6, 6, 4]), "known": np.ones(3, bool),
                         "payload": frame.filled(3, None)})
    cut = snapshot._cut(held, snapshot.KeyTable(["a", "b"], {"a": 0, "b": 1}), 10)
    assert [(cut.keys[cut.bound_key[w]], cut.time[w], cut.time[w + 1]) for w in cut.windows] \
        == [("a", 2, 4), ("b", 2, 6), ("a", 4, 6)]
    items = [IntervalEvent(2, 6, {"k": "a"}), IntervalEvent(2, 6, {"k": "b"}),
             IntervalEvent(2, 4, {"k": "a"})]
    s = props.one_stream(items, EventShape.INTERVAL)
    out = props.run_items(s.group_by("k").apply(lambda g: g.snapshot_window().aggregate(
        n=agg.count())))
    assert sorted(ref.lifetimes(out), key=lambda e: (e.start, e.payload["k"])) == [
        Life(2, 4, {"k": "a", "n": 2}), Life(2, 6, {"k": "b", "n": 1}),
        Life(4, 6, {"k": "a", "n": 1})]


def test_the_key_table_holds_the_keys_held_not_every_key_seen():
    """A key whose events have all left is dropped from the table once such keys are most of
    it, so a stream of ever new keys does not grow the state."""
    import numpy as np

    from cti.forms import frame
    from cti.forms.frame import Chunk
    from cti.operators import snapshot

    node = props.one_stream([], EventShape.INTERVAL).snapshot_window().aggregate(
        n=agg.count()).node
    state = snapshot.SnapshotState()
    sizes = []
    for i in range(300):
        ev = frame.make(["interval"], np.array([10 * i]), np.array([10 * i + 1]), ['{}'],
                        [f'["k{i}"]'])
        out = snapshot.snapshot(node, Chunk(ev, [10 * i + 5]), state)
        assert out.events["start"].tolist() == [10 * i]
        sizes.append(len(state.keys.keys))
    assert max(sizes) <= 64, max(sizes)


def test_a_key_table_pickles_its_keys_once_and_reads_a_state_that_held_its_codes_too():
    """The codes are the keys' places: a state holds the keys alone, and a state pickled
    with the codes beside them (before) reads back as the same table."""
    import pickle

    import numpy as np

    from cti.operators import snapshot

    table = snapshot.KeyTable()
    assert table.codes(np.array([0, 2, 1, 2]), ["a", "b", "c"]).tolist() == [0, 2, 1, 2]
    back = pickle.loads(pickle.dumps(table))
    assert back == table and back.code_of == {"a": 0, "b": 1, "c": 2}
    assert "code_of" not in pickle.dumps(table).decode("latin-1")
    old = snapshot.KeyTable.__new__(snapshot.KeyTable)
    old.__setstate__({"keys": ["x", "y"], "code_of": {"x": 0, "y": 1}})
    assert old == snapshot.KeyTable(["x", "y"], {"x": 0, "y": 1})
    assert old.codes(np.array([0]), ["z"]).tolist() == [2]
