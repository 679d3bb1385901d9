"""A large text column as UTF-8 bytes and offsets (``cti.forms.texts``) gives what the array of
Python strings gives, and a shard's state keeps it as memory-mapped parts, not as objects."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.forms import texts
from cti.forms.edges import BulkBook, opened
from cti.operators import join_side
from cti.runtime.spark import state
from cti.runtime.spark.state import PartStore, dump_state, load_parts
from cti.time import MAX_TIME

TEXT = st.one_of(st.none(), st.text(st.characters(blacklist_categories=("Cs",)), max_size=6))


@pytest.fixture
def small(monkeypatch):
    """Columns of a few rows are held as ``Texts`` too."""
    monkeypatch.setattr(texts, "MIN_ROWS", 1)


@settings(max_examples=examples(120), deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=30), st.lists(TEXT, max_size=10),
       st.data())
def test_texts_give_what_the_array_of_objects_gives(values, more, data):
    saved, texts.MIN_ROWS = texts.MIN_ROWS, 1
    try:
        array = np.asarray(values, object)
        got = texts.compact(array)
        assert isinstance(got, texts.Texts) and len(got) == len(array)
        assert got.tolist() == values and np.asarray(got).tolist() == values
        at = np.asarray(data.draw(st.lists(st.integers(0, len(values) - 1), max_size=20)),
                        np.int64)
        assert got[at].dtype == object and got[at].tolist() == array[at].tolist()
        mask = np.asarray(data.draw(st.lists(st.booleans(), min_size=len(values),
                                             max_size=len(values))), bool)
        kept = got[mask]
        assert isinstance(kept, texts.Texts) and kept.tolist() == array[mask].tolist()
        assert got[1:4].tolist() == values[1:4] and got[0] == values[0]
        both = texts.concat([kept, np.asarray(more, object)])
        assert list(np.asarray(both)) == [*array[mask].tolist(), *more]
        assert pickle.loads(pickle.dumps(got)).tolist() == values
    finally:
        texts.MIN_ROWS = saved


def test_a_column_of_few_rows_or_of_other_objects_stays_an_array_of_objects():
    few = np.asarray(["a", "b"], object)
    assert texts.compact(few) is few
    mixed = np.asarray(["a", 1] * texts.MIN_ROWS, object)
    assert texts.compact(mixed) is mixed
    surrogate = np.asarray(["\ud800"] * texts.MIN_ROWS, object)  # (UTF-8 cannot hold it)
    assert texts.compact(surrogate) is surrogate
    many = np.asarray([f"row {i}" for i in range(texts.MIN_ROWS)], object)
    got = texts.compact(many)
    assert isinstance(got, texts.Texts)
    assert type(texts.concat([few, many])) is np.ndarray  # (no ``Texts`` among them)
    assert texts.concat([got[:3], mixed[:2]]).tolist() == ["row 0", "row 1", "row 2", "a", 1]


def _segment(n: int) -> join_side.Segment:
    return join_side.make_segment({
        "id": np.arange(n, dtype=np.int64), "kind": np.full(n, "edge_start", object),
        "start": np.zeros(n, np.int64), "end": np.full(n, MAX_TIME, np.int64),
        "known": np.zeros(n, bool),
        "payload": np.asarray([f'{{"key":"k{i}","owner":"é {i}"}}' for i in range(n)], object),
        "key": np.full(n, "", object), "jkey": np.asarray([f'["k{i % 7}"]' for i in range(n)],
                                                          object)})


def test_a_large_segments_texts_are_memory_mapped_parts_of_the_state(tmp_path, small,
                                                                      monkeypatch):
    """A join side's payloads and join keys, and a bulk book's payloads, are ``Texts``: a
    state holding them is written as plain array parts (no pickled objects), and read back in
    a worker that never saw them as memory maps that give the same rows and matches."""
    from cti.forms import edges

    monkeypatch.setattr(edges, "BULK_STARTS", 10)
    seg = _segment(50)
    book = opened({}, np.zeros(50, np.int64), seg.payload, np.zeros(50, np.int64))
    # (held as Python strings by the step that made them; ``Texts`` once pickled)
    assert type(book) is BulkBook
    assert type(seg.payload) is np.ndarray and type(book.pieces[0][1]) is np.ndarray
    copied = pickle.loads(pickle.dumps((seg, book)))
    assert isinstance(copied[0].payload, texts.Texts) and isinstance(copied[0].jkey, texts.Texts)
    assert isinstance(copied[1].pieces[0][1], texts.Texts)
    side = join_side.Side([seg])
    store = PartStore(str(tmp_path), 64)
    blob = dump_state({"side": side, "book": book}, store, None, 1)
    # (the one-text columns kind and key are the only parts of objects)
    assert len([p for p in tmp_path.iterdir() if p.name.endswith(".pkl.zst")]) == 2
    state.clear_cache()
    back, _ = load_parts(blob, store)
    got = back["side"].segments[0]
    assert state._mapped(got.payload.data) and state._mapped(got.jkey.offsets)
    assert got.payload.tolist() == seg.payload.tolist()
    assert back["book"].as_dict() == book.as_dict()
    key, jkey = np.asarray(["", ""], object), np.asarray(['["k3"]', '["k9"]'], object)
    want = join_side.matches(side, key, jkey)
    assert all((a == b).all() for a, b in zip(join_side.matches(back["side"], key, jkey), want,
                                               strict=True))
    ids = np.asarray([49, 3, 10], np.int64)
    assert (join_side.gather(back["side"], ids, ("payload",))["payload"]
            == np.asarray(seg.payload)[ids]).all()


def test_a_side_of_texts_merges_and_purges_as_one_of_objects(small):
    side = join_side.Side()
    for first in (0, 40, 60):
        seg = pickle.loads(pickle.dumps(_segment(first + 20)))  # (as a state read gives it)
        seg = join_side._kept(seg, np.arange(len(seg)) >= first)  # ids first.. first+19
        join_side.add(side, seg)
    assert len(side.segments) == 1 and isinstance(side.segments[0].payload, texts.Texts)
    assert side.segments[0].payload.tolist() == [
        f'{{"key":"k{i}","owner":"é {i}"}}' for i in [*range(20), *range(40, 80)]]
