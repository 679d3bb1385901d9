"""Count windows with aggregates (SPEC 8; StreamInsight's ``CountByStartTimeWindow(n)``).

Per key, a window for every ``n`` consecutive distinct start times d_i .. d_{i+n-1}, sliding
by one distinct start time; its members are the events that start at one of them (events with
the same start count as one unit, so a window may hold more than ``n`` events; an interval or
edge belongs by its start alone). Output: a point at d_{i+n-1} + 1 tick
(``POINT_ALIGN_TO_WINDOW_END``, StreamInsight's only policy). Fewer than ``n`` distinct starts
left when the input ends form no window.

A window is complete once a CTI passes its last start (an event may still start exactly at
the CTI). Output CTIs are unchanged: a window still open ends after the CTI. Under a
time-sensitive operator (``cti.operators.udo``, which makes the policy
``CLIP_TO_WINDOW_END``), whose outputs may start anywhere in their window, each CTI goes back
to the start of the earliest window not yet complete: it then depends on the events held
(``data_ctis``). State
(``CountState``): per key the events of its last ``n - 1`` distinct starts before the CTI
(the next windows' first members) and every event at or after it; the rest is purged.
"""

from __future__ import annotations

import attrs
import numpy as np
import pandas as pd

from cti.events import EventShape
from cti.forms import frame
from cti.forms.frame import Chunk
from cti.forms.schema import field_names
from cti.operators import plan, window_members
from cti.operators.projection import aggregates_read
from cti.operators.unit import OperatorUnit
from cti.time import MAX_TIME, MIN_TIME


def _no_rows() -> pd.DataFrame:
    return frame.framed({"key": np.empty(0, object), "start": np.empty(0, np.int64),
                         "end": np.empty(0, np.int64), "payload": np.empty(0, object)})


@attrs.define
class CountState:
    """A count window's state: the input's latest CTI and the events still needed
    (``key``, ``start``, ``end``, ``payload``)."""

    cti: int = MIN_TIME
    held: pd.DataFrame = attrs.field(factory=_no_rows)
    out_cti: int = MIN_TIME  # the latest output CTI under ``CLIP_TO_WINDOW_END``


@attrs.frozen
class _Starts:
    """The distinct (key, start) pairs of the events before the CTI, sorted by key then
    start: each event's pair, each pair's time and its place among its key's, and the pairs
    in time order."""

    of_row: np.ndarray
    time: np.ndarray
    key: np.ndarray  # each pair's key (code)
    place: np.ndarray  # 0 for a key's first distinct start, 1 for its second, ...
    last: np.ndarray  # each pair's key's last pair (index)
    by_time: np.ndarray  # the pairs' numbers in time order


def _starts(key_codes: np.ndarray, start: np.ndarray, n_keys: int) -> _Starts:
    """``_Starts`` of events with ``key_codes`` (each below ``n_keys``) and ``start`` times:
    one stable sort of the times (nearly sorted as events come) and a stable one of the key
    codes (``window_members.by_key``), the pairs where either changes; no hashing, no sort
    of the pairs themselves."""
    by_time = frame.stable_order(start)
    order = window_members.by_key(by_time, key_codes, n_keys)
    keys, times = key_codes[order], start[order]
    new = np.empty(len(order), bool)  # (a pair starts where the key or the time changes)
    new[:1] = True
    np.not_equal(times[1:], times[:-1], out=new[1:])
    new[1:] |= keys[1:] != keys[:-1]
    number = np.cumsum(new) - 1
    of_row = np.empty(len(order), np.int64)
    of_row[order] = number
    key_of = keys[new]
    heads = np.flatnonzero(np.diff(key_of, prepend=-1) != 0)  # (each key's first pair)
    sizes = np.diff(np.append(heads, len(key_of)))
    first = np.repeat(heads, sizes)
    time = times[new]
    return _Starts(of_row, time, key_of, np.arange(len(key_of)) - first,
                   first + np.repeat(sizes, sizes) - 1,
                   window_members.pairs_in_time_order(of_row[by_time], time))


def _take_events(state: CountState, chunk: Chunk, lifetimes: bool, payloads: bool) -> None:
    """Points, intervals and edge starts join ``held`` (an edge end changes no membership);
    with ``lifetimes`` (a time-sensitive function sees them) an edge end also ends its start's
    row. Without ``payloads`` or ``lifetimes`` (counts only), nothing reads the payloads: they
    are held as nulls (``frame.repeated``: no Python text made per row)."""
    written = payloads or lifetimes
    ev = chunk.events if written else chunk.raw_events
    if not len(ev):
        return
    is_end = ev["kind"].to_numpy() == "edge_end"
    new = ev[~is_end] if is_end.any() else ev
    rows = frame.framed({"key": new["key"].to_numpy(object), "start": new["start"].to_numpy(),
                         "end": new["end"].to_numpy(), "payload": new["payload"].to_numpy(
                             object) if written else frame.repeated(len(new), None)})
    state.held = frame.stack([state.held, rows]) if len(state.held) else rows
    if lifetimes and is_end.any():
        _close_edges(state, ev[is_end])


def _close_edges(state: CountState, ends: pd.DataFrame) -> None:
    """Each edge end sets the end of its start's row: the first still open (end MAX_TIME) with
    its start, payload and key (a start already purged is no longer needed). One scan of
    ``held`` per edge end."""
    held = state.held
    end = held["end"].to_numpy().copy()
    start, payload = held["start"].to_numpy(), held["payload"].to_numpy(object)
    key = held["key"].to_numpy(object)
    for s, e, p, k in ends[["start", "end", "payload", "key"]].itertuples(index=False):
        at = np.flatnonzero((start == s) & (end == MAX_TIME) & (payload == p) & (key == k))
        if len(at):
            end[at[0]] = e
    held = held.copy()
    held["end"] = end
    state.held = held


def _sees_lifetimes(node: plan.CountWindow) -> bool:
    """Whether an aggregate of the window is time-sensitive (it sees lifetimes)."""
    return any(getattr(a, "time_sensitive", False) for a in node.aggregates.values())


def count_window(node: plan.CountWindow, chunk: Chunk, state: CountState,
                 group_field: str | None = None) -> Chunk:
    """One step: at the chunk's last CTI c, the windows whose last start is before c (and
    was not before the previous CTI) are emitted; then what no later window needs leaves.
    ``group_field``: as the snapshot window's (``window_members.aggregated``)."""
    _take_events(state, chunk, _sees_lifetimes(node), window_members.reads_payloads(node))
    if not chunk.ctis:
        return Chunk(frame.empty(), [])
    c, n = chunk.ctis[-1], node.n
    held = state.held
    before = np.flatnonzero(held["start"].to_numpy() < c)
    taken = held.iloc[before]
    key_codes, keys = pd.factorize(taken["key"].to_numpy(object))
    key_codes = key_codes.astype(np.int64)
    starts = _starts(key_codes, taken["start"].to_numpy(), len(keys))
    # Each event's windows: those whose last start is its own or one of the next n - 1 of
    # its key; emitted: the complete ones not emitted at an earlier CTI.
    t = starts.of_row
    past = np.minimum(t + n, starts.last[t] + 1)
    is_new = (starts.place >= n - 1) & (starts.time >= state.cti)
    out = frame.empty()
    if is_new.any():
        ev = frame.make(frame.repeated(len(taken), "interval"), taken["start"].to_numpy(),
                        taken["end"].to_numpy(), taken["payload"].to_numpy(object),
                        taken["key"].to_numpy(object))
        # (texts once per key; the codes are the keys' places)
        key_of_k = pd.Categorical.from_codes(starts.key, keys, validate=False)
        # (the windows by time: the output's order, across keys)
        got = window_members.aggregated_by_cover(node, ev, t, past,
                                                 starts.by_time[is_new[starts.by_time]],
                                                 key_of_k, group_field)
        if got is None:
            rows, js = window_members.expand(t, past)
            rows, js = rows[is_new[js]], js[is_new[js]]
            got = window_members.aggregated(node, ev, rows, js, key_of_k, group_field, (
                starts.time[np.maximum(np.arange(len(starts.time)) - (n - 1), 0)],
                starts.time + 1))
        kk, key_of, payloads = got
        ends = starts.time[kk] + 1
        # (right under a group_by, whose ungrouping leaves every key empty: empty already)
        key_of = frame.repeated(len(kk), "") if group_field is not None else np.asarray(
            key_of, object)
        out = frame.make(frame.repeated(len(kk), "point"), ends, ends + 1, payloads, key_of)
    if c == MAX_TIME:
        state.held = _no_rows()
    else:  # a key's last n - 1 distinct starts before c begin its next windows
        keep = np.ones(len(held), bool)
        keep[before] = starts.place[t] > starts.place[starts.last[t]] - (n - 1)
        state.held = held[keep].reset_index(drop=True)
    state.cti = c
    if node.output_policy is not plan.WindowOutputPolicy.CLIP_TO_WINDOW_END:
        return Chunk(out, list(chunk.ctis), tags=chunk.tags)
    ctis, tags = _clipped_ctis(starts, chunk.ctis, chunk.cti_tags, n, state.out_cti)
    if ctis:
        state.out_cti = ctis[-1]
    return Chunk(out, ctis, tags=tags)


def _clipped_ctis(starts: _Starts, ctis: list[int], tags: list[int], n: int, after: int
                  ) -> tuple[list[int], list[int]]:
    """The output CTIs where outputs may start anywhere in their window (a time-sensitive
    operator's, ``cti.operators.udo``): each CTI c (above ``after``) goes back to the start of
    the earliest window not complete at c. The window that starts at a key's distinct start d
    is open at c where d < c <= its n-th start (none yet: open), so c goes to the least such
    d: found, as the snapshot window's, by a running maximum of the windows' last starts in
    order of d (``starts``: every start before the step's last CTI, so all before c). With
    their tags (``Chunk.tags``)."""
    d = starts.time
    cs = np.asarray(ctis, np.int64)
    got = cs
    if len(d):
        nth = np.arange(len(d)) + (n - 1)
        last = np.where(nth <= starts.last, d[np.minimum(nth, len(d) - 1)], MAX_TIME)
        order = np.argsort(d, kind="stable")
        b, reach = d[order], np.maximum.accumulate(last[order])
        j = np.searchsorted(reach, cs, side="left")  # (the first window that reaches c)
        first = b[np.minimum(j, len(b) - 1)]
        got = np.where((j < len(b)) & (first < cs) & (cs < MAX_TIME), first, cs)
    return frame.rising(got.tolist(), tags, after)


UNITS = [OperatorUnit(
    plan.CountWindow,
    lambda node, inputs, state, machine: count_window(node, inputs[0], state,
                                                      machine.group_field_of.get(id(node))),
    new_state=lambda node: CountState(),
    data_ctis=lambda node: node.output_policy is plan.WindowOutputPolicy.CLIP_TO_WINDOW_END,
    output_fields=lambda node: field_names(node.aggregates),
    input_fields=lambda node, wanted, read: (aggregates_read(node.aggregates),),
    output_shape=lambda node: EventShape.POINT, tags=True)]
