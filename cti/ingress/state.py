"""The ingress state of a stream and of a group of streams, typed, and its plain-data form.

Every ingress path (``cti.ingress.paths``) reads and writes a stream's ``StreamState``; the
state store keeps its plain-data form (``GroupState.to_data``: a tuple of each stream's field
values in declaration order, no key strings to pickle every micro-batch), and a checkpoint
written before this class existed (a dict ``{"streams": [16-key dict, ...]}``) still loads
(``GroupState.from_data``), and so does an event-ordering policy's state of the older dict
form (``OrderingState.from_data``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import attrs
from sortedcontainers import SortedList

from cti.events import EVENT_STATUSES, INPUT_STATUSES, ORDERING_REASONS
from cti.forms.edges import stored_book
from cti.ingress.spec import StreamSpec
from cti.settings import EventOrderingPolicy
from cti.time import MIN_TIME

METRICS = (*INPUT_STATUSES, "cti_regressions", "ctis")
TIMELINE_METRICS = ("input", *EVENT_STATUSES, *ORDERING_REASONS)
FORMAT = 1  # the plain-data form's version (``GroupState.to_data``)


@attrs.define(slots=True, eq=True)
class Timeline:
    """One timeline of an event-ordering stream (``cti.ingress.ordering``): the largest
    timestamp it assigned (``max``; None: none yet), its last arrival, its partition, the
    floor its watermark never goes below, and its counts (``TIMELINE_METRICS``)."""

    id: str
    max: int | None
    last_arrival: int | None
    partition: str | None
    floor: int
    metrics: dict[str, int]

    @classmethod
    def from_data(cls, data: tuple | dict[str, Any]) -> Timeline:
        """A timeline from ``OrderingState.to_data``'s tuple, or an older checkpoint's dict."""
        return cls(**data) if isinstance(data, dict) else cls(*data)


@attrs.define(slots=True, eq=True)
class OrderingState:
    """The event-ordering policy's state of a stream (``cti.ingress.ordering``): the arrival
    clock ``A``; the timelines by id; ``maxes``, (max, id) of every timeline with a max;
    ``silent``, how many have none; the buffer of kept events, (timestamp, seq, timeline,
    row, status, start, end, reason), and with independent timelines each one's buffered
    (timestamp, seq) (``per_timeline``); the last CTI emitted (``cti``, MAX_TIME after the
    end-of-input flush) and given by the rules (``rule_cti``, never flushed); and how many
    timelines were forgotten (``purged``)."""

    A: int = MIN_TIME
    timelines: dict[str, Timeline] = attrs.Factory(dict)
    maxes: SortedList = attrs.Factory(SortedList)
    silent: int = 0
    buffer: SortedList = attrs.Factory(SortedList)
    per_timeline: dict[str, SortedList] = attrs.Factory(dict)
    cti: int = MIN_TIME
    rule_cti: int = MIN_TIME
    purged: int = 0

    @classmethod
    def new(cls, policy: EventOrderingPolicy, declared_partitions: tuple[str, ...] = ()
            ) -> OrderingState:
        """Fresh state. Declared partitions are timelines unless timelines are keys
        (``over``)."""
        st = cls()
        for p in declared_partitions if policy.over is None else ():
            st.timeline(p, p)
        return st

    def timeline(self, tid: str, partition: str | None, floor: int | None = None
                 ) -> Timeline:
        """Timeline ``tid``, made if it is not there: its watermark never below ``floor``, by
        default the stream's CTI now (a timeline first seen after the stream's CTI advanced
        cannot go below that CTI)."""
        tl = self.timelines.get(tid)
        if tl is None:
            tl = Timeline(tid, None, None, partition, self.cti if floor is None else floor,
                          dict.fromkeys(TIMELINE_METRICS, 0))
            self.timelines[tid] = tl
            self.silent += 1
        return tl

    def set_max(self, tl: Timeline, ts: int) -> None:
        """Raise timeline ``tl``'s max to ``ts`` (if above it), keeping ``maxes`` and
        ``silent``."""
        if tl.max is None:
            self.silent -= 1
        elif ts <= tl.max:
            return
        else:
            self.maxes.remove((tl.max, tl.id))
        tl.max = ts
        self.maxes.add((ts, tl.id))

    def to_data(self) -> tuple:
        """The field values in declaration order, each timeline as its field values."""
        data = attrs.astuple(self, recurse=False)
        return (data[0], {t: attrs.astuple(tl, recurse=False)
                          for t, tl in self.timelines.items()}, *data[2:])

    @classmethod
    def from_data(cls, data: Any) -> OrderingState | None:
        """A state from ``to_data``'s tuple, or the dict of older checkpoints (None: none)."""
        if data is None or isinstance(data, OrderingState):
            return data
        if isinstance(data, dict):
            return cls(**{**data, "timelines": {
                t: Timeline.from_data(tl) for t, tl in data["timelines"].items()}})
        return cls(data[0], {t: Timeline.from_data(tl) for t, tl in data[1].items()},
                   *data[2:])


@attrs.define(slots=True, eq=True)
class StreamState:
    """One stream's ingress state: what the row machine keeps between rows and batches."""

    ordering: OrderingState | None = attrs.field(  # the event-ordering policy's state
        converter=OrderingState.from_data)
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
        return cls(OrderingState.new(spec.ordering, spec.declared_partitions)
                   if spec.ordering else None)

    def to_data(self) -> tuple:
        """The field values in declaration order (the containers themselves, not copies; the
        policy's state as ``OrderingState.to_data``)."""
        data = attrs.astuple(self, recurse=False)
        return data if self.ordering is None else (self.ordering.to_data(), *data[1:])

    @classmethod
    def from_data(cls, data: tuple | dict[str, Any]) -> StreamState:
        """A state from ``to_data``'s tuple, or from the dict form of older checkpoints."""
        if isinstance(data, dict):
            return cls(**data)
        return cls(*data)


_FIELDS = tuple(f.name for f in attrs.fields(StreamState))
_BOOK = _FIELDS.index("open_edges")


def with_stored_books(data: Any, min_entries: int) -> Any:
    """A group's state in plain-data form (``GroupState.to_data``) with each edge book of at
    least ``min_entries`` identities as a ``StoredBook`` (read-only, the same object for as
    long as no edge of its stream arrives: a stored state names it, not its entries)."""
    if data is None or isinstance(data, dict):
        return data
    version, streams = data
    out = []
    for st in streams:
        book = st[_BOOK]
        if type(book) is dict and len(book) >= min_entries:
            st = (*st[:_BOOK], stored_book(book), *st[_BOOK + 1:])
        out.append(st)
    return version, out


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
