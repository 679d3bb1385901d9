"""Snapshot windows with aggregates (SPEC 8; StreamInsight's ``SnapshotWindow``).

A window lies between each two consecutive endpoints (starts and ends) of a key's events, so
the set of active events is constant inside it; a window with no active event gives nothing,
and equal results of neighbouring windows are not merged. Output: an interval with the
window's lifetime (``CLIP_TO_WINDOW_END``, StreamInsight's only policy), or a point at its
end (``POINT_ALIGN_TO_WINDOW_END``, an extension).

State (``SnapshotState``): the events that still reach past the input's CTI, one row each,
with ``lo``, the start of the first window of theirs not yet emitted. A CTI at c completes
every window that ends at or before c (a later event starts, and a later edge end ends, at or
after c): they are emitted, the events that end by c purged, and the rest start their next
window at the last endpoint at or before c. An edge whose end has not arrived is active up to
the CTI; one still open when the input ends (CTI at MAX_TIME) lasts to MAX_TIME, so the last
window of its key is ``[last endpoint, MAX_TIME)`` (no point at infinity under
``POINT_ALIGN_TO_WINDOW_END``).

Output CTI (``CLIP_TO_WINDOW_END``): each input CTI c goes back to the start of the window
open at c, the earliest over the keys whose window there holds events; unchanged where none
does. It is computed from what is certain at c (events with sync time below c), so it does not
depend on how the input is cut into micro-batches: an event starting exactly at c, or an edge
ending exactly at c, may arrive after the CTI and does not count there (an interval or point
that ends at c does). Under ``POINT_ALIGN_TO_WINDOW_END`` every open window ends after the
CTI, so the CTIs are unchanged.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pandas as pd

from cti.events import EventShape, one_kind
from cti.forms import frame
from cti.forms.edges import close_edge, open_edge
from cti.forms.frame import Chunk
from cti.forms.schema import field_names
from cti.operators import plan, window_members
from cti.operators.projection import aggregates_read
from cti.operators.unit import OperatorUnit
from cti.time import MAX_TIME, MIN_TIME


def _no_rows() -> pd.DataFrame:
    return frame.framed({"id": np.empty(0, np.int64), "code": np.empty(0, np.int64),
                         "start": np.empty(0, np.int64), "lo": np.empty(0, np.int64),
                         "end": np.empty(0, np.int64), "known": np.empty(0, bool),
                         "payload": np.empty(0, object)})


@attrs.define
class KeyTable:
    """The keys of the held rows, each with a code (its place in ``keys``) that lasts from
    step to step: the cut reads the rows' codes, not their key texts hashed afresh."""

    keys: list[Any] = attrs.field(factory=list)
    code_of: dict[Any, int] = attrs.field(factory=dict)

    def __getstate__(self) -> dict[str, Any]:
        return {"keys": self.keys}  # (the codes are the places: not pickled twice)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.keys = list(state["keys"])  # (a state pickled with ``code_of`` too: rebuilt)
        self.code_of = {k: i for i, k in enumerate(self.keys)}

    def codes(self, codes: np.ndarray, values: Any) -> np.ndarray:
        """The table's codes of rows given as codes into ``values`` (new keys added)."""
        used = np.flatnonzero(np.bincount(codes, minlength=len(values)))
        table = np.zeros(len(values), np.int64)
        table[used] = [self._code(values[u]) for u in used.tolist()]
        return table[codes]

    def _code(self, key: Any) -> int:
        code = self.code_of.get(key)
        if code is None:
            code = self.code_of[key] = len(self.keys)
            self.keys.append(key)
        return code

    def compacted(self, codes: np.ndarray) -> np.ndarray:
        """The rows' codes (all the rows held) once keys no row holds leave the table, where
        they are most of it (so it grows with the keys held, not with every key seen)."""
        if len(self.keys) <= max(64, 2 * len(codes)):
            return codes
        kept, used = frame.renumbered(codes, len(self.keys))
        if 2 * len(used) > len(self.keys):
            return codes
        self.keys = [self.keys[u] for u in used.tolist()]
        self.code_of = {k: i for i, k in enumerate(self.keys)}
        return kept


@attrs.define
class SnapshotState:
    """A snapshot window's state. ``held``: one row per event that reaches past ``cti``
    (``id``, ``code``: its key's in ``keys``, ``start``, ``lo``, ``end``, ``known``,
    ``payload``; ``known``: its end was known with its start, a point's or an
    interval's; ``end`` MAX_TIME: an edge still open); ``open``: the open edges' row ids
    (``cti.forms.edges``); ``out_cti``: the latest output CTI."""

    cti: int = MIN_TIME
    out_cti: int = MIN_TIME
    next_id: int = 0
    held: pd.DataFrame = attrs.field(factory=_no_rows)
    open: dict[Any, list[Any]] = attrs.field(factory=dict)
    keys: KeyTable = attrs.field(factory=KeyTable)


@attrs.frozen
class _Cut:
    """The windows of the held events that start before the CTI ``c``: boundaries (each key's
    endpoints, sorted by key then time), which rows they come from, and what each window
    holds."""

    at: np.ndarray  # positions in ``held`` of the rows taken
    key_codes: np.ndarray
    keys: np.ndarray
    i_lo: np.ndarray  # each row's first boundary (its ``lo``)
    i_end: np.ndarray  # each row's end's boundary
    floors: np.ndarray  # each key's last boundary at or before c (-1: none)
    time: np.ndarray  # each boundary's time
    bound_key: np.ndarray  # each boundary's key (code)
    known_end: np.ndarray  # a point's or interval's end lies on the boundary
    cover: np.ndarray  # how many rows hold the window from each boundary to the next
    windows: np.ndarray  # the windows that hold events (by number: the window from a
    # boundary to the next of its key), by start time
    ends: np.ndarray  # each of ``windows``' end (the time of the boundary after it)


def _take_events(state: SnapshotState, chunk: Chunk, payloads: bool = True,
                 edges: bool = True) -> None:
    """The chunk's events into ``held``; an edge end sets its start's row's end. Without
    ``payloads`` (counts only), and with no edge (whose payload is part of its identity), a
    payload held as typed columns is not written as text: it stays null. Without ``edges``
    (the input's shape is points' or intervals') the kinds are not read."""
    ev = chunk.raw_events
    if not len(ev):
        return
    kind = ev["kind"].to_numpy() if edges else None
    is_end = kind == "edge_end" if edges else np.zeros(len(ev), bool)
    is_start = kind == "edge_start" if edges else is_end
    written = payloads or is_end.any() or is_start.any()
    if written:
        ev = chunk.events  # (the same rows)
    new = ~is_end if is_end.any() else None
    if new is None or new.any():
        _take_new(state, chunk, ev if new is None else ev[new],
                  is_start if new is None else is_start[new], new, written)
    if is_end.any():
        _close_edges(state, ev[is_end])


def _take_new(state: SnapshotState, chunk: Chunk, new: pd.DataFrame, is_start: np.ndarray,
              at: np.ndarray | None, payloads: bool = True) -> None:
    """Rows for the chunk's events ``new`` (all but edge ends: the chunk's rows where ``at``
    holds, or all of them), keyed by the state's key codes; without ``payloads`` (nothing
    reads them), their payloads held as nulls (``frame.repeated``: no column per step)."""
    ids = state.next_id + np.arange(len(new), dtype=np.int64)
    state.next_id += len(new)
    start, keys = new["start"].to_numpy(), new["key"].to_numpy(object)
    codes, values = chunk.keys if chunk.keys is not None else pd.factorize(keys)
    codes = state.keys.codes(codes if at is None or chunk.keys is None else codes[at], values)
    rows = frame.framed({"id": ids, "code": codes, "start": start, "lo": start,
                         "end": np.where(is_start, MAX_TIME, new["end"].to_numpy()),
                         "known": ~is_start, "payload": new["payload"].to_numpy(object)
                         if payloads else frame.repeated(len(new), None)})
    for i in np.flatnonzero(is_start).tolist():
        open_edge(state.open, (int(start[i]), rows["payload"].iat[i], keys[i]), int(ids[i]))
    state.held = frame.stack([state.held, rows]) if len(state.held) else rows


def _close_edges(state: SnapshotState, ends: pd.DataFrame) -> None:
    """Edge ends: each sets the end of the row of the earliest open start it closes."""
    closed, times = [], []
    for s, e, p, key in ends[["start", "end", "payload", "key"]].itertuples(index=False):
        found, rid = close_edge(state.open, (int(s), p, key))
        if found:
            closed.append(rid)
            times.append(int(e))
    if closed:
        held = state.held.copy()
        end = held["end"].to_numpy().copy()
        end[np.searchsorted(held["id"].to_numpy(), closed)] = times
        held["end"] = end
        state.held = held


def _sorted_by_key_time(codes: np.ndarray, times: np.ndarray, n_keys: int
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The order of the rows' endpoints (``times``: their starts, then their ends; ``codes``:
    the rows' keys) by time, and by key, then time: a stable sort by time
    (``_endpoints_by_time``), then a stable one by key code (``window_members.by_key``)."""
    by_time = _endpoints_by_time(times)
    return by_time, window_members.by_key(by_time, np.concatenate([codes, codes]), n_keys)


def _endpoints_by_time(times: np.ndarray) -> np.ndarray:
    """``frame.stable_order`` of the rows' endpoints (their starts, then their ends), from the
    starts' sort and the ends': the ends in the starts' order, put in order from it
    (``frame.stable_order_near``: rows of one duration, as after ``alter_event_duration``,
    come so but for the rows held from the step before, whose ``lo`` rose to the cut); the
    two sorted runs then merged by one stable sort (numpy's, which merges runs). The starts
    come nearly sorted (jittered arrival), where numpy's stable sort of 32-bit offsets (a
    merge of runs) is twice as fast as two radix passes over 16-bit halves."""
    m = len(times) // 2
    lo, end = times[:m], times[m:]
    by_lo = frame.stable_order(lo)
    by_end = frame.stable_order_near(end, by_lo)
    merged = np.argsort(np.concatenate([lo.take(by_lo), end.take(by_end)]), kind="stable")
    return np.concatenate([by_lo, by_end + m]).take(merged)


def _boundaries(codes: np.ndarray, times: np.ndarray, n_keys: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The boundaries of rows with key ``codes`` and endpoints ``times`` (their starts, then
    their ends): each endpoint's boundary number (the boundaries: the distinct (key, time)
    pairs, by key, then time), each boundary's time, each key's number of boundaries, how
    many rows hold the window from each boundary to the next (the starts less the ends at or
    before it, summed along the boundaries: a row's two share its key, so each key's sum
    comes back to 0 at its last), and the boundaries' numbers in time order."""
    pairs = 2 * np.bincount(codes, minlength=n_keys)
    by_time, order = _sorted_by_key_time(codes, times, n_keys)
    t_sorted = times.take(order)
    new = np.empty(len(times), bool)  # (a boundary starts where the time or the key changes)
    new[:1] = True
    np.not_equal(t_sorted[1:], t_sorted[:-1], out=new[1:])
    firsts = (np.cumsum(pairs) - pairs)[pairs > 0]
    new[firsts] = True
    number = np.cumsum(new)
    number -= 1
    b_of = np.empty(len(times), np.int64)
    b_of[order] = number
    per_key = np.zeros(n_keys, np.int64)
    per_key[pairs > 0] = number[firsts + pairs[pairs > 0] - 1] - number[firsts] + 1
    time = t_sorted[new]
    cover = np.bincount(b_of[:len(codes)], minlength=len(time))
    cover -= np.bincount(b_of[len(codes):], minlength=len(time))
    np.cumsum(cover, out=cover)
    return b_of, time, per_key, cover, window_members.pairs_in_time_order(b_of.take(by_time),
                                                                          time)


def _cut(held: pd.DataFrame, table: KeyTable, c: int) -> _Cut:
    """The boundaries and windows of the held rows whose ``lo`` is before ``c`` (their keys
    by their codes in ``table``)."""
    at = np.flatnonzero(held["lo"].to_numpy() < c)
    every = len(at) == len(held)  # (every row: its columns as they are, none gathered)
    key_codes, lo, end = (held[name].to_numpy() if every else held[name].to_numpy()[at]
                          for name in ("code", "lo", "end"))
    keys = frame.filled(len(table.keys), None)
    keys[:] = table.keys
    m = len(at)
    b_of, time, per_key, cover, by_time = _boundaries(key_codes, np.concatenate([lo, end]),
                                                      len(keys))
    i_lo, i_end = b_of[:m], b_of[m:]
    b_key = np.repeat(np.arange(len(keys)), per_key)
    # each key's last boundary at or before c: its first one, plus how many it has by c, - 1
    first_of_key = np.cumsum(per_key) - per_key
    # (each key's times rise: a reduction of each key's run, not a count of each boundary)
    by_c, has = np.zeros(len(keys), np.int64), per_key > 0
    if has.any():
        by_c[has] = np.add.reduceat(time <= c, first_of_key[has], dtype=np.int64)
    floors = np.where(by_c > 0, first_of_key + by_c - 1, -1)
    known_end = np.zeros(len(time), bool)
    known = held["known"].to_numpy()
    known_end[i_end[known if every else known[at]]] = True
    return _Cut(at, key_codes, keys, i_lo, i_end, floors, time, b_key, known_end, cover,
                *_holding(cover, by_time, time))


def _holding(cover: np.ndarray, by_time: np.ndarray, time: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """The windows that hold events (from boundary ``i`` to ``i + 1`` of the same key, that
    ``cover`` rows hold: none at a key's last boundary), in the order of ``by_time``, and
    their ends."""
    windows = by_time[(cover > 0).take(by_time)]
    return windows, time[1:].take(windows)


def _members(held: pd.DataFrame, cut: _Cut) -> pd.DataFrame:
    """The held rows the cut takes, as intervals: the members of its windows."""
    taken = held.iloc[cut.at]
    return frame.make(frame.repeated(len(taken), "interval"), taken["start"].to_numpy(),
                      taken["end"].to_numpy(), taken["payload"].to_numpy(object),
                      cut.keys[cut.key_codes])


def _emit(node: plan.SnapshotWindow, held: pd.DataFrame, cut: _Cut, c: int,
          group_field: str | None) -> pd.DataFrame:
    """The results of the windows the CTI completed (every row's windows up to its last
    boundary at or before its end and ``c``): summed along the windows where the aggregates
    only add, else member by member."""
    # The windows emitted now: those that end by the CTI (each key's last boundary at or
    # before it is the last of its rows' windows), by start: the results the engine releases
    # now come first, and they come near the output's order, so the rows released are one
    # slice and the output's take reads on.
    point = node.output_policy is plan.WindowOutputPolicy.POINT_ALIGN_TO_WINDOW_END
    # (a window that ends at MAX_TIME has no point after it)
    ending = (cut.ends <= c) & (cut.ends < MAX_TIME) if point else cut.ends <= c
    done = cut.windows[ending]
    if not len(done):
        return frame.empty()
    # (counts read no column of a row: a frame of none, the rows' columns made only for
    # another aggregate)
    ev = _members(held, cut) if window_members.reads_payloads(node) else pd.DataFrame(
        index=pd.RangeIndex(len(cut.at)))
    lo = cut.i_lo
    by_key = pd.Categorical.from_codes(cut.bound_key, cut.keys, validate=False)  # (ours)
    got = window_members.aggregated_by_cover(node, ev, lo, cut.i_end, done, by_key,
                                             group_field, cut.cover)
    if got is None:
        hi = np.where(held["end"].to_numpy()[cut.at] <= c, cut.i_end,
                      cut.floors[cut.key_codes])
        if point:
            hi = np.where(cut.time[hi] == MAX_TIME, hi - 1, hi)
        rows, ks = window_members.expand(lo, hi)
        members = ev if len(ev.columns) else _members(held, cut)  # (counts: not made yet)
        got = window_members.aggregated(node, members, rows, ks,
                                        cut.keys[cut.bound_key], group_field,
                                        (cut.time, np.append(cut.time[1:], MAX_TIME)))
    kk, key_of, payloads = got
    # (the windows emitted, as given: their ends found already)
    starts, ends = cut.time[kk], cut.ends[ending] if kk is done else cut.time[kk + 1]
    # (right under a group_by, whose ungrouping leaves every key empty: empty already)
    key_of = frame.repeated(len(kk), "") if group_field is not None else np.asarray(key_of,
                                                                                 object)
    if node.output_policy is plan.WindowOutputPolicy.CLIP_TO_WINDOW_END:
        return frame.make(frame.repeated(len(kk), "interval"), starts, ends, payloads, key_of)
    return frame.make(frame.repeated(len(kk), "point"), ends, ends + 1, payloads, key_of)


def _out_ctis(cut: _Cut, ctis: list[int], tags: list[int], after: int
              ) -> tuple[list[int], list[int]]:
    """``CLIP_TO_WINDOW_END``'s output CTIs (above ``after``): each CTI c at the start b of
    the earliest window that holds events, starts before c and ends after c (at c, where
    what ends there is an edge end or nothing but starts: not certain at c); with their
    tags."""
    held, q = cut.windows, cut.ends
    # (past the end where what ends there is not certain at it, but not past MAX_TIME)
    unsure = ~cut.known_end[1:][held]
    unsure &= q < MAX_TIME
    reach = q + unsure
    np.maximum.accumulate(reach, out=reach)
    cs = np.asarray(ctis, np.int64)
    j = np.searchsorted(reach, cs, side="right")
    first = cut.time[held[np.minimum(j, len(held) - 1)]] if len(held) else cs
    got = np.where((j < len(held)) & (first < cs), first, cs)
    return frame.rising((MAX_TIME if c == MAX_TIME else t
                         for c, t in zip(ctis, got.tolist(), strict=True)), tags, after)


def _purge(state: SnapshotState, cut: _Cut, c: int) -> None:
    """Rows that end by ``c`` leave; the rest start their next window at their key's last
    boundary at or before ``c``."""
    held = state.held
    if c == MAX_TIME:
        state.held, state.open, state.keys = _no_rows(), {}, KeyTable()
        return
    keep = held["end"].to_numpy() > c
    kept = frame.rows_where(held, keep)  # (columns shared, or taken one by one)
    kept.index = pd.RangeIndex(len(kept))
    # (a row the cut did not take has its lo at or after c, past its key's last boundary)
    floor, has = np.full(len(cut.floors), MIN_TIME), cut.floors >= 0
    floor[has] = cut.time[cut.floors[has]]
    codes = kept["code"].to_numpy()
    # (new columns: the shared ones are not written)
    kept["lo"] = np.maximum(kept["lo"].to_numpy(), floor[codes])
    kept["code"] = state.keys.compacted(codes)
    state.held = kept


def snapshot(node: plan.SnapshotWindow, chunk: Chunk, state: SnapshotState,
             group_field: str | None = None) -> Chunk:
    """One step: take the events; at the chunk's last CTI emit the windows it completes.
    ``group_field``: the window is the whole query of a ``group_by(group_field)``, and its
    payloads carry the group's value (``window_members.aggregated``)."""
    _take_events(state, chunk, window_members.reads_payloads(node),
                 one_kind(node.source.shape) is None)
    if not chunk.ctis:
        return Chunk(frame.empty(), [])
    c = chunk.ctis[-1]
    cut = _cut(state.held, state.keys, c)
    out = _emit(node, state.held, cut, c, group_field)
    if node.output_policy is plan.WindowOutputPolicy.CLIP_TO_WINDOW_END:
        ctis, tags = _out_ctis(cut, chunk.ctis, chunk.cti_tags, state.out_cti)
    else:
        ctis, tags = list(chunk.ctis), chunk.tags
    if ctis:
        state.out_cti = ctis[-1]
    _purge(state, cut, c)
    state.cti = c
    return Chunk(out, ctis, tags=tags)


def ctis_from_data(node: Any) -> bool:
    """Whether ``node``'s output CTIs depend on the events it holds: a snapshot window (or
    TopK over one) with ``CLIP_TO_WINDOW_END``, whose CTI goes back to the window open at it.
    Shards holding different keys would give different CTIs, so a plan with one is not
    spread over shards (``sharding``)."""
    window = node.window if isinstance(node, plan.TopK) else node
    return isinstance(window, plan.SnapshotWindow) and \
        window.output_policy is plan.WindowOutputPolicy.CLIP_TO_WINDOW_END


def output_shape(node: Any) -> EventShape:
    """An interval per window (``CLIP_TO_WINDOW_END``) or a point at its end."""
    return EventShape.INTERVAL if node.output_policy is \
        plan.WindowOutputPolicy.CLIP_TO_WINDOW_END else EventShape.POINT


UNITS = [OperatorUnit(
    plan.SnapshotWindow,
    lambda node, inputs, state, machine: snapshot(node, inputs[0], state,
                                                  machine.group_field_of.get(id(node))),
    new_state=lambda node: SnapshotState(), data_ctis=ctis_from_data,
    output_fields=lambda node: field_names(node.aggregates),
    input_fields=lambda node, wanted, read: (aggregates_read(node.aggregates),),
    output_shape=output_shape, tags=True)]
