"""Ingress of one micro-batch as array operations, for the common stream (SPEC 3-4).

The row machine (``IngressMachine``) is the definition; this computes exactly its output rows
and its new state, with numpy over the whole batch, for a group of one stream that generates
its CTIs (count or duration), has a policy, imports nothing and has no event-ordering policy, on
a batch of point, interval or edge rows, adapter CTIs and end of input. An edge stream's
starts are judged by the arrays and its ends paired with them in one pass over the edges in
arrival order (``columns.edges_paired``: a dict operation per edge, no event object).

Bad input (SPEC 9: a row the adapter could not read, an event that does not fit the stream, an
arrival time that goes back, an edge end that closes nothing) is found by the arrays and
worded by the row machine's own rules (``machine.problem``) on the few rows they flag: each
such row is dead-lettered in its place (``on_bad_input="dead_letter"``), or the first raises
the row machine's error; so do rows out of sequence or after the end of input. Where a clock
tick is among the rows, or another shard's event broke a rule (its owner raises), this
returns None and the caller runs the row machine on the same state: both keep the same state,
so they can take turns.

Rows and output are pandas frames in the Spark row layout (``cti.runtime.spark.schema``: a
missing time is ``NULL_TIME``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from cti.engine.layout import in_rows_from_pandas, out_rows_to_pandas
from cti.events import SHAPE_KINDS, EventShape
from cti.ingress import importing
from cti.ingress.columns import NULL, STATUS, edges_paired, judged, output_frame
from cti.ingress.machine import (
    STRAY_END,
    IngressMachine,
    after_end,
    arrival_back,
    bad_input,
    elsewhere,
    out_of_sequence,
    problem,
)
from cti.ingress.spec import StreamSpec, imported_by_all
from cti.operators.frame import Chunk, filled, make, stack, text_codes
from cti.rows import CLOCK, EOS, INVALID
from cti.time import MAX_TIME, MIN_TIME, format_time

_REASON = np.asarray([None, "cti_violation"], dtype=object)
_CTI_STATUS = np.asarray(["cti", "cti_regression"], dtype=object)
EVENT_KIND = {EventShape.POINT: "point", EventShape.INTERVAL: "interval"}  # (vectorised shapes)


def eligible(specs: list[StreamSpec], edges: bool = False) -> bool:
    """A group of one stream this module takes: CTIs generated, a policy, nothing imported,
    no event-ordering policy; points or intervals (``edges``: or edges, which ``process``
    and ``process_group`` take, not the paths that build a shard's chunk from the arrays)."""
    if len(specs) != 1:
        return False
    s = specs[0]
    return (s.ordering is None and s.import_from is None and s.generates
            and s.policy is not None
            and (s.shape in EVENT_KIND or (edges and s.shape is EventShape.EDGE)))


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


def process(spec: StreamSpec, st: dict[str, Any], pdf: pd.DataFrame) -> pd.DataFrame | None:
    """The batch's output rows (stream 0), or None where the row machine must run instead."""
    done = _process(spec, st, pdf, 0)
    return None if done is None else done[0]


def process_group(machine: IngressMachine, pdf: pd.DataFrame, owner: int | None = None
                  ) -> pd.DataFrame | None:
    """A micro-batch of a group: vectorised where it can be, else None (the row machine runs).

    A group of one common stream runs wholly vectorised. A group where one common stream is
    imported by all the others (a fast stream and the slow reference streams that take its
    CTIs) runs that stream vectorised and hands its CTIs, at their place in arrival order, to
    the row machine, which processes the importing streams' rows (usually few) as it would.

    With ``owner`` (a query shard; ``pdf`` has an ``own`` column) only the owner's events of
    the vectorised stream are output, and a ``weight`` column says how many rows each row
    stands for in the whole output: one row per event status (kind ``summary``) counts all
    the stream's events, so its event rows weigh 0; every other row weighs 1.
    """
    specs = machine.specs
    if machine.failing:  # (bad input met in another shard's event: the row machine goes on)
        return None
    if eligible(specs, edges=True):
        done = _process(specs[0], machine.state["streams"][0], pdf, 0, owner)
        return None if done is None else done[0]
    fast = [i for i, sp in enumerate(specs)
            if eligible([sp], edges=True) and imported_by_all(specs, i)]
    if not fast:
        return None
    i = fast[0]

    def fast_stream(rows: pd.DataFrame) -> tuple[pd.DataFrame, list] | None:
        got = _process(specs[i], machine.state["streams"][i], rows, i, owner)
        return None if got is None else got[:2]

    done = with_importers(machine, pdf, i, fast_stream)
    if done is None:
        return None
    out, rest = done
    if owner is not None:
        rest["weight"] = np.int64(1)
    return stack([out, rest])


def with_importers(machine: IngressMachine, pdf: pd.DataFrame, i: int,
                   fast: Callable[[pd.DataFrame], tuple[pd.DataFrame, list] | None]
                   ) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """A group whose stream ``i`` runs vectorised (``fast``: its output rows and each CTI with
    its place in arrival order, or None) and whose other streams import its CTIs: those CTIs
    queued at their places, then the other stream's rows vectorised too where it can be
    (``importing``), else the row machine processes them as it would. The output rows of
    both, or None where ``fast`` declines."""
    mine = pdf["stream"].to_numpy() == i
    done = fast(pdf[mine])
    if done is None:
        return None
    out, ctis = done
    machine.import_ctis(i, ctis)
    return out, importers_step(machine, pdf[~mine], i)


def importers_step(machine: IngressMachine, rows: pd.DataFrame, i: int) -> pd.DataFrame:
    """The output rows of the streams that import stream ``i``'s CTIs (queued already) for
    their input ``rows``: vectorised where ``importing`` can, else by the row machine."""
    rest = importing.process(machine, rows, i)
    if rest is None:
        return out_rows_to_pandas(machine.process(in_rows_from_pandas(rows)))
    # (what the row machine adds after its merge: an event-ordering stream's metrics)
    return stack([rest, out_rows_to_pandas(machine.process([]))])


def shard_chunk(machine: IngressMachine, pdf: pd.DataFrame, owner: int,
                field: str | None = None) -> tuple[pd.DataFrame, Chunk] | None:
    """A query shard's micro-batch of a group of one common stream, when the shard passes no
    ingress rows on: the chunk its operators take (the ``owner``'s accepted and adjusted
    events and the stream's CTIs), built straight from the arrays, and the output rows of
    ``process_group(machine, pdf, owner)`` without the owner's event rows (the CTI and the
    summary rows: what the metrics need). None where ``process_group`` would give None.
    ``field``: the payload field that spreads the query; where ``pdf`` has its JSON text for
    every event the chunk keeps (``text``, see ``packing.routed``), the chunk carries its
    codes (``Chunk.fields``)."""
    if machine.failing or not eligible(machine.specs):
        return None
    done = _process(machine.specs[0], machine.state["streams"][0], pdf, 0, owner,
                    events_apart=True, field=field)
    return None if done is None else (done[0], done[2])


def _process(spec: StreamSpec, st: dict[str, Any], pdf: pd.DataFrame, index: int,
             owner: int | None = None, events_apart: bool = False, field: str | None = None
             ) -> tuple[pd.DataFrame, list[tuple[tuple, int]], Chunk] | None:
    """Stream ``index``'s output rows, each CTI it emitted with its place in arrival order
    (the merge key of the row that made it), and (``events_apart``, with an ``owner``) the
    owner's chunk, whose event rows the output then leaves out; None where the row machine
    must run. ``owner``: see ``process_group``; ``field``: see ``shard_chunk``."""
    if st["pending"] or st["imported"] or \
            st["data_arrival"] != st["last_arrival"]:  # a clock tick ahead of the data
        return None
    edges = spec.shape is EventShape.EDGE
    ev_kind = "edge_start" if edges else EVENT_KIND[spec.shape]
    got = in_sequence(spec, st, pdf, ev_kind)
    if got is None:
        return None
    pdf, kind, rest = got
    n = len(pdf)
    if n == 0:
        empty = output_frame({}, index)
        return ((empty if owner is None else empty.assign(weight=np.zeros(0, np.int64))), [],
                Chunk.empty())
    seq = pdf["seq"].to_numpy(np.int64)
    start = pdf["start"].to_numpy(np.int64)
    end = pdf["end"].to_numpy(np.int64)
    arrival = pdf["arrival"].to_numpy(np.int64)
    payload = pdf["payload"].to_numpy(object)
    is_ev, is_end, is_cti, is_eos = np.ones(n, bool), *(np.zeros(n, bool) for _ in range(3))
    is_ev[rest] = False  # (the other kinds are few: compared there only)
    is_end[rest], is_cti[rest] = kind[rest] == "edge_end", kind[rest] == "cti"
    is_eos[-1] = kind[-1] == "eos"  # (``in_sequence``: none before the last row)
    # Arrival order: an explicit arrival may not go back; otherwise the sync time (SPEC 5).
    sync_arrival = np.where(arrival != NULL, arrival, np.where(
        is_eos, MAX_TIME, np.where(is_end, end, start)))
    run = np.maximum.accumulate(np.concatenate([[st["last_arrival"]], sync_arrival]))
    rule = broken_rules(spec, pdf, kind, rest, run[:-1])
    bad = rule != None  # noqa: E711 (per row)
    if bad.any():
        good = ~bad
        is_ev, is_end, is_cti = is_ev & good, is_end & good, is_cti & good
        if not spec.dead_letter:  # the first bad row raises, as processing meets it
            first = int(np.argmax(bad))
            row = in_rows_from_pandas(pdf.iloc[first:first + 1])[0]
            if elsewhere(row):
                return None  # (its owner raises; the row machine goes on here, as it must)
            if not edges:  # (edges: an end that closes nothing may come first)
                raise bad_input(spec, row, rule[first])

    # CTI generation (SPEC 4): counted events are all events, whatever the policy does.
    prev_max = MIN_TIME if st["max_start"] is None else st["max_start"]
    max_start = np.maximum.accumulate(np.where(is_ev, start, MIN_TIME))
    max_start = np.maximum(max_start, prev_max)
    generating = np.zeros(n, bool)
    ev_idx = np.flatnonzero(is_ev)
    count, gen_ref = st["count"], st["gen_ref"]
    if spec.event_count is not None:
        # The events whose ordinal (count + 1, count + 2, ...) is a multiple of the count.
        generating[ev_idx[(-count - 1) % spec.event_count::spec.event_count]] = True
        count = int((count + len(ev_idx)) % spec.event_count)
    else:
        triggers, gen_ref = span_points(start[ev_idx], prev_max, gen_ref, spec.duration)
        generating[ev_idx[triggers]] = True
    candidate = np.full(n, MIN_TIME, np.int64)
    candidate[generating] = saturating_sub(max_start[generating], spec.delay)
    candidate[is_cti] = start[is_cti]
    if is_eos.any() and spec.advance_to_infinity_on_shutdown:
        candidate[-1] = MAX_TIME
    after = np.maximum.accumulate(np.concatenate([[st["cti"]], candidate]))
    before, after = after[:-1], after[1:]
    emits_cti = candidate > before
    regression = is_cti & ~emits_cti

    if edges:  # only the owner of an edge (it has its payload) pairs and judges it
        owned = (is_ev | is_end) & (payload != None)  # noqa: E711 (per row)
        out_start, out_end, reason, accepted, adjust, dropped, stray = edges_paired(
            st["open_edges"], spec, is_ev & owned, is_end & owned, start, end, payload,
            before, judged(spec, is_ev & owned, start, end, before), strays=True)
        if not spec.dead_letter and (stray | bad).any():
            first = int(np.argmax(stray | bad))
            raise bad_input(spec, in_rows_from_pandas(pdf.iloc[first:first + 1])[0],
                            rule[first] if bad[first] else STRAY_END)
        if stray.any():  # an end that closes nothing: a dead letter
            rule[stray], bad, owned = STRAY_END, bad | stray, owned & ~stray
    else:
        violates, adjust, dropped, accepted = judged(spec, is_ev, start, end, before)
        out_start = np.where(dropped, NULL, np.where(adjust, before, start))
        out_end = np.where(dropped, NULL, end)
        reason = _REASON[violates.astype(np.int8)]

    # Output rows: each input row's event row, then the CTI it generated (or its regression).
    rows_ev = np.flatnonzero(owned) if edges else ev_idx
    rows_cti = np.flatnonzero(emits_cti | regression)
    others = None
    if owner is not None and not edges:  # events of other shards: counted, not output
        rows_ev = np.flatnonzero(is_ev & (pdf["own"].to_numpy(np.int32) == owner))
        others = status_rows({"accepted": accepted, "adjusted": adjust, "dropped": dropped})
    chunk = Chunk.empty()
    if events_apart and owner is not None:  # the chunk from the arrays; no event rows
        kept = rows_ev[~dropped[rows_ev]]
        chunk = kept_chunk(ev_kind, start[kept], end[kept], before[kept], adjust[kept],
                           payload[kept], candidate[emits_cti].tolist(),
                           known_field(pdf, kept, field))
        rows_ev = rows_ev[:0]
    rows_bad = np.flatnonzero(bad)
    order = np.argsort(np.concatenate([rows_ev * 2, rows_bad * 2, rows_cti * 2 + 1]),
                       kind="stable")

    extra = 0 if others is None else len(others["weight"])
    if extra:  # the summary rows go last
        order = np.concatenate([order, np.arange(len(order), len(order) + extra)])

    def pick(ev_values: np.ndarray, cti_values: np.ndarray, column: str) -> np.ndarray:
        tail = [others[column]] if extra else []
        return np.concatenate([ev_values, dead[column], cti_values, *tail])[order]

    dead = dead_letters(pdf, rows_bad, rule, before)

    null_cti = np.full(len(rows_cti), NULL, np.int64)
    point = ev_kind == "point"
    ev_start = out_start[rows_ev]
    ev_end = np.full(len(rows_ev), NULL, np.int64) if point else out_end[rows_ev]
    status_ev = STATUS[np.where(accepted[rows_ev], 0, np.where(adjust[rows_ev], 1, 2))]
    regression_cti = regression[rows_cti]
    status_cti = _CTI_STATUS[regression_cti.astype(np.int8)]
    cti_start = np.where(regression_cti, NULL, candidate[rows_cti])
    in_cti = np.where(regression_cti, seq[rows_cti], -1)
    reasons_cti = np.asarray([
        f"CTI {format_time(int(v))} does not move the stream's time {format_time(int(c))} "
        "forward; ignored" if r else None
        for v, c, r in zip(start[rows_cti], before[rows_cti], regression[rows_cti],
                           strict=True)], dtype=object)
    cti_ev = np.where(before[rows_ev] == MIN_TIME, NULL, before[rows_ev])
    cti_cti = np.where(after[rows_cti] == MIN_TIME, NULL, after[rows_cti])
    emitted = np.flatnonzero(emits_cti)
    cti_keys = [((int(run[r + 1]), index, int(seq[r])), int(candidate[r])) for r in emitted]
    # Row numbers as in the whole output: each input row's event row, then its CTI row.
    cti_row = emits_cti | regression
    upto = np.cumsum((owned if edges else is_ev).astype(np.int64) + bad + cti_row)
    m = int(upto[-1])
    ev_seq = st["out_seq"] + upto[rows_ev] - 1 - cti_row[rows_ev]
    cti_seq = st["out_seq"] + upto[rows_cti] - 1
    dead["seq"] = st["out_seq"] + upto[rows_bad] - 1
    out = output_frame({
        "seq": pick(ev_seq, cti_seq, "seq"),
        "in_seq": pick(seq[rows_ev], in_cti, "in_seq"),
        "kind": pick(kind[rows_ev], np.full(len(rows_cti), "cti", object), "kind"),
        "start": pick(ev_start, cti_start, "start"),
        "end": pick(ev_end, null_cti, "end"),
        "payload": pick(payload[rows_ev], np.full(len(rows_cti), None, object), "payload"),
        "status": pick(status_ev, status_cti, "status"),
        "orig_start": pick(start[rows_ev], np.where(regression_cti, start[rows_cti], NULL),
                           "orig_start"),
        "orig_end": pick(np.full(len(rows_ev), NULL, np.int64) if point else end[rows_ev],
                         null_cti, "orig_end"),
        "cti": pick(cti_ev, cti_cti, "cti"),
        "reason": pick(reason[rows_ev], reasons_cti, "reason"),
        "partition": pick(np.full(len(rows_ev), None, object),
                          np.full(len(rows_cti), None, object), "partition"),
    }, index)
    if owner is not None:  # (an edge's row is reported by its owner: it weighs 1)
        out["weight"] = pick(np.full(len(rows_ev), int(edges), np.int64),
                             np.ones(len(rows_cti), np.int64), "weight")

    # The row machine's state after the same rows.
    metrics = st["metrics"]
    metrics["accepted"] += int(accepted.sum())
    metrics["adjusted"] += int(adjust.sum())
    metrics["dropped"] += int(dropped.sum())
    metrics["invalid"] += len(rows_bad)
    metrics["ctis"] += int(emits_cti.sum())
    metrics["cti_regressions"] += int(regression.sum())
    st["cti"] = int(after[-1])
    st["count"] = count
    st["gen_ref"] = gen_ref
    if len(ev_idx):
        st["max_start"] = int(max_start[-1])
    st["out_seq"] += m
    st["next_in_seq"] += n
    st["last_arrival"] = st["data_arrival"] = int(run[-1])
    st["last_key"] = (int(run[-1]), index, int(seq[-1]))
    st["eos"] = bool(is_eos.any())
    return out, cti_keys, chunk


def in_sequence(spec: StreamSpec, st: dict[str, Any], pdf: pd.DataFrame, common: str
                ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray] | None:
    """The batch's new rows in sequence (rows seen before and a row given twice are replays:
    skipped), their kinds, and where the kind is not ``common`` (the few other rows); raises
    as the row machine does for a row out of sequence or after the end of input; None where a
    clock tick is among them (the row machine takes those)."""
    seq = pdf["seq"].to_numpy(np.int64)
    if len(seq) > 1 and not (seq[1:] > seq[:-1]).all():
        pdf = pdf.sort_values("seq", kind="stable")
        seq = pdf["seq"].to_numpy(np.int64)
        first = np.concatenate([[True], seq[1:] != seq[:-1]])
        if not first.all():
            pdf, seq = pdf[first], seq[first]
    expected = st["next_in_seq"]
    at = int(np.searchsorted(seq, expected))
    if at:
        pdf, seq = pdf.iloc[at:], seq[at:]
    kind = pdf["kind"].to_numpy(object)
    rest = np.flatnonzero(kind != common)
    n = len(seq)
    if not n or (not len(rest) and seq[-1] == expected + n - 1 and not st["eos"]):
        return pdf, kind, rest  # (the usual batch)
    if (kind[rest] == CLOCK).any():
        return None
    gap = np.flatnonzero(seq != expected + np.arange(n))
    ends = rest[kind[rest] == EOS]
    after = 0 if st["eos"] else int(ends[0]) + 1 if len(ends) else n
    if len(gap) and gap[0] <= after:
        raise out_of_sequence(spec, int(seq[gap[0]]), expected + int(gap[0]))
    if after < n:
        raise after_end(spec, int(seq[after]))
    return pdf, kind, rest


def broken_rules(spec: StreamSpec, pdf: pd.DataFrame, kind: np.ndarray, rest: np.ndarray,
                 data_arrival: np.ndarray) -> np.ndarray:
    """The rule each row breaks as the row machine words it (``machine.problem``; None: a good
    row), ``data_arrival`` the stream's arrival before each: the checks run on the arrays, and
    the wording on the few rows they flag."""
    n = len(kind)
    start = pdf["start"].to_numpy(np.int64)
    end = pdf["end"].to_numpy(np.int64)
    arrival = pdf["arrival"].to_numpy(np.int64)
    back = (arrival != NULL) & (arrival < data_arrival)
    suspect = back | (start == NULL) | (start == MAX_TIME) | (end == MAX_TIME) \
        | (pdf["error"].to_numpy(object) != None)  # noqa: E711 (per row)
    # The rows that need an end after their start: an interval stream's events, edge ends.
    spans = np.full(n, spec.shape is EventShape.INTERVAL)
    spans[rest] = kind[rest] == "edge_end"
    suspect |= spans & ((end == NULL) | (end <= start))
    suspect[rest[~np.isin(kind[rest], [*SHAPE_KINDS[spec.shape], "cti"])]] = True
    suspect[rest[kind[rest] == EOS]] = False
    rule = np.full(n, None, object)
    at = np.flatnonzero(suspect)
    for r, row in zip(at.tolist(), in_rows_from_pandas(pdf.iloc[at]), strict=True):
        if back[r] and row.kind != INVALID:
            row = row._replace(error=arrival_back(row.arrival, int(data_arrival[r])))
        rule[r] = problem(spec, row)
    return rule


def dead_letters(pdf: pd.DataFrame, rows: np.ndarray, rule: np.ndarray, before: np.ndarray
                 ) -> dict[str, np.ndarray]:
    """The output columns of the dead-lettered ``rows`` (``IngressMachine._bad``): status
    ``invalid``, no times of their own, their input times as the original ones, the rule they
    break as the reason, the CTI in force (without ``seq``: the caller numbers them)."""
    def at(column: str, dtype: Any) -> np.ndarray:
        return pdf[column].to_numpy(dtype)[rows]

    null = np.full(len(rows), NULL, np.int64)
    return {"in_seq": at("seq", np.int64), "kind": at("kind", object), "start": null,
            "end": null, "payload": at("payload", object),
            "status": np.full(len(rows), "invalid", object), "orig_start": at("start", np.int64),
            "orig_end": at("end", np.int64),
            "cti": np.where(before[rows] == MIN_TIME, NULL, before[rows]),
            "reason": rule[rows], "partition": at("partition", object),
            "weight": np.ones(len(rows), np.int64)}


def kept_chunk(ev_kind: str, start: np.ndarray, end: np.ndarray, before: np.ndarray,
               adjust: np.ndarray, payload: np.ndarray, ctis: list[int],
               fields: dict[str, Any]) -> Chunk:
    """The chunk of the events a shard keeps (their starts, ends, CTI in force, adjusted
    mask and payloads) and the stream's new CTIs: an adjusted event starts at the CTI."""
    kept_start = np.where(adjust, before, start)
    return Chunk(make(filled(len(start), ev_kind), kept_start,
                      kept_start + 1 if ev_kind == "point" else end,
                      np.where(payload == None, "{}", payload) if len(payload)  # noqa: E711
                      else payload, filled(len(start), "")), ctis, fields)


def known_field(pdf: pd.DataFrame, kept: np.ndarray, field: str | None
                ) -> dict[str, tuple[np.ndarray, list[Any], list[str]]]:
    """``{field: text_codes}`` of the ``kept`` rows from the ``text`` column, if it has a
    text for each of them; else nothing."""
    text = pdf["text"] if field is not None and "text" in pdf else None
    if text is None or not isinstance(text.dtype, pd.CategoricalDtype) or not len(kept):
        return {}
    codes = text.cat.codes.to_numpy()[kept]
    if (codes < 0).any():
        return {}
    return {field: text_codes(codes, text.cat.categories.tolist())}


def status_rows(masks: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The columns of one output row per event status (a mask of the rows that have it), with
    their count (``weight``); dropped and adjusted events broke the CTI (``cti_violation``)."""
    status = [k for k, m in masks.items() if m.any()]
    n = len(status)
    null = np.full(n, NULL, np.int64)
    return {
        "seq": np.full(n, -1, np.int64), "in_seq": np.full(n, -1, np.int64),
        "kind": np.full(n, "summary", object), "start": null, "end": null,
        "payload": np.full(n, None, object), "status": np.asarray(status, object),
        "orig_start": null, "orig_end": null, "cti": null,
        "reason": np.asarray([None if k == "accepted" else "cti_violation" for k in status],
                             object),
        "partition": np.full(n, None, object),
        "weight": np.asarray([int(masks[k].sum()) for k in status], np.int64),
    }
