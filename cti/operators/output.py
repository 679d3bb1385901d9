"""A query's released output as rows, and rows back to the ordered item sequence.

An output row is ``(release, kind, start, end, payload)``: ``release`` is the CTI that releases
the event; a CTI row has kind ``cti`` and ``start == release``. Sorting by :func:`ordered`
gives the output sequence (docs/operators.md, "Release and order"), however the rows were
produced (one in-process machine, or Spark shards whose rows meet at the sink).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from cti.events import Cti, StreamItem
from cti.operators.frame import KIND_RANK, stable_order, to_item

OutputRow = tuple[int, str, int, int, str | None]


def rows_of_step(events: pd.DataFrame, ctis: Iterable[int]) -> list[OutputRow]:
    rows: list[OutputRow] = [
        (int(r), k, int(s), int(e), p) for r, k, s, e, p in zip(
            events["release"], events["kind"], events["start"], events["end"],
            events["payload"], strict=True)]
    rows += [(int(c), "cti", int(c), int(c), None) for c in ctis]
    return rows


def ordered(rows: pd.DataFrame) -> pd.DataFrame:
    """Output rows (columns release, kind, start, end, payload) in output order: by release;
    within a release block the events by sync time, kind, start, end and payload, then the
    CTI that releases them."""
    kind = rows["kind"].to_numpy(object)
    cti = kind == "cti"
    start = rows["start"].to_numpy(np.int64)
    end = rows["end"].to_numpy(np.int64)
    keys = pd.DataFrame({
        "release": rows["release"].to_numpy(np.int64),
        "cti": cti,
        "sync": np.where(cti, 0, np.where(kind == "edge_end", end, start)),
        "rank": pd.Series(kind).map(KIND_RANK).fillna(0).to_numpy(np.int64),
        "start": np.where(cti, 0, start),
        "end": np.where(cti, 0, end),
        "payload": np.where(cti, "", rows["payload"].to_numpy(object)),
    })
    return rows.iloc[stable_order(keys)].reset_index(drop=True)


def items_of_frame(rows: pd.DataFrame) -> list[StreamItem]:
    """Ordered output rows as stream items."""
    return [Cti(int(s)) if k == "cti" else to_item(k, s, e, p) for k, s, e, p in zip(
        rows["kind"], rows["start"], rows["end"], rows["payload"], strict=True)]


def items_of_rows(rows: Iterable[OutputRow]) -> list[StreamItem]:
    """The output sequence: rows in release order, each event before the CTI releasing it."""
    return items_of_frame(ordered(pd.DataFrame(list(rows), columns=list(COLUMNS))))


def deliver(adapter: Any, rows: pd.DataFrame, batch_id: int) -> None:
    """One batch of a query's output rows, in output order, to an output adapter: as a frame
    (kind, start, end, payload) to an adapter with ``write_frame``, else as items."""
    if not len(rows):
        return
    rows = ordered(rows)
    if hasattr(adapter, "write_frame"):
        adapter.write_frame(rows[["kind", "start", "end", "payload"]], batch_id)
    else:
        adapter.write(items_of_frame(rows), batch_id)


COLUMNS = ("release", "kind", "start", "end", "payload")
