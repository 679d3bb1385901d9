"""A query's released output as rows, and rows back to the ordered item sequence.

An output row is ``(release, kind, start, end, payload)``: ``release`` is the CTI that releases
the event; a CTI row has kind ``cti`` and ``start == release``. Sorting by :func:`order_key`
gives the output sequence (docs/operators.md, "Release and order"), however the rows were
produced (one in-process machine, or Spark shards whose rows meet at the sink).
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from cti.events import Cti, StreamItem
from cti.operators.frame import KIND_RANK, to_item

OutputRow = tuple[int, str, int, int, str | None]


def rows_of_step(events: pd.DataFrame, ctis: Iterable[int]) -> list[OutputRow]:
    rows: list[OutputRow] = [
        (int(r), k, int(s), int(e), p) for r, k, s, e, p in zip(
            events["release"], events["kind"], events["start"], events["end"],
            events["payload"], strict=True)]
    rows += [(int(c), "cti", int(c), int(c), None) for c in ctis]
    return rows


def order_key(row: OutputRow) -> tuple:
    release, kind, start, end, payload = row
    if kind == "cti":
        return (release, 1)
    sync = end if kind == "edge_end" else start
    return (release, 0, sync, KIND_RANK[kind], start, end, payload)


def items_of_rows(rows: Iterable[OutputRow]) -> list[StreamItem]:
    """The output sequence: rows in release order, each event before the CTI releasing it."""
    items: list[StreamItem] = []
    for release, kind, start, end, payload in sorted(rows, key=order_key):
        items.append(Cti(release) if kind == "cti" else to_item(kind, start, end, payload))
    return items
