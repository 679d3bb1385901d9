"""The edge pairing rule (``cti.forms.edges``) that ingress, windows, joins and clips share: an end
closes the earliest open start of its identity; a refused end leaves that start first in line."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from cti.forms.edges import close_edge, open_edge, open_values, pair_ends, reopen_edge

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
