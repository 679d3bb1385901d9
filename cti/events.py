"""Event shapes, events and CTIs: the immutable object model.

Times are int ticks (``.start``, ``.end``, ``.time``); ``repr`` shows them as ISO-8601 in UTC.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import attrs

from cti.errors import InvalidEventError
from cti.time import MAX_TIME, MIN_TIME, format_time, to_datetime, to_ticks


class EventShape(enum.Enum):
    """How an event's lifetime is given (StreamInsight's ``EventShape``)."""

    POINT = "point"
    INTERVAL = "interval"
    EDGE = "edge"


class EdgeType(enum.Enum):
    START = "start"
    END = "end"


def _edge_type(value: Any) -> EdgeType:
    try:
        return EdgeType(value)
    except ValueError:
        raise InvalidEventError(f"edge type must be EdgeType.START or END, got {value!r}") from None


def _payload(value: Mapping[str, Any] | None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidEventError(f"payload must be a mapping of field names, got {value!r}")
    return dict(value)


_NAIVE_HINT = ("give it a tzinfo (timezone.utc, ZoneInfo('Europe/Paris')); an event is built "
               "before it is bound, so no application's time zone applies")


def _time_of(where: str) -> Any:
    """The converter of time field ``where``: a naive ``datetime`` is refused (an event does
    not know the application it will be bound in, so it has no zone to read one in)."""
    def convert(value: Any) -> int:
        try:
            return to_ticks(value, None, where, _NAIVE_HINT)
        except TypeError as exc:
            raise InvalidEventError(f"{where}: invalid time {value!r}: {exc}") from None
        except ValueError as exc:
            raise InvalidEventError(str(exc) if where in str(exc)
                                    else f"{where}: invalid time {value!r}: {exc}") from None
    return convert


def _times_repr(item: Any, **times: int) -> str:
    """``Name(field=ISO time, ..., payload=...)``: times as people read them (UTC)."""
    parts = [f"{k}={format_time(t)}" for k, t in times.items()]
    if hasattr(item, "payload"):
        parts.append(f"payload={item.payload!r}")
    return f"{type(item).__name__}({', '.join(parts)})"


def _check_finite(name: str, t: int) -> None:
    if t in (MIN_TIME, MAX_TIME):
        raise InvalidEventError(f"{name} {format_time(t)} is a sentinel, not an event time")


class _Datetimes:
    """``start_datetime`` / ``end_datetime``: the lifetime as aware UTC datetimes."""

    @property
    def start_datetime(self) -> datetime:
        return to_datetime(self.start)

    @property
    def end_datetime(self) -> datetime:
        return to_datetime(self.end)


@attrs.frozen
class PointEvent(_Datetimes):
    """An event at one instant: lifetime [start, start + 1 tick)."""

    start: int = attrs.field(converter=_time_of("PointEvent start"))
    payload: dict[str, Any] = attrs.field(factory=dict, converter=_payload, hash=False)

    def __attrs_post_init__(self) -> None:
        _check_finite("point start", self.start)

    def __repr__(self) -> str:
        return _times_repr(self, start=self.start)

    @property
    def end(self) -> int:
        return self.start + 1

    @property
    def sync_time(self) -> int:
        return self.start


@attrs.frozen
class IntervalEvent(_Datetimes):
    """An event with lifetime [start, end), start < end."""

    start: int = attrs.field(converter=_time_of("IntervalEvent start"))
    end: int = attrs.field(converter=_time_of("IntervalEvent end"))
    payload: dict[str, Any] = attrs.field(factory=dict, converter=_payload, hash=False)

    def __repr__(self) -> str:
        return _times_repr(self, start=self.start, end=self.end)

    def __attrs_post_init__(self) -> None:
        _check_finite("interval start", self.start)
        _check_finite("interval end", self.end)
        if self.end <= self.start:
            raise InvalidEventError(
                f"interval end {format_time(self.end)} must be after its start "
                f"{format_time(self.start)} (rule: end > start)"
            )

    @property
    def sync_time(self) -> int:
        return self.start


@attrs.frozen
class EdgeEvent(_Datetimes):
    """An edge: a START opens [start, +inf); the END with the same start and payload closes it.

    For an END edge, ``end`` is the closing time (> start). For a START edge ``end`` is MAX_TIME.
    """

    edge_type: EdgeType = attrs.field(converter=_edge_type)
    start: int = attrs.field(converter=_time_of("EdgeEvent start"))
    end: int = attrs.field(default=MAX_TIME, converter=_time_of("EdgeEvent end"))
    payload: dict[str, Any] = attrs.field(factory=dict, converter=_payload, hash=False)

    def __repr__(self) -> str:
        return (f"EdgeEvent(edge_type={self.edge_type}, start={format_time(self.start)}, "
                f"end={format_time(self.end)}, payload={self.payload!r})")

    def __attrs_post_init__(self) -> None:
        _check_finite("edge start", self.start)
        if self.edge_type is EdgeType.START and self.end != MAX_TIME:
            raise InvalidEventError("an edge START has no end (it is open until its END arrives)")
        if self.edge_type is EdgeType.END:
            _check_finite("edge end", self.end)
            if self.end <= self.start:
                raise InvalidEventError(
                    f"edge end {format_time(self.end)} must be after its start "
                    f"{format_time(self.start)} (rule: end > start)"
                )

    @classmethod
    def start_edge(cls, start: Any, payload: Mapping[str, Any] | None = None) -> EdgeEvent:
        return cls(EdgeType.START, start, MAX_TIME, payload)

    @classmethod
    def end_edge(cls, start: Any, end: Any, payload: Mapping[str, Any] | None = None) -> EdgeEvent:
        return cls(EdgeType.END, start, end, payload)

    @property
    def sync_time(self) -> int:
        return self.start if self.edge_type is EdgeType.START else self.end


@attrs.frozen
class Cti:
    """Current Time Increment: no later event of the stream has a sync time below ``time``."""

    time: int = attrs.field(converter=_time_of("Cti time"))

    def __repr__(self) -> str:
        return _times_repr(self, time=self.time)

    @property
    def sync_time(self) -> int:
        return self.time

    @property
    def datetime(self) -> datetime:
        """The CTI's time as an aware UTC datetime (``datetime.max`` for MAX_TIME)."""
        return to_datetime(self.time)


Event = PointEvent | IntervalEvent | EdgeEvent
StreamItem = PointEvent | IntervalEvent | EdgeEvent | Cti


def kind_of(item: StreamItem) -> str:
    """The row kind of an item: point, interval, edge_start, edge_end or cti."""
    if isinstance(item, PointEvent):
        return "point"
    if isinstance(item, IntervalEvent):
        return "interval"
    if isinstance(item, EdgeEvent):
        return "edge_start" if item.edge_type is EdgeType.START else "edge_end"
    if isinstance(item, Cti):
        return "cti"
    raise InvalidEventError(f"not an event or CTI: {item!r}")


SHAPE_KINDS: dict[EventShape, frozenset[str]] = {
    EventShape.POINT: frozenset({"point"}),
    EventShape.INTERVAL: frozenset({"interval"}),
    EventShape.EDGE: frozenset({"edge_start", "edge_end"}),
}
EVENT_KINDS: frozenset[str] = frozenset().union(*SHAPE_KINDS.values())


def one_kind(shape: EventShape | None) -> str | None:
    """The kind of every event of a stream of ``shape`` where there is one (points',
    intervals'); None for edges (two kinds) and mixed streams (``shape`` None)."""
    kinds = SHAPE_KINDS.get(shape, frozenset()) if shape is not None else frozenset()
    return next(iter(kinds)) if len(kinds) == 1 else None


def wrong_shape(kind: str, shape: EventShape) -> str:
    """The rule an event of ``kind`` breaks on a stream of ``shape`` (bad input)."""
    def a(noun: str) -> str:
        return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"

    return f"{a(kind)} event on {a(shape.value)} stream (rule: events match the stream's shape)"

# What ingress made of an event (an input row's status: these, or ``invalid`` for bad input),
# and why an event-ordering policy moved or dropped one.
EVENT_STATUSES = ("accepted", "adjusted", "dropped")
INPUT_STATUSES = (*EVENT_STATUSES, "invalid")
ORDERING_REASONS = ("late", "early", "out_of_order")


def items_from_rows(kinds: Iterable[str], starts: Iterable[int], ends: Iterable[int | None],
                    payloads: Iterable[str | None]) -> list[StreamItem]:
    """Items from rows that the engine made (each a valid event or CTI, its payload canonical
    JSON text or None for ``{}``): ``item_from_kind`` of each, built without checking them
    again, their payloads parsed in one ``json.loads``: a run's results are millions of them."""
    kinds, payloads = list(kinds), list(payloads)
    parsed = iter(json.loads("[" + ",".join(
        p if isinstance(p, str) and p else "{}"
        for k, p in zip(kinds, payloads, strict=True) if k != "cti") + "]"))
    out: list[StreamItem] = []
    make, put = object.__new__, object.__setattr__
    for kind, start, end in zip(kinds, starts, ends, strict=True):
        if kind == "cti":
            item = make(Cti)
            put(item, "time", int(start))
        elif kind == "point":
            item = make(PointEvent)
            put(item, "start", int(start))
            put(item, "payload", next(parsed))
        elif kind in _EDGE_TYPES:
            item = make(EdgeEvent)
            put(item, "edge_type", _EDGE_TYPES[kind])
            put(item, "start", int(start))
            put(item, "end", MAX_TIME if kind == "edge_start" else int(end))
            put(item, "payload", next(parsed))
        elif kind == "interval":
            item = make(IntervalEvent)
            put(item, "start", int(start))
            put(item, "end", int(end))
            put(item, "payload", next(parsed))
        else:
            raise InvalidEventError(f"unknown event kind {kind!r}")
        out.append(item)
    return out


_EDGE_TYPES = {"edge_start": EdgeType.START, "edge_end": EdgeType.END}


def item_from_kind(kind: str, start: int, end: int | None, payload: dict[str, Any]) -> StreamItem:
    """Build an item back from its row form (the inverse of :func:`kind_of`)."""
    if kind == "point":
        return PointEvent(start, payload)
    if kind == "interval":
        return IntervalEvent(start, end, payload)
    if kind == "edge_start":
        return EdgeEvent(EdgeType.START, start, MAX_TIME, payload)
    if kind == "edge_end":
        return EdgeEvent(EdgeType.END, start, end, payload)
    if kind == "cti":
        return Cti(start)
    raise InvalidEventError(f"unknown event kind {kind!r}")
