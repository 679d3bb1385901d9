"""What keeps a shard's first step over a large table smaller (issue 40): a frame's rows of one
run taken as a slice, an event's owner taken from its routed input row, and a bounded file's
cached table forgotten once read to its end. Each gives what the plain way gives."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.engine.batch import owners
from cti.engine.shard import _input_rows, _owned, _routed
from cti.events import EventShape
from cti.forms.frame import rows_where
from cti.io.files.arrow_tables import csv_table
from cti.io.reference import ReferenceDataConfig, ReferenceDataInputAdapterFactory


def _frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({
        "seq": np.arange(n, dtype=np.int64), "text": np.array([f"t{i}" for i in range(n)], object),
        "typed": pd.arrays.ArrowExtensionArray(pa.array([f"k{i % 3}" for i in range(n)]))})


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 30).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.booleans(), min_size=n, max_size=n),
    st.integers(0, n), st.integers(0, n))))
def test_rows_where_is_the_masked_frame_and_a_run_shares_its_columns(case):
    n, bits, a, b = case
    frame = _frame(n)
    for mask in (np.array(bits, bool), (np.arange(n) >= min(a, b)) & (np.arange(n) < max(a, b))):
        got = rows_where(frame, mask)
        pd.testing.assert_frame_equal(got, frame[mask])
        kept = np.flatnonzero(mask)
        if len(kept) and kept[-1] - kept[0] + 1 == len(kept):
            assert np.shares_memory(got["seq"].to_numpy(), frame["seq"].to_numpy())
            got["seq"] = -1  # (a column set on the slice leaves the frame as it was)
            assert (frame["seq"].to_numpy() == np.arange(n)).all()


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 50)), st.booleans()),
                max_size=40), st.integers(2, 4))
def test_an_events_routed_owner_is_the_one_its_payload_hashes_to(rows, shards):
    """``_owned`` with the owners the input rows were routed with (where known) says what it
    says hashing every payload again; ``_routed`` finds them by sequence number."""
    payloads = np.array([None if k is None else json.dumps({"k": f"v{k}"}) for k, _ in rows],
                        object)
    given_ = np.array([g for _, g in rows], bool)
    hashed = np.full(len(rows), -1, np.int64)
    present = np.flatnonzero(pd.notna(payloads))
    if len(present):
        hashed[present] = owners(pa.array(list(payloads[present]), pa.string()), "k", shards)
    # The input rows: those given, in another order, with other streams' rows between.
    seqs = np.arange(len(rows), dtype=np.int64) + 100
    order = np.flatnonzero(given_)[::-1]
    inputs = pd.DataFrame({
        "stream": np.concatenate([np.ones(len(order), np.int32), np.zeros(2, np.int32)]),
        "seq": np.concatenate([seqs[order], [100, 101]]),
        "own": np.concatenate([hashed[order], [shards - 1, 0]]).astype(np.int32)})
    routed = _routed(inputs, 1, seqs)
    assert (routed[given_] == hashed[given_]).all() and (routed[~given_] == -1).all()
    for shard in range(shards):
        assert (_owned(payloads, "k", shard, shards, routed)
                == _owned(payloads, "k", shard, shards)).all()


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 30)), max_size=30),
       st.lists(st.integers(-2, 33), max_size=20), st.booleans())
def test_an_input_rows_place_is_found_by_its_sequence_number(rows, wanted, increasing):
    """``_input_rows`` (a stream's increasing numbers searched) finds each number where a
    hash of the stream's numbers finds it (-1: not among them), and None where one repeats."""
    if increasing:  # (each stream's numbers as a batch has them: increasing)
        rows = sorted(rows, key=lambda r: r[1])
    inputs = pd.DataFrame({"stream": np.array([s for s, _ in rows], np.int32),
                           "seq": np.array([q for _, q in rows], np.int64)})
    in_seq = np.array(wanted, np.int64)
    for stream in (0, 1):
        ours = np.flatnonzero(inputs["stream"].to_numpy() == stream)
        seqs = pd.Index(inputs["seq"].to_numpy()[ours])
        got = _input_rows(inputs, stream, in_seq)
        if not seqs.is_unique:
            assert got is None
            continue
        at = seqs.get_indexer(in_seq)
        assert (got == np.where(at >= 0, ours[at] if len(ours) else -1, -1)).all()


def test_a_reference_file_read_to_its_end_is_forgotten(tmp_path):
    path = tmp_path / "ref.csv"
    path.write_text("key,owner\nk1,a\nk2,b\n")
    adapter = ReferenceDataInputAdapterFactory().create(
        ReferenceDataConfig(path, 5, "csv"), EventShape.EDGE)
    assert adapter.latest_offset() == 2
    first = csv_table(str(path))
    assert csv_table(str(path)) is first  # (cached)
    adapter.release()
    again = csv_table(str(path))
    assert again is not first and again.equals(first)


def _reference_query(tmp_path, rows: int) -> tuple[Any, Any, Any, Any]:
    """Events (a CTI every 10) joined on key with ``rows`` reference rows that import their
    CTIs (the bench's reference query, small): its queries, groups, refs and 2-shard routes."""
    from datetime import timedelta

    import cti
    from cti.engine.route import routes
    from cti.io.memory import MemoryInputAdapterFactory
    from cti.runtime.base import queries_inputs

    path = tmp_path / "ref.csv"
    path.write_text("key,owner\n" + "".join(f"k{i},o{i}\n" for i in range(rows)))
    events = [cti.Arriving(cti.PointEvent(1000 + i, {"key": f"k{i % 7}", "value": i}), 1000 + i)
              for i in range(30)]
    generated = cti.AdvanceTimeGenerationSettings(10, delay=timedelta(microseconds=1))
    stream = cti.CepStream.create(
        "events", MemoryInputAdapterFactory(), events, EventShape.POINT,
        cti.AdvanceTimeSettings(generated, policy=cti.AdvanceTimePolicy.DROP),
        application=cti.Application())
    imported = cti.AdvanceTimeImportSettings("events")
    reference = cti.CepStream.create(
        "reference", ReferenceDataInputAdapterFactory(), ReferenceDataConfig(path, 500, "csv"),
        EventShape.EDGE,
        cti.AdvanceTimeSettings(import_settings=imported, policy=cti.AdvanceTimePolicy.ADJUST),
        application=stream.application)
    queries = [stream.join(reference, on="key")]
    groups, refs = queries_inputs(queries)
    return queries, groups, refs, routes(queries, groups, refs, 2, False)


def test_a_shard_that_reports_every_ingress_row_reports_them_uncopied(tmp_path):
    """The timed path's report of a shard that reports all its output rows (shard 0 of a
    reference stream beside the events) is its stacked output itself, not a second copy;
    another shard's is the rows it owns, as ``_counted`` picks them."""
    from cti.engine.shard import Shard, _counted
    from cti.ingress import paths
    from cti.ingress.group import GroupRun
    from cti.ingress.state import GroupState
    from cti.runtime.spark.packing import unpack
    from cti.runtime.spark.source import CtiAdapterStreamReader, encode_sources

    queries, groups, refs, routed = _reference_query(tmp_path, 40)
    streams = [(0, i, s.factory, s.config, s.shape, False)
               for i, s in enumerate(groups[0].streams)]
    reader = CtiAdapterStreamReader(encode_sources(streams, None, routed, 2))
    start = reader.initialOffset()
    packed = [row for p in reader.partitions(start, reader.latestOffset(start))
              for row in reader.read(p)]
    slots = sorted({row[1] for row in packed})
    for shard, slot in enumerate(slots):
        rows = unpack(pd.DataFrame([r for r in packed if r[1] == slot],
                                   columns=["query", "slot", "group", "seq", "blob"]))
        engine = Shard(queries[0].node, [], refs[0], {0: groups[0].specs()}, routed[0], shard)
        run = GroupRun(engine.specs[0], GroupState.from_data(None, engine.specs[0]))
        got = paths.shard_step(run, rows, engine._context(0))
        mine = rows["stream"].to_numpy() == 1
        reference = _counted(got.rows.iloc[np.flatnonzero(got.rows["stream"].to_numpy() == 1)],
                             shard, routed[0], 0, rows[mine])
        if shard == 0:
            assert got.report is got.rows
        else:
            assert len(got.report) < len(got.rows)
        pd.testing.assert_frame_equal(
            got.report[got.report["stream"] == 1].reset_index(drop=True),
            reference.reset_index(drop=True))
