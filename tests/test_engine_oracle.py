"""The engine (``LocalRuntime``: the shard step of ``cti.engine.shard`` with one shard) gives the
row machine's results (``oracle.OracleRuntime``: one input row at a time, payloads as JSON) on
random inputs and random micro-batch splits: plain ingress groups (every stream's items,
diagnostics and counts), queries (their output and their input streams' results) and the
columnar path (a Parquet input read as Arrow batches, its key field's texts as codes)."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
from budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import OracleRuntime
from strategies import bind, describe, stream_defs
from test_operator_properties import case_and_inputs, explain

from cti import (
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Application,
    CepStream,
    EventShape,
    agg,
)
from cti.io.memory import CollectingOutputAdapterFactory
from cti.io.parquet import ParquetInputAdapterFactory, ParquetInputConfig
from cti.runtime import local
from cti.runtime.local import LocalRuntime

FAST = settings(max_examples=examples(60), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SPLITS = st.none() | st.lists(st.integers(1, 6), min_size=1, max_size=3)
# How many rows LocalRuntime steps at most at once within a micro-batch of one stream.
PIECES = st.sampled_from([1, 2, 5, local.PIECE_ROWS])


@FAST
@given(defs=stream_defs(), sizes=SPLITS)
def test_plain_groups_equal_the_row_machine(defs, sizes):
    group = bind(defs)[0].ingress_group()
    got = LocalRuntime(batch_sizes=sizes).run(group)
    want = OracleRuntime(batch_sizes=sizes).run(bind(defs)[0].ingress_group())
    assert got == want, f"{describe(defs)}\nsizes: {sizes}"


@FAST
@given(drawn=case_and_inputs(), sizes=SPLITS, piece=PIECES)
def test_queries_equal_the_row_machine(drawn, sizes, piece):
    case, defs = drawn
    with mock.patch.object(local, "PIECE_ROWS", piece):
        got = case.build(bind(defs)).run(LocalRuntime(batch_sizes=sizes))
    want = case.build(bind(defs)).run(OracleRuntime(batch_sizes=sizes))
    assert got == want, f"{explain(case, defs)}\nsizes: {sizes}"


def _events(rows: list[tuple], path: str) -> CepStream:
    """Point events from a Parquet file of columns t, key, v (and x where rows have four)."""
    names = ("t", "key", "v", "x")[:len(rows[0]) if rows else 3]
    types = (pa.int64(), pa.string(), pa.int64(), pa.string())
    pq.write_table(pa.table({name: pa.array([r[k] for r in rows], types[k])
                             for k, name in enumerate(names)}), path)
    settings_ = AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(3, delay=timedelta(microseconds=2),
                                      advance_to_infinity_on_shutdown=True),
        policy=AdvanceTimePolicy.DROP)
    return CepStream.create("events", ParquetInputAdapterFactory(), ParquetInputConfig(path, "t"),
                            EventShape.POINT, settings_, application=Application())


ROWS = st.lists(st.tuples(st.integers(0, 60), st.sampled_from(["a", "b", "c", 'q"']),
                          st.integers(-2, 2)), max_size=40)


@FAST
@given(rows=ROWS, sizes=SPLITS, piece=PIECES)
def test_a_columnar_input_equals_the_row_machine(rows, sizes, piece, tmp_path_factory):
    """Parquet rows go through ``read_frame`` and the key's texts as the chunk's codes; the
    oracle reads them item by item. Also written (``write_query``) batch by batch alike, a
    micro-batch stepped in pieces of ``piece`` rows."""
    path = str(tmp_path_factory.mktemp("pq") / "events.parquet")
    patched = mock.patch.object(local, "PIECE_ROWS", piece)
    patched.start()
    try:
        _check_columnar(rows, sizes, path)
    finally:
        patched.stop()


def _check_columnar(rows: list[tuple[int, str, int]], sizes: list[int] | None, path: str
                    ) -> None:

    def query(stream: CepStream):
        return stream.group_by("key").apply(
            lambda g: g.hopping_window(timedelta(microseconds=10), timedelta(microseconds=5))
            .aggregate(count=agg.count(), total=agg.sum("v")))

    assert (LocalRuntime(batch_sizes=sizes).run(_events(rows, path).ingress_group())
            == OracleRuntime(batch_sizes=sizes).run(_events(rows, path).ingress_group()))
    got = query(_events(rows, path)).run(LocalRuntime(batch_sizes=sizes))
    want = query(_events(rows, path)).run(OracleRuntime(batch_sizes=sizes))
    assert got == want, (rows, sizes)
    written = []
    for runtime in (LocalRuntime(batch_sizes=sizes), OracleRuntime(batch_sizes=sizes)):
        sink = CollectingOutputAdapterFactory()
        query(_events(rows, path)).to(sink, "out").run(runtime)
        written.append(sink.adapters["out"].batches)
    assert written[0] == written[1], (rows, sizes)
