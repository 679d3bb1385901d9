"""Durations computed from the event: ``alter_event_duration(fn)`` and
``alter_event_lifetime(start_fn, fn)`` (StreamInsight's ``AlterEventDuration(e => ...)``).

``fn`` takes the event as the public classes show it (``PointEvent``, ``IntervalEvent``, an
edge ``EdgeEvent``: times in ticks, the payload a dict) and returns its new duration: a
``timedelta``, a duration string, ``ticks(n)``, or ``MAX_TIME`` (the event lasts forever, until
something such as ``clip_event_duration(clip_stream, on=...)`` ends it). A bare number or a
duration that is not positive is the user's mistake: an error naming the operator, the stream
and the event. Output CTIs are those of the constant form (SPEC 8): the duration never moves a
start.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cti.errors import CtiError, InvalidSettingsError
from cti.events import items_from_rows
from cti.forms.schema import shown
from cti.operators import usercode
from cti.time import MAX_TIME, positive_duration_ticks, to_duration_ticks


def duration_of(value: Any, operator: str) -> Any:
    """A duration setting as ticks: a duration, ``MAX_TIME`` (forever), or a function of the
    event (kept as it is)."""
    if callable(value):
        return value
    if value is MAX_TIME or (type(value) is int and value == MAX_TIME):
        return MAX_TIME
    return positive_duration_ticks(value, f"{operator} duration")


def ends(starts: np.ndarray, duration: int | np.ndarray) -> np.ndarray:
    """``start + duration`` per event, saturating just below ``MAX_TIME`` (an end is finite);
    a duration of ``MAX_TIME`` ends there (forever)."""
    if np.ndim(duration) == 0 and len(starts) and 0 <= int(duration) < MAX_TIME and \
            int(starts.max()) <= MAX_TIME - 1 - int(duration):
        return starts + int(duration)  # (one duration, no end near MAX_TIME: none saturates)
    d = np.broadcast_to(np.asarray(duration, np.int64), starts.shape)
    room = np.where(starts >= 0, (MAX_TIME - 1) - np.maximum(starts, 0), MAX_TIME - 1)
    out = starts + np.minimum(d, room)  # (no overflow: d <= room where starts >= 0)
    return np.where(d == MAX_TIME, MAX_TIME - 1, out).astype(np.int64)


def durations(fn: Any, operator: str, stream: str, events: pd.DataFrame) -> np.ndarray:
    """``fn`` of each event (``kind``, ``start``, ``end``, ``payload`` rows), as ticks."""
    out = np.empty(len(events), np.int64)
    texts = events["payload"].to_numpy(object)
    items = items_from_rows(events["kind"].to_numpy(), events["start"].to_numpy(),
                            events["end"].to_numpy(), texts)  # (the engine's own rows)
    for i, (event, text) in enumerate(zip(items, texts, strict=True)):
        try:
            got = fn(event)
        except Exception as exc:
            usercode.note(exc, operator, stream, text, "event")
            raise
        out[i] = _checked(got, operator, stream, event)
    return out


def _checked(got: Any, operator: str, stream: str, event: Any) -> int:
    """The function's value as ticks, or an error naming the operator, stream and event."""
    where = f"{operator} on stream {stream}: the duration function returned {got!r} for " \
            f"the event {shown(repr(event))}"
    if type(got) is int and got == MAX_TIME:
        return MAX_TIME
    if isinstance(got, int | float) and not isinstance(got, bool):
        raise CtiError(f"{where}; a bare number is not a duration: return a timedelta, a "
                       "string such as '15s', ticks(n), or MAX_TIME (forever)")
    try:
        ticks = to_duration_ticks(got, "duration")
    except InvalidSettingsError:
        raise CtiError(f"{where}; return a timedelta, a string such as '15s', ticks(n), or "
                       "MAX_TIME (forever)") from None
    if ticks <= 0:
        raise CtiError(f"{where}; a duration must be positive")
    return ticks
