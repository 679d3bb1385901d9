"""TopK over snapshot, hopping and tumbling windows (SPEC 8) on random points, intervals and
edges (``test_operator_properties``' random inputs): each window's members (by the brute
forces of the windows) ranked by SQL RANK computed from a sort, every member ranked ``k`` or
better returned with its rank; the window's output CTIs; the same output whatever the arrival
order below the CTIs and however the input is cut into micro-batches; the same output on
Spark under ``group_by``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import operator_reference as ref
import pytest
import test_operator_properties as props
from budget import examples
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from operator_reference import Life
from strategies import batch_sizes, bind, describe, past_the_simplest, spark_splits
from test_snapshot_window import snapshot_ctis, snapshot_members

from cti import Cti, CtiError, PointEvent, WindowOutputPolicy, ticks
from cti.errors import InvalidSettingsError, UnknownFieldError
from cti.runtime.local import LocalRuntime

ORDERS = {
    "v desc": (("v", "desc"),),
    "v asc, id asc": (("v", "asc"), ("id", "asc")),
    "k asc, v desc": (("k", "asc"), ("v", "desc")),
}


def ranked(payloads: list[dict], order: Sequence[tuple[str, str]], k: int) -> list[dict]:
    """SQL RANK from a sort: sorted by the fields (a stable sort per field, last first), a
    member's rank is 1 + its place among members with a different sort key before it."""
    rows = list(payloads)
    for field, direction in reversed(order):
        rows.sort(key=lambda p, f=field: p[f], reverse=direction == "desc")
    out, rank = [], 0
    for place, p in enumerate(rows, 1):
        key = [p[f] for f, _ in order]
        if place == 1 or key != [rows[place - 2][f] for f, _ in order]:
            rank = place
        if rank <= k:
            out.append({**p, "rank": rank})
    return out


def hopping_members(lives: Sequence[Life], size: int, hop: int, group_by: str | None
                    ) -> list[tuple[int, int, list[dict]]]:
    members: dict[tuple, list[dict]] = defaultdict(list)
    for x in lives:
        g = ref.canon({"g": x.payload[group_by]}) if group_by else ""
        for w in ref.windows_overlapping(x.start, x.end, size, hop, 0):
            members[(w[0], w[1], g)].append(x.payload)
    return [(s, e, ps) for (s, e, _), ps in members.items()]


@st.composite
def top_k_case(draw: st.DrawFn, grouped: bool | None = None) -> props.Case:
    kind = draw(st.sampled_from(["snapshot", "tumbling", "hopping"]))
    size = draw(st.integers(1, 12))
    hop = size if kind == "tumbling" else draw(st.integers(1, size))
    clip = draw(st.booleans())
    policy = WindowOutputPolicy.CLIP_TO_WINDOW_END if clip else \
        WindowOutputPolicy.POINT_ALIGN_TO_WINDOW_END
    k = draw(st.integers(1, 4))
    order_text = draw(st.sampled_from(sorted(ORDERS)))
    order = ORDERS[order_text]
    group = draw(st.booleans()) if grouped is None else grouped

    def windowed(s: Any) -> Any:
        if kind == "snapshot":
            w = s.snapshot_window(policy)
        elif kind == "tumbling":
            w = s.tumbling_window(ticks(size), output_policy=policy)
        else:
            w = s.hopping_window(ticks(size), ticks(hop), output_policy=policy)
        return w.top_k(k, [list(p) for p in order])

    def build(s: list[Any]) -> Any:
        return s[0].group_by("k").apply(windowed) if group else windowed(s[0])

    def reference(lv: list[list[Life]], c: list[list[int]]) -> list[Life]:
        g = "k" if group else None
        if kind == "snapshot":
            windows = snapshot_members(lv[0], g)
        else:  # (edges never closed end at the last finite CTI: the hopping window's choice)
            windows = hopping_members(ref.end_open_edges_at_last_cti(lv[0], c[0]), size, hop,
                                      g)
        out = []
        for start, end, payloads in windows:
            if not clip and end == ref.MAX_TIME:
                continue
            for p in ranked(payloads, order, k):
                out.append(Life(start, end, p, False) if clip else Life(end, end + 1, p, True))
        return out

    def ctis(c: list[list[int]]) -> list[int]:
        if clip and kind != "snapshot":
            return ref.ctis_window_clipped(c[0], size, hop, 0)
        return ref.ctis_unchanged(c[0])  # (a clipped snapshot's: checked in check_top_k)

    window = "snapshot_window(" if kind == "snapshot" else (
        f"tumbling_window({size}, " if kind == "tumbling" else f"hopping_window({size}, {hop}, ")
    text = (f"{'group_by(k).apply(' if group else ''}{window}{policy.name}).top_k({k}, "
            f"{order_text}){')' if group else ''}")
    case = props.Case(text, 1, build, reference, ctis, window=True)
    case.snapshot_clip = kind == "snapshot" and clip  # type: ignore[attr-defined]
    case.group = "k" if group else None  # type: ignore[attr-defined]
    return case


def check_top_k(case: props.Case, defs: list) -> None:
    """As ``props.check_case``; a clipped snapshot's CTIs by the snapshot's rule."""
    if not case.snapshot_clip:  # type: ignore[attr-defined]
        props.check_case(case, defs)
        return
    streams, ins = props.ingress_outputs(defs)
    msg = props.explain(case, defs, ins)
    note(msg)
    out = case.build(streams).run(LocalRuntime()).items("output")
    props.check_well_formed(out, msg)
    lives = ref.lifetimes(ins[0])
    problem = ref.diff(case.reference([lives], [ref.ctis_of(ins[0])]), ref.lifetimes(out))
    assert not problem, f"{problem}\n{msg}\noutput: {out}"
    want = snapshot_ctis(lives, defs[0].shape is props.EDGE, ref.ctis_of(ins[0]),
                         case.group)  # type: ignore[attr-defined]
    assert ref.ctis_of(out) == want, msg


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_top_k_ranks_equal_a_sort(data):
    case = data.draw(top_k_case())
    finite = data.draw(st.booleans())
    check_top_k(case, data.draw(props.input_defs(1, max_size=14, finite=finite)))


@settings(max_examples=examples(50), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), sizes=batch_sizes)
def test_top_k_output_does_not_depend_on_arrival_order_or_batches(data, sizes):
    case = data.draw(top_k_case())
    defs = data.draw(props.input_defs(1, max_size=14))
    streams, ins = props.ingress_outputs(defs)
    whole = props.run_local(case, streams)
    assert props.run_local(case, streams, sizes) == whole, props.explain(case, defs)
    replay = data.draw(props.replay_defs(defs, ins))
    msg = props.explain(case, defs, ins) + "\nreplayed as:\n" + describe(replay)
    assert props.run_local(case, bind(replay)) == whole, msg


@pytest.mark.spark
@settings(max_examples=examples(1), deadline=None, suppress_health_check=list(HealthCheck))
@given(cases=st.lists(st.tuples(top_k_case(grouped=True), props.input_defs(1, max_size=10)),
                      min_size=6, max_size=8),
       splits=past_the_simplest(spark_splits))
def test_top_k_on_spark_equals_local(spark, cases, splits):
    props.assert_spark_equals_local(spark, cases, splits)


def test_nulls_rank_last_and_values_that_do_not_compare_fail_by_field():
    s = props.one_stream([PointEvent(1, {"v": 2}), PointEvent(2, {"v": None}),
                          PointEvent(3, {"v": 5})])
    out = props.run_items(s.tumbling_window(ticks(10)).top_k(3, [("v", "desc")]))
    assert [e.payload for e in out if not isinstance(e, Cti)] == [
        {"rank": 1, "v": 5}, {"rank": 2, "v": 2}, {"rank": 3, "v": None}]
    bad = props.one_stream([PointEvent(1, {"v": 2}), PointEvent(2, {"v": "x"})])
    with pytest.raises(CtiError, match="field 'v'"):
        props.run_items(bad.tumbling_window(ticks(10)).top_k(1, [("v", "asc")]))


@pytest.mark.parametrize(("args", "message"), [
    ((0, [("v", "desc")]), "k is a whole number"),
    ((1, [("v", "down")]), "order_by is a list of"),
    ((1, []), "order_by is a list of"),
    ((1, [("nope", "asc")]), "nope"),
    ((1, [("v", "asc")], "v"), "already a field"),
])
def test_mistakes_fail_loudly(args, message):
    s = props.one_stream([PointEvent(1, {"v": 1})])
    with pytest.raises((InvalidSettingsError, UnknownFieldError), match=message):
        s.snapshot_window().top_k(*args)


def test_under_group_by_a_payload_without_the_field_gets_the_groups_value():
    """As ``group_by`` adds its field to every output payload that lacks it (here the null
    group of events without ``k``), so does TopK, the whole query of the group."""
    s = props.one_stream([PointEvent(1, {"v": 1}), PointEvent(2, {"k": "x", "v": 2}),
                          PointEvent(3, {"k": "x", "v": 3})])
    q = s.group_by("k", nulls="group").apply(
        lambda g: g.tumbling_window(ticks(10)).top_k(1, [("v", "desc")]))
    assert sorted((e.payload for e in props.run_items(q) if not isinstance(e, Cti)),
                  key=lambda p: p["v"]) == [{"k": None, "rank": 1, "v": 1},
                                            {"k": "x", "rank": 1, "v": 3}]
