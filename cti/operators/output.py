"""A query's released output as rows, and rows back to the ordered item sequence.

An output row is ``(release, kind, start, end, payload)``: ``release`` is the CTI that releases
the event; a CTI row has kind ``cti`` and ``start == release``. Sorting by :func:`ordered`
gives the output sequence (docs/operators.md, "Release and order"), however the rows were
produced (one in-process machine, or Spark shards whose rows meet at the sink).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cti.events import Cti, StreamItem, items_from_rows, kind_of
from cti.forms import frame
from cti.forms.frame import KIND_RANK, arrow_texts, arrow_to_pandas
from cti.forms.rows import payload_to_json

OutputRow = tuple[int, str, int, int, str | None]


def step_table(events: pd.DataFrame, ctis: Sequence[int], kind: str | None = None,
               encoded: bool = False) -> pa.Table:
    """A step's released events (with ``release``) and its new output CTIs as output rows
    (``OUTPUT_ARROW``): the events, then one row per CTI (kind ``cti``, start = end =
    release); in two chunks, the events' columns not copied. ``kind``: every event's, where
    the stream's shape says (``events.one_kind``; None: read from the rows). ``encoded``:
    payloads that come dictionary-encoded stay so (``frame.arrow_texts``; the table then
    has that payload type), for a packer that keeps them so (``packing.pack_rows``)."""
    c = pa.array(np.asarray(ctis, np.int64))
    kinds = _kind_texts(events["kind"].to_numpy(object)) if kind is None else \
        frame.repeated_text(len(events), kind)
    payloads = arrow_texts(events["payload"], encoded)
    schema = OUTPUT_ARROW if payloads.type == pa.string() else OUTPUT_ARROW.set(
        4, pa.field("payload", payloads.type))
    return pa.Table.from_batches([
        pa.record_batch([pa.array(events["release"].to_numpy(np.int64)), kinds,
                         pa.array(events["start"].to_numpy(np.int64)),
                         pa.array(events["end"].to_numpy(np.int64)), payloads], schema=schema),
        pa.record_batch([c, frame.repeated_text(len(c), "cti"), c, c,
                         pa.nulls(len(c), payloads.type)], schema=schema)])


def _kind_texts(kinds: np.ndarray) -> pa.Array:
    """The kinds as Arrow strings: one repeated where they are all one (a window's results:
    no Arrow string made from each of millions of Python ones)."""
    if len(kinds) and (kinds == kinds[0]).all():
        return frame.repeated_text(len(kinds), kinds[0])
    return pa.array(kinds, pa.string())


def table_rows(table: pa.Table) -> list[OutputRow]:
    """Output rows (``OUTPUT_ARROW`` columns) as tuples."""
    return list(zip(*table.to_pydict().values(), strict=True))


def rows_of_step(events: pd.DataFrame, ctis: Sequence[int]) -> list[OutputRow]:
    """``step_table`` as tuples."""
    return table_rows(step_table(events, ctis))


def ordered(rows: pd.DataFrame) -> pd.DataFrame:
    """Output rows (columns release, kind, start, end, payload) in output order: by release;
    within a release block the events by sync time, kind, start, end and payload, then the
    CTI that releases them."""
    return rows.iloc[_order(_rows_table(rows))].reset_index(drop=True)


def _rows_table(rows: pd.DataFrame) -> pa.Table:
    """Output rows as a frame (``COLUMNS``) as an Arrow table (``OUTPUT_ARROW``)."""
    return pa.Table.from_pandas(rows[list(COLUMNS)], schema=OUTPUT_ARROW, preserve_index=False)


def ordered_table(rows: pa.Table) -> pa.Table:
    """``ordered`` of output rows as an Arrow table (in one chunk: Arrow sorts a table of
    several at half the speed, and takes from one faster)."""
    rows = rows.combine_chunks()
    return rows.take(_order(rows))


def _order(rows: pa.Table, edges: bool = True) -> np.ndarray:
    """The row order of ``ordered``: Arrow's stable sort by ``_sort_keys``, or the same order
    found faster where the rows come in release order when sorted by sync time
    (``_by_sync``), unless most rows tie on sync time (a window's results, which share their
    window's): those would be copied and sorted by Arrow all the same. ``edges``: whether
    the rows may hold edge ends (not where the stream's shape is points' or intervals')."""
    order = _by_sync(rows, MOST_TIED, edges)  # (on the chunks as they come: no copy)
    if order is not None:
        return order
    keys = _sort_keys(rows.combine_chunks())  # (Arrow sorts one chunk faster)
    numbers = None if any(keys.column(c).null_count for c in _NUMERIC) else [
        keys.column(c).to_numpy(zero_copy_only=False) for c in _NUMERIC]
    if numbers is not None and _events_tie(numbers):
        return _by_numbers(keys, numbers)
    return pc.sort_indices(keys, sort_keys=[(c, "ascending") for c in keys.column_names]
                           ).to_numpy()


_NUMERIC = ("release", "cti", "sync", "rank", "start", "end")  # ``_sort_keys`` but payload


def _events_tie(numbers: list[np.ndarray]) -> bool:
    """Whether the events (not CTIs) tie on all the numbers of their sort keys (``_NUMERIC``):
    one window's results, released together."""
    events = ~numbers[1]
    for column in numbers:
        values = column[events]
        if len(values) and not (values == values[0]).all():
            return False
    return True


def _by_numbers(keys: pa.Table, numbers: list[np.ndarray]) -> np.ndarray:
    """The stable order of the sort ``keys`` (``_sort_keys``; ``numbers``, its columns but the
    payload, with no nulls): by the numbers in numpy, then each run of rows tied on them by
    payload in Arrow. Where the events tie on the numbers (``_events_tie``: a window's
    results), Arrow's sort by all seven keys took a third longer than by the payload alone;
    where they do not (many windows' results), Arrow's sort by all seven is the faster."""
    order = np.lexsort(numbers[::-1])
    tied = np.ones(max(len(order) - 1, 0), bool)
    for column in numbers:
        ranked = column[order]
        tied &= ranked[1:] == ranked[:-1]
    if tied.any():
        payload = keys.column("payload")
        _sort_ties(lambda at: pa.table({"payload": payload.take(at)}), order, tied)
    return order


def _sort_keys(rows: pa.Table) -> pa.Table:
    """What ``ordered`` sorts by, most significant first: release, CTI or not, sync time, the
    kind's rank, start, end, payload (a CTI's all 0 or empty after ``cti``)."""
    kind = rows.column("kind")
    cti = pc.equal(kind, "cti")
    start, end = rows.column("start"), rows.column("end")
    zero = pa.scalar(0, pa.int64())
    return pa.table({
        "release": rows.column("release"),
        "cti": cti,
        "sync": pc.if_else(cti, zero, pc.if_else(pc.equal(kind, "edge_end"), end, start)),
        "rank": _kind_ranks(kind),
        "start": pc.if_else(cti, zero, start),
        "end": pc.if_else(cti, zero, end),
        "payload": pc.if_else(cti, "", rows.column("payload")),
    })


def _kind_ranks(kind: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Each kind's place in ``KIND_RANK``'s order (0: a CTI's, or a kind not there)."""
    return pc.fill_null(pc.index_in(kind, value_set=pa.array(
        sorted(KIND_RANK, key=KIND_RANK.get))), 0)


MOST_TIED = 0.5  # the share of rows to sort by their ties above which ``_order`` sorts by Arrow
DENSE_TIES = 0.25  # the share of neighbours tied above which all are compared through slices


def _by_sync(rows: pa.Table, most_tied: float = 1.0, edges: bool = True
             ) -> np.ndarray | None:
    """``_order`` by one stable sort of each row's sync time (a CTI's: its release, ahead of
    events that start there), where that puts the rows in release order; rows of equal sync
    then sorted among themselves by all the keys (``_sort_ties``), but for runs of them in
    that order already (``_runs_in_order``: TopK's results of a window k). A stable sort has
    one result: the order that is sorted and keeps rows of equal keys as they came; so the
    order is checked, pair by neighbouring pair; None where it does not hold (or a key is
    null), or where more than ``most_tied`` of the rows' neighbours are ties left to sort."""
    if any(rows.column(c).null_count for c in ("release", "kind", "start", "end")):
        return None
    kind = rows.column("kind")
    cti = pc.equal(kind, "cti").to_numpy(zero_copy_only=False)
    ends = pc.equal(kind, "edge_end").to_numpy(zero_copy_only=False) if edges else None
    release, start, end = (rows.column(c).to_numpy() for c in ("release", "start", "end"))
    first = np.where(cti, release, start if ends is None else np.where(ends, end, start))
    order = frame.stable_order(first)
    ranked = first[order]
    tied = ranked[1:] == ranked[:-1]
    if tied.any():
        tied &= ~_runs_in_order(rows, order, tied, (release, cti, start, end))
    if np.count_nonzero(tied) > most_tied * len(tied):
        return None
    if tied.any():
        _sort_ties(lambda at: _sort_keys(frame.take_few(rows, at)), order, tied)
    return order if _in_release_order(release[order], cti[order]) else None


def _runs_in_order(rows: pa.Table, order: np.ndarray, tied: np.ndarray,
                   numbers: tuple[np.ndarray, ...]) -> np.ndarray:
    """Of the neighbours in ``order`` tied on sync time (``tied``), those in a run of ties
    that is in ``ordered``'s order already: every neighbour in it the row that follows it in
    ``rows``, and no greater by the sort keys (``_no_greater_than_next``). Linear in the
    ties: each such row compared once with the next. (A stable sort would leave such a run
    as it is.)"""
    ties = np.flatnonzero(tied)
    after = order[ties]
    good = order[ties + 1] == after + 1
    good[good] = _no_greater_than_next(rows, numbers, after[good])
    run = np.cumsum(np.diff(ties, prepend=-2) != 1)  # (neighbours of one run: one number)
    bad = np.zeros(int(run[-1]) + 1, bool)
    bad[run[~good]] = True
    in_order = np.zeros(len(tied), bool)
    in_order[ties[~bad[run]]] = True
    return in_order


def _no_greater_than_next(rows: pa.Table, numbers: tuple[np.ndarray, ...], at: np.ndarray
                          ) -> np.ndarray:
    """Whether each row at ``at`` (none the last) is no greater than the row after it by the
    sort keys but sync time (``_sort_keys``: release, CTI or not, the kind's rank, start,
    end, payload; two CTIs of one release equal; ``numbers``: the rows' release, whether a
    CTI, start and end); payloads compared by Arrow, a null one as greater. Where the ties
    are few (a large output's), only those rows and their next ones are taken; where they
    are many (a window's results, all of one sync time), every row is compared with the next
    through slices (a take would copy the payload texts): ``DENSE_TIES``."""
    if len(at) > DENSE_TIES * len(numbers[0]):
        pairs = [(c[:-1], c[1:]) for c in numbers]
        ranks = _kind_ranks(rows.column("kind")).to_numpy(zero_copy_only=False)
        payload = rows.column("payload")
        pairs.append((ranks[:-1], ranks[1:]))
        return _pairs_in_order(pairs, (payload.slice(0, len(ranks) - 1), payload.slice(1)))[at]
    pairs = [(c[at], c[at + 1]) for c in numbers]
    n = len(at)  # (the rows and their next ones, kind and payload, taken at once)
    taken = frame.take_few(rows.select(["kind", "payload"]), np.concatenate([at, at + 1]))
    ranks = _kind_ranks(taken.column("kind")).to_numpy(zero_copy_only=False)
    pairs.append((ranks[:n], ranks[n:]))
    payload = taken.column("payload")
    return _pairs_in_order(pairs, (payload.slice(0, n), payload.slice(n)))


def _pairs_in_order(pairs: list[tuple[np.ndarray, np.ndarray]],
                    payloads: tuple[pa.ChunkedArray, pa.ChunkedArray]) -> np.ndarray:
    """``_no_greater_than_next`` of rows paired with their next ones: ``pairs`` the release,
    CTI, start, end and kind rank of each row and of its next, ``payloads`` theirs."""
    (release, later_release), (cti, later_cti), start, end, ranks = pairs
    ok = np.zeros(len(release), bool)
    open_ = np.ones(len(ok), bool)  # (tied on the keys so far)
    for key, after in ((release, later_release), (cti, later_cti)):
        ok |= open_ & (key < after)
        open_ &= key == after
    ok |= open_ & cti
    open_ &= ~cti
    for key, after in (ranks, start, end):
        ok |= open_ & (key < after)
        open_ &= key == after
    no_greater = pc.less_equal(*payloads)
    return ok | open_ & no_greater.fill_null(False).to_numpy(zero_copy_only=False)


def _in_release_order(release: np.ndarray, cti: np.ndarray) -> bool:
    """Whether rows ordered by sync time (``_by_sync``) are in release order: releases that
    never fall, and no event after a CTI of the same release. (Rows of one release and kind
    then come by sync time, as sorted: the rest of ``ordered``'s order holds.)"""
    step = np.diff(release)
    if not (step >= 0).all():
        return False
    return not ((step == 0) & cti[:-1] & ~cti[1:]).any()


def _sort_ties(keys_of: Callable[[np.ndarray], pa.Table], order: np.ndarray,
               tied: np.ndarray) -> None:
    """Rows tied on the keys they are in ``order`` by (``tied``: neighbours in ``order`` that
    are) put in place in ``order`` by Arrow's stable sort of the keys that are left
    (``keys_of`` the rows at some positions), each run of them where it lies (one run:
    sorted as it is, with no column numbering the runs)."""
    at, run = frame.tie_runs(tied)
    sub = keys_of(order[at])
    if run[0] != run[-1]:
        sub = sub.add_column(0, "run", pa.array(run))
    within = pc.sort_indices(sub, sort_keys=[(c, "ascending") for c in sub.column_names])
    order[at] = order[at][within.to_numpy()]


def in_output_order(items: Sequence[StreamItem]) -> list[StreamItem]:
    """A micro-batch's output gathered from the partitions it was written in (each in output
    order, the batch's CTIs in one of them), in the order of the whole batch (``ordered``): an
    event's release is the batch's first CTI above its sync time, as the shard that released
    it computed (every shard computes the same CTIs)."""
    ctis = np.sort(np.asarray([i.time for i in items if isinstance(i, Cti)], np.int64))
    events = [i for i in items if not isinstance(i, Cti)]
    kinds = [kind_of(i) for i in events]
    start = np.asarray([i.start for i in events], np.int64)
    end = np.asarray([i.end for i in events], np.int64)
    sync = np.where(np.asarray(kinds, object) == "edge_end", end, start)
    at = np.searchsorted(ctis, sync, side="right")
    release = np.where(at < len(ctis), ctis[np.minimum(at, len(ctis) - 1)] if len(ctis)
                       else 0, np.iinfo(np.int64).max)
    rows = pd.DataFrame({
        "release": np.concatenate([release, ctis]),
        "kind": kinds + ["cti"] * len(ctis),
        "start": np.concatenate([start, ctis]),
        "end": np.concatenate([end, np.zeros(len(ctis), np.int64)]),
        "payload": [payload_to_json(i.payload) for i in events] + [None] * len(ctis)})
    return items_of_frame(ordered(rows))


def items_of_frame(rows: pd.DataFrame) -> list[StreamItem]:
    """Ordered output rows as stream items."""
    return items_from_rows(rows["kind"], rows["start"].tolist(), rows["end"].tolist(),
                           rows["payload"])


def items_of_rows(rows: Iterable[OutputRow]) -> list[StreamItem]:
    """The output sequence: rows in release order, each event before the CTI releasing it."""
    return items_of_frame(ordered(pd.DataFrame(list(rows), columns=list(COLUMNS))))


def steps_in_order(tables: Iterable[pa.Table], edges: bool = True) -> pa.Table:
    """Output rows of one machine's steps, one table per step, in output order: each step's
    put in order by itself (a step's working set, not the batch's), one after the other (a
    chunk each). A machine's CTIs rise from step to step, so each step's releases follow the
    one's before it; where they did not, the rows are put in order together."""
    parts: list[pa.Table] = []
    rising = True
    for table in tables:
        if not len(table):
            continue
        part = _taken(table, _order(table, edges))
        if parts:
            rising &= part.column("release")[0].as_py() > parts[-1].column("release")[-1].as_py()
        parts.append(part)
    if not parts:
        return OUTPUT_ARROW.empty_table()
    rows = pa.concat_tables(parts, promote_options="default")
    return rows if rising else _taken(rows, _order(rows, edges))


def deliver(adapter: Any, rows: pd.DataFrame | pa.Table, batch_id: int,
            partition: int | None = None, edges: bool = True, in_order: bool = False
            ) -> None:
    """One batch of a query's output rows (an Arrow table or a frame), in output order, to an
    output adapter: as an Arrow table (kind, start, end, payload) to an adapter with
    ``write_table``, as a pandas frame of them to one with ``write_frame``, else as items;
    ``partition``: the part of the batch they are, for a partitioned adapter
    (``cti.adapters.OutputAdapter``), else None (the whole batch); ``edges``: as
    ``_order``'s; ``in_order``: the rows come in output order already
    (``steps_in_order``)."""
    if not len(rows):
        return
    table = rows if isinstance(rows, pa.Table) else _rows_table(rows)
    table = table.select(ROWS_ARROW.names) if in_order else _taken(
        table.select(ROWS_ARROW.names), _order(table, edges))
    where = {} if partition is None else {"partition": partition}
    if hasattr(adapter, "write_table"):
        adapter.write_table(table, batch_id, **where)
        return
    frame = arrow_to_pandas(table)
    if hasattr(adapter, "write_frame"):
        adapter.write_frame(frame, batch_id, **where)
    else:
        adapter.write(items_of_frame(frame), batch_id, **where)


def _taken(table: pa.Table, order: np.ndarray) -> pa.Table:
    """``table.take(order)``: where ``order`` takes the rows in few stretches of rows in a row
    (rows in output order already but for the CTIs among them: a window's results), the
    stretches as they lie, a chunk each (no row copied: the rows of a step's millions of
    results are not written again); else one chunk gathered row by row."""
    order = order.astype(np.int64, copy=False)  # (Arrow's sort gives unsigned positions)
    batches = table.to_batches()
    lengths = [b.num_rows for b in batches]
    # (a stretch ends where the rows taken stop being in a row, or at the end of a chunk)
    breaks = np.diff(order) != 1
    breaks |= np.isin(order[1:], np.cumsum(lengths)[:-1])
    starts = np.insert(np.flatnonzero(breaks) + 1, 0, 0)
    if not len(order) or len(starts) > len(order) // 256 + 1 or any(
            pa.types.is_dictionary(t) for t in table.schema.types):  # (a dictionary: taken)
        return table.combine_chunks().take(order)
    which, first = frame.places_in_parts(lengths, order[starts])
    return pa.Table.from_batches([batches[b].slice(f, n) for b, f, n in zip(
        which.tolist(), first.tolist(), np.diff(starts, append=len(order)).tolist(),
        strict=True)], schema=table.schema)


COLUMNS = ("release", "kind", "start", "end", "payload")
OUTPUT_ARROW = pa.schema([("release", pa.int64()), ("kind", pa.string()),  # COLUMNS in Arrow
                          ("start", pa.int64()), ("end", pa.int64()), ("payload", pa.string())])
# A batch of output rows as an adapter's ``write_table`` receives it (``cti.adapters``).
ROWS_ARROW = pa.schema([f for f in OUTPUT_ARROW if f.name != "release"])
