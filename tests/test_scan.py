"""``stream.scan(operator)`` (user-defined stream operators, state per key, sync-time order)
against a hand-written loop on random inputs; the same output whatever the arrival order
below the CTIs and however the input is cut; Spark (spread over shards under group_by)
against the in-process runner; the user's mistakes."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import operator_reference as ref
import pytest
from budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from operator_reference import Life
from strategies import batch_sizes, bind, past_the_simplest, spark_splits
from test_operator_properties import (
    Case,
    assert_arrival_order_free,
    assert_spark_equals_local,
    check_case,
    input_defs,
    one_stream,
    run_local,
)

from cti import CtiError, EdgeEvent, EventShape, InvalidSettingsError, PointEvent, StreamOperator
from cti.runtime.local import LocalRuntime

FAST = settings(max_examples=examples(50), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
SHAPES = [EventShape.POINT, EventShape.INTERVAL]


class Counting(StreamOperator):
    """Per key: how many events so far and the start of the one before (the same outputs
    whatever order events at one time are taken in)."""

    def initial_state(self) -> dict:
        return {"n": 0, "prev": None}

    def process(self, event: Any) -> list[dict]:
        n, prev = self.state["n"] + 1, self.state["prev"]
        self.state = {"n": n, "prev": event.start}
        return [{"n": n, "prev": prev}]


class Previous(StreamOperator):
    """Order-sensitive at ties: the id of the event before (a running sum every 2nd)."""

    def initial_state(self) -> list:
        return [None, 0]

    def process(self, event: Any) -> list[dict]:
        before, total = self.state
        self.state = [event.payload["id"], total + event.payload["v"]]
        return [{"before": before}, {"total": total}] if total % 2 else [{"before": before}]


def counted(lives: list[Life], per_key: bool) -> list[Life]:
    """The loop: events per key in start order, each giving a point at its start."""
    keyed: dict[str, list[Life]] = defaultdict(list)
    for x in lives:
        keyed[x.payload["k"] if per_key else ""].append(x)
    out = []
    for members in keyed.values():
        n, prev = 0, None
        for x in sorted(members, key=lambda x: x.start):
            n += 1
            extra = {"k": x.payload["k"]} if per_key else {}  # (the group's field)
            out.append(Life(x.start, x.start + 1, {"n": n, "prev": prev, **extra}, True))
            prev = x.start
    return out


def scan_case() -> st.SearchStrategy[Case]:
    def case(grouped: bool) -> Case:
        build = (lambda s: s[0].group_by("k").apply(lambda g: g.scan(Counting()))) if grouped \
            else (lambda s: s[0].scan(Counting()))
        return Case(f"{'group_by(k).apply(' if grouped else ''}scan(Counting())", 1, build,
                    lambda lv, c: counted(lv[0], grouped), lambda c: ref.ctis_unchanged(c[0]),
                    shapes=(SHAPES,))

    return st.booleans().map(case)


def order_case() -> st.SearchStrategy[Case]:
    def case(grouped: bool) -> Case:
        build = (lambda s: s[0].group_by("k").apply(lambda g: g.scan(Previous()))) if grouped \
            else (lambda s: s[0].scan(Previous()))
        return Case("scan(Previous())", 1, build, None, None, shapes=(SHAPES,))

    return st.booleans().map(case)


@FAST
@given(data=st.data())
def test_scan_equals_the_loop(data):
    case = data.draw(scan_case())
    check_case(case, data.draw(input_defs(1, [SHAPES])))


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_output_does_not_depend_on_arrival_order_below_the_ctis(data):
    case = data.draw(st.one_of(scan_case(), order_case()))
    defs = data.draw(input_defs(1, [SHAPES]))
    assert_arrival_order_free(data, case, defs)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), sizes=batch_sizes)
def test_output_does_not_depend_on_batch_boundaries(data, sizes):
    case = data.draw(st.one_of(scan_case(), order_case()))
    streams = bind(data.draw(input_defs(1, [SHAPES])))
    assert run_local(case, streams, sizes) == run_local(case, streams)


@pytest.mark.spark
@settings(max_examples=examples(1), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), splits=past_the_simplest(spark_splits))
def test_spark_equals_local(spark, data, splits):
    cases = [(case, data.draw(input_defs(1, [SHAPES], max_size=8)))
             for case in [data.draw(st.one_of(scan_case(), order_case())) for _ in range(8)]]
    assert_spark_equals_local(spark, cases, splits)


def test_a_grouped_scan_is_spread_over_shards_by_the_key():
    from cti.operators.sharding import shard_fields

    q = one_stream([PointEvent(1, {"k": "x"})]).group_by("k").apply(
        lambda g: g.scan(Counting()))
    assert shard_fields(q.node, q.inputs()) == ["k"]


class Wrong(StreamOperator):
    def process(self, event: Any) -> list:
        return [3]


class Failing(StreamOperator):
    def process(self, event: Any) -> list:
        return [{"x": 1 / 0}]


def test_the_users_mistakes_are_named():
    s = one_stream([PointEvent(1, {"k": "x", "v": 1})])
    with pytest.raises(InvalidSettingsError, match="StreamOperator subclass"):
        s.scan(lambda e: [])
    with pytest.raises(InvalidSettingsError, match="an edge stream"):
        one_stream([EdgeEvent.start_edge(1, {})], EventShape.EDGE).scan(Counting())
    with pytest.raises(CtiError, match=r"scan\(Wrong\) on stream 'a': process must return "):
        s.scan(Wrong()).run(LocalRuntime())
    with pytest.raises(ZeroDivisionError) as err:
        s.scan(Failing()).run(LocalRuntime())
    assert any("scan(Failing) on stream 'a'" in n for n in err.value.__notes__)
    with pytest.raises(NotImplementedError, match="must define process"):
        s.scan(StreamOperator()).run(LocalRuntime())


ROWS = [{"t": t, "k": "abc"[n % 3], "v": n, "id": f"e{n}"}
        for n, t in enumerate([10, 12, 11, 15, 30, 22, 31, 40, 38, 45, 44, 50, 61, 58, 70, 83])]


def running(path: Any) -> Any:
    from cti import AdvanceTimeSettings, Application, CepStream, ticks
    from cti.io.files import FileInputConfig, JsonLinesInputAdapterFactory

    config = FileInputConfig(path, start_column="t", time_format="ticks", live=True)
    s = CepStream.create("s", JsonLinesInputAdapterFactory(), config, EventShape.POINT,
                         AdvanceTimeSettings.unordered_start_time(ticks(3)),
                         application=Application())
    return s.group_by("k").apply(lambda g: g.scan(Previous()))


@pytest.mark.spark
def test_a_scans_state_survives_a_restart_from_the_checkpoint(spark, tmp_path):
    """Stopped mid-stream and restarted from its checkpoint (4 shards), each key's state
    carries on: the output equals an uninterrupted in-process run."""
    from restarts import run_twice_from_checkpoint

    _, restarted = run_twice_from_checkpoint(spark, tmp_path, ROWS, 7, running, (3, 4),
                                             ({"shards": 4}, {}))
    assert restarted == running(tmp_path / "in.jsonl").collect(LocalRuntime())
    assert sum("total" in e.payload for e in restarted if hasattr(e, "payload")) > 2
