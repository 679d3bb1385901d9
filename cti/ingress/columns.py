"""Ingress output rows as arrays, shared by the vectorised paths (``vectorized``, ``ordered``,
``importing``, ``cti.ingress.timed``): the layout's missing time, the event statuses by code,
a stream's rows in sequence, the bad rows among them, the policy on events against the CTI in
force (SPEC 3), edge ends paired with their starts, and the frame of output rows."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pandas as pd

from cti.events import EVENT_STATUSES, SHAPE_KINDS, EventShape
from cti.forms.edges import opened, writable
from cti.forms.frame import framed
from cti.forms.rows import CLOCK, EOS, INVALID, InRow, payload_to_json
from cti.ingress import ordering
from cti.ingress.rules import (
    after_end,
    arrival_back,
    out_of_sequence,
    problem,
    tick_out_of_sequence,
    tick_without_time,
)
from cti.ingress.spec import StreamSpec
from cti.ingress.state import StreamState
from cti.settings import AdvanceTimePolicy
from cti.time import MAX_TIME, MIN_TIME, add

NULL = MIN_TIME  # the Spark layout's missing time
STATUS = np.asarray(EVENT_STATUSES, dtype=object)  # by code: 0 accepted, 1 adjusted, 2 dropped
# The kind of most of a stream's rows: its events (an edge stream's starts).
STARTS = {EventShape.POINT: "point", EventShape.INTERVAL: "interval",
          EventShape.EDGE: "edge_start"}


def statuses(accepted: np.ndarray, adjusted: np.ndarray) -> np.ndarray:
    """Each event's status by the policy's masks: accepted, adjusted, else dropped."""
    return STATUS[np.where(accepted, 0, np.where(adjusted, 1, 2))]


def suspects(spec: StreamSpec, kind: np.ndarray, start: np.ndarray, end: np.ndarray,
             error: np.ndarray, rare: np.ndarray | None = None) -> np.ndarray:
    """The rows that may break a rule of ``rules.problem`` (a few more at most: the rules are
    worded on these alone, ``worded``): an error carried in, a kind the stream does not take
    (a CTI from its adapter it does), a missing or sentinel time, a missing or empty
    lifetime where there must be one. Never the end of input. ``rare``: the rows whose kind
    is not ``STARTS[spec.shape]`` (few; computed if not given)."""
    if rare is None:
        rare = np.flatnonzero(kind != STARTS[spec.shape])
    flagged = pd.notna(error) | (start == NULL) | (start == MAX_TIME) | (end == MAX_TIME)
    if spec.shape is EventShape.INTERVAL:
        flagged |= (end == NULL) | (end <= start)
    other, s, e = kind[rare], start[rare], end[rare]  # (the rare rows by their own kinds)
    mine = pd.notna(error[rare]) | (s == NULL) | (s == MAX_TIME) | (e == MAX_TIME) | (
        ~np.isin(other, [*SHAPE_KINDS[spec.shape], "cti", EOS])) | (
        (other == "edge_end") & ((e == NULL) | (e <= s)))
    mine[other == EOS] = False
    flagged[rare] = mine
    return flagged


def worded(spec: StreamSpec, rows: list[InRow], back: np.ndarray, data: np.ndarray
           ) -> tuple[list[str | None], list[InRow]]:
    """The rule each of these rows breaks as the row machine words it (``rules.problem``;
    None: none) and the rows as it receives them: a row whose arrival goes ``back`` behind
    the stream's data arrival ``data`` before it (unless unreadable anyway) carries that
    problem (``IngressMachine._receive``)."""
    received = [row._replace(error=arrival_back(row.arrival, int(d)))
                if b and row.kind != INVALID else row
                for row, b, d in zip(rows, back.tolist(), data.tolist(), strict=True)]
    return [problem(spec, row) for row in received], received


def judged(spec: StreamSpec, is_ev: np.ndarray | bool, start: np.ndarray, end: np.ndarray,
           before: np.ndarray) -> tuple[np.ndarray, ...]:
    """The policy (SPEC 3) on events (``is_ev``: points, intervals or edge starts) against the
    CTI in force ``before`` each: an event below it violates the CTI; an interval whose end
    lies beyond it, or an edge start below a finite CTI, is adjusted (ADJUST), else dropped.
    (violates, adjusted, dropped, accepted) masks."""
    violates = is_ev & (start < before)
    movable = (end > before) if spec.shape is EventShape.INTERVAL else (
        before < MAX_TIME) if spec.shape is EventShape.EDGE else False
    adjust = violates & (spec.policy is AdvanceTimePolicy.ADJUST) & movable
    return violates, adjust, violates & ~adjust, is_ev & ~violates


def policed(verdict: tuple[np.ndarray, ...], start: np.ndarray, end: np.ndarray,
            before: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The events' output times after the policy's ``verdict`` (``judged``): ``NULL`` where
    dropped, an adjusted start moved to the CTI in force ``before`` it; and the reason
    (``cti_violation`` where an event violated the CTI, else None)."""
    violates, adjust, dropped, _ = verdict
    reason = np.empty(len(start), object)  # (None: filled in C, not a string array cast)
    reason[violates] = "cti_violation"
    return (np.where(dropped, NULL, np.where(adjust, before, start)),
            np.where(dropped, NULL, end), reason)


def edges_paired(book: dict, spec: StreamSpec, starts: np.ndarray, ends: np.ndarray,
                 start: np.ndarray, end: np.ndarray, payload: np.ndarray, before: np.ndarray,
                 verdict: tuple[np.ndarray, ...], strays: bool = False
                 ) -> tuple[Any, ...] | None:
    """The edges' output times (``NULL`` where dropped), reasons, (accepted, adjusted,
    dropped) masks, the ends' included, the mask of ends that close nothing (bad input),
    pairing each end with the earliest open start of its start time and payload
    (``cti.forms.edges``) in arrival order as the row machine does; and the book as the row
    machine leaves it (``book`` itself, changed, or a new one: a stored book is read-only,
    ``writable``; starts alone opened on an empty book may make a ``BulkBook``, ``opened``),
    its order included: identities it holds throughout keep their place, the others follow
    in the order they were last opened. An end that closes nothing changes nothing; without
    ``strays`` the first one gives None instead (the book's content untouched).

    ``starts``/``ends``: the rows to pair (the owner's edges); ``verdict``: ``judged`` on the
    starts. A start opens with the time it was emitted at (None if dropped); an end closes it:
    dropped with the start, or behind the CTI ``before`` it, where DROP (or a CTI at infinity,
    or no policy: the end is then an error, which the caller words) drops the end and leaves
    the start open, first in line, and ADJUST moves the end to the CTI; an end at or before
    its emitted start moves to one tick after it
    (``IngressMachine._edge_end``)."""
    violates, adjust, dropped, accepted = verdict
    out_start, out_end, reason = policed(verdict, start, end, before)
    rows = np.flatnonzero(starts | ends)
    stray = np.zeros(len(starts), bool)
    if not ends.any():  # starts alone: opened in bulk, in order
        book = opened(book, start[rows], payload[rows], out_start[rows])
        return out_start, out_end, reason, accepted, adjust, dropped, stray, book
    book = writable(book)
    lines: dict[tuple, list] = {}  # identity -> its open values now (the book's, copied)
    moved: dict[tuple, int] = {}  # identity -> when it was last (re)opened, if it left its place
    drop_late = spec.policy is not AdvanceTimePolicy.ADJUST  # (None: the caller words them)
    for op, (j, s, p, is_end, e, c, a_out) in enumerate(zip(
            rows.tolist(), start[rows].tolist(), payload[rows].tolist(), ends[rows].tolist(),
            end[rows].tolist(), before[rows].tolist(), out_start[rows].tolist(), strict=True)):
        ident = (s, p)
        line = lines.get(ident)
        if line is None:
            line = lines[ident] = list(book.get(ident, ()))
        if not is_end:
            if not line:
                moved[ident] = op
            line.append(None if a_out == NULL else a_out)
            continue
        if not line:  # no open start: bad input
            if not strays:
                return None
            stray[j] = True
            out_start[j] = out_end[j] = NULL
            continue
        a = line.pop(0)
        if a is None:
            out_start[j] = out_end[j] = NULL
            reason[j] = "start_dropped"
            continue
        why = None if a == s else "start_adjusted"
        if e < c:
            if drop_late or c == MAX_TIME:  # the end is dropped; its start stays open
                if not line:
                    moved[ident] = op
                line.insert(0, a)
                out_start[j] = out_end[j] = NULL
                reason[j] = "cti_violation"
                continue
            e, why = c, "cti_violation"
        if e <= a:
            e, why = add(a, 1), "end_before_adjusted_start"
        out_start[j], out_end[j], reason[j] = a, e, why
    for ident, line in lines.items():
        if not line or ident in moved:
            book.pop(ident, None)
        elif ident in book:
            book[ident] = line  # (in its place)
    for ident in sorted((i for i in moved if lines[i]), key=moved.__getitem__):
        book[ident] = lines[ident]
    kept = reason == None  # noqa: E711 (per row)
    judged_ends = ends & ~stray
    return (out_start, out_end, reason, accepted | (judged_ends & kept),
            adjust | (judged_ends & ~kept & (out_start != NULL)),
            dropped | (judged_ends & (out_start == NULL)), stray, book)


def output_frame(cols: dict[str, Any], index: int) -> pd.DataFrame:
    """Output rows of stream ``index`` in the Spark layout (``partition``: None unless
    given)."""
    n = len(cols.get("seq", ()))
    times = ("seq", "in_seq", "start", "end", "orig_start", "orig_end", "cti")
    return framed({
        "stream": np.full(n, index, np.int32),
        **{c: np.asarray(cols.get(c, np.zeros(0)), np.int64 if c in times else object)
           for c in ("seq", "in_seq", "kind", "start", "end", "payload", "status",
                     "orig_start", "orig_end", "cti", "reason")},
        "partition": np.asarray(cols["partition"], object) if "partition" in cols
        else np.full(n, None, object),
    })


@attrs.frozen
class Ticks:
    """A batch's wall-clock ticks (``cti.forms.rows.clock_row``) that the row machine takes (not
    replayed, not after the end of input), in order: the row each precedes (``at``, an index
    among the batch's rows in sequence; their number for a tick after them all), its
    sequence number (the next row's) and its time."""

    at: np.ndarray
    seq: np.ndarray
    arrival: np.ndarray

    @classmethod
    def none(cls) -> Ticks:
        empty = np.zeros(0, np.int64)
        return cls(empty, empty, empty)

    def among(self, pdf: pd.DataFrame, stream: int) -> pd.DataFrame:
        """The rows ``pdf`` of stream ``stream`` (those the ticks were found among) with the
        ticks as rows of kind ``clock`` in their places (no payload, no times but
        ``arrival``)."""
        if not len(self.at):
            return pdf
        k = len(self.at)
        ticks = pd.DataFrame({
            "stream": np.full(k, stream, pdf["stream"].dtype), "seq": self.seq,
            "arrival": self.arrival, "kind": np.full(k, CLOCK, object),
            "start": np.full(k, NULL, np.int64), "end": np.full(k, NULL, np.int64),
            **{c: np.full(k, None, object) for c in ("payload", "error", "partition")}})
        both = pd.concat([pdf[ticks.columns], ticks], ignore_index=True)
        place = np.concatenate([np.arange(len(pdf)) * 2 + 1, self.at * 2])
        return both.iloc[np.argsort(place, kind="stable")].reset_index(drop=True)

    def floor(self, n: int) -> np.ndarray:
        """For each of ``n`` rows and after them (``n + 1`` values), the latest tick time at
        or before it (``MIN_TIME``: none): the least merge arrival the ticks give it."""
        out = np.full(n + 1, MIN_TIME, np.int64)
        np.maximum.at(out, self.at, self.arrival)
        return np.maximum.accumulate(out)


def metrics_row(spec: StreamSpec, st: StreamState, index: int) -> pd.DataFrame:
    """An event-ordering stream's output row of the policy's metrics snapshot, as the row
    machine adds it after each batch (``IngressMachine._emit_ordering_metrics``)."""
    out = output_frame({
        "seq": [st.out_seq], "in_seq": [-1], "kind": ["metrics"], "start": [NULL],
        "end": [NULL], "status": ["metrics"], "orig_start": [NULL], "orig_end": [NULL],
        "cti": [NULL if st.cti == MIN_TIME else st.cti], "reason": [None],
        "payload": [payload_to_json(ordering.snapshot(spec.ordering, st.ordering))]},
        index)
    st.out_seq += 1
    return out


def in_sequence(spec: StreamSpec, st: StreamState, pdf: pd.DataFrame, common: str
                ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, Ticks]:
    """A stream's new rows of the batch in sequence (rows seen before and a row given twice
    are replays: skipped), their kinds, where the kind is not ``common`` (the few other
    rows), and the clock ticks among them (``Ticks``); raises as the row machine does for a
    row or tick out of sequence, a row after the end of input, a tick without a time."""
    kind = pdf["kind"].to_numpy(object)
    rest = np.flatnonzero(kind != common)
    ticks = Ticks.none()
    clock = rest[kind[rest] == CLOCK]
    if len(clock):
        tick_rows = pdf.iloc[clock].sort_values("seq", kind="stable")
        keep = np.ones(len(pdf), bool)
        keep[clock] = False
        pdf, kind = pdf[keep], kind[keep]
        rest = np.flatnonzero(kind != common)
    seq = pdf["seq"].to_numpy(np.int64)
    if len(seq) > 1 and not (seq[1:] > seq[:-1]).all():
        pdf = pdf.sort_values("seq", kind="stable")
        seq = pdf["seq"].to_numpy(np.int64)
        first = np.concatenate([[True], seq[1:] != seq[:-1]])
        if not first.all():
            pdf, seq = pdf[first], seq[first]
        kind = pdf["kind"].to_numpy(object)
        rest = np.flatnonzero(kind != common)
    expected = st.next_in_seq
    at = int(np.searchsorted(seq, expected))
    if at:
        pdf, seq, kind = pdf.iloc[at:], seq[at:], kind[at:]
        rest = rest[rest >= at] - at
    n = len(seq)
    usual = not len(rest) and (not n or seq[-1] == expected + n - 1) and not st.eos
    if usual and not len(clock):
        return pdf, kind, rest, ticks
    gap = np.flatnonzero(seq != expected + np.arange(n))
    ends = rest[kind[rest] == EOS]
    after = 0 if st.eos else int(ends[0]) + 1 if len(ends) else n
    row_error = min(int(gap[0]) if len(gap) and gap[0] <= after else n, after)
    if len(clock):
        t_seq = tick_rows["seq"].to_numpy(np.int64)
        t_arrival = tick_rows["arrival"].to_numpy(np.int64)
        t_at = np.searchsorted(seq, t_seq, side="left")
        # (a tick is received before the row it precedes: after the end, or replayed, it is
        # ignored; else it must be the next row's, and have a time)
        last = -1 if st.eos else int(ends[0]) if len(ends) else n  # (the last it precedes)
        taken = (t_seq >= expected) & (t_at <= last)
        wrong = taken & ((t_seq > expected + t_at) | (t_arrival == NULL)) & (t_at <= row_error)
        if wrong.any():
            k = int(np.argmax(wrong))
            if t_seq[k] > expected + t_at[k]:
                raise tick_out_of_sequence(spec, int(t_seq[k]), expected + int(t_at[k]))
            raise tick_without_time(spec, int(t_seq[k]))
        ticks = Ticks(t_at[taken], t_seq[taken], t_arrival[taken])
    if len(gap) and gap[0] <= after:
        raise out_of_sequence(spec, int(seq[gap[0]]), expected + int(gap[0]))
    if after < n:
        raise after_end(spec, int(seq[after]))
    return pdf, kind, rest, ticks


def own_arrivals(arrival: np.ndarray, is_eos: np.ndarray, is_end: np.ndarray,
                 start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each row's own arrival, as the row machine receives it: its explicit arrival, else the
    end of input's infinity, an edge end's end, any other row's start."""
    return np.where(arrival != NULL, arrival, np.where(is_eos, MAX_TIME, np.where(
        is_end, end, start)))


def saturating_sub(values: np.ndarray, delay: int) -> np.ndarray:
    """``cti.time.add(v, -delay)`` of each value (none a sentinel): saturating at the
    sentinels, without overflowing int64."""
    return np.clip(values, max(MIN_TIME, MIN_TIME + delay), min(MAX_TIME, MAX_TIME + delay)) \
        - delay


def span_points(starts: np.ndarray, prev_max: int, gen_ref: int | None, span: int
                ) -> tuple[np.ndarray, int | None]:
    """Which of these counted events (their starts, in arrival order) generate a CTI by time
    span (SPEC 4: the first counted event, then each whose start is at least ``span`` past the
    start of the event that generated the previous CTI, ``gen_ref``), and the new ``gen_ref``.
    ``prev_max``: the largest start before them. Such an event's start is above every earlier
    start (the events since the last one all started less than ``span`` after it, and it was
    above all before it), so the first event at or past ``gen_ref + span`` is the first such
    record: one search per generated CTI where they are few beside the records, else a step
    per record, never a step per event."""
    out = np.zeros(len(starts), bool)
    if not len(starts):
        return out, gen_ref
    earlier = np.maximum.accumulate(np.concatenate([[prev_max], starts[:-1]]))
    records = np.flatnonzero(starts > earlier)  # strictly increasing starts
    at = starts[records]
    i = 0 if gen_ref is None else _first_at(at, gen_ref + span)
    if i < len(at) and (len(at) - i < 2 or np.diff(at[i:]).min() >= span):
        out[records[i:]] = True  # every record from there on is a span past the one before
        return out, int(at[-1])
    if i < len(at) and (int(at[-1]) - int(at[i])) // span * 8 < len(at) - i:
        while i < len(at):  # few generators among many records: a search for each
            out[records[i]] = True
            gen_ref = int(at[i])
            i = _first_at(at, gen_ref + span)
        return out, gen_ref
    for j, t in zip(records[i:].tolist(), at[i:].tolist(), strict=True):  # a step per record
        if gen_ref is None or t - gen_ref >= span:
            out[j] = True
            gen_ref = t
    return out, gen_ref


def _first_at(ordered: np.ndarray, t: int) -> int:
    """The index of the first value at or above ``t`` (a Python int, maybe past int64)."""
    return len(ordered) if t > MAX_TIME else int(np.searchsorted(ordered, t, side="left"))


def generated(spec: StreamSpec, st: StreamState, is_ev: np.ndarray, start: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, int, int | None]:
    """CTI generation (SPEC 4) over rows in processing order, ``is_ev`` the events it counts
    (all events, whatever the policy does): the CTI each row's event generates (``MIN_TIME``:
    none), the largest start up to each row, and the stream's new ``count`` and ``gen_ref``
    (``st``: its state before)."""
    prev_max = MIN_TIME if st.max_start is None else st.max_start
    max_start = np.maximum(np.maximum.accumulate(np.where(is_ev, start, MIN_TIME)), prev_max)
    generating = np.zeros(len(start), bool)
    ev_idx = np.flatnonzero(is_ev)
    count, gen_ref = st.count, st.gen_ref
    if spec.event_count is not None:
        # The events whose ordinal (count + 1, count + 2, ...) is a multiple of the count.
        generating[ev_idx[(-count - 1) % spec.event_count::spec.event_count]] = True
        count = int((count + len(ev_idx)) % spec.event_count)
    elif spec.duration is not None:
        triggers, gen_ref = span_points(start[ev_idx], prev_max, gen_ref, spec.duration)
        generating[ev_idx[triggers]] = True
    candidate = np.full(len(start), MIN_TIME, np.int64)
    candidate[generating] = saturating_sub(max_start[generating], spec.delay)
    return candidate, max_start, count, gen_ref
