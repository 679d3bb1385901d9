"""User functions over frames (``where``, ``select``, ``join`` and ``agg.udf`` with
``frame=True``): the same results as the functions over one payload at a time, whatever the
micro-batches, on both runtimes; a function that returns the wrong thing, or raises, is
named."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest
from budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cti import (
    AdvanceTimeSettings,
    Application,
    CepStream,
    EventShape,
    IntervalEvent,
    PointEvent,
    agg,
)
from cti.errors import CtiError, InvalidSettingsError
from cti.io.memory import MemoryInputAdapterFactory
from cti.runtime.local import LocalRuntime
from cti.runtime.spark import SparkRuntime

CASES = settings(max_examples=examples(30), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _payload(draw, with_f):
    payload = {"k": draw(st.sampled_from("abc")), "v": draw(st.integers(-5, 20))}
    if with_f and draw(st.booleans()):  # a field some payloads lack
        payload["f"] = draw(st.sampled_from([0.5, 2.0, -1.25]))
    return payload


@st.composite
def cases(draw):
    t, points, intervals = 0, [], []
    with_f = draw(st.booleans())
    for _ in range(draw(st.integers(0, 25))):
        t += draw(st.integers(0, 3))
        points.append(PointEvent(t, _payload(draw, with_f)))
    t = 0
    for _ in range(draw(st.integers(0, 10))):
        t += draw(st.integers(0, 6))
        intervals.append(IntervalEvent(t, t + draw(st.integers(1, 12)), _payload(draw, False)))
    return dict(points=points, intervals=intervals,
                batches=draw(st.lists(st.integers(1, 7), min_size=1, max_size=4)))


def _streams(points, intervals):
    app = Application()
    s = CepStream.create("s", MemoryInputAdapterFactory(), points, EventShape.POINT,
                         AdvanceTimeSettings.increasing_start_time(), application=app)
    r = CepStream.create("r", MemoryInputAdapterFactory(), intervals, EventShape.INTERVAL,
                         AdvanceTimeSettings.unordered_start_time(timedelta(microseconds=3)),
                         application=app)
    return s, r


def _queries(s, r):
    """Each query twice: its functions over one payload, and over frames."""
    return [
        (s.where(lambda p: p["v"] % 3 != 0),
         s.where(lambda df: df["v"] % 3 != 0, frame=True)),
        (s.select(lambda p: {"k": p["k"], "w": p["v"] * 2, "f": p.get("f")}),
         s.select(lambda df: pd.DataFrame({"k": df["k"], "w": df["v"] * 2,
                                           "f": df["f"] if "f" in df else None}), frame=True)),
        (s.join(r, on="k", predicate=lambda lp, rp: lp["v"] > rp["v"],
                select=lambda lp, rp: {"k": lp["k"], "lv": lp["v"], "rv": rp["v"]}),
         s.join(r, on="k", predicate=lambda lf, rf: lf["v"] > rf["v"],
                select=lambda lf, rf: pd.DataFrame({"k": lf["k"], "lv": lf["v"],
                                                    "rv": rf["v"]}), frame=True)),
        (s.join(r, on="k", predicate=lambda lp, rp: lp["v"] <= rp["v"]),  # payloads merged
         s.join(r, on="k", predicate=lambda lf, rf: lf["v"] <= rf["v"], frame=True)),
        (s.group_by("k").apply(lambda g: g.tumbling_window(timedelta(microseconds=5)).aggregate(
            t=agg.udf(lambda ps: [p["v"] for p in ps]))),
         s.group_by("k").apply(lambda g: g.tumbling_window(timedelta(microseconds=5)).aggregate(
            t=agg.udf(lambda df: df["v"].tolist(), frame=True)))),
    ]


@CASES
@given(case=cases())
def test_functions_over_frames_equal_functions_over_payloads(case):
    s, r = _streams(case["points"], case["intervals"])
    for by_row, by_frame in _queries(s, r):
        want = by_row.collect(LocalRuntime())
        assert by_frame.collect(LocalRuntime(batch_sizes=case["batches"])) == want


def test_on_spark_functions_over_frames_equal_the_in_process_run(spark):
    points = [PointEvent(t, {"k": "abc"[t % 3], "v": t % 11, **({"f": 0.5} if t % 4 else {})})
              for t in range(0, 90, 2)]
    intervals = [IntervalEvent(t, t + 9, {"k": "abc"[t % 3], "v": 5}) for t in range(0, 90, 7)]
    s, r = _streams(points, intervals)
    queries = _queries(s, r)
    got = SparkRuntime(spark, shards=2, batch_sizes=[13, 40]).run_queries(
        [by_frame for _, by_frame in queries], with_inputs=False)  # one streaming query
    for (by_row, by_frame), result in zip(queries, got, strict=True):
        assert result.items(by_frame.name) == by_row.collect(LocalRuntime())


def test_a_function_that_returns_the_wrong_thing_or_raises_is_named():
    s, r = _streams([PointEvent(t, {"k": "a", "v": t}) for t in range(5)],
                    [IntervalEvent(0, 9, {"k": "a", "v": 1})])
    local = LocalRuntime()
    with pytest.raises(CtiError, match=r"where\(\.\.\., frame=True\) on stream 's' must return "
                                       r"one boolean per event \(5\)"):
        s.where(lambda df: df["v"][:2] > 1, frame=True).collect(local)
    with pytest.raises(CtiError, match=r"one boolean per event"):
        s.where(lambda df: df["v"], frame=True).collect(local)  # numbers, not booleans
    with pytest.raises(CtiError, match=r"select\(\.\.\., frame=True\) on stream 's' must "
                                       r"return a frame of 5 rows"):
        s.select(lambda df: df["v"], frame=True).collect(local)
    with pytest.raises(CtiError, match=r"columns are field names"):
        s.select(lambda df: pd.DataFrame({0: df["v"]}), frame=True).collect(local)
    with pytest.raises(CtiError, match=r"join\(\.\.\., frame=True\).*predicate must return "
                                       r"one boolean per pair \(5\)"):
        s.join(r, on="k", predicate=lambda lf, rf: lf["v"], frame=True).collect(local)
    with pytest.raises(CtiError, match=r"join\(\.\.\., frame=True\).*select must return"):
        s.join(r, on="k", select=lambda lf, rf: lf.iloc[:0], frame=True).collect(local)
    with pytest.raises(KeyError) as raised:
        s.select(lambda df: df["nope"], frame=True).collect(local)
    assert any("select on stream 's' raised KeyError on the frame of 5 payloads; the first "
               '{"k":"a","v":0}' in note for note in raised.value.__notes__)
    with pytest.raises(InvalidSettingsError, match="where frame is True or False, got 'yes'"):
        s.where(lambda df: df["v"] > 0, frame="yes")
