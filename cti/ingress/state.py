"""The ingress state of a stream and of a group of streams, typed, and its plain-data form.

Every ingress path (``cti.ingress.paths``) reads and writes a stream's ``StreamState``; the
state store keeps its plain-data form (``GroupState.to_data``: a tuple of each stream's field
values in declaration order, no key strings to pickle every micro-batch), and a checkpoint
written before this class existed (a dict ``{"streams": [16-key dict, ...]}``) still loads
(``GroupState.from_data``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import attrs

from cti.events import INPUT_STATUSES
from cti.ingress import ordering
from cti.ingress.spec import StreamSpec
from cti.time import MIN_TIME

METRICS = (*INPUT_STATUSES, "cti_regressions", "ctis")
FORMAT = 1  # the plain-data form's version (``GroupState.to_data``)


@attrs.define(slots=True, eq=True)
class StreamState:
    """One stream's ingress state: what the row machine keeps between rows and batches."""

    ordering: dict[str, Any] | None  # the event-ordering policy's state (``ordering``)
    partition_arrival: dict = attrs.Factory(dict)  # partition -> last arrival (ordering)
    cti: int = MIN_TIME  # the stream's current time
    count: int = 0  # counted events since the last count-generated CTI
    max_start: int | None = None  # largest start among counted events
    gen_ref: int | None = None  # start of the event that made the previous duration CTI
    open_edges: dict = attrs.Factory(dict)  # (start, payload) -> [start emitted, or None]
    out_seq: int = 0
    next_in_seq: int = 0
    last_arrival: int = MIN_TIME  # the merge arrival: data and clock ticks (running maximum)
    data_arrival: int = MIN_TIME  # the largest arrival of the stream's own rows
    last_key: tuple | None = None  # merge key of the last row received
    eos: bool = False  # end of input received
    pending: deque = attrs.Factory(deque)  # (merge key, row) received, not yet processed
    imported: deque = attrs.Factory(deque)  # (merge key, time) CTIs imported, not processed
    metrics: dict[str, int] = attrs.Factory(lambda: dict.fromkeys(METRICS, 0))

    @classmethod
    def new(cls, spec: StreamSpec) -> StreamState:
        """A stream's state before its first row."""
        return cls(ordering.new_state(spec.ordering, spec.declared_partitions)
                   if spec.ordering else None)

    def to_data(self) -> tuple:
        """The field values in declaration order (the containers themselves, not copies)."""
        return attrs.astuple(self, recurse=False)

    @classmethod
    def from_data(cls, data: tuple | dict[str, Any]) -> StreamState:
        """A state from ``to_data``'s tuple, or from the dict form of older checkpoints."""
        if isinstance(data, dict):
            return cls(**data)
        return cls(*data)


_FIELDS = tuple(f.name for f in attrs.fields(StreamState))


@attrs.define(slots=True, eq=True)
class GroupState:
    """The ingress state of a group of streams (those linked by CTI imports), one per stream
    in the group's declaration order."""

    streams: list[StreamState]

    @classmethod
    def new(cls, specs: list[StreamSpec]) -> GroupState:
        return cls([StreamState.new(spec) for spec in specs])

    def to_data(self) -> tuple:
        """The plain-data form the state store keeps: ``(FORMAT, [stream tuple, ...])``."""
        return FORMAT, [s.to_data() for s in self.streams]

    @classmethod
    def from_data(cls, data: Any, specs: list[StreamSpec]) -> GroupState:
        """A group's state from its plain-data form (``to_data``, or an older checkpoint's
        ``{"streams": [dict, ...]}``); None: a new state."""
        if data is None:
            return cls.new(specs)
        if isinstance(data, GroupState):
            return data
        if isinstance(data, dict):
            return cls([StreamState.from_data(s) for s in data["streams"]])
        version, streams = data
        if version != FORMAT:
            raise ValueError(f"ingress state of format {version!r}: this cti reads {FORMAT}")
        return cls([StreamState.from_data(s) for s in streams])


def next_in_seq(data: Any, stream: int) -> int:
    """The sequence number a stream's next input row gets, from its group's state in plain
    data form (None: a new group)."""
    if data is None:
        return 0
    return GroupState.from_data(data, []).streams[stream].next_in_seq
