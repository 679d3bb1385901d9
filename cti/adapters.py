"""Input and output adapter protocols, and a base class for adapters that enqueue items.

An input adapter is a *replayable* sequence of items in arrival order, addressed by offset
(0, 1, 2, ...). That is what lets Spark re-read a micro-batch after a failure and restart
exactly once from a checkpoint. Items are events, CTIs, ``Arriving`` wrappers that carry an
arrival time, and ``InvalidInput`` for rows the adapter could not read.

Adapters and their factories are created in Spark's executors, so factory and config must be
picklable (module-level classes, plain data).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from cti.errors import BindingError
from cti.events import Cti, EventShape, StreamItem
from cti.settings import AdapterAdvanceTimeSettings
from cti.time import TimeLike, format_time, to_ticks


def _arrival(value: TimeLike) -> int:
    return to_ticks(value, None, "Arriving arrival")


def _partition(value: Any) -> str | None:
    return None if value is None else str(value)


@attrs.frozen
class Arriving:
    """An item with the time the source received it (its arrival time, in ticks) and,
    optionally, the input partition it came from."""

    item: StreamItem
    arrival: int = attrs.field(converter=_arrival)
    partition: str | None = attrs.field(default=None, converter=_partition)

    def __repr__(self) -> str:
        return (f"Arriving(item={self.item!r}, arrival={format_time(self.arrival)}, "
                f"partition={self.partition!r})")


@attrs.frozen
class InvalidInput:
    """A row the adapter could not turn into an event: it goes to an error or the dead letters."""

    reason: str
    raw: str = ""


AdapterItem = StreamItem | Arriving | InvalidInput

# A columnar adapter's ``read_frame`` may give its payloads as typed columns: ``field:<name>``,
# payload field <name>'s value per row in the type ``json.loads`` gives it (int64, float64,
# bool or string; null: JSON null), one column for EVERY field of the payloads, and the string
# column ``field:`` itself, on each row whose payload these columns are the list of its fields
# (``field_marker``; null on the other rows). On such a row the ``payload`` may be null: the
# engine reads fields (keys, aggregates, a frame of payloads) from the columns and writes a
# payload's JSON text only where it needs it. (The marker names the fields because rows of
# several streams meet in one batch, each stream's fields null on the others' rows.)
FIELD_COLUMN = "field:"


def field_marker(names: Iterable[str]) -> str:
    """The ``FIELD_COLUMN`` marker of a payload of these fields: their sorted JSON list."""
    import json

    return json.dumps(sorted(names), separators=(",", ":"))


@runtime_checkable
class InputAdapter(Protocol):
    """A replayable input: ``read(start, end)`` yields the items at offsets [start, end).

    An adapter may set ``events_only = True`` when every item it yields is an event (or
    ``InvalidInput``) without an arrival time: never a ``Cti``, never ``Arriving``. On Spark,
    the shards of a query spread by key then receive only their own events of a stream that
    generates a CTI every N events, and the source's generation points
    (``cti.ingress.timed``), instead of every row's times.

    An adapter may set ``arrivals_in_order = True`` when no ``Arriving`` item it yields
    arrives before an earlier item (its arrival, or without one its sync time), and it yields
    no ``Cti``. On Spark, the shards of a query spread by key then receive only their own
    events of a stream that imports its CTIs, and each piece's arrival progress
    (``cti.ingress.progress``), where its items have arrival times (without them, they do
    anyway); a shard that finds a piece arriving before the stream's earlier rows names the
    broken promise.

    A bounded adapter (``is_complete()``) that caches what it read of its input per process
    may have ``release()``, which forgets it: on Spark the source calls it once the input is
    read to its end, in the process that read the last range and in the one that found the
    end (``ReferenceDataInputAdapter``: a file's table, 100 MB at a million rows).

    A columnar adapter has ``read_frame(start, end)`` (see ``cti.io.parquet``): the rows as an
    Arrow table in cti's row form, or None where it reads these rows by ``read``. If it also sets
    ``projects_fields = True``, its ``read_frame`` takes ``fields=``: the payload fields a run
    needs (``cti.operators.projection``; a query whose output payloads are computed, such as
    a window's aggregates, needs only the fields it reads), and may leave the others out of
    the payloads.
    """

    def latest_offset(self) -> int:
        """How many items are available now."""

    def read(self, start: int, end: int) -> Iterable[AdapterItem]:
        """The items at offsets [start, end), in arrival order."""

    def is_complete(self) -> bool:
        """True when no item beyond ``latest_offset()`` will ever come (a bounded input)."""


@runtime_checkable
class InputAdapterFactory(Protocol):
    """Creates input adapters (StreamInsight's ``ITypedInputAdapterFactory``).

    A factory may also define ``declare_advance_time_properties(config, shape)`` returning
    ``AdapterAdvanceTimeSettings`` (StreamInsight's ``IDeclareAdvanceTimeProperties``), and
    ``check_config(config, shape)``, which raises when the config cannot work (a missing file,
    a column the data lacks): ``CepStream.create`` calls it and raises ``BindingError`` naming
    the stream, before anything runs.
    """

    def create(self, config: Any, shape: EventShape) -> InputAdapter: ...


def declared_settings(
    factory: Any, config: Any, shape: EventShape
) -> AdapterAdvanceTimeSettings | None:
    """The factory's declared advance-time settings, or None if it declares none."""
    declare = getattr(factory, "declare_advance_time_properties", None)
    if declare is None:
        return None
    settings = declare(config, shape)
    if settings is not None and not isinstance(settings, AdapterAdvanceTimeSettings):
        raise TypeError(
            f"{type(factory).__name__}.declare_advance_time_properties must return "
            f"AdapterAdvanceTimeSettings or None, got {settings!r}"
        )
    return settings


def check_config(name: str, factory: Any, config: Any, shape: EventShape) -> None:
    """Run the factory's optional ``check_config(config, shape)``; what it raises becomes a
    ``BindingError`` (or the ``BindingError`` subclass it raised) naming stream ``name``, the
    original error as its cause."""
    check = getattr(factory, "check_config", None)
    if check is None:
        return
    try:
        check(config, shape)
    except Exception as exc:
        kind = type(exc) if isinstance(exc, BindingError) else BindingError
        raise kind(f"stream {name!r}: {exc}") from exc


class EnqueuingInputAdapter:
    """Base class for a bounded adapter written in StreamInsight's push style.

    Subclasses implement ``produce()`` and call ``enqueue(event)``, ``enqueue_cti(time)`` and
    ``enqueue_invalid(reason, raw)`` from it. ``produce`` must give the same items every time it
    runs (it is replayed by offset).
    """

    def __init__(self) -> None:
        self._items: list[AdapterItem] | None = None

    def produce(self) -> None:
        raise NotImplementedError

    def enqueue(self, item: StreamItem, arrival: TimeLike | None = None,
                partition: str | None = None) -> None:
        self._buffer().append(
            item if arrival is None else Arriving(item, arrival, partition))

    def enqueue_cti(self, time: TimeLike, arrival: TimeLike | None = None) -> None:
        self.enqueue(Cti(time), arrival)

    def enqueue_invalid(self, reason: str, raw: str = "") -> None:
        self._buffer().append(InvalidInput(reason, raw))

    def _buffer(self) -> list[AdapterItem]:
        if getattr(self, "_producing", None) is None:
            raise RuntimeError("enqueue is called from produce()")
        return self._producing

    def _all(self) -> Sequence[AdapterItem]:
        # getattr: subclasses that forget super().__init__() still work.
        if getattr(self, "_items", None) is None:
            self._producing: list[AdapterItem] | None = []
            self.produce()
            self._items, self._producing = self._producing, None
        return self._items

    def latest_offset(self) -> int:
        return len(self._all())

    def read(self, start: int, end: int) -> Iterable[AdapterItem]:
        return self._all()[start:end]

    def is_complete(self) -> bool:
        return True


@runtime_checkable
class OutputAdapter(Protocol):
    """Receives a stream's output (events and CTIs), in order, one batch at a time.

    ``batch_id`` increases with each batch. A batch may be delivered again after a failure
    (Spark replays the micro-batch): writing it again must replace, not append, so that the
    output is exactly once. Spark creates output adapters in its executors.

    An adapter of a query's output may also have ``write_frame(frame, batch_id)``: it then
    receives each batch as one pandas frame in output order, columns ``kind`` (point, interval,
    edge_start, edge_end or cti), ``start``, ``end`` (ticks) and ``payload`` (canonical JSON;
    None on CTIs), instead of items: no Python object per event (columnar sinks, counts). Or
    ``write_table(table, batch_id)``, preferred to both: the same columns as one Arrow table
    (``cti.io.outputs.ROWS_ARROW``; payload null on CTIs), no pandas frame and no Python
    string per event (the Parquet, Delta and JSON-lines outputs).

    Parallel output: a factory with ``partitioned = True`` promises that its adapters'
    ``write``, ``write_frame`` and ``write_table`` take ``partition=`` (an int, or None for
    the whole batch) and land each (batch id, partition) exactly once, whatever the other
    partitions do (a file per batch and partition, a transaction per partition). On Spark
    each shard partition of a query's output then writes its own rows, in output order, in
    its own task, all at once; other factories get each micro-batch's output whole, in one
    task.
    """

    def write(self, items: Sequence[StreamItem], batch_id: int) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class OutputAdapterFactory(Protocol):
    def create(self, config: Any, shape: EventShape) -> OutputAdapter: ...
