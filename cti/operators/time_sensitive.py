"""A time-sensitive aggregate's call (StreamInsight's ``CepTimeSensitiveAggregate``): the
window's events with their lifetimes clipped to it, and the window as a ``WindowDescriptor``.
Called by the windows' emits (hopping, tumbling, snapshot, count), so it sits below them and
below ``cti.operators.udo``, which builds on it."""

from __future__ import annotations

from typing import Any

import attrs

from cti.events import IntervalEvent, PointEvent
from cti.forms.rows import payload_from_json
from cti.operators import plan, usercode
from cti.time import MAX_TIME, to_datetime


@attrs.frozen
class WindowDescriptor:
    """A window as a time-sensitive function sees it: ``[start, end)`` in ticks."""

    start: int
    end: int

    @property
    def start_datetime(self) -> Any:
        return to_datetime(self.start)

    @property
    def end_datetime(self) -> Any:
        return to_datetime(self.end)


def window_events(events: list[tuple[int, int, str]], start: int, end: int) -> list[Any]:
    """A window's events (start, end, payload text; in time order) clipped to [start, end);
    one that lasts forever (in a snapshot window that reaches MAX_TIME) ends at MAX_TIME - 1,
    the last finite time, as ``alter_event_duration(MAX_TIME)``'s intervals do."""
    out: list[Any] = []
    for s, e, text in events:
        s, e = max(s, start), min(e, end, MAX_TIME - 1)
        payload = payload_from_json(text)
        out.append(PointEvent(s, payload) if e - s == 1 else IntervalEvent(s, e, payload))
    return out


def value(node: plan.Node, name: str, agg: Any, events: list[tuple[int, int, str]],
          start: int, end: int) -> Any:
    """A time-sensitive aggregate's value over a window (called by the window's emit)."""
    given = window_events(events, start, end)
    try:
        return agg.fn(given, WindowDescriptor(start, end))
    except Exception as exc:
        usercode.note(exc, f"aggregate {name!r}", node.source.label, repr(given[:3]),
                      f"window [{start}, {end}) of {len(given)} events; the first")
        raise
