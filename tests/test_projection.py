"""Projection: a query whose output payloads are computed (a window's aggregates, a
``group_by``'s key) reads only the payload fields it needs from an adapter that can leave the
others out (Parquet), and its output is the same as with every field read (the row oracle reads
whole payloads), on both runtimes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from unittest import mock

import pytest
from budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import OracleRuntime
from test_engine_oracle import _events

from cti import (
    CepStream,
    agg,
)
from cti.engine.route import routes
from cti.io.memory import CollectingOutputAdapterFactory
from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
from cti.io.parquet import ParquetInputAdapter
from cti.runtime.base import query_inputs
from cti.runtime.local import LocalRuntime

US = timedelta(microseconds=1)


def _windows(s):
    return s.hopping_window(10 * US, 5 * US)


# (query, the fields it reads of its input; None: every field)
QUERIES: dict[str, tuple[Callable[[CepStream], object], frozenset[str] | None]] = {
    "count per key": (lambda s: s.group_by("key").apply(
        lambda g: _windows(g).aggregate(n=agg.count())), frozenset({"key"})),
    "sum per key": (lambda s: s.group_by("key").apply(
        lambda g: _windows(g).aggregate(total=agg.sum("v"))), frozenset({"key", "v"})),
    "count of all": (lambda s: _windows(s).aggregate(n=agg.count()), frozenset()),
    "lifetime, then max": (lambda s: _windows(s.alter_event_duration(4 * US).shift_event_time(
        2 * US)).aggregate(top=agg.max("v")), frozenset({"v"})),
    "where reads all": (lambda s: s.where(lambda p: p["x"] != "b").group_by("key").apply(
        lambda g: _windows(g).aggregate(n=agg.count())), None),
    "user aggregate reads all": (lambda s: _windows(s).aggregate(
        xs=agg.udf(lambda payloads: len({p["x"] for p in payloads}))), None),
    "output of the input": (lambda s: s.shift_event_time(US), None),
    "anti join, the right side's key": (lambda s: _windows(s).aggregate(n=agg.count()).select(
        lambda p: {"key": "a", **p}).left_anti_semi_join(s, on="key"), frozenset({"key"})),
}

ROWS = st.lists(st.tuples(st.integers(0, 60), st.sampled_from(["a", "b", "c"]),
                          st.integers(-2, 2), st.sampled_from(["a", "b", 'q"'])), max_size=30)


def _read_fields(build: Callable[[CepStream], object], path: str) -> set:
    """The ``fields=`` each ``read_frame`` of the query's in-process run was given."""
    seen: set = set()
    real = ParquetInputAdapter.read_frame

    def spy(self, start, end, fields=None):
        seen.add(fields)
        return real(self, start, end, fields)

    with mock.patch.object(ParquetInputAdapter, "read_frame", spy):
        build(_events([(1, "a", 1, "b")], path)).to(CollectingOutputAdapterFactory(), "o").run(
            LocalRuntime())
    return seen


@pytest.mark.parametrize("name", list(QUERIES))
def test_a_query_reads_the_fields_its_output_needs(name, tmp_path):
    build, fields = QUERIES[name]
    query = build(_events([(1, "a", 1, "b")], str(tmp_path / "e.parquet")))
    groups, refs = query_inputs(query)
    (route,) = routes([query], groups, [refs], 1, with_inputs=False)
    assert route.reads.get((0, 0)) == fields
    # A run that returns its inputs' own results reads them whole.
    (whole,) = routes([query], groups, [refs], 1, with_inputs=True)
    assert whole.reads == {}
    assert _read_fields(build, str(tmp_path / "f.parquet")) == {fields}


@settings(max_examples=examples(60), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rows=ROWS, name=st.sampled_from(list(QUERIES)),
       sizes=st.none() | st.lists(st.integers(1, 6), min_size=1, max_size=3))
def test_projected_output_equals_reading_every_field(rows, name, sizes, tmp_path_factory):
    """Written (``to``: projected) in process, and by the oracle from whole payloads."""
    path = str(tmp_path_factory.mktemp("pq") / "events.parquet")
    build, _ = QUERIES[name]
    written = []
    for runtime in (LocalRuntime(batch_sizes=sizes), OracleRuntime(batch_sizes=sizes)):
        sink = CollectingOutputAdapterFactory()
        build(_events(rows, path)).to(sink, "out").run(runtime)
        written.append(sink.adapters["out"].batches)
    assert written[0] == written[1], (rows, sizes)


@pytest.mark.spark
def test_projected_on_spark_equals_in_process(spark, tmp_path):
    from cti.runtime.spark import SparkRuntime

    rows = [(t, "abc"[t % 3], t % 5 - 2, "ab"[t % 2]) for t in range(0, 120, 2)]
    path = str(tmp_path / "events.parquet")
    for name in ("sum per key", "count of all"):
        build, _ = QUERIES[name]
        out = tmp_path / name.replace(" ", "-")
        build(_events(rows, path)).to(JsonLinesOutputAdapterFactory(), str(out)).run(
            SparkRuntime(spark, shards=2, batch_sizes=[25]))
        assert read_json_lines_output(out) == build(_events(rows, path)).collect(
            LocalRuntime()), name
