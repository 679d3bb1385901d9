"""A stream whose CTIs are all imported (SPEC 5), vectorised: the slow reference stream of a
group whose fast stream runs vectorised (``vectorized.with_importers``).

The row machine merges the slow stream's rows with the CTIs it imports in arrival order (the
merge key: arrival, stream, sequence). A row waits until the fast stream has received a row
later than it (its CTI in force is then known); an imported CTI waits until the slow stream
has received a row later than it. So what is processed in a batch is every queued row and
imported CTI below the first that must wait, in key order, and each event is judged against
the last CTI imported before it: a search, not a step per row. This module computes exactly
the row machine's output rows and new state for that, and returns None (the row machine
runs) for anything else: a CTI from the adapter, an edge end that closes nothing, a stream
that generates CTIs of its own or is imported from, a violation without a policy, a bad row in
a stream that raises for it (the row machine raises the group's first in arrival order). A
bad row of a stream that dead-letters it (SPEC 9) is dead-lettered in its place, worded by
the row machine's rules (``machine.problem``). Edge ends are paired with their starts as
``columns.edges_paired`` does.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import pandas as pd

from cti.engine.layout import IN_COLUMNS, in_row_to_tuple, in_rows_from_pandas
from cti.events import EventShape
from cti.ingress.columns import (
    NULL,
    STATUS,
    edges_paired,
    in_sequence,
    judged,
    output_frame,
)
from cti.ingress.machine import IngressMachine, arrival_back, problem
from cti.ingress.spec import StreamSpec
from cti.rows import CLOCK, EOS, INVALID, InRow
from cti.time import MAX_TIME, MIN_TIME

_STARTS = {EventShape.POINT: "point", EventShape.INTERVAL: "interval",
           EventShape.EDGE: "edge_start"}


def process(machine: IngressMachine, pdf: pd.DataFrame, fast: int) -> pd.DataFrame | None:
    """The output rows of the group's other stream for its input rows ``pdf`` (the fast
    stream ``fast`` processed and its CTIs queued already), or None where the row machine
    must take them."""
    specs, streams = machine.specs, machine.state["streams"]
    if len(specs) != 2:
        return None
    j = 1 - fast
    spec, st, fst = specs[j], streams[j], streams[fast]
    if (spec.import_from != fast or spec.generates or spec.ordering is not None
            or machine.importers[j] or fst["pending"] or fst["imported"]
            or specs[fast].import_from is not None):
        return None
    got = in_sequence(spec, st, pdf, _STARTS[spec.shape], raises=False)
    if got is None:
        return None
    pdf = got[0]
    n = len(pdf)
    # The rows held from earlier batches (received already: their keys are known) first.
    held = list(st["pending"])
    if any(row.kind == CLOCK for _, row in held):
        return None
    queued = pd.concat([pd.DataFrame([in_row_to_tuple(row) for _, row in held],
                                     columns=[c for c, _ in IN_COLUMNS]), pdf],
                       ignore_index=True) if held else pdf
    seq = queued["seq"].to_numpy(np.int64)
    kind = queued["kind"].to_numpy(object)
    start = queued["start"].to_numpy(np.int64)
    end = queued["end"].to_numpy(np.int64)
    arrival = queued["arrival"].to_numpy(np.int64)[len(held):]
    payload = queued["payload"].to_numpy(object)
    is_eos = kind == EOS
    event_kind = _STARTS[spec.shape]
    is_end = kind == "edge_end" if event_kind == "edge_start" else np.zeros(len(kind), bool)
    other = (kind != event_kind) & ~is_end & ~is_eos
    if (kind[other] == "cti").any() or (is_eos.any() and not is_eos[-1]):
        return None  # (an adapter's CTI: the row machine)

    # Receiving (``IngressMachine._receive``): each new row's merge arrival; an explicit
    # arrival that goes back behind the stream's data is bad input (unless unreadable anyway).
    explicit = arrival != NULL
    new_eos = is_eos[len(held):]
    own = np.where(explicit, arrival, np.where(new_eos, MAX_TIME, np.where(
        is_end[len(held):], end[len(held):], start[len(held):])))
    data = np.maximum.accumulate(np.concatenate([[st["data_arrival"]], own]))
    back = np.zeros(len(seq), bool)
    back[len(held):] = explicit & (arrival < data[:-1]) & (kind[len(held):] != INVALID)
    rule, received = _broken_rules(spec, queued, kind, other, back, held, data)
    bad = rule != None  # noqa: E711 (per row)
    if bad.any() and not spec.dead_letter:
        return None  # (the row machine raises, for the first in the whole group's order)
    ev = ~is_eos & ~is_end & ~bad  # (the starts: they count, edge ends do not)
    is_end &= ~bad
    merge = np.concatenate([np.asarray([key[0] for key, _ in held], np.int64),
                            np.maximum.accumulate(np.concatenate([[st["last_arrival"]],
                                                                  own]))[1:]])
    total = len(seq)
    last_key = (int(merge[-1]), j, int(seq[-1])) if n else st["last_key"]
    eos = st["eos"] or bool(new_eos.any())

    # What is processed: rows below the fast stream's last key, imported CTIs below this
    # stream's, in key order up to the first that must wait.
    ready = total if fst["eos"] else _count_below(merge, j, seq, fst["last_key"])
    queue = list(st["imported"])
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
    imports = queue[:waiting]

    # Each processed row after the imported CTIs before it; its CTI in force is the last.
    ctis = np.asarray([t for _, t in imports], np.int64)
    at = np.asarray([_count_below(merge[:ready], j, seq[:ready], key) for key, _ in imports],
                    np.int64)
    before = np.concatenate([[st["cti"]], ctis])[
        np.searchsorted(at, np.arange(ready), side="right")]
    done = slice(0, ready)
    s, e, p, ends = start[done], end[done], payload[done], is_end[done]
    is_ev = ev[done]
    elsewhere = (p == None) & (event_kind == "edge_start")  # noqa: E711 (another shard's edge)
    judge = is_ev & ~elsewhere
    ends &= ~elsewhere
    dead = bad[done]
    violates, adjusted, dropped, accepted = judged(spec, judge, s, e, before)
    if spec.policy is None and (violates.any() or (ends & (e < before)).any()):
        return None
    if event_kind == "edge_start":
        paired = edges_paired(st["open_edges"], spec, judge, ends, s, e, p, before,
                              (violates, adjusted, dropped, accepted))
        if paired is None:
            return None
        out_start, out_end, reason, accepted, adjusted, dropped, _ = paired
        judge |= ends
    else:
        out_start = np.where(dropped, NULL, np.where(adjusted, before, s))
        out_end = np.where(dropped | (event_kind != "interval"), NULL, e)
        reason = np.where(violates, "cti_violation", None)

    # Output rows in processing order: the imported CTIs at their places among the rows.
    emits = np.flatnonzero(judge | dead)
    gone = dead[emits]  # (dead letters: no times of their own, the rule they break)
    order = np.argsort(np.concatenate([emits * 2 + 1, at * 2]), kind="stable")
    m = len(emits) + len(imports)
    k = len(imports)
    no_end = np.full(len(emits), NULL, np.int64) if event_kind == "point" else e[emits]

    def pick(rows_values: Any, cti_values: Any) -> np.ndarray:
        return np.concatenate([np.asarray(rows_values), np.asarray(cti_values)])[order]

    out = output_frame({
        "seq": st["out_seq"] + np.arange(m, dtype=np.int64),
        "in_seq": pick(seq[done][emits], np.full(k, -1)),
        "kind": pick(kind[done][emits], np.full(k, "cti", object)),
        "start": pick(np.where(gone, NULL, out_start[emits]), ctis),
        "end": pick(np.where(gone, NULL, out_end[emits]), np.full(k, NULL)),
        "payload": pick(p[emits], np.full(k, None, object)),
        "status": pick(np.where(gone, "invalid", STATUS[np.where(
            accepted[emits], 0, np.where(adjusted[emits], 1, 2))]), np.full(k, "cti", object)),
        "orig_start": pick(s[emits], np.full(k, NULL)),
        "orig_end": pick(np.where(gone, e[emits], no_end), np.full(k, NULL)),
        "cti": pick(np.where(before[emits] == MIN_TIME, NULL, before[emits]), ctis),
        "reason": pick(np.where(gone, rule[done][emits], reason[emits]).astype(object),
                       np.full(k, None, object)),
    }, j)

    # The row machine's state after the same rows (the edge book's: ``edges_paired``).
    if is_ev.any():
        top = int(s[is_ev].max())
        st["max_start"] = top if st["max_start"] is None else max(st["max_start"], top)
    metrics = st["metrics"]
    metrics["accepted"] += int(accepted.sum())
    metrics["adjusted"] += int(adjusted.sum())
    metrics["dropped"] += int(dropped.sum())
    metrics["ctis"] += k
    metrics["invalid"] += int(dead.sum())
    if k:
        st["cti"] = int(ctis[-1])
    for _ in range(k):
        st["imported"].popleft()
    st["out_seq"] += m
    st["next_in_seq"] += n
    if n:
        st["last_arrival"] = int(merge[-1])
        st["data_arrival"] = int(data[-1])
        st["last_key"] = last_key
    st["eos"] = eos
    # The rows that wait, as the row machine holds them (those held before, as they were).
    waiting_rows = held[ready:] + list(zip(
        [(int(merge[r]), j, int(seq[r])) for r in range(max(ready, len(held)), total)],
        received[max(ready - len(held), 0):], strict=True))
    st["pending"] = deque(waiting_rows)
    return out


def _broken_rules(spec: StreamSpec, queued: pd.DataFrame, kind: np.ndarray, other: np.ndarray,
                  back: np.ndarray, held: list[tuple[tuple, InRow]], data: np.ndarray
                  ) -> tuple[np.ndarray, list[InRow]]:
    """The rule each queued row (the ``held`` ones first) breaks as the row machine words it
    (``machine.problem``; None: a good row): the checks on the arrays, the wording on the
    few rows they flag (a new row whose arrival goes ``back`` carries its problem from
    receiving, as ``IngressMachine._receive`` has it; ``data``: the stream's data arrival
    before each new row); and the new rows as the row machine receives them."""
    start, end = queued["start"].to_numpy(np.int64), queued["end"].to_numpy(np.int64)
    event_kind = _STARTS[spec.shape]
    spans = (kind == "edge_end") | ((kind == event_kind) & (event_kind == "interval"))
    suspect = other | (queued["error"].to_numpy(object) != None) | back | (  # noqa: E711
        ((start == NULL) | (start == MAX_TIME) | (end == MAX_TIME)) & (kind != EOS)) | (
        spans & ((end == NULL) | (end <= start)))
    rule = np.full(len(kind), None, object)
    h = len(held)
    received = in_rows_from_pandas(queued.iloc[h:])
    for r in np.flatnonzero(suspect).tolist():
        row = received[r - h] if r >= h else held[r][1]
        if back[r]:
            row = received[r - h] = row._replace(error=arrival_back(row.arrival,
                                                                    int(data[r - h])))
        rule[r] = problem(spec, row)
    return rule, received


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
