"""The row forms that both runtimes feed to and read from the ingress machine.

A row is a plain tuple so that it travels the same way through a Python list (in-process)
and a pandas/Arrow batch (Spark). Payloads travel as canonical JSON (sorted keys), which is also
the identity an edge end uses to find its start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any, NamedTuple

from cti.adapters import AdapterItem, Arriving, InvalidInput
from cti.errors import InvalidEventError
from cti.events import StreamItem, kind_of
from cti.time import MAX_TIME

# Row kinds beyond the event kinds: end of input, a row the adapter could not parse, and a
# wall-clock tick of a silent stream.
EOS = "eos"
INVALID = "invalid"
CLOCK = "clock"


class InRow(NamedTuple):
    """One input item of one stream, in that stream's arrival order (``seq``)."""

    stream: int
    seq: int
    arrival: int | None
    kind: str
    start: int | None
    end: int | None
    payload: str | None
    error: str | None = None
    partition: str | None = None


class OutRow(NamedTuple):
    """One item of a stream after ingress, or a diagnostic row (dropped, invalid, regression).

    ``status`` is ``accepted``, ``adjusted`` or ``dropped`` for events, ``cti`` for CTIs,
    ``cti_regression`` for an ignored adapter CTI and ``invalid`` for dead-lettered input.
    """

    stream: int
    seq: int
    in_seq: int
    kind: str
    start: int | None
    end: int | None
    payload: str | None
    status: str
    orig_start: int | None
    orig_end: int | None
    cti: int | None
    reason: str | None
    partition: str | None = None


OUTPUT_STATUSES = ("accepted", "adjusted", "cti")


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"payload value {value!r} of type {type(value).__name__} is not JSON-able")


def payload_to_json(payload: Mapping[str, Any] | None) -> str:
    """Canonical JSON of a payload: sorted keys, no spaces."""
    return _CANONICAL.encode(payload if type(payload) is dict else dict(payload or {}))


# One encoder for every payload (``json.dumps`` with options builds one per call).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=_json_default)

# Printable ASCII but " and \: a string of these is, quoted, its own JSON text.
PLAIN_JSON_CHARS = r"[\x20\x21\x23-\x5b\x5d-\x7e]"


def payload_from_json(text: str | None) -> dict[str, Any]:
    return {} if not text else json.loads(text)


def item_to_row(stream: int, seq: int, item: StreamItem, arrival: int | None = None,
                partition: str | None = None) -> InRow:
    """An event or CTI as an input row."""
    kind = kind_of(item)
    if kind == "cti":
        return InRow(stream, seq, arrival, kind, item.time, None, None, None, partition)
    end = None if kind in ("point", "edge_start") else item.end
    return InRow(stream, seq, arrival, kind, item.start, end, payload_to_json(item.payload),
                 None, partition)


def eos_row(stream: int, seq: int) -> InRow:
    return InRow(stream, seq, MAX_TIME, EOS, None, None, None)


def clock_row(stream: int, seq: int, arrival: int) -> InRow:
    """A recorded wall-clock tick: by arrival time ``arrival`` the stream had delivered no row
    after row ``seq - 1``. It takes no sequence number of its own (``seq`` is the next row's,
    which it precedes), advances only the stream's arrival clock, and is idempotent, so a
    replayed micro-batch that carries it gives the same output."""
    return InRow(stream, seq, arrival, CLOCK, None, None, None)


def adapter_item_to_row(stream: int, seq: int, item: AdapterItem) -> InRow:
    """What an adapter produced, as an input row (invalid items become ``invalid`` rows)."""
    if isinstance(item, InvalidInput):
        return InRow(stream, seq, None, INVALID, None, None, item.raw, item.reason)
    arrival = partition = None
    if isinstance(item, Arriving):
        item, arrival, partition = item.item, item.arrival, item.partition
    try:
        return item_to_row(stream, seq, item, arrival, partition)
    except (InvalidEventError, TypeError, ValueError) as exc:
        return InRow(stream, seq, arrival, INVALID, None, None, repr(item)[:500], str(exc))
