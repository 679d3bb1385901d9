"""A brute-force reference model of the temporal operators (SPEC 2, 8; docs/operators.md).

Written from the SPEC and the operator docs alone, not from ``cti/operators``: deliberately
naive (every pair, every window, every tick boundary), so that it is easy to believe.

The model works on *final lifetimes*: a stream's items (events and CTIs, as a runtime outputs
them) become a list of :class:`Life` -- ``[start, end)``, the payload, and whether the event is a
point. Edge pairs are matched first-in, first-out by (start, canonical payload); an edge start
that is never closed lives until ``MAX_TIME``. Operators are functions of lists of lifetimes;
output CTIs are functions of the inputs' CTIs. Engine output is turned into lifetimes the same
way and compared as a multiset (:func:`multiset`).

Besides the operators there is :func:`canonical_order`: where an output item must sit in the
output sequence (docs/operators.md, "Release and order"), given the output events and CTIs.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cti import MAX_TIME, MIN_TIME, Cti, EdgeEvent, EdgeType, IntervalEvent, PointEvent

Payload = dict[str, Any]


# ---- payloads and lifetimes -------------------------------------------------------------------

def _round_floats(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dict):
        return {k: _round_floats(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_round_floats(v) for v in value]
    return value


def canon(payload: Payload) -> str:
    """Canonical JSON of a payload (sorted keys, no spaces), floats rounded to 9 digits so that
    an average computed in another order compares equal."""
    return json.dumps(_round_floats(dict(payload)), sort_keys=True, separators=(",", ":"))


def json_of(payload: Payload) -> str:
    """Canonical JSON exactly as the docs order ties by: sorted keys, no spaces."""
    return json.dumps(dict(payload), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Life:
    """A final lifetime ``[start, end)`` with its payload. ``point``: the event is a point
    (None where the model does not say which shape the output has)."""

    start: int
    end: int
    payload: Payload
    point: bool | None = False

    def key(self, with_shape: bool = True) -> tuple:
        shape = self.point if with_shape else None
        return (self.start, self.end, canon(self.payload), shape)

    def __repr__(self) -> str:  # short, for assertion messages
        end = "inf" if self.end == MAX_TIME else self.end
        tag = "pt " if self.point else ""
        return f"{tag}[{self.start}, {end}) {canon(self.payload)}"


def is_cti(item: Any) -> bool:
    return isinstance(item, Cti)


def is_edge_end(item: Any) -> bool:
    return isinstance(item, EdgeEvent) and item.edge_type is EdgeType.END


def sync_time(item: Any) -> int:
    """SPEC 2: start for points, intervals and edge starts; end for edge ends; time for CTIs."""
    if is_cti(item):
        return item.time
    return item.end if is_edge_end(item) else item.start


def ctis_of(items: Iterable[Any]) -> list[int]:
    return [i.time for i in items if is_cti(i)]


def lifetimes(items: Iterable[Any]) -> list[Life]:
    """The final lifetimes of a stream's output items (CTIs are ignored).

    Points are ``[t, t+1)``, intervals ``[s, e)``; an edge end closes the earliest still-open
    edge start with the same start and payload; a start never closed lives to ``MAX_TIME``.
    An edge end that closes nothing is a broken stream: ``AssertionError``.
    """
    out: list[Life | EdgeEvent] = []  # an EdgeEvent: an edge start not closed (yet)
    open_edges: dict[tuple[int, str], list[int]] = defaultdict(list)  # -> indexes into out
    for item in items:
        if is_cti(item):
            continue
        if isinstance(item, PointEvent):
            out.append(Life(item.start, item.start + 1, item.payload, True))
        elif isinstance(item, IntervalEvent):
            out.append(Life(item.start, item.end, item.payload, False))
        elif isinstance(item, EdgeEvent) and item.edge_type is EdgeType.START:
            open_edges[(item.start, canon(item.payload))].append(len(out))
            out.append(item)
        elif isinstance(item, EdgeEvent):
            waiting = open_edges[(item.start, canon(item.payload))]
            assert waiting, f"edge end {item!r} closes no open edge start"
            out[waiting.pop(0)] = Life(item.start, item.end, item.payload, False)
        else:
            raise AssertionError(f"not a stream item: {item!r}")
    return [x if isinstance(x, Life) else Life(x.start, MAX_TIME, x.payload, False)
            for x in out]


def end_open_edges_at_last_cti(lives: Sequence[Life], ctis: Sequence[int]) -> list[Life]:
    """The engine's choice for windows over edges never closed (cti/operators/window.py; the
    SPEC would give infinitely many windows): such an edge ends at the input's last finite CTI,
    or one tick after its start if that is later."""
    finite = [c for c in ctis if c < MAX_TIME]
    out = []
    for x in lives:
        if x.end == MAX_TIME:
            end = max(finite[-1], x.start + 1) if finite else x.start + 1
            x = Life(x.start, end, x.payload, x.point)
        out.append(x)
    return out


def multiset(lives: Iterable[Life], with_shape: bool = True) -> Counter:
    return Counter(x.key(with_shape) for x in lives)


def diff(expected: Iterable[Life], got: Iterable[Life], with_shape: bool = True) -> str:
    """A readable difference of two multisets of lifetimes ('' when equal)."""
    want, have = multiset(expected, with_shape), multiset(got, with_shape)
    missing, extra = want - have, have - want
    if not missing and not extra:
        return ""
    return (f"missing (expected, not produced): {sorted(missing.elements(), key=str)}\n"
            f"extra (produced, not expected): {sorted(extra.elements(), key=str)}")


# ---- time arithmetic --------------------------------------------------------------------------

def sat_add(t: int, d: int) -> int:
    """``t + d`` saturating at the sentinels (infinity plus anything is still infinity)."""
    if t in (MAX_TIME, MIN_TIME):
        return t
    return max(MIN_TIME, min(MAX_TIME, t + d))


# ---- single-input operators -------------------------------------------------------------------

def where(lives: Sequence[Life], pred: Callable[[Payload], bool]) -> list[Life]:
    return [x for x in lives if pred(x.payload)]


def select(lives: Sequence[Life], fn: Callable[[Payload], Payload]) -> list[Life]:
    return [Life(x.start, x.end, fn(x.payload), x.point) for x in lives]


def union(*inputs: Sequence[Life]) -> list[Life]:
    return [x for lives in inputs for x in lives]


def shift_event_time(lives: Sequence[Life], d: int) -> list[Life]:
    return [Life(sat_add(x.start, d), sat_add(x.end, d), x.payload, x.point) for x in lives]


def alter_event_duration(lives: Sequence[Life], d: int) -> list[Life]:
    """Every event becomes ``[start, start + d)`` (its shape is not decided here)."""
    return [Life(x.start, sat_add(x.start, d), x.payload, None) for x in lives]


def clip_event_duration(lives: Sequence[Life], d: int) -> list[Life]:
    """End becomes ``min(end, start + d)``; a point stays a point."""
    return [Life(x.start, min(x.end, sat_add(x.start, d)), x.payload, x.point) for x in lives]


def to_point_event_stream(lives: Sequence[Life]) -> list[Life]:
    return [Life(x.start, x.start + 1, x.payload, True) for x in lives]


# ---- joins ------------------------------------------------------------------------------------

On = str | tuple[str, str] | None


def keys_match(on: On, left: Payload, right: Payload) -> bool:
    if on is None:
        return True
    lf, rf = (on, on) if isinstance(on, str) else on
    return left[lf] == right[rf]


def default_select(left: Payload, right: Payload) -> Payload:
    return {**left, **right}


def join(left: Sequence[Life], right: Sequence[Life], on: On = None,
         predicate: Callable[[Payload, Payload], bool] | None = None,
         select_fn: Callable[[Payload, Payload], Payload] | None = None) -> list[Life]:
    """Every pair with matching keys (and predicate) whose lifetimes overlap: the intersection,
    payload ``select_fn(l, r)``; a point joined with anything is a point."""
    select_fn = select_fn or default_select
    out = []
    for lv in left:
        for rv in right:
            if not keys_match(on, lv.payload, rv.payload):
                continue
            if predicate is not None and not predicate(lv.payload, rv.payload):
                continue
            s, e = max(lv.start, rv.start), min(lv.end, rv.end)
            if s < e:
                out.append(Life(s, e, select_fn(lv.payload, rv.payload),
                                bool(lv.point or rv.point)))
    return out


def subtract(start: int, end: int, cover: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The maximal parts of ``[start, end)`` not covered by any interval of ``cover``."""
    parts = []
    t = start
    for s, e in sorted(cover):
        if e <= t:
            continue
        if s >= end:
            break
        if s > t:
            parts.append((t, s))
        t = max(t, e)
        if t >= end:
            break
    if t < end:
        parts.append((t, end))
    return parts


def left_anti_semi_join(left: Sequence[Life], right: Sequence[Life], on: On = None,
                        predicate: Callable[[Payload, Payload], bool] | None = None
                        ) -> list[Life]:
    """Each left event during the (maximal) times no matching right event is alive; a point
    survives whole or not at all."""
    out = []
    for lv in left:
        cover = [(rv.start, rv.end) for rv in right
                 if keys_match(on, lv.payload, rv.payload)
                 and (predicate is None or predicate(lv.payload, rv.payload))]
        for s, e in subtract(lv.start, lv.end, cover):
            out.append(Life(s, e, lv.payload, lv.point))
    return out


# ---- windows ----------------------------------------------------------------------------------

# An aggregate is (kind, field): kind in count/sum/min/max/avg; field a payload field name or a
# function of the payload (None for count); or ("udf", fn): fn(list of the window's payloads).
Aggregate = tuple[str, Any]


def _value(field: Any, payload: Payload) -> Any:
    return field(payload) if callable(field) else payload[field]


def aggregate_value(kind: str, field: Any, payloads: Sequence[Payload]) -> Any:
    if kind == "count":
        return len(payloads)
    if kind == "udf":  # a function of the window's payloads (order-insensitive here)
        return field(list(payloads))
    values = [_value(field, p) for p in payloads]
    if kind == "sum":
        return sum(values)
    if kind == "min":
        return min(values)
    if kind == "max":
        return max(values)
    if kind == "avg":
        return sum(values) / len(values)
    raise ValueError(kind)


def windows_overlapping(start: int, end: int, size: int, hop: int,
                        alignment: int) -> list[tuple[int, int]]:
    """Every window ``[a + k*hop, a + k*hop + size)`` that overlaps ``[start, end)``."""
    assert end < MAX_TIME, "an infinite lifetime overlaps infinitely many windows"
    k = math.floor((start - size - alignment) / hop) - 1
    out = []
    while alignment + k * hop < end:
        ws = alignment + k * hop
        if ws + size > start:
            out.append((ws, ws + size))
        k += 1
    return out


def hopping_window(lives: Sequence[Life], size: int, hop: int, alignment: int,
                   aggregates: dict[str, Aggregate], point_at_end: bool = True,
                   group_by: str | None = None) -> list[Life]:
    """One output per non-empty (window, group): the group field's value (under ``group_by``)
    and one field per aggregate; a point at the window end or an interval = the window.
    Membership: the event's lifetime overlaps the window (clipping does not change these
    aggregates, which only read payloads)."""
    members: dict[tuple[int, int, str], list[Payload]] = defaultdict(list)
    group_values: dict[str, Any] = {}
    for x in lives:
        g = json.dumps(x.payload[group_by]) if group_by else ""
        if group_by:
            group_values[g] = x.payload[group_by]
        for w in windows_overlapping(x.start, x.end, size, hop, alignment):
            members[(w[0], w[1], g)].append(x.payload)
    out = []
    for (ws, we, g), payloads in members.items():
        payload = {group_by: group_values[g]} if group_by else {}
        for name, (kind, field) in aggregates.items():
            payload[name] = aggregate_value(kind, field, payloads)
        out.append(Life(we, we + 1, payload, True) if point_at_end
                   else Life(ws, we, payload, False))
    return out


# ---- output CTIs (SPEC 8) ---------------------------------------------------------------------

def strictly_increasing(ctis: Iterable[int]) -> list[int]:
    """Drop every CTI that would not move time forward."""
    out: list[int] = []
    for c in ctis:
        if not out or c > out[-1]:
            out.append(c)
    return out


def ctis_unchanged(ctis: Sequence[int]) -> list[int]:
    return strictly_increasing(ctis)


def ctis_shifted(ctis: Sequence[int], d: int) -> list[int]:
    return strictly_increasing(sat_add(c, d) for c in ctis)


def ctis_merged(*inputs: Sequence[int]) -> list[int]:
    """Several inputs (union, join, anti-semi-join): every input CTI value at most the minimum
    of the inputs' latest CTIs, increasing (docs/operators.md); none while an input has none."""
    if any(not c for c in inputs):
        return []
    bound = min(c[-1] for c in inputs)
    return sorted({c for cs in inputs for c in cs if c <= bound})


def ctis_window_clipped(ctis: Sequence[int], size: int, hop: int, alignment: int) -> list[int]:
    """CLIP_TO_WINDOW_END: each CTI pushed back to the start of the earliest window not yet
    complete (the first window whose end is after the CTI)."""
    out = []
    for c in ctis:
        if c == MAX_TIME:
            out.append(c)
            continue
        k = math.floor((c - size - alignment) / hop) + 1
        ws = alignment + k * hop
        assert ws + size > c and ws - hop + size <= c
        out.append(ws)
    return strictly_increasing(out)


# ---- release order (docs/operators.md "Release and order") ------------------------------------

KIND_RANK = {"point": 0, "interval": 1, "edge_end": 2, "edge_start": 3}


def kind_name(item: Any) -> str:
    if isinstance(item, PointEvent):
        return "point"
    if isinstance(item, IntervalEvent):
        return "interval"
    return "edge_end" if is_edge_end(item) else "edge_start"


def order_key(item: Any) -> tuple:
    end = item.start + 1 if isinstance(item, PointEvent) else item.end
    return (sync_time(item), KIND_RANK[kind_name(item)], item.start, end, json_of(item.payload))


def canonical_order(items: Sequence[Any]) -> list[Any]:
    """The output sequence the docs prescribe for these output events and CTIs: each event just
    before the first CTI greater than its sync time; within a block ordered by (sync time, kind
    point < interval < edge end < edge start, start, end, canonical JSON). Events no CTI passes
    (only possible without a final CTI at MAX_TIME) go last, in the same order."""
    ctis = ctis_of(items)
    blocks: list[list[Any]] = [[] for _ in range(len(ctis) + 1)]
    for item in items:
        if is_cti(item):
            continue
        s = sync_time(item)
        i = next((k for k, c in enumerate(ctis) if c > s), len(ctis))
        blocks[i].append(item)
    out: list[Any] = []
    for k, block in enumerate(blocks):
        out += sorted(block, key=order_key)
        if k < len(ctis):
            out.append(Cti(ctis[k]))
    return out
