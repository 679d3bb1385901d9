"""Event-ordering policies (Azure Stream Analytics' model, SPEC section 7) for one stream.

Each *timeline* (an input partition by default; a key value with ``over``; a partition with
``partitioned=True``) keeps ``max``, the largest timestamp it assigned. With A the arrival
clock (largest arrival seen), L the late-arrival tolerance and O the out-of-order tolerance,
the timeline's watermark is ``w = max(max - O, A - L)``, and the stream's CTI is the minimum
over timelines, which is ``max(min(max) - O, A - L)``: a ``SortedList`` of the timelines' max
values gives it in O(log n) per event.

Kept events wait in a buffer and are released in timestamp order (ties in arrival order) once
the watermark reaches them: the stream's CTI when the timelines are combined, the timeline's
own watermark when each timeline stands alone (``over`` / ``partitioned``).

The stream's CTI is a promise for every timeline, including those not seen yet. A partition
that first delivers after the CTI advanced starts with its watermark at that CTI (its events
below it are out of order); with independent timelines the CTI is the arrival clock minus the
late-arrival tolerance, the bound that every key, seen or not, respects.

Purging (``purge_idle_timelines``, independent timelines only): once a timeline's max is at or
below A - L, its watermark is A - L, nothing of it is buffered (the buffer is released up to
A - L first), and it stays so until it delivers again. A timeline created afresh then behaves
the same: its watermark is A - L too, and whichever max the two reach, both stay at A - L until
their kept events lift them, which lifts both alike (a kept event is at or above A - L, so at or
above the old max minus O). So the timeline is forgotten and, if its key returns, started anew:
the output is the same, only its metrics leave the snapshot (``purged_timelines`` counts them).
A timeline whose first events were all dropped keeps nothing and goes at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sortedcontainers import SortedList

from cti.forms.rows import InRow
from cti.ingress.state import TIMELINE_METRICS, OrderingState, Timeline  # noqa: F401
from cti.settings import AdvanceTimePolicy, EventOrderingPolicy
from cti.time import MAX_TIME, MIN_TIME, add

# emit(row, status, start, end, reason, timeline)
Emit = Callable[[InRow, str, int | None, int | None, str | None, str], None]


def new_state(policy: EventOrderingPolicy,
              declared_partitions: tuple[str, ...] = ()) -> OrderingState:
    """Fresh state (``OrderingState.new``)."""
    return OrderingState.new(policy, declared_partitions)


def watermark(policy: EventOrderingPolicy, st: OrderingState, tl: Timeline) -> int:
    a_term = max(add(st.A, -policy.late_arrival_tolerance), tl.floor)
    if tl.max is None:
        return a_term
    return max(add(tl.max, -policy.out_of_order_tolerance), a_term)


def stream_cti(policy: EventOrderingPolicy, st: OrderingState) -> int:
    """The stream's CTI by the rules: the minimum watermark over the partitions when they are
    combined; with independent timelines (substreams), the bound every timeline, even one not
    seen yet, respects: the arrival clock minus the late-arrival tolerance."""
    a_term = add(st.A, -policy.late_arrival_tolerance)
    if independent(policy) or st.silent or not st.maxes:
        return a_term
    return max(add(st.maxes[0][0], -policy.out_of_order_tolerance), a_term)


def timeline_id(policy: EventOrderingPolicy, row: InRow) -> tuple[str | None, str | None]:
    """(timeline id, problem): the key value with ``over``, else the partition."""
    if policy.over is None:
        return (row.partition or ""), None
    payload = json.loads(row.payload or "{}")
    if policy.over not in payload:
        return None, f"the payload has no field {policy.over!r} named by over= (rule: the " \
                     "substream key is present)"
    return json.dumps(payload[policy.over], sort_keys=True), None


def independent(policy: EventOrderingPolicy) -> bool:
    return policy.over is not None or policy.partitioned


def process_event(policy: EventOrderingPolicy, st: OrderingState, row: InRow, tid: str,
                  emit: Emit) -> None:
    """Steps 1-4 of SPEC 7 for one event (its arrival already checked and counted in A)."""
    tl = st.timeline(tid, row.partition)
    m = tl.metrics
    m["input"] += 1
    tl.last_arrival = row.arrival
    w = watermark(policy, st, tl)  # as it stood before this event
    app = row.arrival if policy.timestamp_by_arrival else row.start
    ts, status, reason = app, "accepted", None
    window = policy.early_arrival_window
    if window is not None and app > add(row.arrival, window):
        m["early"] += 1
        if policy.early_action is AdvanceTimePolicy.DROP:
            m["dropped"] += 1
            emit(row, "dropped", None, None, "early", tid)
            return
        ts, status, reason = add(row.arrival, window), "adjusted", "early"
    late_bound = add(row.arrival, -policy.late_arrival_tolerance)
    if app < late_bound:
        m["late"] += 1
        if policy.action is AdvanceTimePolicy.DROP:
            m["dropped"] += 1
            emit(row, "dropped", None, None, "late", tid)
            return
        ts, status, reason = late_bound, "adjusted", "late"
    if ts < w:
        m["out_of_order"] += 1
        if policy.action is AdvanceTimePolicy.DROP:
            m["dropped"] += 1
            emit(row, "dropped", None, None, "out_of_order", tid)
            return
        ts, status, reason = w, "adjusted", "out_of_order"
    m[status] += 1
    st.set_max(tl, ts)
    end = None if row.end is None else add(row.end, ts - row.start)  # lifetimes keep length
    entry = (ts, row.seq, tid, tuple(row), status, ts, end, reason)
    st.buffer.add(entry)
    if independent(policy):
        st.per_timeline.setdefault(tid, SortedList()).add((ts, row.seq))


def release(policy: EventOrderingPolicy, st: OrderingState, tid: str | None,
            emit: Emit, flush: bool = False) -> int | None:
    """Release what the watermarks allow; return the new stream CTI if it moved forward."""
    if not flush:
        st.rule_cti = max(st.rule_cti, stream_cti(policy, st))
    cti = MAX_TIME if flush else st.rule_cti
    buffer = st.buffer
    if independent(policy) and not flush:
        # Everything at or below A - L is final on every timeline; the current timeline's own
        # watermark may release more of it.
        _release_upto(st, buffer, add(st.A, -policy.late_arrival_tolerance), None, emit)
        if tid is not None:
            tl = st.timelines[tid]
            _release_upto(st, buffer, watermark(policy, st, tl), tid, emit)
    else:
        _release_upto(st, buffer, cti, None, emit)
    if policy.purge_idle_timelines and independent(policy) and not flush:
        _purge(policy, st, tid)
    if cti > st.cti:
        st.cti = cti
        return cti
    return None


def _purge(policy: EventOrderingPolicy, st: OrderingState, tid: str | None) -> None:
    """Forget the timelines that can no longer change anything (the module's docstring says
    why): those whose max is at or below A - L (a prefix of ``maxes``), and ``tid`` if it
    kept nothing. Called after the release up to A - L."""
    limit = add(st.A, -policy.late_arrival_tolerance)
    maxes = st.maxes
    while maxes and maxes[0][0] <= limit:
        _forget(st, maxes.pop(0)[1])
    if tid is not None and tid in st.timelines and st.timelines[tid].max is None:
        st.silent -= 1
        _forget(st, tid)


def _forget(st: OrderingState, tid: str) -> None:
    del st.timelines[tid]
    st.per_timeline.pop(tid, None)
    st.purged += 1


def _release_upto(st: OrderingState, buffer: SortedList, limit: int, tid: str | None,
                  emit: Emit) -> None:
    if tid is None:
        while buffer and buffer[0][0] <= limit:
            _emit_entry(st, buffer.pop(0), emit)
        return
    mine = st.per_timeline.get(tid)
    while mine and mine[0][0] <= limit:
        ts, seq = mine[0]
        i = buffer.bisect_left((ts, seq))
        _emit_entry(st, buffer.pop(i), emit)


def _emit_entry(st: OrderingState, entry: tuple, emit: Emit) -> None:
    ts, seq, tid, row, status, start, end, reason = entry
    mine = st.per_timeline.get(tid)
    if mine is not None:
        mine.discard((ts, seq))
        if not mine:
            del st.per_timeline[tid]
    emit(InRow(*row), status, start, end, reason, tid)


def snapshot(policy: EventOrderingPolicy, st: OrderingState) -> dict[str, Any]:
    """The policy's metrics snapshot (a ``metrics`` output row's payload): the arrival clock,
    the rules' CTI (the end-of-input flush to MAX_TIME is not a delay), each timeline's
    metrics, and with purging how many timelines were forgotten."""
    out = {"arrival_clock": st.A, "cti": st.rule_cti, "timelines": metrics(policy, st)}
    if policy.purge_idle_timelines:
        out["purged_timelines"] = st.purged
    return out


def metrics(policy: EventOrderingPolicy, st: OrderingState) -> dict[str, Any]:
    """Per timeline: the counters, the watermark and its delay; and which are not progressing."""
    a = st.A
    out = {}
    for tid, tl in st.timelines.items():
        w = watermark(policy, st, tl)
        last = tl.last_arrival
        out[tid] = {
            **tl.metrics,
            "partition": tl.partition,
            "watermark": w,
            "watermark_delay": None if a == MIN_TIME else a - w,
            "last_arrival": last,
            "not_progressing": a != MIN_TIME and (last is None or
                                                  last < a - policy.late_arrival_tolerance),
        }
    return out
