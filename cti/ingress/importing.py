"""A stream that imports its CTIs (SPEC 5), vectorised: a slow reference stream of a group
whose fast stream runs vectorised (``vectorized.with_importers``), or a stream that imports
from such a stream, down a chain (a -> b -> c); each on its own (it waits only for the
streams up its chain).

The row machine merges the stream's rows with the CTIs it imports in arrival order (the
merge key: arrival, stream, sequence). A row waits until every stream up its chain has
received a row later than it and processed everything before it (its CTI in force is then
known: ``GroupRun.done_below``); an imported CTI waits until the stream has received a
row later than it. So what is processed in a batch is every queued row and imported CTI below
the first that must wait, in key order, and each event is judged against the last CTI
imported before it: a search, not a step per row. This module computes exactly the row
machine's output rows and new state for that, and the CTIs the stream passes down the chain
with their places. The stream may also have CTIs of its own, generated (SPEC 4) or from its
adapter: in processing order, each CTI, imported or its own, moves the stream's time where it
is later (a running maximum). A bad row (SPEC 9; an edge end that closes nothing too) is
dead-lettered in its place, worded by the row machine's rules (``rules.problem``), or, in
a stream that raises, the first the stream processes is the machine's fault (the group's
first in arrival order raises: ``GroupRun.settle``). Edge ends are paired with their
starts as ``columns.edges_paired`` does. A wall-clock tick waits in its place as a row does
and moves the merge arrival only.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import attrs
import numpy as np
import pandas as pd

from cti.forms.layout import IN_COLUMNS, in_row_to_tuple, in_rows_from_pandas
from cti.forms.rows import CLOCK, EOS
from cti.ingress import progress
from cti.ingress.columns import (
    NULL,
    STARTS,
    edges_paired,
    generated,
    in_sequence,
    judged,
    output_frame,
    own_arrivals,
    policed,
    statuses,
    suspects,
    worded,
)
from cti.ingress.group import DONE, GroupRun
from cti.ingress.progress import OTHERS
from cti.ingress.rules import STRAY_END, bad_input, cti_regression
from cti.ingress.spec import StreamSpec
from cti.ingress.state import StreamState
from cti.time import MAX_TIME, MIN_TIME


def process(machine: GroupRun, pdf: pd.DataFrame, exporter: int, j: int
            ) -> tuple[pd.DataFrame, list[tuple[tuple, int]]] | None:
    """The output rows of stream ``j``, which imports the CTIs of stream ``exporter``, for its
    input rows ``pdf`` (the exporter processed and its CTIs queued already), and each CTI it
    emitted with its place in arrival order (to queue in the streams that import from it), or
    None for a stream that binding never makes (no policy, or an event-ordering policy)."""
    spec, st = machine.specs[j], machine.state.streams[j]
    if spec.import_from != exporter or spec.ordering is not None:
        return None
    rx = _receive(spec, st, pdf, j)
    ready, waiting, queue = _ready(machine, st, rx, exporter, j)
    imports = queue[:waiting]
    tm = _times(spec, st, rx, ready, imports, j)
    held, queued, h = rx.held, rx.queued, rx.h
    seq, kind, rule, bad, merge = rx.seq, rx.kind, rx.rule, rx.bad, rx.merge
    event_kind = STARTS[spec.shape]
    done, s, e, p, ends, is_ev = tm.done, tm.s, tm.e, tm.p, tm.ends, tm.is_ev
    made_ctis, ctis, row_at, imp_at, before = tm.made, tm.ctis, tm.row_at, tm.imp_at, tm.before
    regression, own_moves, imp_moves = tm.regression, tm.own_moves, tm.imp_moves

    away = (p == None) & (event_kind == "edge_start")  # noqa: E711 (another shard's edge)
    judge = is_ev & ~away
    ends &= ~away
    dead = bad[done]
    violates, adjusted, dropped, accepted = judged(spec, judge, s, e, before)
    if spec.policy is None and (violates.any() or (ends & (e < before)).any()):
        return None  # (a stream that imports CTIs has a policy: ``StreamSpec``)
    if event_kind == "edge_start":
        out_start, out_end, reason, accepted, adjusted, dropped, stray, st.open_edges = \
            edges_paired(st.open_edges, spec, judge, ends, s, e, p, before,
                         (violates, adjusted, dropped, accepted), strays=True)
        judge |= ends & ~stray
        rule[:ready][stray] = STRAY_END  # (an end that closes nothing: bad input)
        dead = dead | stray
    else:
        out_start, out_end, reason = policed((violates, adjusted, dropped, accepted), s, e,
                                             before)
        if event_kind != "interval":
            out_end[:] = NULL
    if dead.any() and not spec.dead_letter:  # the batch fails: none is output or counted
        first = int(np.argmax(dead))
        row = held[first][1] if first < h else in_rows_from_pandas(
            queued.iloc[first:first + 1])[0]
        machine.fault((int(merge[first]), j, int(seq[first])), row,
                      bad_input(spec, row, rule[first]))
        dead = np.zeros(ready, bool)

    # Output rows in processing order: each row's own (event, dead letter or regression),
    # then the CTI it made; the imported CTIs that move the stream's time in their places.
    emits = np.flatnonzero(judge | dead | regression)
    gone = dead[emits]  # (dead letters: no times of their own, the rule they break)
    back = regression[emits]  # (an adapter's CTI that does not move the time: ignored)
    made = np.flatnonzero(own_moves)
    took = np.flatnonzero(imp_moves)
    new_ctis = np.concatenate([made_ctis, ctis[took]])
    c = len(new_ctis)
    # Each CTI's place in arrival order: the row that made it, or the import it passed on.
    cti_keys = [(int(merge[r]), j, int(seq[r])) for r in made.tolist()] + [
        imports[t][0] for t in took.tolist()]
    place = np.argsort(np.concatenate([row_at[made], imp_at[took]])).tolist()
    exported = [(cti_keys[x], int(new_ctis[x])) for x in place]
    order = np.argsort(np.concatenate([row_at[emits] * 2, row_at[made] * 2 + 1,
                                       imp_at[took] * 2]), kind="stable")
    m = len(emits) + c
    # Another shard's point or interval has its output row in its place (its owner reports
    # it): numbered, not output here (an edge has none: only its owner pairs and judges it).
    silent = np.where(rx.others[done] & (event_kind != "edge_start"), rx.weight[done], 0)
    shift = np.concatenate([[0], np.cumsum(silent)])  # (the rows of the units before each)
    imp_units = imp_at - np.arange(len(imp_at))  # (the units before each import)
    no_end = np.full(len(emits), NULL, np.int64) if event_kind == "point" else e[emits]
    before_ev = before[emits]
    cti_seq = np.full(c, -1, np.int64)

    def pick(rows_values: Any, cti_values: Any) -> np.ndarray:
        return np.concatenate([np.asarray(rows_values), np.asarray(cti_values)])[order]

    out = output_frame({
        "seq": st.out_seq + np.arange(m, dtype=np.int64) + pick(
            shift[emits], np.concatenate([shift[made], shift[imp_units[took]]])),
        "in_seq": pick(seq[done][emits], cti_seq),
        "kind": pick(kind[done][emits], np.full(c, "cti", object)),
        "start": pick(np.where(gone | back, NULL, out_start[emits]), new_ctis),
        "end": pick(np.where(gone | back, NULL, out_end[emits]), np.full(c, NULL)),
        "payload": pick(p[emits], np.full(c, None, object)),
        "status": pick(np.where(gone, "invalid", np.where(back, "cti_regression",
                                                   statuses(accepted[emits], adjusted[emits]))),
            np.full(c, "cti", object)),
        "orig_start": pick(s[emits], np.full(c, NULL)),
        "orig_end": pick(np.where(gone, e[emits], np.where(back, NULL, no_end)),
                         np.full(c, NULL)),
        "cti": pick(np.where(before_ev == MIN_TIME, NULL, before_ev), new_ctis),
        "reason": pick(np.where(gone, rule[done][emits], np.where(
            back, _regressions(s[emits], before_ev, back), reason[emits])).astype(object),
            np.full(c, None, object)),
    }, j)

    _moved_state(st, rx, tm, j, ready, queue, waiting, (accepted, adjusted, dropped, dead),
                 c, m + int(shift[-1]))
    return out, exported


def _regressions(start: np.ndarray, before: np.ndarray, back: np.ndarray) -> np.ndarray:
    """The reason of each adapter CTI that goes ``back`` (``rules.cti_regression``), None
    elsewhere."""
    out = np.empty(len(back), object)  # (Nones)
    at = np.flatnonzero(back)
    out[at] = [cti_regression(int(t), int(b)) for t, b in zip(
        start[at].tolist(), before[at].tolist(), strict=True)]
    return out


@attrs.define(slots=True)
class _Received:
    """The stream's queued rows (those held from earlier batches, then the new ones, ticks
    among them) as arrays, as the row machine receives them: merge arrivals, bad rows."""

    held: list
    queued: pd.DataFrame
    h: int  # (rows held)
    total: int
    n: int  # (new rows received: a tick takes no sequence number)
    seq: np.ndarray
    kind: np.ndarray
    start: np.ndarray
    end: np.ndarray
    payload: np.ndarray
    is_eos: np.ndarray
    is_end: np.ndarray
    ev: np.ndarray
    is_cti: np.ndarray
    data: int  # (the stream's data arrival after the rows)
    merge: np.ndarray
    rule: np.ndarray
    bad: np.ndarray
    received: dict
    last_key: tuple | None
    eos: bool
    others: np.ndarray  # (the units of the other shards' rows, ``progress.units``)
    weight: np.ndarray  # (how many rows each stands for)


def _receive(spec: StreamSpec, st: StreamState, pdf: pd.DataFrame, j: int) -> _Received:
    """The rows held and the batch's rows of stream ``j`` as the row machine receives them."""
    grouped = progress.units(spec, st, pdf, j)  # (a piece's progress: the other shards' units)
    if grouped is None:
        got = in_sequence(spec, st, pdf, STARTS[spec.shape])
        pdf = got[3].among(got[0], j)  # (clock ticks as rows of their own, in their places)
        n = len(pdf) - len(got[3].at)  # (rows received: a tick takes no sequence number)
    else:
        pdf, n = grouped
    # The rows held from earlier batches (received already: their keys are known) first.
    held = list(st.pending)
    queued = pd.concat([pd.DataFrame([in_row_to_tuple(row) for _, row in held],
                                     columns=[c for c, _ in IN_COLUMNS]), pdf],
                       ignore_index=True) if held else pdf
    h, total = len(held), len(queued)
    seq = queued["seq"].to_numpy(np.int64)
    kind = queued["kind"].to_numpy(object)
    start = queued["start"].to_numpy(np.int64)
    end = queued["end"].to_numpy(np.int64)
    arrival = queued["arrival"].to_numpy(np.int64)[h:]
    payload = queued["payload"].to_numpy(object)
    is_eos = kind == EOS
    is_tick = kind == CLOCK
    others = kind == OTHERS  # (units of the other shards' rows: no rule of a row to break)
    tick = is_tick[h:]  # (of the new rows)
    event_kind = STARTS[spec.shape]
    is_end = kind == "edge_end" if event_kind == "edge_start" else np.zeros(total, bool)

    # Receiving (``IngressMachine._receive``): each new row's merge arrival (a tick's: its
    # time); an explicit arrival that goes back behind the stream's data is bad input (unless
    # unreadable anyway). A tick moves the merge arrival only.
    explicit = arrival != NULL
    new_eos = is_eos[h:]
    own = own_arrivals(arrival, new_eos, is_end[h:], start[h:], end[h:])
    data = np.maximum.accumulate(np.concatenate([[st.data_arrival],
                                                 np.where(tick, MIN_TIME, own)]))
    back = np.zeros(total, bool)
    back[h:] = explicit & (arrival < data[:-1]) & ~tick & ~others[h:]
    # Bad rows: found by the arrays, worded by the row machine's rules on those flagged; the
    # new rows as the row machine receives them (a held row carries its problem already).
    at = np.flatnonzero((suspects(spec, kind, start, end, queued["error"].to_numpy(object))
                         & ~is_tick & ~others) | back)
    # (Rows as objects only where needed: the flagged ones here, those left waiting below.)
    new_at = at[at >= h]
    received = dict(zip(new_at.tolist(), in_rows_from_pandas(queued.iloc[new_at]), strict=True))
    rule = np.full(total, None, object)
    rule[at], rows = worded(spec, [held[r][1] if r < h else received[r] for r in at],
                            back[at], data[np.maximum(at - h, 0)])
    for r, row in zip(at.tolist(), rows, strict=True):
        if r >= h:
            received[r] = row
    bad = rule != None  # noqa: E711 (per row)
    ev = (kind == event_kind) & ~bad  # (the starts: they count, edge ends do not)
    is_end &= ~bad
    is_cti = (kind == "cti") & ~bad
    merge = np.concatenate([np.asarray([key[0] for key, _ in held], np.int64),
                            np.maximum.accumulate(np.concatenate([[st.last_arrival],
                                                                  own]))[1:]])
    last_key = st.last_key if total == h else (int(merge[-1]), j, int(seq[-1]) if grouped is None
                                               else st.next_in_seq + n - 1)  # (a unit: its first)
    eos = st.eos or bool(new_eos.any())
    return _Received(held, queued, h, total, n, seq, kind, start, end, payload, is_eos, is_end,
                     ev, is_cti, int(data[-1]), merge, rule, bad, received, last_key, eos,
                     others, progress.weights(kind, end))


def _ready(machine: GroupRun, st: StreamState, rx: _Received, exporter: int, j: int
           ) -> tuple[int, int, list]:
    """What is processed: how many queued rows (those below what the streams up the chain
    have received and processed) and imported CTIs (below this stream's last key), in key
    order up to the first that must wait; and the imported queue."""
    merge, seq, total, last_key, eos = rx.merge, rx.seq, rx.total, rx.last_key, rx.eos
    bound = machine.done_below(exporter)
    ready = total if bound is DONE else _count_below(merge, j, seq, bound)
    queue = list(st.imported)
    waiting = next((q for q, (key, _) in enumerate(queue)
                    if not eos and (last_key is None or key >= last_key)), len(queue))
    if ready < total and waiting < len(queue):  # whichever comes first stops the other
        if queue[waiting][0] < (int(merge[ready]), j, int(seq[ready])):
            ready = _count_below(merge, j, seq, queue[waiting][0])
        else:
            waiting = _imports_below(queue, (int(merge[ready]), j, int(seq[ready])))
    elif ready < total:
        waiting = _imports_below(queue, (int(merge[ready]), j, int(seq[ready])))
    elif waiting < len(queue):
        ready = _count_below(merge, j, seq, queue[waiting][0])
    return ready, waiting, queue


@attrs.define(slots=True)
class _Times:
    """The processed rows' CTIs (imported and their own, in processing order) and the
    stream's time before each row."""

    done: slice
    s: np.ndarray
    e: np.ndarray
    p: np.ndarray
    ends: np.ndarray
    is_ev: np.ndarray
    made: np.ndarray  # (the CTIs the rows make that move the stream's time, in order)
    ctis: np.ndarray
    max_start: int | None  # (the largest start of the rows' events and before; None: none)
    count: int
    gen_ref: int | None
    row_at: np.ndarray
    imp_at: np.ndarray
    final: int
    before: np.ndarray
    regression: np.ndarray
    own_moves: np.ndarray
    imp_moves: np.ndarray


def _times(spec: StreamSpec, st: StreamState, rx: _Received, ready: int, imports: list,
           j: int) -> _Times:
    """The CTIs of the first ``ready`` queued rows and the ``imports`` among them."""
    merge, seq, start, end, payload = rx.merge, rx.seq, rx.start, rx.end, rx.payload
    is_end, ev, is_cti, is_eos = rx.is_end, rx.ev, rx.is_cti, rx.is_eos
    # The CTIs in processing order: each imported CTI before the row it precedes (``at``:
    # how many rows come before it), then each row's own: its adapter's, or the one its event
    # generates after it (SPEC 4), or infinity at the end of input; each moves the stream's
    # time if it is later, and an adapter's that does not is a regression.
    k = len(imports)
    ctis = np.asarray([t for _, t in imports], np.int64)
    at = np.asarray([_count_below(merge[:ready], j, seq[:ready], key) for key, _ in imports],
                    np.int64)
    done = slice(0, ready)
    s, e, p, ends = start[done], end[done], payload[done], is_end[done]
    is_ev, own_cti = ev[done], is_cti[done]
    # (a unit of the other shards' rows counts for the largest start; such a stream
    # generates no CTIs: ``progress.reference_streams``)
    counted = is_ev | rx.others[done]
    own, max_start, count, gen_ref = generated(spec, st, counted, s)
    own[own_cti] = s[own_cti]
    if ready and is_eos[ready - 1] and spec.generates and spec.advance_to_infinity_on_shutdown:
        own[-1] = MAX_TIME
    row_at = np.arange(ready) + np.searchsorted(at, np.arange(ready), side="right")
    imp_at = at + np.arange(k)
    candidate = np.full(ready + k, MIN_TIME, np.int64)
    candidate[row_at], candidate[imp_at] = own, ctis
    run = np.maximum.accumulate(np.concatenate([[st.cti], candidate]))
    moves = candidate > run[:-1]
    final = int(run[-1])
    before = run[:-1][row_at]
    regression = own_cti & ~moves[row_at]
    own_moves = moves[row_at] & (own != MIN_TIME)
    imp_moves = moves[imp_at]
    # (of the arrays over every row, only what is read later: a million rows' each 8 MB)
    return _Times(done, s, e, p, ends, is_ev, own[own_moves], ctis,
                  int(max_start[-1]) if counted.any() else None, count, gen_ref, row_at,
                  imp_at, final, before, regression, own_moves, imp_moves)


def _moved_state(st: StreamState, rx: _Received, tm: _Times, j: int, ready: int,
                 queue: list, waiting: int, counted: tuple, c: int, m: int) -> None:
    """The row machine's state after the same rows (the edge book's: ``edges_paired``):
    ``counted`` the (accepted, adjusted, dropped, dead letters) masks, ``c`` the CTIs made,
    ``m`` the output rows."""
    accepted, adjusted, dropped, dead = counted
    held, queued, h, total, merge, seq = rx.held, rx.queued, rx.h, rx.total, rx.merge, rx.seq
    if tm.max_start is not None:
        st.max_start = tm.max_start
    st.count, st.gen_ref = tm.count, tm.gen_ref
    metrics = st.metrics
    metrics["accepted"] += int(accepted.sum())
    metrics["adjusted"] += int(adjusted.sum())
    metrics["dropped"] += int(dropped.sum())
    metrics["ctis"] += c
    metrics["cti_regressions"] += int(tm.regression.sum())
    metrics["invalid"] += int(dead.sum())
    st.cti = tm.final
    # (the waiting imports the stream's time has reached are dropped, as the row machine's
    # ``_drop_passed`` drops them)
    st.imported = deque(q for q in queue[waiting:] if q[1] > tm.final)
    st.out_seq += m
    st.next_in_seq += rx.n
    if total > h:
        st.last_arrival = int(merge[-1])
        st.data_arrival = rx.data
        st.last_key = rx.last_key
    st.eos = rx.eos
    # The rows that wait, as the row machine holds them (those held before, as they were).
    first = max(ready, h)
    waiting_rows = held[ready:] + list(zip(
        [(int(merge[r]), j, int(seq[r])) for r in range(first, total)],
        [rx.received.get(r, row) for r, row in enumerate(
            in_rows_from_pandas(queued.iloc[first:]), first)], strict=True))
    st.pending = deque(waiting_rows)


def _count_below(merge: np.ndarray, stream: int, seq: np.ndarray, key: tuple | None) -> int:
    """How many of the rows (merge arrivals non-decreasing, sequence increasing) of
    ``stream`` have a merge key below ``key`` (None: none)."""
    if key is None:
        return 0
    arrival, other, other_seq = key
    n = int(np.searchsorted(merge, arrival, side="left"))
    if other > stream:  # an equal arrival sorts before the key
        return int(np.searchsorted(merge, arrival, side="right"))
    if other < stream:
        return n
    equal = int(np.searchsorted(merge, arrival, side="right"))
    return n + int(np.searchsorted(seq[n:equal], other_seq, side="left"))


def _imports_below(queue: list[tuple[tuple, int]], key: tuple) -> int:
    """How many queued imported CTIs have a merge key below ``key``."""
    return next((q for q, (k, _) in enumerate(queue) if k >= key), len(queue))
