"""Ingress of an event-ordering stream (SPEC 7) as array operations.

The row machine (``GroupRun`` with ``cti.ingress.ordering``) is the definition; this
computes exactly its output rows and its new state with numpy over a whole micro-batch, for a
group of one stream with an event-ordering policy (its timelines the stream's partitions,
combined by their minimum watermark or each alone, or its substreams, maybe purged), on a
batch of events with arrival times and maybe the end of input. Bad rows (SPEC 9: unreadable, a
CTI from the adapter, no arrival time or one that goes back within its partition, a time that
breaks a rule, a payload without the substream key) are found by the arrays and worded by the
row machine's rules on those rows: dead letters in their place (the clocks move as the row
machine moves them), or the first is the machine's fault (``GroupRun.fault``, see
``cti.ingress.vectorized``). A wall-clock tick is a row that moves the arrival clock and
nothing else, as another shard's event of another shard's substream does.

Why it can be computed without a step per event: an event is judged against its timeline's
watermark ``max(max - O, A - L, floor)`` before it, where ``max`` is the largest timestamp the
timeline assigned. That is a running maximum of what the policy decided, but the same
watermark comes from the running maximum of each event's timestamp as the early-arrival rule
clips it (``min(t, arrival + window)``; an event the rule drops left out), whatever the other
rules then decided: a timestamp they drop or move lies below the watermark in force, or below
``A - L``, so it can never lift a later watermark. So the watermarks, hence every decision,
come from prefix maxima per timeline; the timelines' exact maxima (the state, and the stream's
CTI without substreams) follow from the decisions, and each kept event is released at the
first row whose CTI (or, for a substream, whose timeline's watermark) reaches it: a search
over non-decreasing arrays.
"""

from __future__ import annotations

import heapq
import json
from typing import Any

import attrs
import numpy as np
import pandas as pd
import pyarrow as pa
from sortedcontainers import SortedList

from cti.forms.frame import exact_field, stack
from cti.forms.layout import in_rows_from_pandas
from cti.forms.rows import CLOCK, EOS, INVALID, InRow, payload_to_json
from cti.ingress import ordering
from cti.ingress.columns import (
    NULL,
    STATUS,
    in_sequence,
    metrics_row,
    output_frame,
    suspects,
)
from cti.ingress.group import GroupRun
from cti.ingress.rules import ORDERED_CTI, bad_input, ordering_arrival_problem, problem, validate
from cti.ingress.spec import StreamSpec, rooted_at
from cti.ingress.state import OrderingState, StreamState
from cti.ingress.vectorized import EVENT_KIND, with_importers
from cti.settings import AdvanceTimePolicy
from cti.time import MAX_TIME, MIN_TIME

_REASON = np.asarray([None, "early", "late", "out_of_order"], object)  # (in the rules' order)
# An output item's phase within its input row: the row's dropped event, the events released
# up to the CTI (up to A - L with substreams), those released up to the row's own timeline's
# watermark (substreams), the CTI; the metrics snapshot after every row.
DROP, RELEASE, OWN, CTI, METRICS = range(5)


_SMALL = 2000  # rows up to which ``_group_cummax`` is faster in numpy than with pandas
_HIGHEST = chr(0x10FFFF)  # (above any timeline id of a given max in ``maxes``)


class _Decisions:
    """Each event's decision (SPEC 7, steps 2-4) against its timeline's watermark before it:
    timestamp, status (0 accepted, 1 adjusted, 2 dropped), reason (``_REASON``), and the
    masks the metrics count. An event never judged (another shard's substream) is neither
    kept nor dropped."""

    def __init__(self, m: int, app: np.ndarray) -> None:
        self.app, self.ts = app, app.copy()
        self.status, self.reason = np.zeros(m, np.int8), np.zeros(m, np.int8)
        self.dropped, self.kept = np.zeros(m, bool), np.zeros(m, bool)
        self.late, self.ooo = np.zeros(m, bool), np.zeros(m, bool)

    def judge(self, policy: Any, rows: Any, w: np.ndarray, early: np.ndarray,
              early_drop: np.ndarray, clipped: np.ndarray, late_bound: np.ndarray) -> None:
        app = self.app[rows]
        ts, status, reason = app.copy(), np.zeros(len(app), np.int8), np.zeros(len(app), np.int8)
        drop = policy.action is AdvanceTimePolicy.DROP
        dropped = early_drop.copy()
        moved = early & ~early_drop
        ts[moved] = clipped[moved]
        status[early], reason[early] = np.where(early_drop[early], 2, 1), 1

        def rule(broken: np.ndarray, bound: np.ndarray, why: int) -> None:  # DROP or ADJUST
            if drop:
                dropped[broken] = True
            else:
                ts[broken] = bound[broken]
            status[broken], reason[broken] = 2 if drop else 1, why

        late = ~dropped & (app < late_bound)
        rule(late, late_bound, 2)
        ooo = ~dropped & (ts < w)
        rule(ooo, w, 3)
        self.ts[rows], self.status[rows], self.reason[rows] = ts, status, reason
        self.dropped[rows], self.kept[rows] = dropped, ~dropped
        self.late[rows], self.ooo[rows] = late, ooo


def ordered_stream(specs: list[StreamSpec]) -> int | None:
    """The group's stream that runs vectorised: one with an event-ordering policy (of points or
    intervals) that every other stream of the group imports its CTIs from, directly or down
    a chain."""
    for i, s in enumerate(specs):
        if s.ordering is not None and s.import_from is None and s.shape in EVENT_KIND and \
                rooted_at(specs, i):
            return i
    return None


def process_group(machine: GroupRun, pdf: pd.DataFrame, settle: bool = True
                  ) -> pd.DataFrame | None:
    """A micro-batch of a group whose event-ordering stream runs vectorised: its output rows,
    as the row machine gives them, or None where the group is not rooted at one. The streams
    that import its CTIs (slow reference streams, usually few rows) take its CTIs at their
    place in arrival order, as in ``vectorized.process_group`` (so does ``settle``)."""
    i = ordered_stream(machine.specs)
    if i is None:
        return None
    if len(machine.specs) == 1:
        done = process(machine, machine.specs[0], machine.state.streams[0], pdf)
    else:  # (the policy's snapshot comes after the other streams' rows: ``importers_step``)
        done = with_importers(machine, pdf, i, lambda rows: process(
            machine, machine.specs[i], machine.state.streams[i], rows, i, snapshot=False))
    if done is None:
        return None
    if settle:
        machine.settle()
    return stack(list(done)) if len(machine.specs) > 1 else done[0]


def _ints(*parts: Any) -> np.ndarray:
    return np.concatenate([np.asarray(p, np.int64) for p in parts])


def _sat(values: np.ndarray, d: Any) -> np.ndarray:
    """``cti.time.add(v, d)`` of each value (``d`` one for all, or one each): saturating at
    the sentinels, a sentinel staying where it is."""
    if np.ndim(d) == 0:  # (one for all: two bounds, no overflow)
        d = int(d)
        out = (np.minimum(values, MAX_TIME - d) if d >= 0 else np.maximum(values, MIN_TIME - d)
               ) + d
        return np.where((values == MIN_TIME) | (values == MAX_TIME), values, out)
    d = np.asarray(d, np.int64)
    with np.errstate(over="ignore"):
        out = values + d
    out = np.where((d >= 0) & (values >= MAX_TIME - np.maximum(d, 0)), MAX_TIME,
                   np.where((d < 0) & (values <= MIN_TIME - np.minimum(d, 0)), MIN_TIME, out))
    return np.where((values == MIN_TIME) | (values == MAX_TIME), values, out).astype(np.int64)


def _lowest(current: np.ndarray, alive: np.ndarray, here: np.ndarray, after: np.ndarray
            ) -> np.ndarray:
    """The lowest of the ``alive`` timelines' maxima after each row of a run (``current``:
    each timeline's max before it; ``here``: each row's timeline, one of them; ``after``: its
    max after the row), without a pass per timeline. The lowest after row r is the highest
    level every timeline has reached by r; the row by which every timeline has passed a level
    is the latest row at which one of them left a level below it (a running maximum over the
    levels left, in level order; a timeline's last level is never left)."""
    n = len(here)
    if not len(alive):
        return np.full(n, MIN_TIME, np.int64)
    before = np.maximum(current[here], _group_cummax(after, here, exclusive=True))
    up = np.flatnonzero(after > before)  # the rows that raise their timeline's max
    last = current.copy()
    np.maximum.at(last, here, after)
    left = np.concatenate([before[up], last[alive]])  # a level left, and at which row
    at_row = np.concatenate([up, np.full(len(alive), n)])  # (n: never, in this run)
    order = np.argsort(left, kind="stable")
    passed = np.maximum.accumulate(at_row[order])
    levels = np.unique(np.concatenate([current[alive], after[up]]))
    below = np.searchsorted(left[order], levels, side="left")  # levels left below each
    reached = np.where(below > 0, passed[np.maximum(below - 1, 0)], -1)
    return levels[np.searchsorted(reached, np.arange(n), side="right") - 1]


class _Untouched:
    """The alive timelines' maxima (``current``, updated by the caller) in a heap: the lowest
    of those a run does not touch, in steps of the run's timelines, not of all. An entry
    whose timeline rose since, or that the run touches, is dropped when met; the caller adds
    the run's timelines back after it (``add``)."""

    def __init__(self, current: np.ndarray, alive: np.ndarray) -> None:
        self.current = current
        self.heap = [(int(current[t]), int(t)) for t in np.flatnonzero(alive)]
        heapq.heapify(self.heap)

    def add(self, timelines: np.ndarray) -> None:
        for t in timelines.tolist():
            heapq.heappush(self.heap, (int(self.current[t]), t))

    def lowest(self, touched: set[int]) -> int | None:
        heap = self.heap
        while heap and (heap[0][0] != self.current[heap[0][1]] or heap[0][1] in touched):
            heapq.heappop(heap)
        return heap[0][0] if heap else None


def _lowest_of_run(untouched: _Untouched, here: np.ndarray, after: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``_lowest`` over every alive timeline (the timelines the run does not touch stay as
    they are, so they count as one, at the lowest of their maxima), and the run's
    timelines."""
    touched, local = np.unique(here, return_inverse=True)
    levels = untouched.current[touched]
    low = untouched.lowest(set(touched.tolist()))
    if low is not None:
        levels = np.append(levels, low)
    return _lowest(levels, np.arange(len(levels)), local.reshape(-1), after), touched


def _group_cummax(values: np.ndarray, codes: np.ndarray, exclusive: bool = False
                  ) -> np.ndarray:
    """The running maximum of ``values`` within each code, up to each row (before it with
    ``exclusive``: ``MIN_TIME`` at a code's first row)."""
    if not len(values):
        return values.astype(np.int64)
    order = np.argsort(codes, kind="stable")
    g = codes[order]
    if len(values) > _SMALL:
        top = pd.Series(values[order]).groupby(g, sort=False).cummax().to_numpy(np.int64)
    else:  # (pandas' groupby costs ~0.3 ms a call: ranks, then one running maximum)
        n, v = len(values), values[order]
        by_value = np.argsort(v, kind="stable")
        rank = np.empty(n, np.int64)
        rank[by_value] = np.arange(n)
        group = np.cumsum(np.concatenate([[0], g[1:] != g[:-1]])) * n  # (groups apart)
        top = v[by_value[np.maximum.accumulate(group + rank) - group]]
    if exclusive:
        shifted = np.full(len(top), MIN_TIME, np.int64)
        same = g[1:] == g[:-1]
        shifted[1:][same] = top[:-1][same]
        top = shifted
    out = np.empty_like(top)
    out[order] = top
    return out


def _timelines(policy: Any, payload: np.ndarray, light: np.ndarray, partition: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Each event's timeline id as the row machine names it (``ordering.timeline_id``): its
    partition (``""`` for none), or its ``over`` value's JSON; None for a light row (another
    shard's substream) and for a payload without the key (bad input), and the mask of those
    without it."""
    n = len(payload)
    missing = np.zeros(n, bool)
    if policy.over is None:
        return np.where(partition == None, "", partition).astype(object), missing  # noqa: E711
    out = np.full(n, None, object)
    full = ~light
    if not full.any():
        return out, missing
    texts = pa.array(list(payload[full]), pa.string())
    values = exact_field(texts, policy.over)
    if values is not None and not values.null_count:
        encoded = values.dictionary_encode()
        names = np.asarray([json.dumps(v) for v in encoded.dictionary.to_pylist()], object)
        out[full] = names[encoded.indices.to_numpy(zero_copy_only=False)]
        return out, missing
    for r, text in zip(np.flatnonzero(full).tolist(), payload[full], strict=True):
        p = json.loads(text)
        if isinstance(p, dict) and policy.over in p:
            out[r] = json.dumps(p[policy.over], sort_keys=True)
        else:
            missing[r] = True
    return out, missing


def _partition_arrivals(partition: np.ndarray, arrival: np.ndarray
                        ) -> dict[str | None, int]:
    """Each partition's last arrival, its largest (in order of first appearance; arrivals
    in order within a partition)."""
    if not len(partition):
        return {}
    codes, uniques = pd.factorize(pd.Series(partition, dtype=object), sort=False,
                                  use_na_sentinel=False)
    lasts = np.full(len(uniques), MIN_TIME, np.int64)
    np.maximum.at(lasts, codes, arrival)
    return {None if pd.isna(p) else p: int(a) for p, a in zip(uniques, lasts, strict=True)}


def _arrival_back(partition: np.ndarray, arrival: np.ndarray, recording: np.ndarray,
                  carried: dict[str | None, int]) -> tuple[np.ndarray, np.ndarray]:
    """Which of the ``recording`` rows (events with an arrival time) arrive before the last
    arrival of their partition (``carried``: the last before the batch): bad input, left out
    of the partition's clock, so a later row is checked against the running maximum; and
    that last arrival before each row (``MIN_TIME``: none)."""
    back = np.zeros(len(arrival), bool)
    last = np.full(len(arrival), MIN_TIME, np.int64)
    rows = np.flatnonzero(recording)
    if not len(rows):
        return back, last
    codes, uniques = pd.factorize(pd.Series(partition[rows], dtype=object), sort=False,
                                  use_na_sentinel=False)
    seed = np.asarray([carried.get(None if pd.isna(p) else p, MIN_TIME) for p in uniques],
                      np.int64)
    prior = np.maximum(seed[codes], _group_cummax(arrival[rows], codes, exclusive=True))
    back[rows], last[rows] = arrival[rows] < prior, prior
    return back, last


@attrs.define
class _Batch:
    """A micro-batch's rows of the stream that the vectorised path can take, in ``seq`` order
    (replays left out): ``n`` rows of it processed as events, the ``m`` good events and maybe
    the end of input (``eos``); the events' columns, the events of another shard's substream
    (``light``: no payload) and each event's timeline id (``tids``). The batch's bad rows
    (``dead``: the columns of their dead letters, ``at``: their places among the ``total``
    rows, clock ticks included; ``at`` of the good rows: ``pos``; ``received``: the rows
    that take a sequence number) still count in the stream's clocks: each good
    event's merge arrival (``merge``), the merge arrival and data arrival after the batch,
    each partition's last arrival (``parts``)."""

    seq: np.ndarray
    kind: np.ndarray
    n: int
    m: int
    eos: bool
    start: np.ndarray
    end: np.ndarray
    arrival: np.ndarray
    payload: np.ndarray
    partition: np.ndarray
    parts: dict[str | None, int]
    light: np.ndarray
    tids: np.ndarray
    total: int
    received: int
    last_seq: int
    pos: np.ndarray
    merge: np.ndarray
    merge_last: int
    data_arrival: int
    dead: dict[str, np.ndarray]


def _batch(machine: GroupRun, spec: StreamSpec, st: StreamState, pdf: pd.DataFrame,
           index: int) -> _Batch:
    """The batch as ``_Batch``, clock ticks as rows among its events; raises for rows out of
    sequence or after the end of input, as the row machine does; in a stream that raises for
    bad input, its first bad row is ``machine``'s fault (``GroupRun.fault``)."""
    policy, keyed = spec.ordering, spec.ordering.over is not None
    got = in_sequence(spec, st, pdf, EVENT_KIND[spec.shape])
    # Clock ticks as rows of their own, in their places: each moves the arrival clock, as
    # another shard's event of another shard's substream does (a light row), and no more.
    pdf = got[3].among(got[0], index)
    kind = pdf["kind"].to_numpy(object) if len(got[3].at) else got[1]
    seq = pdf["seq"].to_numpy(np.int64)
    total = len(seq)
    eos = bool(total and kind[-1] == EOS)  # (``in_sequence``: none before the last row)
    rows = total - int(eos)

    def column(name: str, dtype: Any) -> np.ndarray:
        return pdf[name].to_numpy(dtype)[:rows]

    kind = kind[:rows]
    start, end = column("start", np.int64), column("end", np.int64)
    arrival, payload = column("arrival", np.int64), column("payload", object)
    partition, error = column("partition", object), column("error", object)
    partition = np.where(pd.isna(partition), None, partition)
    # The clocks (``IngressMachine._receive``): an unreadable row takes no part in the
    # partitions' clocks; any other row with an arrival that does not go back does.
    invalid, timed, tick = kind == INVALID, arrival != NULL, kind == CLOCK
    back, last = _arrival_back(partition, arrival, ~invalid & timed & ~tick,
                               st.partition_arrival)
    recorded = ~invalid & timed & ~back & ~tick
    merge = np.maximum.accumulate(_ints([st.last_arrival], np.where(
        (invalid & timed) | recorded | tick, arrival, MIN_TIME)))[1:]
    data_arrival = max(st.data_arrival, int(arrival[invalid & timed].max(initial=MIN_TIME)))
    parts = _partition_arrivals(partition[recorded], arrival[recorded])

    # Bad rows, found by the arrays and worded by the row machine's rules on those flagged.
    ev_kind = EVENT_KIND[spec.shape]
    rare = np.flatnonzero(kind != ev_kind)  # (an adapter's CTI is bad input here too)
    suspect = suspects(spec, kind, start, end, error, rare) | ~timed | back
    suspect[rare] = True
    suspect[tick] = False
    rule = np.full(rows, None, object)
    at = np.flatnonzero(suspect)
    for r, row in zip(at.tolist(), in_rows_from_pandas(pdf.iloc[at]), strict=True):
        rule[r] = _rule(spec, row, None if last[r] == MIN_TIME else int(last[r]))
    light = np.asarray(pd.isna(payload) if keyed else np.zeros(rows, bool), bool) | tick
    tids, missing = _timelines(policy, payload, light | (rule != None), partition)  # noqa: E711
    for r in np.flatnonzero(missing & (rule == None)).tolist():  # noqa: E711 (per row)
        row = in_rows_from_pandas(pdf.iloc[r:r + 1])[0]
        rule[r] = ordering.timeline_id(policy, row)[1]
    bad = rule != None  # noqa: E711 (per row)
    good = np.flatnonzero(~bad)
    if bad.any() and not spec.dead_letter:  # the batch fails: none is output or counted
        first = int(np.argmax(bad))
        row = in_rows_from_pandas(pdf.iloc[first:first + 1])[0]
        machine.fault((int(merge[first]), index, int(seq[first])), row,
                      bad_input(spec, row, rule[first]))
        bad[:] = False
    at = np.flatnonzero(bad)
    dead = {"at": at, "in_seq": seq[at], "kind": kind[at], "payload": payload[at],
            "orig_start": start[at], "orig_end": end[at], "reason": rule[at],
            "partition": partition[at]}
    m = len(good)
    return _Batch(_ints(seq[good], seq[-1:] if eos else []), kind[good], m + int(eos), m, eos,
                  start[good], end[good], arrival[good], payload[good], partition[good], parts,
                  light[good], tids[good], total, total - int(tick.sum()),
                  int(seq[-1]) if total else -1, good,
                  merge[good], int(merge[-1]) if rows else st.last_arrival, data_arrival,
                  dead)


def _rule(spec: StreamSpec, row: InRow, last: int | None) -> str | None:
    """The rule a row of an event-ordering stream breaks, as the row machine has it
    (``IngressMachine._ordered_row``), ``last`` its partition's last arrival before it."""
    if row.kind == INVALID:
        return problem(spec, row)
    if row.kind == "cti":
        return ORDERED_CTI
    return ordering_arrival_problem(row, last) or row.error or validate(spec, row)


def process(machine: GroupRun, spec: StreamSpec, st: StreamState, pdf: pd.DataFrame,
            index: int = 0, snapshot: bool = True
            ) -> tuple[pd.DataFrame, list[tuple[tuple, int]]] | None:
    """Stream ``index``'s output rows for a batch of its input rows (with the policy's metrics
    snapshot last, unless not ``snapshot``) and each CTI it emitted with its place in arrival
    order (the merge key of the row that made it), updating ``st`` as the row machine does;
    None (``st`` untouched) for a state the vectorised path never leaves (rows held, CTIs
    imported, edges open). The steps: the batch's rows (``_batch``), its arrival terms
    (``_clock``), its timelines (``_lines``), the decisions and CTIs (``_judge``), the
    releases (``_release``), the output items (``_items``), the state after them
    (``_moved_state``) and the frame in the row machine's order (``_frame``)."""
    ost = st.ordering
    if st.eos:  # (a row now is a replay or an error, a tick changes nothing)
        in_sequence(spec, st, pdf, EVENT_KIND[spec.shape])
        return metrics_row(spec, st, index) if snapshot else output_frame({}, index), []
    if st.pending or st.imported or st.open_edges or \
            not st.cti == ost.cti == ost.rule_cti:
        return None
    indep = ordering.independent(spec.ordering)
    batch = _batch(machine, spec, st, pdf, index)
    clk = _clock(spec.ordering, ost, batch)
    lines = _lines(spec.ordering, ost, batch, clk, indep)
    j = _judge(spec.ordering, ost, batch, clk, lines, indep)
    rel = _release(spec.ordering, ost, batch, clk, lines, j, indep)
    items = _items(spec, batch, j, rel, ost.rule_cti)
    _moved_state(spec, st, batch, clk, lines, j, rel, items, indep, index)
    return _frame(spec, st, batch, items, index, snapshot)


@attrs.define(slots=True)
class _Clock:
    """A batch's arrival terms per good event: the arrival clock ``A`` after it and ``A - L``
    (``a_term``), the time the policy judges (``app``), the early-arrival rule's masks and
    clipped times, and the late bound ``arrival - L``."""

    A: np.ndarray
    a_term: np.ndarray
    app: np.ndarray
    early: np.ndarray
    early_drop: np.ndarray
    clipped: np.ndarray
    late_bound: np.ndarray


def _clock(policy: Any, ost: OrderingState, batch: _Batch) -> _Clock:
    """The batch's arrival terms (``_Clock``)."""
    arrival, m = batch.arrival, batch.m
    A = np.maximum.accumulate(np.concatenate([[ost.A], arrival]))[1:]
    app = arrival if policy.timestamp_by_arrival else batch.start
    window = policy.early_arrival_window
    early = (app > _sat(arrival, window)) if window is not None else np.zeros(m, bool)
    early &= ~batch.light
    early_drop = early & (policy.early_action is AdvanceTimePolicy.DROP)
    clipped = np.where(early, _sat(arrival, window if window is not None else 0), app)
    return _Clock(A, _sat(A, -policy.late_arrival_tolerance), app, early, early_drop, clipped,
                  _sat(arrival, -policy.late_arrival_tolerance))


@attrs.define(slots=True)
class _Lines:
    """The timelines a batch deals with: their ids (``names``, codes by ``number``), the
    judged events (``full``: their rows, ``fc``: their codes; ``codes``: per good event,
    -1 for a light one), the state's timeline of each (``known``, None: new), its carried
    max (``seed``, MIN_TIME: none), floor and the first row it is judged at (``m``: none)."""

    names: list[str]
    number: dict[str, int]
    full: np.ndarray
    fc: np.ndarray
    codes: np.ndarray
    known: list[Any]
    seed: np.ndarray
    floor: np.ndarray
    first_row: np.ndarray


def _lines(policy: Any, ost: OrderingState, batch: _Batch, clk: _Clock, indep: bool) -> _Lines:
    """Timelines: those of the state that matter (combined: all; each alone: the batch's and
    those purging may forget), then the new ones in order of first appearance; each one's
    carried max and floor (the CTI in force when it was made)."""
    m = batch.m
    full = np.flatnonzero(~batch.light)
    row_codes, uniques = pd.factorize(pd.Series(batch.tids[full], dtype=object), sort=False)
    names = list(uniques) if indep else list(ost.timelines)
    if indep and policy.purge_idle_timelines and m:
        reached = int(clk.a_term[-1])  # (A - L at the end: what purging reaches)
        seen = set(names)
        names += [t for _, t in ost.maxes.irange(maximum=(reached, _HIGHEST))
                  if t not in seen]
    number = {t: c for c, t in enumerate(names)}
    for t in uniques:
        if t not in number:
            number[t] = len(names)
            names.append(t)
    fc = np.asarray([number[t] for t in uniques], np.int64)[row_codes]
    codes = np.full(m, -1, np.int64)
    codes[full] = fc
    known = [ost.timelines.get(t) for t in names]
    seed = np.asarray([MIN_TIME if tl is None or tl.max is None else tl.max
                       for tl in known], np.int64)
    floor = np.asarray([MIN_TIME if tl is None else tl.floor for tl in known], np.int64)
    first_row = np.full(len(names), m, np.int64)
    np.minimum.at(first_row, fc, full)
    return _Lines(names, number, full, fc, codes, known, seed, floor, first_row)


@attrs.define(slots=True)
class _Judged:
    """The decisions on a batch's events, each judged event's timeline max after it
    (``after_max``), the stream's CTI rule after each row and in force before it, and the
    rows that emit a CTI."""

    decided: _Decisions
    after_max: np.ndarray
    rule: np.ndarray
    before: np.ndarray
    emits: np.ndarray


def _judge(policy: Any, ost: OrderingState, batch: _Batch, clk: _Clock, lines: _Lines, indep: bool
           ) -> _Judged:
    """Every decision and the stream's CTIs (``_Judged``); sets the floors of the timelines
    made in the batch (``lines.floor``)."""
    m, rule0 = batch.m, ost.rule_cti
    full, fc, seed = lines.full, lines.fc, lines.seed
    prior = np.maximum(seed[fc], _group_cummax(
        np.where(clk.early_drop, MIN_TIME, clk.clipped)[full], fc, exclusive=True))
    decided = _Decisions(m, clk.app)
    after_max = np.full(m, MIN_TIME, np.int64)
    if indep:  # the CTI is A - L whatever was decided; events without a timeline (light)
        rule = np.maximum.accumulate(np.concatenate([[rule0], clk.a_term]))[1:]
        before = np.concatenate([[rule0], rule])[:m]
        made = [c for c, tl in enumerate(lines.known) if tl is None]
        lines.floor[made] = before[lines.first_row[made]]
        _decide_rows(policy, clk, lines, prior, decided, full, slice(None))
        after_max[full] = np.maximum(seed[fc], _group_cummax(
            np.where(decided.kept, decided.ts, MIN_TIME)[full], fc))
    else:
        rule, before = _combined(policy, clk, lines, prior, decided, after_max, m, rule0)
    return _Judged(decided, after_max, rule, before, rule > before)


def _decide_rows(policy: Any, clk: _Clock, lines: _Lines, prior: np.ndarray,
                 decided: _Decisions, rows: Any, at: Any) -> None:
    """Judge events ``rows`` (``at``: the same rows among the judged, ``lines.full``) against
    their timelines' watermarks before them."""
    w = np.maximum(_sat(prior[at], -policy.out_of_order_tolerance),
                   np.maximum(clk.a_term[rows], lines.floor[lines.fc[at]]))
    decided.judge(policy, rows, w, clk.early[rows], clk.early_drop[rows], clk.clipped[rows],
                  clk.late_bound[rows])


def _combined(policy: Any, clk: _Clock, lines: _Lines, prior: np.ndarray,
              decided: _Decisions, after_max: np.ndarray, m: int, rule0: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """Timelines combined: the decisions, the timelines' maxima after each judged row (into
    ``after_max``) and the stream's CTI rule after each row and in force before it, which
    follows the timelines' maxima: in runs between new timelines."""
    full, fc, a_term, ooo_tol = lines.full, lines.fc, clk.a_term, policy.out_of_order_tolerance
    rule, before = np.empty(m, np.int64), np.empty(m, np.int64)
    current, prev = lines.seed.copy(), rule0
    new_timeline = np.asarray([tl is None for tl in lines.known], bool)
    first_row = lines.first_row
    cuts = sorted({0, m, *first_row[new_timeline & (first_row < m)].tolist()})
    untouched = _Untouched(current, ~new_timeline)
    by_first = np.argsort(first_row, kind="stable")
    bounds = np.searchsorted(first_row[by_first], cuts)
    for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
        made = by_first[bounds[k]:bounds[k + 1]]  # (the timelines made at row a)
        made = made[new_timeline[made]]
        lines.floor[made] = prev  # (each is touched by the run: its first row is the run's)
        lo, hi = np.searchsorted(full, [a, b])  # (the judged rows: clock ticks are not)
        sel = full[lo:hi]
        _decide_rows(policy, clk, lines, prior, decided, sel, slice(lo, hi))
        kept, ts = decided.kept[sel], decided.ts[sel]
        here = fc[lo:hi]
        after_max[sel] = np.maximum(current[here], _group_cummax(
            np.where(kept, ts, MIN_TIME), here))
        # The lowest timeline max (MIN_TIME while one has none: then A - L alone), after
        # each judged row, and so after each row (before a run's first judged row, a
        # tick's, the lowest is as it was: the rule in force covers it already).
        lowest, touched = _lowest_of_run(untouched, here, after_max[sel])
        if len(sel) < b - a:
            last = np.full(b - a, -1, np.int64)
            last[sel - a] = np.arange(len(sel))
            last = np.maximum.accumulate(last)
            lowest = np.where(last >= 0, lowest[np.maximum(last, 0)] if len(sel) else
                              MIN_TIME, MIN_TIME)
        stream_cti = np.maximum(_sat(lowest, -ooo_tol), a_term[a:b])
        rule[a:b] = np.maximum.accumulate(np.maximum(stream_cti, prev))
        before[a:b] = np.concatenate([[prev], rule[a:b - 1]])
        np.maximum.at(current, here[kept], ts[kept])
        untouched.add(touched)
        prev = int(rule[b - 1])
    return rule, before


@attrs.define(slots=True)
class _Released:
    """The buffered events (those ``carried`` in the state, then the batch's kept rows
    ``new``): timestamp, sequence number, the row kept at, the row released at (``at``) and
    in which phase, and whether within this batch (``out_at``)."""

    carried: list[Any]
    new: np.ndarray
    e_ts: np.ndarray
    e_seq: np.ndarray
    e_row: np.ndarray
    at: np.ndarray
    phase: np.ndarray
    out_at: np.ndarray


def _release(policy: Any, ost: OrderingState, batch: _Batch, clk: _Clock, lines: _Lines, j: _Judged,
             indep: bool) -> _Released:
    """Release: at the first row (from its own) whose limit reaches the event."""
    # (non-decreasing)
    limit = _ints(clk.a_term if indep else j.rule, [MAX_TIME] if batch.eos else [])
    carried = list(ost.buffer)
    new = np.flatnonzero(j.decided.kept)
    e_ts = np.concatenate([np.asarray([e[0] for e in carried], np.int64), j.decided.ts[new]])
    e_seq = np.concatenate([np.asarray([e[1] for e in carried], np.int64), batch.seq[new]])
    e_row = np.concatenate([np.zeros(len(carried), np.int64), new])
    at = np.maximum(e_row, np.searchsorted(limit, e_ts, side="left"))
    phase = np.full(len(at), RELEASE, np.int64)
    if indep and len(at):
        e_code = np.concatenate([np.asarray([lines.number.get(e[2], -1) for e in carried],
                                            np.int64), lines.codes[new]])
        own = _own_release(lines.codes, lines.full, j.after_max, clk.a_term, lines.floor,
                           policy.out_of_order_tolerance, e_code, e_row, e_ts)
        sooner = own < at
        at, phase = np.where(sooner, own, at), np.where(sooner, OWN, phase)
    return _Released(carried, new, e_ts, e_seq, e_row, at, phase, at < len(limit))


@attrs.define(slots=True)
class _Items:
    """The output items, unordered (``cols``; ``order``: the row machine's order, the
    snapshot last): ``nd`` dropped events, ``nr`` released, ``nc`` CTIs (``cti_rows``, the
    end of input's last with ``flush``, ``cti_values``), the metrics snapshot, then ``nb``
    dead letters; the stream's CTI after the batch (``final_cti``) and each event's output
    end (``kept_end``)."""

    cols: dict[str, np.ndarray]
    order: np.ndarray
    nd: int
    nr: int
    nc: int
    nb: int
    cti_rows: np.ndarray
    cti_values: np.ndarray
    flush: bool
    final_cti: int
    kept_end: np.ndarray


def _items(spec: StreamSpec, batch: _Batch, j: _Judged, rel: _Released, rule0: int
           ) -> _Items:
    """The output items in the row machine's order (``_Items``)."""
    n, m, eos, d = batch.n, batch.m, batch.eos, j.decided
    drop_rows, cti_rows = np.flatnonzero(d.dropped), np.flatnonzero(j.emits)
    out = np.flatnonzero(rel.out_at)
    flush = bool(eos and MAX_TIME > (j.rule[-1] if m else rule0))
    item_row = _ints(drop_rows, rel.at[out], cti_rows, [n - 1] if flush else [], [n])
    tail = np.zeros(len(cti_rows) + int(flush) + 1, np.int64)
    item_phase = _ints(np.full(len(drop_rows), DROP), rel.phase[out],
                       np.full(len(cti_rows) + int(flush), CTI), [METRICS])
    item_ts = _ints(np.zeros(len(drop_rows)), rel.e_ts[out], tail)
    item_seq = _ints(batch.seq[drop_rows], rel.e_seq[out], tail)
    order = np.lexsort((item_seq, item_ts, item_phase, item_row))
    final_cti = MAX_TIME if flush else int(j.rule[-1]) if m else rule0
    # The stream's CTI in force at each row (before its own CTI row), and at the end.
    in_force = _ints(j.before, [j.rule[-1] if m else rule0] if eos else [], [final_cti])
    point = EVENT_KIND[spec.shape] == "point"
    kept_end = batch.end if point else _sat(batch.end, d.ts - batch.start)  # (length kept)
    cti_values = _ints(j.rule[cti_rows], [MAX_TIME] if flush else [])
    nd, nr, nc = len(drop_rows), len(out), len(cti_rows) + int(flush)
    cols = _columns(batch, d, rel, out, drop_rows, nc, point, kept_end, cti_values)
    item_cti = in_force[item_row]
    item_cti[nd + nr:nd + nr + nc] = cti_values
    cols["cti"] = item_cti
    # The bad rows' dead letters, each in its place among the good rows' items.
    dead = batch.dead
    nb = len(dead["at"])
    if nb:
        place = _ints(batch.pos, [batch.total - 1] if eos else [], [batch.total])
        item_row = _ints(place[item_row], dead["at"])
        item_phase = _ints(item_phase, np.full(nb, DROP))
        item_ts, item_seq = _ints(item_ts, np.zeros(nb)), _ints(item_seq, dead["in_seq"])
        order = np.lexsort((item_seq, item_ts, item_phase, item_row))
        in_force_dead = _ints(j.before, [j.rule[-1] if m else rule0])[
            np.searchsorted(batch.pos, dead["at"])]
        null_b = np.full(nb, NULL, np.int64)
        cols = {k: np.concatenate([v, dead[k] if k in dead else {
            "start": null_b, "end": null_b, "status": np.full(nb, "invalid", object),
            "cti": in_force_dead}[k]]).astype(v.dtype) for k, v in cols.items()}
    return _Items(cols, order, nd, nr, nc, nb, cti_rows, cti_values, flush, final_cti,
                  kept_end)


def _columns(batch: _Batch, d: _Decisions, rel: _Released, out: np.ndarray,
             drop_rows: np.ndarray, nc: int, point: bool, kept_end: np.ndarray,
             cti_values: np.ndarray) -> dict[str, np.ndarray]:
    """The output columns of each kind of item (dropped, released (``out``: those of the
    buffered), CTIs, the snapshot), before ``cti``."""
    nd = len(drop_rows)
    n_carried = len(rel.carried)
    c_rel = out[out < n_carried]
    n_rel = rel.new[out[out >= n_carried] - n_carried]
    carried_rows = [rel.carried[i] for i in c_rel]
    seq, kind, start, end = batch.seq, batch.kind, batch.start, batch.end
    payload, partition = batch.payload, batch.partition

    def rel_col(from_entry: Any, from_new: np.ndarray, dtype: Any) -> np.ndarray:
        return np.concatenate([np.asarray([from_entry(e) for e in carried_rows], dtype),
                               np.asarray(from_new, dtype)])

    none_c = np.full(nc + 1, None, object)
    null_c = np.full(nc + 1, NULL, np.int64)
    return {
        "in_seq": np.concatenate([seq[drop_rows], rel_col(lambda e: e[1], seq[n_rel], np.int64),
                                  np.full(nc + 1, -1, np.int64)]),
        "kind": np.concatenate([kind[drop_rows], rel_col(lambda e: e[3][3], kind[n_rel], object),
                                np.asarray(["cti"] * nc + ["metrics"], object)]),
        "start": np.concatenate([np.full(nd, NULL, np.int64),
                                 rel_col(lambda e: e[5], d.ts[n_rel], np.int64),
                                 cti_values, [NULL]]),
        "end": np.concatenate([np.full(nd, NULL, np.int64),
                               rel_col(lambda e: NULL if e[6] is None else e[6],
                                       np.full(len(n_rel), NULL, np.int64) if point
                                       else kept_end[n_rel], np.int64), null_c]),
        "payload": np.concatenate([payload[drop_rows],
                                   rel_col(lambda e: e[3][6], payload[n_rel], object), none_c]),
        "status": np.concatenate([np.full(nd, "dropped", object),
                                  rel_col(lambda e: e[4], STATUS[d.status[n_rel]], object),
                                  np.asarray(["cti"] * nc + ["metrics"], object)]),
        "orig_start": np.concatenate([start[drop_rows],
                                      rel_col(lambda e: e[3][4], start[n_rel], np.int64),
                                      null_c]),
        "orig_end": np.concatenate([end[drop_rows] if not point else np.full(nd, NULL),
                                    rel_col(lambda e: NULL if e[3][5] is None else e[3][5],
                                            np.full(len(n_rel), NULL) if point
                                            else end[n_rel], np.int64), null_c]).astype(np.int64),
        "reason": np.concatenate([_REASON[d.reason[drop_rows]],
                                  rel_col(lambda e: e[7], _REASON[d.reason[n_rel]], object),
                                  none_c]),
        "partition": np.concatenate([partition[drop_rows],
                                     rel_col(lambda e: e[3][8], partition[n_rel], object),
                                     none_c]),
    }


def _moved_state(spec: StreamSpec, st: StreamState, batch: _Batch, clk: _Clock,
                 lines: _Lines, j: _Judged, rel: _Released, items: _Items, indep: bool,
                 index: int) -> None:
    """The state after the batch's rows: the metrics, the timelines, the buffer, the CTIs
    and the clocks."""
    ost, d, m, eos = st.ordering, j.decided, batch.m, batch.eos
    metrics = st.metrics
    statuses = items.cols["status"][items.nd:items.nd + items.nr]
    metrics["accepted"] += int((statuses == "accepted").sum())
    metrics["adjusted"] += int((statuses == "adjusted").sum())
    metrics["dropped"] += items.nd
    metrics["ctis"] += items.nc
    metrics["invalid"] += items.nb
    if m:
        ost.A = int(clk.A[-1])
    st.partition_arrival.update(batch.parts)
    _moved_timelines(spec.ordering, ost, batch, clk, lines, j, indep)
    ost.buffer = SortedList(_left(spec, batch, d, rel, items.kept_end, index))
    if indep:
        per: dict[str, SortedList] = {}
        for e in ost.buffer:
            per.setdefault(e[2], SortedList()).add((e[0], e[1]))
        ost.per_timeline = per
    ost.rule_cti = int(j.rule[-1]) if m else ost.rule_cti
    ost.cti = items.final_cti
    st.cti = items.final_cti
    if batch.total:
        st.last_arrival = MAX_TIME if eos else batch.merge_last
        st.last_key = (st.last_arrival, index, batch.last_seq)
        st.next_in_seq += batch.received
    st.data_arrival = MAX_TIME if eos else batch.data_arrival
    st.eos = st.eos or eos


def _moved_timelines(policy: Any, ost: OrderingState, batch: _Batch, clk: _Clock, lines: _Lines,
                     j: _Judged, indep: bool) -> None:
    """The policy's timelines after the batch: those purged forgotten, those made added,
    each one's max, last arrival and metrics moved."""
    d, fc, full, names, known = j.decided, lines.fc, lines.full, lines.names, lines.known
    in_last, alive, last_start, purges = _lives(
        policy.purge_idle_timelines and indep, fc, full, batch.m, known, lines.seed,
        lines.first_row, j.after_max, clk.a_term, d.dropped)
    ost.purged += purges
    tl_counts = _timeline_counts(fc[in_last], len(names), *(
        mask[full][in_last] for mask in (clk.early, d.late, d.ooo, d.dropped)),
        d.status[full][in_last], d.kept[full][in_last])
    last_row = np.full(len(names), -1, np.int64)
    np.maximum.at(last_row, fc, full)
    for c in np.flatnonzero((last_row >= 0) | ~alive):
        tid, tl = names[c], known[c]
        if tl is not None and (not alive[c] or last_start[c] >= 0):  # forgotten (purged)
            del ost.timelines[tid]
            if tl.max is None:
                ost.silent -= 1
            else:
                ost.maxes.remove((tl.max, tid))
            tl = None
        if not alive[c]:
            continue
        if tl is None:  # made in this batch (its last life's first row)
            r = int(last_start[c])
            tl = ost.timeline(tid, batch.partition[r],
                               int(j.before[r]) if indep else int(lines.floor[c]))
        tl.last_arrival = int(batch.arrival[last_row[c]])
        top = int(j.after_max[last_row[c]])
        if top != MIN_TIME:
            ost.set_max(tl, top)
        for name, count in tl_counts[c].items():
            tl.metrics[name] += count


def _left(spec: StreamSpec, batch: _Batch, d: _Decisions, rel: _Released,
          kept_end: np.ndarray, index: int) -> list[tuple]:
    """The buffer's entries after the batch: those carried and kept not yet released."""
    ev_kind = EVENT_KIND[spec.shape]
    point = ev_kind == "point"
    stay = np.flatnonzero(~rel.out_at)
    n_carried = len(rel.carried)
    left = [rel.carried[i] for i in stay[stay < n_carried]]
    for i in rel.new[stay[stay >= n_carried] - n_carried]:
        row = (index, int(batch.seq[i]), int(batch.arrival[i]), ev_kind, int(batch.start[i]),
               None if point else int(batch.end[i]), batch.payload[i], None,
               batch.partition[i])
        left.append((int(d.ts[i]), int(batch.seq[i]), batch.tids[i], row,
                     str(STATUS[d.status[i]]), int(d.ts[i]),
                     None if point else int(kept_end[i]), _REASON[d.reason[i]]))
    return left


def _frame(spec: StreamSpec, st: StreamState, batch: _Batch, items: _Items, index: int,
           snapshot: bool) -> tuple[pd.DataFrame, list[tuple[tuple, int]]]:
    """The output frame in the row machine's order (the policy's snapshot after the moved
    state, or left out) and each CTI's merge key."""
    cols, order = items.cols, items.order
    if snapshot:
        cols["payload"][items.nd + items.nr + items.nc] = payload_to_json(
            ordering.snapshot(spec.ordering, st.ordering))
    else:  # (the snapshot is the last item)
        order = order[:-1]
    count = len(order)
    cols = {k: v[order] for k, v in cols.items()}
    cols["seq"] = st.out_seq + np.arange(count, dtype=np.int64)
    st.out_seq += count
    out = output_frame({k: v for k, v in cols.items() if k != "partition"}, index)
    out["partition"] = cols["partition"]
    eos = batch.eos
    merge_at = _ints(batch.merge, [MAX_TIME] if eos else [])  # each row's place in arrival
    cti_at = _ints(items.cti_rows, [batch.n - 1] if items.flush else [])
    keys = [((int(merge_at[r]), index, int(batch.seq[r])), int(t))
            for r, t in zip(cti_at, items.cti_values, strict=True)]
    return out, keys


def _own_release(codes: np.ndarray, full: np.ndarray, after_max: np.ndarray,
                 a_term: np.ndarray, floor: np.ndarray, ooo_tol: int, e_code: np.ndarray,
                 e_row: np.ndarray, e_ts: np.ndarray) -> np.ndarray:
    """For each buffered event of a substream (its timeline's code, the row it was kept at,
    its timestamp), the first row from its own that is of its timeline and whose watermark
    after it reaches the event (``len(codes) + 1`` where none): the rows of one timeline in
    order have non-decreasing watermarks, so two searches in the rows sorted by timeline."""
    none = len(codes) + 1
    out = np.full(len(e_code), none, np.int64)
    if not len(full):
        return out
    fc = codes[full]
    wm = np.maximum(np.where(after_max[full] == MIN_TIME, MIN_TIME,
                             _sat(after_max[full], -ooo_tol)),
                    np.maximum(a_term[full], floor[fc]))
    order = np.argsort(fc, kind="stable")  # by timeline, then row
    g, rows, marks = fc[order], full[order], wm[order]
    bounds = np.searchsorted(g, np.arange(len(floor) + 1))
    ok = e_code >= 0
    if not ok.any():
        return out
    q_code, q_ts, lo, hi = e_code[ok], e_ts[ok], bounds[e_code[ok]], bounds[e_code[ok] + 1]
    # The first mark of the event's timeline that reaches it: marks and events merged in
    # (timeline, time) order, an event before an equal mark; the marks before it count.
    merged = np.lexsort((np.concatenate([np.ones(len(marks), np.int8),
                                         np.zeros(len(q_ts), np.int8)]),
                         np.concatenate([marks, q_ts]), np.concatenate([g, q_code])))
    is_mark = merged < len(marks)
    marks_before = np.cumsum(is_mark) - is_mark
    by_mark = np.empty(len(q_ts), np.int64)
    by_mark[merged[~is_mark] - len(marks)] = marks_before[~is_mark]
    by_row = np.searchsorted(g * (len(codes) + 2) + rows, q_code * (len(codes) + 2) + e_row[ok])
    pos = np.maximum(np.maximum(by_mark, by_row), lo)
    found = pos < hi
    res = np.full(ok.sum(), none, np.int64)
    res[found] = rows[pos[found]]
    out[ok] = res
    return out


def _lives(purging: bool, fc: np.ndarray, full: np.ndarray, m: int, known: list[Any],
           seed: np.ndarray, first_row: np.ndarray, after_max: np.ndarray,
           a_term: np.ndarray, dropped: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """With ``purge_idle_timelines``, a timeline is forgotten after a row once its max is at
    or below A - L, or at its own row while it has no max (``ordering._purge``), and made
    anew by its next event: its lives. Purging changes no watermark (``ordering``'s
    docstring), so the decisions do not depend on it, only the state: which timelines are
    left, since when (floor, partition) and the counts of their last lives. Per judged event
    (``fc``: its timeline, ``full``: its row): whether it is of its timeline's last life; per
    timeline: alive at the end, the row its last life began at (-1: the state's timeline goes
    on), and how many were forgotten."""
    k = len(known)
    carried = np.asarray([tl is not None for tl in known], bool)
    in_last, alive = np.ones(len(full), bool), np.ones(k, bool)
    last_start = np.where(carried, -1, first_row)
    if not purging or not k:
        return in_last, alive, last_start, 0
    has_max = seed != MIN_TIME
    gone_before = carried & has_max & (np.searchsorted(a_term, seed, side="left") < first_row)
    alive_first = carried & ~gone_before
    no_max_first = ~alive_first | ~has_max  # (a life without a max goes at a dropped event)
    order = np.argsort(fc, kind="stable")
    g, rows = fc[order], full[order]
    first = np.ones(len(g), bool)
    first[1:] = g[1:] != g[:-1]
    last = np.ones(len(g), bool)
    last[:-1] = first[1:]
    following = np.full(len(g), m, np.int64)
    following[:-1] = np.where(last[:-1], m, rows[1:])
    top = after_max[rows]
    by_max = (top != MIN_TIME) & (np.maximum(rows, np.searchsorted(a_term, top)) < following)
    # Forgotten after a row: by its max, or (a dropped event) as the row before was, or at a
    # timeline's first row as the life it meets has no max.
    decisive = by_max | ~dropped[rows]
    gone = pd.Series(np.where(decisive, by_max, np.nan)).groupby(g).ffill().to_numpy()
    gone = np.where(np.isnan(gone), no_max_first[g], gone).astype(bool)
    starts = np.empty(len(g), bool)
    starts[1:] = gone[:-1]
    starts[first] = ~alive_first[g[first]]
    life = pd.Series(starts.astype(np.int64)).groupby(g).cumsum().to_numpy()
    final = np.zeros(k, np.int64)
    final[g[last]] = life[last]
    in_last[order] = life == final[g]
    seen = np.zeros(k, bool)
    seen[g] = True
    alive[~seen] = ~gone_before[~seen]
    alive[g[last]] = ~gone[last]
    began = starts & (life == final[g])
    last_start[g[began]] = rows[began]
    last_start[seen & (final == 0)] = -1
    return in_last, alive, last_start, int(gone_before.sum() + gone.sum())


def _timeline_counts(codes: np.ndarray, k: int, early: np.ndarray, late: np.ndarray,
                     ooo: np.ndarray, dropped: np.ndarray, status: np.ndarray,
                     kept: np.ndarray) -> list[dict[str, int]]:
    """Each timeline's metrics of this batch (``ordering.TIMELINE_METRICS``)."""
    def per(mask: np.ndarray) -> np.ndarray:
        return np.bincount(codes[mask], minlength=k)

    counts = {"input": np.bincount(codes, minlength=k), "accepted": per(kept & (status == 0)),
              "adjusted": per(kept & (status == 1)), "dropped": per(dropped),
              "late": per(late), "early": per(early), "out_of_order": per(ooo)}
    return [{name: int(counts[name][c]) for name in ordering.TIMELINE_METRICS}
            for c in range(k)]
