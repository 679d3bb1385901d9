"""One side of a join: its events in segments, each indexed by its events' keys, so that a step
costs what it touches (the rows it brings and the rows they meet), not what the side holds.

A side is a list of ``Segment``s in row-id order (ids count up as events arrive). A segment
holds its rows' columns as numpy arrays, in id order, and an index of them by a 64-bit hash of
(group key, join key): the hashes sorted, with the rows in that order. Finding the rows a new
event meets is a binary search per segment; the hash is checked against the keys themselves,
so a collision costs a comparison, never a wrong pair. A step's new events become a segment;
segments of similar size merge (a binary counter: each row is re-indexed O(log n) times), so
a reference table loaded in 1,000 steps of 1,000 rows is indexed in O(n log n), not O(n^2).
Purging by the CTI looks only at segments whose least known end it has reached; an edge end
finds its open start through the same index.

Plain data (attrs classes of numpy arrays and ints), so it pickles into Spark's state store.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pandas as pd

from cti.forms import texts
from cti.forms.edges import pair_ends
from cti.time import MAX_TIME

# The columns of a side's rows: the event's id, kind, start and end (the end of an edge whose
# end has not arrived: unknown, ``known`` False), payload, group key and join key (None:
# null, matches nothing).
ROW_COLUMNS = ("id", "kind", "start", "end", "known", "payload", "key", "jkey")
_MIX = np.uint64(0x9E3779B97F4A7C15)  # mixes the group key's hash into the join key's
# Columns a large segment is pickled with as ``texts.Texts`` (UTF-8 bytes and offsets,
# memory-mapped parts on Spark), not as Python strings: a reference table's payloads and
# join keys. (Compacted when pickled, not when made: a step's own strings stay alive to its
# end, so a copy made then would only add to its peak.)
_TEXTS = ("payload", "jkey")


def key_hashes(key: np.ndarray, jkey: np.ndarray) -> np.ndarray:
    """Each row's 64-bit hash of (group key, join key)."""
    if not len(key):
        return np.empty(0, np.uint64)
    with np.errstate(over="ignore"):
        return _hashed(key) * _MIX ^ _hashed(jkey)


def _hashed(values: np.ndarray) -> np.ndarray:
    """``pd.util.hash_array`` (SipHash with a fixed key: the same in every process and
    release that keeps its algorithm; ``resumed`` checks) of texts, once where all are equal
    (a join outside ``group_by``: every group key "")."""
    values = np.asarray(values, object)
    if (values == values[0]).all():
        return np.full(len(values), pd.util.hash_array(values[:1], categorize=False)[0])
    return pd.util.hash_array(values, categorize=False)


@attrs.define(eq=False)
class Segment:
    """Rows of one side in id order (``ROW_COLUMNS``), with ``hash`` of each row's keys, the
    rows in hash order (``order``) and their hashes in that order (``sorted_hash``),
    ``min_end`` (the least known end; MAX_TIME: none) and ``open_n`` (rows whose end is not
    known)."""

    id: np.ndarray
    kind: np.ndarray
    start: np.ndarray
    end: np.ndarray
    known: np.ndarray
    payload: np.ndarray
    key: np.ndarray
    jkey: np.ndarray
    hash: np.ndarray
    order: np.ndarray
    sorted_hash: np.ndarray
    min_end: int
    open_n: int

    def __len__(self) -> int:
        return len(self.id)

    def __reduce__(self) -> tuple:
        """Pickled (Spark's state) with its large text columns as ``Texts``: read back as
        memory-mapped parts, not as Python strings in every worker that reads the shard."""
        return Segment, tuple(texts.compact(v) if a.name in _TEXTS else v
                              for a, v in zip(attrs.fields(Segment), attrs.astuple(
                                  self, recurse=False), strict=True))


def make_segment(columns: dict[str, np.ndarray], hashes: np.ndarray | None = None) -> Segment:
    """A segment of rows (``ROW_COLUMNS``, in id order), indexed (``hashes``: the rows' key
    hashes where known)."""
    hashes = key_hashes(columns["key"], columns["jkey"]) if hashes is None else hashes
    order = np.argsort(hashes, kind="stable")
    return Segment(**{c: columns[c] for c in ROW_COLUMNS}, hash=hashes, order=order,
                   sorted_hash=hashes[order], min_end=_min_end(columns["known"], columns["end"]),
                   open_n=int(len(columns["known"]) - columns["known"].sum()))


def _min_end(known: np.ndarray, end: np.ndarray) -> int:
    return int(end[known].min()) if known.any() else MAX_TIME


def _merged(a: Segment, b: Segment) -> Segment:
    """Two segments as one (``a``'s ids below ``b``'s)."""
    return make_segment({c: (texts.concat if c in _TEXTS else np.concatenate)(
        [getattr(a, c), getattr(b, c)]) for c in ROW_COLUMNS}, np.concatenate([a.hash, b.hash]))


def _kept(seg: Segment, keep: np.ndarray) -> Segment:
    """A segment's rows where ``keep``, its index kept (no re-sort)."""
    at = np.cumsum(keep) - 1  # each kept row's new position
    still = keep[seg.order]
    order = at[seg.order[still]]
    cols = {c: getattr(seg, c)[keep] for c in ROW_COLUMNS}
    return Segment(**cols, hash=seg.hash[keep], order=order, sorted_hash=seg.sorted_hash[still],
                   min_end=_min_end(cols["known"], cols["end"]),
                   open_n=int(len(cols["known"]) - cols["known"].sum()))


@attrs.define(eq=False)
class Side:
    """A join side's rows: segments in id order, none empty."""

    segments: list[Segment] = attrs.Factory(list)

    def __len__(self) -> int:
        return sum(len(s) for s in self.segments)


def add(side: Side, seg: Segment) -> None:
    """New rows (ids above the side's) join the side; segments of similar size merge."""
    if not len(seg):
        return
    segs = side.segments
    segs.append(seg)
    while len(segs) > 1 and len(segs[-2]) <= 2 * len(segs[-1]):
        last = segs.pop()
        segs[-1] = _merged(segs[-1], last)


def matches(side: Side, key: np.ndarray, jkey: np.ndarray) -> tuple[np.ndarray, ...]:
    """The side's rows whose (group key, join key) equal each query row's: (query position,
    row id, row start, row end, row known) of each match, by segment."""
    hashes = key_hashes(key, jkey)
    parts = []
    for seg in side.segments:
        lo = np.searchsorted(seg.sorted_hash, hashes, "left")
        n = np.searchsorted(seg.sorted_hash, hashes, "right") - lo
        total = int(n.sum())
        if not total:
            continue
        q = np.repeat(np.arange(len(hashes)), n)
        pos = seg.order[np.repeat(lo, n) + np.arange(total) - np.repeat(np.cumsum(n) - n, n)]
        same = (seg.key[pos] == key[q]) & (seg.jkey[pos] == jkey[q])  # not a hash collision
        q, pos = q[same], pos[same]
        parts.append((q, seg.id[pos], seg.start[pos], seg.end[pos], seg.known[pos]))
    if not parts:
        empty = np.empty(0, np.int64)
        return empty, empty, empty, empty, np.empty(0, bool)
    return tuple(np.concatenate(p) for p in zip(*parts, strict=True))


def _located(side: Side, ids: np.ndarray) -> list[tuple[Segment, np.ndarray, np.ndarray]]:
    """Where the rows ``ids`` are: (segment, which of ``ids``, their positions in it)."""
    segs = side.segments
    firsts = np.asarray([s.id[0] for s in segs], np.int64)
    which = np.searchsorted(firsts, ids, "right") - 1
    out = []
    for k in np.unique(which).tolist():
        at = np.flatnonzero(which == k)
        out.append((segs[k], at, np.searchsorted(segs[k].id, ids[at])))
    return out


def gather(side: Side, ids: np.ndarray, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Columns ``names`` of the rows ``ids`` (every one held by the side), in ``ids`` order."""
    first = side.segments[0] if side.segments else None
    out = {c: np.empty(len(ids), getattr(first, c).dtype if first is not None else object)
           for c in names}
    if not len(ids):
        return out
    for seg, at, pos in _located(side, ids):
        for c in names:
            out[c][at] = getattr(seg, c)[pos]
    return out


def close_edges(side: Side, ends: pd.DataFrame, jkey: np.ndarray) -> None:
    """Edge ends (``ends``: start, end, payload, key, in arrival order; ``jkey`` their join
    keys) close the side's open starts of the same identity, first in, first out
    (``pair_ends``): the rows' ends become known."""
    if not len(ends) or not any(s.open_n for s in side.segments):
        return
    _, ids, _, _, known = matches(side, ends["key"].to_numpy(object), jkey)
    ids = np.unique(ids[~known])  # the open starts that share a key with an end, in id order
    if not len(ids):
        return
    rows = gather(side, ids, ("start", "payload", "key"))
    at, which = pair_ends(pd.DataFrame(rows), ends, ["start", "payload", "key"])
    if not len(at):
        return
    closed, new_end = ids[at], ends["end"].to_numpy(np.int64)[which]
    for seg, got, pos in _located(side, closed):
        if not (seg.end.flags.writeable and seg.known.flags.writeable):
            # (arrays read from a stored state may be shared, read-only: copied, then written)
            seg.end, seg.known = seg.end.copy(), seg.known.copy()
        seg.end[pos] = new_end[got]
        seg.known[pos] = True
        seg.min_end = min(seg.min_end, int(new_end[got].min()))
        seg.open_n -= len(pos)


def purge(side: Side, other_cti: int, referenced: np.ndarray) -> None:
    """Drop the rows that no future event of the other side can meet (their end known and at or
    below its CTI) and nothing refers to (``referenced``: ids). Only segments whose least
    known end the CTI has reached are looked at."""
    segs = []
    for seg in side.segments:
        if seg.min_end <= other_cti:
            dead = seg.known & (seg.end <= other_cti)
            if dead.any() and len(referenced):
                dead &= ~np.isin(seg.id, referenced)
            if dead.any():
                seg = _kept(seg, ~dead)
        if len(seg):
            segs.append(seg)
    side.segments = segs


def reindexed(side: Side) -> Side:
    """The side, its segments re-indexed where a row's stored hash is not what this process
    computes (a checkpoint of a pandas whose ``hash_array`` differed): one row per segment
    checked."""
    for k, seg in enumerate(side.segments):
        if key_hashes(seg.key[:1], seg.jkey[:1])[0] != seg.hash[0]:
            side.segments[k] = make_segment({c: getattr(seg, c) for c in ROW_COLUMNS})
    return side


def of_frame(table: pd.DataFrame) -> Side:
    """A side from a table of rows (``ROW_COLUMNS``, in id order): the form a checkpoint of an
    earlier release holds."""
    side = Side()
    if len(table):
        cols = {c: table[c].to_numpy(_DTYPES[c]).copy() for c in ROW_COLUMNS}
        side.segments.append(make_segment(cols))
    return side


_DTYPES: dict[str, Any] = {"id": np.int64, "kind": object, "start": np.int64,
                           "end": np.int64, "known": bool, "payload": object, "key": object,
                           "jkey": object}
