"""Count windows (SPEC 8) against a brute force over random points, intervals and edges
(``test_operator_properties``' random inputs): per group, a window for every ``n``
consecutive distinct start times; plus unchanged CTIs, a well-formed canonical output, the
same output whatever the arrival order below the CTIs and however the input is cut into
micro-batches, and the same output on Spark (spread over shards by ``group_by``)."""

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

from cti import MAX_TIME, Cti, EventShape, PointEvent, WindowOutputPolicy, agg
from cti.errors import InvalidSettingsError


def count_reference(lives: Sequence[Life], n: int, specs: dict[str, ref.Aggregate],
                    group_by: str | None) -> list[Life]:
    """Per group: the distinct start times d_0 < d_1 < ...; for every i, the events starting
    at one of d_i .. d_{i+n-1}, as a point at d_{i+n-1} + 1."""
    groups: dict[str, list[Life]] = defaultdict(list)
    for x in lives:
        groups[ref.canon({"g": x.payload[group_by]}) if group_by else ""].append(x)
    out = []
    for members in groups.values():
        starts = sorted({x.start for x in members})
        for i in range(len(starts) - n + 1):
            chosen = set(starts[i:i + n])
            payloads = [x.payload for x in members if x.start in chosen]
            payload = {group_by: payloads[0][group_by]} if group_by else {}
            payload |= {name: ref.aggregate_value(kind, f, payloads)
                        for name, (kind, f) in specs.items()}
            end = starts[i + n - 1] + 1
            out.append(Life(end, end + 1, payload, True))
    return out


@st.composite
def count_case(draw: st.DrawFn, grouped: bool | None = None) -> props.Case:
    n = draw(st.integers(1, 4))
    group = draw(st.booleans()) if grouped is None else grouped
    udf = draw(st.booleans())  # (without one, only adding aggregates: summed along windows)
    names = draw(st.lists(st.sampled_from(sorted(props.AGGREGATES)), min_size=0 if udf else 1,
                          max_size=3, unique=True))
    specs: dict[str, ref.Aggregate] = {"id": ("udf", props._udf_ids)} if udf else {}
    specs |= {name: props.AGGREGATES[name][1] for name in names}

    def aggs() -> dict[str, Any]:
        return ({"id": agg.udf(props._udf_ids)} if udf else {}) | {
            name: props.AGGREGATES[name][0]() for name in names}

    def windowed(s: Any) -> Any:
        return s.count_window(n).aggregate(**aggs())

    def build(s: list[Any]) -> Any:
        return s[0].group_by("k").apply(windowed) if group else windowed(s[0])

    text = (f"{'group_by(k).apply(' if group else ''}count_window({n})"
            f".aggregate({', '.join(specs)}){')' if group else ''}")
    return props.Case(text, 1, build,
                      lambda lv, c: count_reference(lv[0], n, specs, "k" if group else None),
                      lambda c: ref.ctis_unchanged(c[0]), window=True)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_count_window_equals_the_brute_force(data):
    case = data.draw(count_case())
    props.check_case(case, data.draw(props.input_defs(1, max_size=14)))


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_count_window_output_does_not_depend_on_arrival_order_below_the_ctis(data):
    case = data.draw(count_case())
    defs = data.draw(props.input_defs(1, max_size=14))
    streams, ins = props.ingress_outputs(defs)
    whole = props.run_local(case, streams)
    replay = data.draw(props.replay_defs(defs, ins))
    msg = props.explain(case, defs, ins) + "\nreplayed as:\n" + describe(replay)
    note(msg)
    assert props.run_local(case, bind(replay)) == whole, msg


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), sizes=batch_sizes)
def test_count_window_output_does_not_depend_on_batch_boundaries(data, sizes):
    case = data.draw(count_case())
    defs = data.draw(props.input_defs(1, max_size=14))
    streams = bind(defs)
    assert props.run_local(case, streams, sizes) == props.run_local(case, streams), \
        props.explain(case, defs) + f"\nbatches {sizes}"


@pytest.mark.spark
@settings(max_examples=examples(1), deadline=None, suppress_health_check=list(HealthCheck))
@given(cases=st.lists(st.tuples(count_case(grouped=True), props.input_defs(1, max_size=10)),
                      min_size=6, max_size=8),
       splits=past_the_simplest(spark_splits))
def test_count_window_on_spark_equals_local(spark, cases, splits):
    props.assert_spark_equals_local(spark, cases, splits)


def test_a_window_completes_once_a_cti_passes_its_last_start():
    """A CTI at 5 still admits events starting at 5: the window {3, 5} is complete only at
    the next CTI, and holds the two events at 5 (they count as one start)."""
    items = [PointEvent(3, {"v": 1}), PointEvent(5, {"v": 2}), Cti(5), PointEvent(5, {"v": 4}),
             PointEvent(6, {"v": 8}), Cti(7)]
    s = props.one_stream(items, flush=False)
    out = props.run_items(s.count_window(2).aggregate(n=agg.count(), total=agg.sum("v")))
    assert out == [Cti(5), PointEvent(6, {"n": 3, "total": 7}), Cti(7)]


@pytest.mark.parametrize(("build", "message"), [
    (lambda s: s.count_window(0), "n is a whole number"),
    (lambda s: s.count_window(True), "n is a whole number"),
    (lambda s: s.count_window(2, WindowOutputPolicy.CLIP_TO_WINDOW_END), "not supported"),
    (lambda s: s.count_window(2).aggregate(x=agg.avg("nope")), "nope"),
    (lambda s: s.count_window(2).top_k(1, [("v", "desc")]), "not count windows"),
])
def test_mistakes_fail_loudly(build, message):
    from cti import UnknownFieldError

    s = props.one_stream([PointEvent(1, {"v": 1})])
    with pytest.raises((InvalidSettingsError, UnknownFieldError), match=message):
        build(s)


def test_end_of_input_leaves_fewer_than_n_starts_without_a_window():
    s = props.one_stream([PointEvent(t, {"v": t}) for t in (1, 2, 3)], EventShape.POINT)
    out = props.run_items(s.count_window(2).aggregate(top=agg.max("v")))
    assert [e for e in out if not isinstance(e, Cti)] == [
        PointEvent(3, {"top": 2}), PointEvent(4, {"top": 3})]
    assert ref.ctis_of(out)[-1] == MAX_TIME
