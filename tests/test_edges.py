"""The edge pairing rule (``cti.forms.edges``) that ingress, windows, joins and clips share: an end
closes the earliest open start of its identity; a refused end leaves that start first in line."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.events import EventShape
from cti.forms.edges import (
    NO_START,
    BulkBook,
    close_edge,
    open_edge,
    open_values,
    opened,
    pair_ends,
    reopen_edge,
    writable,
)
from cti.time import MIN_TIME

# Operations on identities 0..2: ("open", ident), ("close", ident), ("refuse", ident): a close
# whose end is refused, so the start it took opens again.
OPS = st.lists(st.tuples(st.sampled_from(["open", "close", "refuse"]), st.integers(0, 2)),
               max_size=40)


@given(OPS)
def test_an_end_closes_the_earliest_open_start_of_its_identity(ops):
    book: dict = {}
    opened: list[tuple[int, int]] = []  # (ident, n-th start overall) still open, in order
    for n, (op, ident) in enumerate(ops):
        if op == "open":
            open_edge(book, ident, n)
            opened.append((ident, n))
            continue
        earliest = next((o for o in opened if o[0] == ident), None)
        found, value = close_edge(book, ident)
        assert (found, value) == ((True, earliest[1]) if earliest else (False, None))
        if earliest is not None:
            if op == "refuse":
                reopen_edge(book, ident, value)
            else:
                opened.remove(earliest)
        book = pickle.loads(pickle.dumps(book))  # plain data: it travels in a shard's state
    assert sorted(open_values(book)) == sorted(opened)
    assert all(book.values()), "an identity with no open start leaves the book"


# An identity as the join's columns: (start, payload, key), key None for an ungrouped stream.
IDENTS = st.tuples(st.integers(0, 2), st.sampled_from(['{"a":1}', '{"a":2}']),
                   st.sampled_from([None, "", '["k"]']))


@given(st.lists(IDENTS, max_size=30), st.lists(IDENTS, max_size=30))
def test_pair_ends_pairs_a_tables_open_starts_as_close_edge_does_one_end_at_a_time(starts, ends):
    book: dict = {}
    for n, ident in enumerate(starts):
        open_edge(book, ident, n)
    expected = []
    for k, ident in enumerate(ends):
        found, n = close_edge(book, ident)
        if found:
            expected.append((n, k))
    cols = ["start", "payload", "key"]
    opened = pd.DataFrame(starts or None, columns=cols).astype({"start": np.int64})
    arriving = pd.DataFrame(ends or None, columns=cols).astype({"start": np.int64})
    at, which = pair_ends(opened, arriving, cols)
    assert sorted(zip(at.tolist(), which.tolist(), strict=True)) == sorted(expected)


# Starts opened in bulk (ident: (start, payload); a value of NO_START: a dropped start).
BULK = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["p", "q", "r"]),
                          st.integers(0, 9) | st.just(NO_START)), max_size=30)


def _opened_one_by_one(pieces: list[list[tuple]]) -> dict:
    book: dict = {}
    for piece in pieces:
        for s, p, v in piece:
            open_edge(book, (s, p), None if v == NO_START else v)
    return book


def _arrays(piece: list[tuple]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.asarray([s for s, _, _ in piece], np.int64),
            np.asarray([p for _, p, _ in piece], object),
            np.asarray([v for _, _, v in piece], np.int64))


@settings(deadline=None)
@given(st.lists(BULK, max_size=4), st.integers(1, 40))
def test_a_bulk_book_is_the_book_its_starts_make_one_by_one(pieces, bulk_from):
    """Starts opened in bulk on an empty book (at least ``BULK_STARTS`` of them) are kept as
    arrays (``BulkBook``), later bulks added as pieces; the dict ``writable`` gives, and ``==``,
    are those of the same starts opened one by one, the identities' order included. A bulk
    book pickles as its arrays, and is read-only: ``writable`` without a change keeps it."""
    from cti.forms import edges

    want = _opened_one_by_one(pieces)
    saved, edges.BULK_STARTS = edges.BULK_STARTS, bulk_from
    try:
        book: object = {}
        for piece in pieces:
            book = opened(book, *_arrays(piece))
    finally:
        edges.BULK_STARTS = saved
    first = next((len(p) for p in pieces if p), 0)
    assert (type(book) is BulkBook) == (first >= bulk_from)
    assert list(writable(book).items()) == list(want.items())
    assert book == want and want == book and bool(book) == bool(want)
    if type(book) is BulkBook:
        assert writable(book, changing=False) is book
        back = pickle.loads(pickle.dumps(book))
        assert type(back) is BulkBook and list(back.as_dict().items()) == list(want.items())


def test_an_end_gets_the_bulk_books_starts_as_a_dict():
    """``edges_paired`` with an end on a bulk book: the book becomes the dict the starts make,
    the end closes the earliest start of its identity, the others stay in their order."""
    from cti.ingress.columns import edges_paired
    from cti.ingress.spec import StreamSpec
    from cti.settings import AdvanceTimePolicy

    book = BulkBook(((np.asarray([5, 5, 7], np.int64), np.asarray(["p", "q", "p"], object),
                      np.asarray([5, 5, 7], np.int64)),))
    spec = StreamSpec("s", EventShape.EDGE, policy=AdvanceTimePolicy.ADJUST)
    one = np.ones(1, bool)
    got = edges_paired(book, spec, ~one, one, np.asarray([5]), np.asarray([9]),
                       np.asarray(["q"], object), np.asarray([MIN_TIME]),
                       (~one, ~one, ~one, ~one), strays=True)
    assert got[0].tolist() == [5] and got[1].tolist() == [9]
    assert type(got[-1]) is dict and list(got[-1].items()) == [((5, "p"), [5]), ((7, "p"), [7])]
    assert type(book) is BulkBook  # (the stored book itself unchanged)
