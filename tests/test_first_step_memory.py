"""What keeps a shard's first step over a large table smaller (issue 40): a frame's rows of one
run taken as a slice, an event's owner taken from its routed input row, and a bounded file's
cached table forgotten once read to its end. Each gives what the plain way gives."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.engine.batch import owners
from cti.engine.shard import _owned, _routed
from cti.events import EventShape
from cti.forms.frame import rows_where
from cti.io.files.arrow_tables import csv_table
from cti.io.reference import ReferenceDataConfig, ReferenceDataInputAdapterFactory


def _frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({
        "seq": np.arange(n, dtype=np.int64), "text": np.array([f"t{i}" for i in range(n)], object),
        "typed": pd.arrays.ArrowExtensionArray(pa.array([f"k{i % 3}" for i in range(n)]))})


@settings(max_examples=60, deadline=None)
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


@settings(max_examples=60, deadline=None)
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
