"""``clip_event_duration(clip_stream, on=...)``: StreamInsight's ``ClipEventDuration`` against
another stream (SPEC 8).

Each source event ends at the start of the first clip-stream event with the same key (the
``on`` fields, and the group key inside ``group_by``) that starts strictly after it, if that
comes before its own end. With ``alter_event_duration(MAX_TIME)`` first, readings become a
signal: each value lasts until the next reading of its key.

A source point is never clipped (nothing starts strictly inside [t, t + 1)) and passes at once.
An interval or edge is held until its end is final: its candidate end (its own end, or the
first matching clip start after its start) is at or below both inputs' CTIs, so no clip event
and no edge end still to come can change it. It then leaves as an interval. Edge ends of a
source edge already emitted (clipped before its end came) are swallowed.

Output CTI: for every input CTI value c (of either input, up to the smaller latest CTI, as a
join's), the smallest of c and the start of each held event that starts before c and whose
candidate end is at or after c (its end is not yet known at c). A value depends only on the
events below it, so the output is the same whatever the arrival order below the CTIs and the
micro-batch boundaries. At ``MAX_TIME`` everything is released (an edge never closed and
never clipped ends at ``MAX_TIME - 1``).

The output CTIs depend on the events held, so shards holding different keys disagree
(``OperatorUnit.data_ctis``): each output CTI is tagged with the level it answers, which every
shard computes alike from the inputs' CTIs, and Spark's hold stage takes the least of the
shards' CTIs per tag (``cti.engine.hold``).

State, indexed by what finds it: clip starts per (group key, join key), sorted, purged below
the earliest held start; held events by id, and an ``OpenEdges`` book of held edge starts.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from cti.events import EventShape
from cti.forms import frame
from cti.forms.edges import close_edge, open_edge
from cti.forms.frame import Chunk
from cti.operators import plan
from cti.operators.join import _join_key
from cti.operators.projection import union
from cti.operators.unit import OperatorUnit, Wanted
from cti.time import MAX_TIME, MIN_TIME

_OPERATOR = "clip_event_duration"


def new_state() -> dict[str, Any]:
    return {"clips": {}, "held": {}, "open": {}, "next_id": 0, "latest": [MIN_TIME, MIN_TIME],
            "pending": [[], []], "level": MIN_TIME, "out": MIN_TIME}


def _add_clips(node: plan.ClipByStream, chunk: Chunk, state: dict[str, Any]) -> None:
    """Each clip event's start (an edge end's is its start's: nothing new) under its key."""
    ev = chunk.events
    ev = ev[ev["kind"].to_numpy() != "edge_end"]
    if not len(ev):
        return
    jkeys = _join_key(ev, node.right_key, node.right, _OPERATOR)
    clips = state["clips"]
    for key, jkey, s in zip(ev["key"].to_numpy(), jkeys, ev["start"].to_numpy(), strict=True):
        if jkey is not None:  # (a null key matches nothing)
            bisect.insort(clips.setdefault((key, jkey), []), int(s))


def _add_sources(node: plan.ClipByStream, chunk: Chunk, state: dict[str, Any]) -> list[tuple]:
    """Hold each interval and edge start; close held edges; pass points on (returned)."""
    ev = chunk.events
    if not len(ev):
        return []
    jkeys = _join_key(ev, node.left_key, node.left, _OPERATOR)
    points, held = [], state["held"]
    for kind, s, e, p, key, jkey in zip(ev["kind"].to_numpy(), ev["start"].to_numpy(),
                                        ev["end"].to_numpy(), ev["payload"].to_numpy(object),
                                        ev["key"].to_numpy(), jkeys, strict=True):
        s, e = int(s), int(e)
        if kind == "point":
            points.append(("point", s, e, p, key))
        elif kind == "edge_end":
            found, at = close_edge(state["open"], (s, p, key))
            if found and at in held:  # (else emitted already, clipped: the end is swallowed)
                held[at][1], held[at][5] = e, False
        else:
            at = state["next_id"]
            state["next_id"] += 1
            held[at] = [s, e, p, key, jkey, kind == "edge_start"]
            if kind == "edge_start":
                open_edge(state["open"], (s, p, key), at)
    return points


def _candidate(state: dict[str, Any], event: list) -> int:
    """A held event's end as known now: its own, or the first matching clip start after its
    start if earlier."""
    s, e, _, key, jkey, _ = event
    clips = state["clips"].get((key, jkey)) if jkey is not None else None
    if clips:
        at = bisect.bisect_right(clips, s)
        if at < len(clips):
            return min(e, clips[at])
    return e


def _levels(state: dict[str, Any], chunks: tuple[Chunk, Chunk]) -> tuple[list[int], int]:
    """The input CTI values (both inputs) now at or below both inputs' latest CTIs, in order,
    and that bound."""
    for side, chunk in enumerate(chunks):
        if chunk.ctis:
            state["latest"][side] = chunk.ctis[-1]
            state["pending"][side] += chunk.ctis
    bound = min(state["latest"])
    if bound <= state["level"]:
        return [], state["level"]
    levels = sorted({c for p in state["pending"] for c in p if c <= bound})
    state["pending"] = [[c for c in p if c > bound] for p in state["pending"]]
    state["level"] = bound
    return levels, bound


def _output_ctis(state: dict[str, Any], levels: list[int]) -> tuple[list[int], list[int]]:
    """Each level pushed back to the start of a held event that starts below it and whose end
    is not known at it (SPEC 8), increasing; and the level each answers, its tag (every shard
    computes the same levels: ``Chunk.tags``)."""
    held = list(state["held"].values())
    starts = np.asarray([h[0] for h in held], np.int64)
    cands = np.asarray([_candidate(state, h) for h in held], np.int64)
    out: list[int] = []
    for c in levels:
        t = c
        if c < MAX_TIME and len(held):
            open_at = (starts < c) & (cands >= c)
            if open_at.any():
                t = min(c, int(starts[open_at].min()))
        out.append(t)
    ctis, tags = frame.rising(out, levels, state["out"])
    if ctis:
        state["out"] = ctis[-1]
    return ctis, tags


def _release(state: dict[str, Any], bound: int) -> list[tuple]:
    """The held events whose end is final at ``bound``, as intervals; they leave the state."""
    out = []
    for at, event in list(state["held"].items()):
        end = _candidate(state, event)
        if end <= bound or bound == MAX_TIME:
            s, _, p, key, _, _ = event
            out.append(("interval", s, min(end, MAX_TIME - 1), p, key))
            del state["held"][at]
    return out


def _purge_clips(state: dict[str, Any], bound: int) -> None:
    """Clip starts at or below every held start and the bound can clip nothing any more (a
    later source event starts at or after the source's CTI, above the bound)."""
    low = min([bound, *(h[0] for h in state["held"].values())])
    for key in list(state["clips"]):
        clips = state["clips"][key]
        cut = bisect.bisect_right(clips, low)
        if cut:
            del clips[:cut]
        if not clips:
            del state["clips"][key]


def clip_by(node: plan.ClipByStream, source: Chunk, clip: Chunk,
            state: dict[str, Any]) -> Chunk:
    """One step (the module's docstring)."""
    _add_clips(node, clip, state)
    events = _add_sources(node, source, state)
    levels, bound = _levels(state, (source, clip))
    ctis, tags = _output_ctis(state, levels)
    if levels:
        events += _release(state, bound)
        _purge_clips(state, bound)
    out = frame.make(*zip(*events, strict=True)) if events else frame.empty()
    return Chunk(out, ctis, tags=tags)


def _shape(node: plan.ClipByStream) -> EventShape | None:
    """Points stay points; intervals and edges become intervals."""
    shape = node.left.shape
    return shape if shape in (EventShape.POINT, None) else EventShape.INTERVAL


def _read(node: plan.ClipByStream, wanted: Wanted, read: Any) -> tuple[Wanted, Wanted]:
    """The source's payloads are the output's, with its key; of the clip events, their key."""
    keys = [frozenset() if k is None else frozenset({k}) for k in (node.left_key,
                                                                   node.right_key)]
    return union(wanted, keys[0]), keys[1]


UNITS = [OperatorUnit(
    plan.ClipByStream, lambda node, inputs, state, machine: clip_by(node, *inputs, state),
    new_state=lambda node: new_state(), data_ctis=lambda node: True, tags=True,
    spreads=lambda node: ((node.left, node.left_key), (node.right, node.right_key)),
    output_fields=lambda node: node.left.fields, output_shape=_shape, input_fields=_read)]
