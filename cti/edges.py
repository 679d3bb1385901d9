"""How an edge end finds its start: the one pairing rule of ingress and of every operator that
holds edges (hopping window, join, clip).

An edge end closes the earliest still-open edge start of the same identity: its start time
and payload, and inside an operator also its group key. A holder keeps its open starts in an
``OpenEdges`` book: per identity, one value per open start, in the order they opened (first
in, first out). The value is what the holder needs once the edge closes: ingress the start it
emitted (None if it dropped it), a window the next window the edge feeds, a join the row of
its side's table, a clip whether it already closed the edge early. The book is plain data (a
dict of lists), so it pickles with the holder's state.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

OpenEdges = dict[Hashable, list[Any]]


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
