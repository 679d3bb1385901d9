"""Window aggregates: the built-ins (count, sum, min, max, avg) and user-defined ones.

Built-ins are computed vectorised from partial aggregates per (group, window); user-defined
ones see the payloads of the window's events (``udf``) or fold them one by one
(``incremental``). A field is a payload field name or a function of the payload.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from cti.errors import InvalidSettingsError

Field = str | Callable[[dict[str, Any]], Any]


def _field(value: Any) -> Field | None:
    if value is None or isinstance(value, str) and value or callable(value):
        return value
    raise InvalidSettingsError(f"an aggregate field is a payload field name or a function, "
                               f"got {value!r}")


@attrs.frozen
class Aggregate:
    """One built-in aggregate: ``op`` in count, sum, min, max, avg over ``field``."""

    op: str
    field: Field | None = attrs.field(default=None, converter=_field)

    def __attrs_post_init__(self) -> None:
        if self.op not in ("count", "sum", "min", "max", "avg"):
            raise InvalidSettingsError(f"unknown aggregate {self.op!r}")
        if self.op != "count" and self.field is None:
            raise InvalidSettingsError(f"{self.op} needs a field (a name or a function)")


@attrs.frozen
class UserDefinedAggregate:
    """``fn(payloads) -> value`` over the payloads of a window's events (in time order);
    ``frame``: over a pandas frame of them (``cti.forms.frame.payload_frame``);
    ``time_sensitive``: ``fn(events, window)`` over the events with their lifetimes clipped to
    the window, and the window (StreamInsight's ``CepTimeSensitiveAggregate``:
    ``cti.operators.udo``)."""

    fn: Callable[..., Any]
    frame: bool = False
    time_sensitive: bool = attrs.field(default=False, kw_only=True)

    def compute(self, payloads: Sequence[dict[str, Any]]) -> Any:
        return self.fn(payloads)


@attrs.frozen
class IncrementalAggregate:
    """An aggregate with state: ``init() -> s``, ``add(s, payload) -> s``, ``result(s)``."""

    init: Callable[[], Any]
    add: Callable[[Any, dict[str, Any]], Any]
    result: Callable[[Any], Any] = lambda s: s

    def compute(self, payloads: Sequence[dict[str, Any]]) -> Any:
        state = self.init()
        for p in payloads:
            state = self.add(state, p)
        return self.result(state)


AnyAggregate = Aggregate | UserDefinedAggregate | IncrementalAggregate


def count() -> Aggregate:
    """The number of events in the window."""
    return Aggregate("count")


def sum(field: Field) -> Aggregate:
    """The sum of a payload field (or function) over the window's events."""
    return Aggregate("sum", field)


def min(field: Field) -> Aggregate:
    return Aggregate("min", field)


def max(field: Field) -> Aggregate:
    return Aggregate("max", field)


def avg(field: Field) -> Aggregate:
    return Aggregate("avg", field)


def udf(fn: Callable[..., Any], *, frame: bool = False,
        time_sensitive: bool = False) -> UserDefinedAggregate:
    """A user-defined aggregate: a function over the payloads of the window's events (a list
    of dicts; ``frame=True``: a pandas frame, a row per event, a column per field). With
    ``time_sensitive=True``, ``fn(events, window)``: the window's events (``PointEvent`` /
    ``IntervalEvent``, lifetimes clipped to the window, in time order) and the window
    (``window.start``, ``window.end``, ticks)."""
    if not callable(fn):
        raise InvalidSettingsError(f"udf needs a function, got {fn!r}")
    for name, flag in (("frame", frame), ("time_sensitive", time_sensitive)):
        if not isinstance(flag, bool):
            raise InvalidSettingsError(f"udf {name} is True or False, got {flag!r}")
    if frame and time_sensitive:
        raise InvalidSettingsError("udf: a time-sensitive aggregate takes events, not a frame "
                                   "(frame=True and time_sensitive=True together)")
    return UserDefinedAggregate(fn, frame, time_sensitive=time_sensitive)


def incremental(init: Callable[[], Any], add: Callable[[Any, dict[str, Any]], Any],
                result: Callable[[Any], Any] | None = None) -> IncrementalAggregate:
    """A user-defined aggregate as state: ``init()``, ``add(state, payload)``, ``result``."""
    for name, f in (("init", init), ("add", add), ("result", result)):
        if f is not None and not callable(f):
            raise InvalidSettingsError(f"incremental: {name} must be a function, got {f!r}")
    return IncrementalAggregate(init, add, result or (lambda s: s))


def check_aggregates(aggs: dict[str, Any]) -> dict[str, AnyAggregate]:
    if not aggs:
        raise InvalidSettingsError("aggregate() needs at least one named aggregate")
    for name, a in aggs.items():
        if not isinstance(a, AnyAggregate):
            raise InvalidSettingsError(
                f"aggregate {name!r}: use cti.agg.count(), sum(f), min(f), max(f), avg(f), "
                f"udf(fn) or incremental(init, add, result), got {a!r}")
    return dict(aggs)
