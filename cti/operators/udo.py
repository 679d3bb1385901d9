"""User-defined operators over windows (StreamInsight's ``CepOperator`` and
``CepTimeSensitiveOperator``) and time-sensitive aggregates (``CepTimeSensitiveAggregate``).

``windowed.apply_operator(fn)``: ``fn(payloads)`` returns any number of output payloads per
window (and group), each with the window's output lifetime (a point at its end, or the window,
as the output policy says). ``apply_operator(fn, time_sensitive=True)``: ``fn(events, window)``
sees the window's events with their lifetimes clipped to it (``PointEvent`` where the event
lasts one tick, else ``IntervalEvent``, in time order) and the ``WindowDescriptor``, and returns
events (``PointEvent`` / ``IntervalEvent``) that must lie inside the window; the output CTIs
then follow ``CLIP_TO_WINDOW_END``'s rule (pushed back to the start of the earliest window not
yet complete), since an output event may start anywhere in its window.

The hook is generic: a ``WindowOperator`` runs its ``inner`` window node (any window whose
``aggregate`` takes a user-defined aggregate: hopping, tumbling, snapshot and count) with one
user-defined aggregate that calls ``fn`` and returns its outputs as a list; the step then
turns each window's list into output events. So a window operator is sharded like its window
under ``group_by(...).apply(...)``, its state is its window's, and its output CTIs depend on
the events it holds where its window's do (``cti.operators.sharding``: a snapshot window, and
under a time-sensitive operator a count window, whose CTIs go back to the earliest window not
yet complete).
"""

from __future__ import annotations

from typing import Any

import attrs

from cti.errors import CtiError
from cti.events import IntervalEvent, PointEvent
from cti.forms import frame
from cti.forms.frame import Chunk
from cti.forms.rows import payload_from_json, payload_to_json
from cti.forms.schema import shown
from cti.operators import plan, usercode
from cti.operators.time_sensitive import WindowDescriptor
from cti.operators.unit import OperatorUnit

EVENTS = "__operator"  # the inner window's one aggregate: the operator's outputs


@attrs.frozen
class Collect:
    """The inner window's aggregate: the user's ``fn`` called on a window, its outputs checked
    and returned as a list (payloads; or [start, end, payload] in the window)."""

    fn: Any
    sensitive: bool
    label: str

    def __call__(self, *args: Any) -> list[Any]:
        try:
            got = self.fn(*args)
        except Exception as exc:
            usercode.note(exc, "apply_operator", self.label, repr(args[0][:3]),
                          f"window of {len(args[0])} events; the first")
            raise
        got = list(got) if got is not None else []
        if not self.sensitive:
            return [self._payload(p) for p in got]
        window = args[1]
        return [self._event(e, window) for e in got]

    def _payload(self, p: Any) -> dict[str, Any]:
        if not isinstance(p, dict):
            raise CtiError(f"apply_operator on stream {self.label}: the function must return "
                           f"payloads (dicts), got {shown(repr(p))}")
        return p

    def _event(self, e: Any, window: WindowDescriptor) -> list[Any]:
        if not isinstance(e, PointEvent | IntervalEvent):
            raise CtiError(f"apply_operator(time_sensitive=True) on stream {self.label}: the "
                           f"function must return PointEvent or IntervalEvent, got "
                           f"{shown(repr(e))}")
        if e.start < window.start or e.end > window.end:
            raise CtiError(f"apply_operator(time_sensitive=True) on stream {self.label}: the "
                           f"output event {shown(repr(e))} lies outside its window "
                           f"[{window.start_datetime}, {window.end_datetime}); an output "
                           "event must lie inside its window")
        return [e.start, e.end, isinstance(e, PointEvent), self._payload(e.payload)]


def apply_operator(windowed: Any, fn: Any, time_sensitive: bool, label: str) -> Any:
    """The stream of ``windowed.apply_operator(fn, time_sensitive)``: ``windowed`` is any
    windowed stream whose ``aggregate`` takes a user-defined aggregate."""
    from cti.errors import InvalidSettingsError
    from cti.operators.aggregates import udf

    if not callable(fn):
        raise InvalidSettingsError(f"apply_operator must be a function, got {fn!r}")
    if not isinstance(time_sensitive, bool):
        raise InvalidSettingsError(f"apply_operator time_sensitive is True or False, got "
                                   f"{time_sensitive!r}")
    if time_sensitive and hasattr(windowed, "output_policy"):
        windowed = attrs.evolve(windowed, output_policy=plan.WindowOutputPolicy.
                                CLIP_TO_WINDOW_END)  # (its CTIs: outputs start in a window)
    stream = windowed.stream
    inner = windowed.aggregate(**{EVENTS: udf(Collect(fn, time_sensitive, stream._label()),
                                              time_sensitive=time_sensitive)})
    node = plan.WindowOperator(stream._node(), inner.node, fn, time_sensitive)
    return stream._derive(node, stream._label(label))


def step(node: plan.WindowOperator, chunk: Chunk, state: Any, machine: Any) -> Chunk:
    """The inner window's step (its state in ``state``), each window's list of outputs made
    events."""
    out = machine.run_inner(node.inner, [chunk], state)
    ev = out.events
    rows: list[tuple] = []
    for kind, s, e, text, key in zip(ev["kind"].to_numpy(), ev["start"].to_numpy(),
                                     ev["end"].to_numpy(), ev["payload"].to_numpy(object),
                                     ev["key"].to_numpy(), strict=True):
        for got in payload_from_json(text)[EVENTS]:
            if node.time_sensitive:
                start, end, point, p = got
                rows.append(("point" if point else "interval", start, end,
                             payload_to_json(p), key))
            else:
                rows.append((kind, int(s), int(e), payload_to_json(got), key))
    events = frame.make(*zip(*rows, strict=True)) if rows else frame.empty()
    return Chunk(events, out.ctis, tags=out.tags)


def _shape(node: plan.WindowOperator) -> Any:
    return None if node.time_sensitive else node.inner.shape


UNITS = [OperatorUnit(plan.WindowOperator, lambda node, inputs, state, machine: step(
    node, inputs[0], state, machine), new_state=lambda node: {}, output_fields=lambda node: None,
    output_shape=_shape, input_fields=lambda node, wanted, read: (None,), tags=True)]
