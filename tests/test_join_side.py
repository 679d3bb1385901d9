"""A join side in key-indexed segments (``cti.operators.join_side``) finds, gathers, closes and
purges exactly what a scan of all its rows would, whatever steps the rows came in."""

from __future__ import annotations

import numpy as np
import pandas as pd
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.operators import join_side
from cti.time import MAX_TIME

KEYS = st.sampled_from(["", '["g"]'])
JKEYS = st.sampled_from(['["a"]', '["b"]', '["c"]', None])
ROW = st.tuples(KEYS, JKEYS, st.integers(0, 20), st.integers(1, 10), st.booleans())


def _segment(rows: list[tuple], first_id: int) -> join_side.Segment:
    n = len(rows)
    known = np.asarray([r[4] for r in rows], bool)
    start = np.asarray([r[2] for r in rows], np.int64)
    return join_side.make_segment({
        "id": np.arange(first_id, first_id + n, dtype=np.int64),
        "kind": np.asarray(["interval" if k else "edge_start" for k in known], object),
        "start": start, "end": np.where(known, start + [r[3] for r in rows], MAX_TIME),
        "known": known, "payload": np.asarray([f'{{"n":{first_id + i}}}' for i in range(n)],
                                              object),
        "key": np.asarray([r[0] for r in rows], object),
        "jkey": np.asarray([r[1] for r in rows], object)})


def _all(side: join_side.Side) -> pd.DataFrame:
    return pd.DataFrame({c: np.concatenate([getattr(s, c) for s in side.segments])
                         if side.segments else [] for c in join_side.ROW_COLUMNS})


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.lists(ROW, max_size=12), max_size=8), st.lists(st.tuples(KEYS, JKEYS),
                                                                     max_size=6),
       st.integers(0, 30), st.lists(st.integers(0, 80), max_size=5))
def test_a_side_finds_what_a_scan_finds(steps, queries, cti, referenced):
    side, next_id = join_side.Side(), 0
    for rows in steps:
        join_side.add(side, _segment(rows, next_id))
        next_id += len(rows)
        ids = [s.id for s in side.segments]
        assert all(len(s) for s in side.segments)
        assert (np.diff(np.concatenate(ids)) > 0).all() if ids else True  # id order
    whole = _all(side)
    assert len(whole) == next_id
    # matches: every row with equal keys, none other
    key = np.asarray([q[0] for q in queries], object)
    jkey = np.asarray([q[1] for q in queries], object)
    q, ids, start, end, known = join_side.matches(side, key, jkey)
    got = sorted(zip(q.tolist(), ids.tolist(), strict=True))
    want = sorted((i, int(r.id)) for i, (k, j) in enumerate(queries)
                  for r in whole.itertuples() if r.key == k and r.jkey == j)
    assert got == want
    rows = whole.set_index("id")
    assert start.tolist() == rows.loc[ids, "start"].tolist()
    # gather by id, in any order
    pick = whole["id"].to_numpy()[::-1]
    cols = join_side.gather(side, pick, ("start", "payload"))
    assert cols["payload"].tolist() == rows.loc[pick, "payload"].tolist()
    # purge: the known rows ending at or below the CTI, but for the referenced ones
    refs = np.asarray(referenced, np.int64)
    join_side.purge(side, cti, refs)
    kept = _all(side)
    dead = whole["known"] & (whole["end"] <= cti) & ~whole["id"].isin(referenced)
    assert kept["id"].tolist() == whole.loc[~dead, "id"].tolist()
    q2, ids2, *_ = join_side.matches(side, key, jkey)
    assert sorted(zip(q2.tolist(), ids2.tolist(), strict=True)) == [
        (i, r) for i, r in want if r in set(kept["id"].tolist())]


def test_edge_ends_close_their_starts_first_in_first_out():
    side = join_side.Side()
    rows = [("", '["a"]', 5, 0, False), ("", '["a"]', 5, 0, False), ("", '["b"]', 5, 0, False)]
    seg = _segment(rows, 0)
    seg.payload[:] = ['{"k":"a"}', '{"k":"a"}', '{"k":"b"}']
    join_side.add(side, seg)
    ends = pd.DataFrame({"start": [5, 5], "end": [9, 7], "payload": ['{"k":"a"}', '{"k":"b"}'],
                         "key": ["", ""]})
    join_side.close_edges(side, ends, np.asarray(['["a"]', '["b"]'], object))
    cols = join_side.gather(side, np.arange(3), ("end", "known"))
    assert cols["known"].tolist() == [True, False, True]
    assert cols["end"].tolist() == [9, MAX_TIME, 7]
    assert side.segments[0].open_n == 1 and side.segments[0].min_end == 7


def test_a_hash_this_process_does_not_compute_is_reindexed():
    side = join_side.Side()
    join_side.add(side, _segment([("", '["a"]', 1, 1, True), ("", '["b"]', 2, 1, True)], 0))
    seg = side.segments[0]
    seg.hash = seg.hash + np.uint64(1)  # as another pandas' hash_array might have written
    seg.sorted_hash = seg.hash[seg.order]
    join_side.reindexed(side)
    q, ids, *_ = join_side.matches(side, np.asarray([""], object), np.asarray(['["b"]'], object))
    assert ids.tolist() == [1]
