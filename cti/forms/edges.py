"""How an edge end finds its start: the one pairing rule of ingress and of every operator that
holds edges (hopping window, join, clip).

An edge end closes the earliest still-open edge start of the same identity: its start time
and payload, and inside an operator also its group key. A holder keeps its open starts in an
``OpenEdges`` book: per identity, one value per open start, in the order they opened (first
in, first out). The value is what the holder needs once the edge closes: ingress the start it
emitted (None if it dropped it), a window the next window the edge feeds, a join the row of
its side's table, a clip whether it already closed the edge early. The book is plain data (a
dict of lists), so it pickles with the holder's state.

A holder that keeps its events in a table anyway (the join) needs no book: ``pair_ends``
applies the same rule to the table's open starts, all of a chunk's ends at once.

A book that many starts open at once and no end has reached yet (a reference table: a
million edges from its load time, which may never end) is kept as the starts' arrays, in
the order they opened (``BulkBook``, ``opened``): no Python object per edge, and in a
stored state a few arrays (``cti.runtime.spark.state`` keeps each large one as a part).
It is the book those starts would make, opened one by one on an empty book; the first end
(or a holder that changes it otherwise) gets that book as a dict (``writable``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import numpy as np

from cti.forms import texts
from cti.time import MIN_TIME

OpenEdges = dict[Hashable, list[Any]]
NO_START = MIN_TIME  # a ``BulkBook`` value: the start was dropped (None; ingress's NULL)
# From how many starts opened at once on an empty book it is kept as a ``BulkBook``.
BULK_STARTS = 4096


class StoredBook(dict):
    """A large book as a stored state keeps it (``stored_book``): read-only, each identity's
    values a tuple, so that a process may hand the same object to the next micro-batch
    (``cti.runtime.spark.state`` keeps it as a part) and a change to it fails instead of
    changing what others share. ``writable`` gives the book to change."""

    def __reduce__(self) -> tuple:
        return StoredBook, (dict(self),)

    def _refuse(self, *_args: Any, **_kwargs: Any) -> None:
        raise TypeError("a stored edge book is read-only: change the book "
                        "cti.forms.edges.writable gives")

    __setitem__ = __delitem__ = setdefault = pop = popitem = clear = update = _refuse
    __ior__ = _refuse


def stored_book(book: OpenEdges) -> StoredBook:
    """``book`` as a ``StoredBook`` (the same identities, in the same order)."""
    return StoredBook((ident, tuple(values)) for ident, values in book.items())


class BulkBook:
    """The book of edge starts opened in bulk (``opened``) on an empty book, none closed
    yet: per bulk, the starts' times, payloads and values (the time each start was emitted
    at; ``NO_START``: None, dropped) as arrays (the payloads of a large bulk pickled as
    ``texts.Texts``), in the order they opened. Read-only, like a
    ``StoredBook``: ``writable`` gives it as the dict ``open_edges`` would have made of the
    same starts (identities in the order they first opened, each one's values in order)."""

    __slots__ = ("pieces",)

    def __init__(self, pieces: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]
                 ) -> None:
        self.pieces = pieces

    def __reduce__(self) -> tuple:
        """Pickled with a large bulk's payloads as ``texts.Texts`` (memory-mapped parts on
        Spark, not Python strings in every worker that reads the shard)."""
        return BulkBook, (tuple((start, texts.compact(payload), value)
                                for start, payload, value in self.pieces),)

    def __bool__(self) -> bool:
        return any(len(start) for start, _, _ in self.pieces)

    def starts(self) -> int:
        """How many open starts it holds."""
        return sum(len(start) for start, _, _ in self.pieces)

    def as_dict(self) -> OpenEdges:
        """The book as a dict of lists (``open_edges`` of every start, in order)."""
        book: OpenEdges = {}
        for start, payload, value in self.pieces:
            values = value.tolist()
            open_edges(book, zip(start.tolist(), payload.tolist(), strict=True),
                       [None if v == NO_START else v for v in values])
        return book

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BulkBook):
            other = other.as_dict()
        return isinstance(other, dict) and self.as_dict() == other

    __hash__ = None  # type: ignore[assignment]  (a book is mutable data, as a dict is)

    def __repr__(self) -> str:
        return f"BulkBook({self.starts()} open starts)"


def opened(book: OpenEdges | BulkBook, start: np.ndarray, payload: np.ndarray,
           emitted: np.ndarray) -> OpenEdges | BulkBook:
    """The book after edge starts open, in order (``open_edges``): their times ``start``,
    payloads and the times they were emitted at (``NO_START``: dropped). An empty book or a
    ``BulkBook`` takes many at once as arrays (``BulkBook``); any other book is changed in
    place (a stored one copied first: ``writable``)."""
    if not len(start):
        return book
    bulk = type(book) is BulkBook
    if bulk or (not book and len(start) >= BULK_STARTS):
        piece = (np.asarray(start, np.int64), np.asarray(payload, object),
                 np.asarray(emitted, np.int64))
        return BulkBook((*book.pieces, piece) if bulk else (piece,))
    book = writable(book)
    open_edges(book, zip(start.tolist(), payload.tolist(), strict=True),
               [None if t == NO_START else t for t in emitted.tolist()])
    return book


def writable(book: OpenEdges | BulkBook, changing: bool = True) -> OpenEdges | BulkBook:
    """A book that may be changed, where ``changing``: a stored book's copy (its values lists
    again), a ``BulkBook`` as a dict, else the book itself."""
    if changing and isinstance(book, StoredBook):  # (or a part's book read when looked in)
        return {ident: list(values) for ident, values in book.items()}
    if changing and type(book) is BulkBook:
        return book.as_dict()
    return book


def open_edge(book: OpenEdges, ident: Hashable, value: Any) -> None:
    """An edge start of ``ident`` opened, last in line among its identity's open starts."""
    book.setdefault(ident, []).append(value)


def open_edges(book: OpenEdges, idents: Iterable[Hashable], values: Iterable[Any]) -> None:
    """``open_edge`` of each identity with its value, in order (a reference table's rows: many
    at once)."""
    held = book.get
    for ident, value in zip(idents, values, strict=True):
        line = held(ident)
        if line is None:
            book[ident] = [value]
        else:
            line.append(value)


def close_edge(book: OpenEdges, ident: Hashable) -> tuple[bool, Any]:
    """An edge end of ``ident`` arrived: (True, the value of the earliest open start it
    closes), which leaves the book; (False, None) if no start of that identity is open."""
    values = book.get(ident)
    if not values:
        return False, None
    value = values.pop(0)
    if not values:
        del book[ident]
    return True, value


def reopen_edge(book: OpenEdges, ident: Hashable, value: Any) -> None:
    """A start that ``close_edge`` took stays open after all (its end was refused): first in
    line again."""
    book.setdefault(ident, []).insert(0, value)


def open_values(book: OpenEdges) -> list[tuple[Hashable, Any]]:
    """Every open start as (identity, value), each identity's in the order they opened."""
    return [(ident, value) for ident, values in book.items() for value in values]


def pair_ends(opened: Any, ends: Any, ident: list[str]) -> tuple[Any, Any]:
    """The pairing rule over frames: ``opened`` holds the open starts in the order they opened,
    ``ends`` edge ends in arrival order, both with the ``ident`` columns. The k-th end of an
    identity closes the k-th open start of that identity, as ``close_edge`` one end at a time
    would. Returns (positions in ``opened``, positions in ``ends``) of the pairs; an end without
    an open start pairs with nothing."""
    import numpy as np

    empty = np.empty(0, np.int64)
    if not len(opened) or not len(ends):
        return empty, empty
    # Only starts at an end's start time can pair: narrow by the integer column first.
    near = np.flatnonzero(np.isin(opened[ident[0]].to_numpy(), ends[ident[0]].to_numpy()))
    if not len(near):
        return empty, empty
    o = opened.iloc[near][ident].reset_index(drop=True)
    o["_rank"] = o.groupby(ident, sort=False, dropna=False).cumcount()
    o["_at"] = near
    e = ends[ident].reset_index(drop=True)
    e["_rank"] = e.groupby(ident, sort=False, dropna=False).cumcount()
    e["_end"] = np.arange(len(e))
    m = e.merge(o, on=[*ident, "_rank"])
    return m["_at"].to_numpy(np.int64), m["_end"].to_numpy(np.int64)
