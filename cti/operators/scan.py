"""``stream.scan(operator)``: a user-defined stream operator with state of its own
(StreamInsight 2.1's ``CepPointStreamOperator``).

The user subclasses ``StreamOperator``: ``initial_state()`` gives a new key's state, and
``process(event)`` is called once per event in sync-time order with ``self.state`` set to the
state of the event's group key (one state for a stream outside ``group_by``), which it may read
and replace; it returns any number of payloads, each emitted as a point at the event's start.

So that the order is the sync-time order whatever the arrival order, an event is processed
once a CTI has passed its sync time (the events at one time in a fixed order: kind, end,
payload). Output CTIs are the input's (SPEC 8: an output point lies at its event's start,
which the CTI that lets the event through has passed). The states are plain data in the
operator's state (pickled into Spark's state store and checkpointed with it), one per key;
under ``group_by(...).apply(...)`` a key's state lives in the shard that owns the key.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from cti.errors import CtiError
from cti.events import EventShape, items_from_rows
from cti.forms import frame
from cti.forms.frame import KIND_RANK, Chunk
from cti.forms.rows import payload_to_json
from cti.forms.schema import shown
from cti.operators import plan, usercode
from cti.operators.unit import OperatorUnit
from cti.time import MIN_TIME


class StreamOperator:
    """Subclass it: ``initial_state()`` (a picklable value: a number, a dict, a list ...)
    and ``process(event) -> payloads`` (an iterable of dicts), reading and replacing
    ``self.state``, the state of the event's key."""

    state: Any = None

    def initial_state(self) -> Any:
        """The state of a key before its first event (default: None)."""
        return None

    def process(self, event: Any) -> Iterable[dict[str, Any]]:
        """The payloads ``event`` gives (each a point at its start); ``self.state`` is its
        key's state."""
        raise NotImplementedError(f"{type(self).__name__} must define process(self, event)")

    def __call__(self, event: Any) -> Iterable[dict[str, Any]]:
        return self.process(event)


def new_state() -> dict[str, Any]:
    return {"held": frame.empty(), "states": {}, "cti": MIN_TIME}


def _ready(state: dict[str, Any], chunk: Chunk) -> pd.DataFrame:
    """The held and new events a CTI has passed, in sync-time order (the rest stay held)."""
    held = frame.concat([state["held"], chunk.events])
    if chunk.ctis:
        state["cti"] = chunk.ctis[-1]
    sync = frame.sync(held)
    due = sync < state["cti"]
    state["held"] = held[~due].reset_index(drop=True)
    ready = held[due]
    order = np.lexsort((ready["payload"].to_numpy(str), ready["key"].to_numpy(str),
                        ready["end"].to_numpy(),
                        ready["kind"].map(KIND_RANK).to_numpy(), sync[due]))
    return ready.iloc[order]


def _outputs(node: plan.Scan, got: Any, event: Any) -> list[str]:
    """The payloads ``process`` returned, as JSON texts; anything else names the operator."""
    payloads = [] if got is None else list(got) if not isinstance(got, dict) else [got]
    for p in payloads:
        if not isinstance(p, dict):
            raise CtiError(f"scan({type(node.operator).__name__}) on stream "
                           f"{node.source.label}: process must return payloads (dicts), got "
                           f"{shown(repr(p))} for the event {shown(repr(event))}")
    return [payload_to_json(p) for p in payloads]


def scan(node: plan.Scan, chunk: Chunk, state: dict[str, Any]) -> Chunk:
    """One step (the module's docstring)."""
    op, states, rows = node.operator, state["states"], []
    ready = _ready(state, chunk)
    kinds = ready["kind"].to_numpy()
    if ((kinds == "edge_start") | (kinds == "edge_end")).any():
        raise CtiError(f"scan({type(op).__name__}) on stream {node.source.label}: an edge "
                       "event; scan takes points and intervals (to_point_event_stream() or "
                       "alter_event_duration(...) first)")
    texts_in = ready["payload"].to_numpy(object)
    events = items_from_rows(kinds, ready["start"].to_numpy(), ready["end"].to_numpy(),
                             texts_in)  # (built at once, unchecked: the engine's own rows)
    for event, text, key in zip(events, texts_in, ready["key"].to_numpy(), strict=True):
        s = event.start
        op.state = states[key] if key in states else op.initial_state()
        try:
            got = op.process(event)
            texts = _outputs(node, got, event)
        except Exception as exc:
            usercode.note(exc, f"scan({type(op).__name__})", node.source.label, text, "event")
            raise
        states[key] = op.state
        rows += [("point", int(s), int(s) + 1, t, key) for t in texts]
    op.state = None
    out = frame.make(*zip(*rows, strict=True)) if rows else frame.empty()
    return Chunk(out, list(chunk.ctis), tags=chunk.tags)


UNITS = [OperatorUnit(plan.Scan, lambda node, inputs, state, machine: scan(
    node, inputs[0], state), new_state=lambda node: new_state(),
    output_fields=lambda node: None, output_shape=lambda node: EventShape.POINT,
    input_fields=lambda node, wanted, read: (None,), tags=True)]
