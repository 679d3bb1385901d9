"""Operators that look at one event at a time: where, select and the lifetime operators.

Each maps a chunk to a chunk; CTIs pass unchanged except where the operator moves time
(``shift_event_time``, ``alter_event_lifetime``), which applies the same move to the CTIs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cti.errors import CtiError
from cti.events import EventShape, one_kind
from cti.forms import frame
from cti.forms.edges import close_edge, open_edge
from cti.forms.frame import Chunk
from cti.forms.rows import payload_to_json
from cti.operators import durations, plan, usercode
from cti.operators.unit import OperatorUnit
from cti.time import MAX_TIME, MIN_TIME


def _shift_times(values: np.ndarray, d: int) -> np.ndarray:
    """``values + d`` in int64, leaving the sentinels where they are and clamping just inside
    them (a finite time never becomes a sentinel)."""
    finite = (values != MAX_TIME) & (values != MIN_TIME)
    lo, hi = MIN_TIME + 1, MAX_TIME - 1
    moved = np.clip(values, max(lo, lo - d), min(hi, hi - d)) + d
    return np.where(finite, moved, values).astype(np.int64)


def _map_ctis(chunk: Chunk, fn) -> tuple[list[int], list[int]]:
    """The chunk's CTIs through ``fn`` (the sentinels kept), those that rise, with their
    tags (``frame.rising``)."""
    return frame.rising(
        (c if c in (MAX_TIME, MIN_TIME) else min(max(int(fn(c)), MIN_TIME + 1), MAX_TIME - 1)
         for c in chunk.ctis), chunk.cti_tags)


def _on_frame(node: plan.Where | plan.Select, operator: str, fn: Any, chunk: Chunk
              ) -> tuple[pd.DataFrame, Any]:
    """The events' payloads as a frame (``frame.payload_frame``), and ``fn`` of it; an
    exception of ``fn`` noted with the operator, the stream and the frame's first payload."""
    df = frame.payload_frame((chunk.raw_events if chunk.columns else chunk.events)[
        "payload"].to_numpy(object), chunk.columns)  # (from the columns where known)
    try:
        return df, fn(df)
    except Exception as exc:
        usercode.note(exc, operator, node.source.label, chunk.payload_texts(np.arange(1))[0],
                      f"frame of {len(df)} payloads; the first")
        raise


def where(node: plan.Where, chunk: Chunk) -> Chunk:
    ev = chunk.raw_events if node.frame else chunk.events  # (a frame: from the columns)
    if not len(ev):
        return chunk
    def test(p: dict[str, Any]) -> bool:
        try:
            return bool(node.predicate(p))
        except Exception as exc:
            usercode.note(exc, "where", node.source.label, payload_to_json(p))
            raise

    if node.frame:
        df, got = _on_frame(node, "where", node.predicate, chunk)
        keep = frame.mask_of(got, len(df), f"where(..., frame=True) on stream "
                             f"{node.source.label}")
    else:
        keep = np.asarray(frame.map_payloads(ev, test), dtype=bool)
    return Chunk(ev[keep].reset_index(drop=True), chunk.ctis,  # the payloads are the same
                 chunk.taken(keep),
                 None if chunk.keys is None else (chunk.keys[0][keep], chunk.keys[1]),
                 chunk.tags)


def select(node: plan.Select, chunk: Chunk) -> Chunk:
    ev = chunk.raw_events if node.frame else chunk.events
    if not len(ev):
        return chunk

    def project(p: dict[str, Any]) -> str:
        try:
            out = node.fn(p)
        except Exception as exc:
            usercode.note(exc, "select", node.source.label, payload_to_json(p))
            raise
        if not isinstance(out, dict):
            raise CtiError(f"select must return a dict payload, got {out!r} for {p!r}")
        return payload_to_json(out)

    if node.frame:
        df, got = _on_frame(node, "select", node.fn, chunk)
        payloads = frame.payloads_of_frame(got, len(df), f"select(..., frame=True) on stream "
                                           f"{node.source.label}")
    else:
        payloads = frame.map_payloads(ev, project)
    ev = ev.copy()
    ev["payload"] = pd.Series(payloads, dtype=object, index=ev.index)
    return Chunk(ev, chunk.ctis, tags=chunk.tags)


def shift(node: plan.ShiftEventTime, chunk: Chunk) -> Chunk:
    d = node.offset
    ev = chunk.raw_events.copy()
    ev["start"] = _shift_times(ev["start"].to_numpy(), d)
    ev["end"] = _shift_times(ev["end"].to_numpy(), d)
    ctis, tags = _map_ctis(chunk, lambda c: c + d)
    return Chunk(ev, ctis, chunk.columns, tags=tags)


def _as_intervals(chunk: Chunk, start: np.ndarray, duration: Any,
                  ctis: tuple[list[int], list[int] | None], node: Any) -> Chunk:
    """Every event but edge ends, as the interval [start, start + duration), with ``ctis``
    and their tags (the payloads and their typed columns unchanged). ``duration``: ticks,
    or a function of each event (``durations``; ``node`` names the operator and stream in
    its errors)."""
    ev = chunk.raw_events
    # (points or intervals have no edge end: every row kept, its columns as they are)
    keep = None if one_kind(node.source.shape) else ev["kind"].to_numpy() != "edge_end"
    if keep is not None and keep.all():
        keep = None
    if keep is not None:
        start = start[keep]
    if callable(duration):
        operator = "alter_event_duration" if isinstance(node, plan.AlterEventDuration) \
            else "alter_event_lifetime"
        duration = durations.durations(duration, operator, node.source.label,
                                       chunk.events if keep is None else chunk.events[keep])
    end = durations.ends(start, duration)
    payload, key = (ev[c] if keep is None else ev[c][keep] for c in ("payload", "key"))
    return Chunk(frame.make(frame.repeated(len(start), "interval"), start, end, payload, key),
                 ctis[0], chunk.columns if keep is None else chunk.taken(keep), tags=ctis[1])


def alter_duration(node: plan.AlterEventDuration, chunk: Chunk) -> Chunk:
    return _as_intervals(chunk, chunk.raw_events["start"].to_numpy(), node.duration,
                         (chunk.ctis, chunk.tags), node)


def alter_lifetime(node: plan.AlterEventLifetime, chunk: Chunk) -> Chunk:
    ev = chunk.raw_events
    def start(s: int) -> int:
        try:
            return int(node.start_fn(s))
        except Exception as exc:
            usercode.note(exc, "alter_event_lifetime", node.source.label, f"start {s}")
            raise

    starts = np.asarray([start(int(s)) for s in ev["start"]], dtype=np.int64)
    return _as_intervals(chunk, starts, node.duration, _map_ctis(chunk, node.start_fn),
                         node)


def to_point(node: plan.ToPointEventStream, chunk: Chunk) -> Chunk:
    ev = chunk.raw_events
    keep = ev["kind"].to_numpy() != "edge_end"
    start = ev["start"].to_numpy()[keep]
    return Chunk(frame.make(frame.repeated(len(start), "point"), start, start + 1,
                            ev["payload"][keep], ev["key"][keep]), chunk.ctis, chunk.taken(keep),
                 tags=chunk.tags)


def new_clip_state() -> dict[str, Any]:
    return {"open": {}, "cti": MIN_TIME}  # OpenEdges: (start, payload, key) -> [closed early?]


def clip(node: plan.ClipEventDuration, chunk: Chunk, state: dict[str, Any]) -> Chunk:
    """``end = min(end, start + d)``. An edge stays an edge: its end is emitted at
    ``start + d`` once the CTI passes it (the real end is then swallowed), or at its real end."""
    d = node.max_duration
    ev = chunk.events
    kind = ev["kind"].to_numpy()
    start, end = ev["start"].to_numpy(), ev["end"].to_numpy()
    limit = _shift_times(start, d)
    fixed = (kind == "point") | (kind == "interval")
    out = ev[fixed].copy()
    out["end"] = np.minimum(end[fixed], limit[fixed])
    edges: list[tuple] = []
    for k, s, e, p, key in zip(kind[~fixed], start[~fixed], end[~fixed],
                               ev["payload"].to_numpy()[~fixed], ev["key"].to_numpy()[~fixed],
                               strict=True):
        ident = (int(s), p, key)
        if k == "edge_start":
            open_edge(state["open"], ident, False)
            edges.append(("edge_start", s, MAX_TIME, p, key))
            continue
        found, closed_early = close_edge(state["open"], ident)
        if found and not closed_early:  # (closed by the clip already: the end is swallowed)
            edges.append(("edge_end", s, min(int(e), int(s) + d), p, key))
    if chunk.ctis:
        state["cti"] = chunk.ctis[-1]
    for (s, p, key), queue in state["open"].items():
        for i, closed in enumerate(queue):
            if not closed and s + d < state["cti"]:
                queue[i] = True
                edges.append(("edge_end", s, s + d, p, key))
    extra = frame.make(*zip(*edges, strict=True)) if edges else frame.empty()
    return Chunk(frame.concat([out, extra]), chunk.ctis, tags=chunk.tags)


def _unary(fn: Any) -> Any:
    """A per-event operator's step: its one input's chunk through ``fn(node, chunk)``."""
    return lambda node, inputs, state, machine: fn(node, inputs[0])


UNITS = [
    OperatorUnit(plan.Where, _unary(where), keeps_payload=True, per_event=True,
                 input_fields=lambda node, wanted, read: (None,), tags=True),  # the predicate: all
    OperatorUnit(plan.Select, _unary(select), per_event=True,
                 output_fields=lambda node: None, tags=True),  # a function's output: unknown
    OperatorUnit(plan.ShiftEventTime, _unary(shift), keeps_payload=True, per_event=True, tags=True),
    OperatorUnit(plan.AlterEventDuration, _unary(alter_duration), keeps_payload=True,
                 per_event=True, output_shape=lambda node: EventShape.INTERVAL, tags=True),
    OperatorUnit(plan.AlterEventLifetime, _unary(alter_lifetime), keeps_payload=True,
                 per_event=True, output_shape=lambda node: EventShape.INTERVAL, tags=True),
    OperatorUnit(plan.ToPointEventStream, _unary(to_point), keeps_payload=True, per_event=True,
                 output_shape=lambda node: EventShape.POINT, tags=True),
    OperatorUnit(plan.ClipEventDuration,
                 lambda node, inputs, state, machine: clip(node, inputs[0], state),
                 new_state=lambda node: new_clip_state(), keeps_payload=True, tags=True),
]
