"""The edge pairing rule (``cti.edges``) that ingress, windows, joins and clips share: an end
closes the earliest open start of its identity; a refused end leaves that start first in line."""

from __future__ import annotations

import pickle

from hypothesis import given
from hypothesis import strategies as st

from cti.edges import close_edge, open_edge, open_values, reopen_edge

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
