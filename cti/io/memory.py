"""In-memory adapters: a list of events and CTIs in, a list of results out."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from cti.adapters import AdapterItem, Arriving, InvalidInput
from cti.events import SHAPE_KINDS, Cti, EventShape, StreamItem, kind_of, wrong_shape
from cti.settings import AdapterAdvanceTimeSettings


class MemoryInputAdapter:
    """The items of a list, in order. Items are events, CTIs, ``Arriving`` or ``InvalidInput``."""

    def __init__(self, items: Sequence[AdapterItem], shape: EventShape) -> None:
        self.items = list(items)
        self.shape = shape
        # Every item an event or bad input (``InputAdapter.events_only``).
        self.events_only = not any(isinstance(item, (Arriving, Cti)) for item in self.items)

    @functools.cached_property
    def arrivals_in_order(self) -> bool:
        """``InputAdapter.arrivals_in_order``: looked at once, where asked."""
        return self.events_only or _arrivals_in_order(self.items)

    def latest_offset(self) -> int:
        return len(self.items)

    def read(self, start: int, end: int) -> Iterable[AdapterItem]:
        for item in self.items[start:end]:
            inner = item.item if isinstance(item, Arriving) else item
            if isinstance(inner, InvalidInput):
                yield inner
                continue
            kind = kind_of(inner)
            if kind != "cti" and kind not in SHAPE_KINDS[self.shape]:
                yield InvalidInput(wrong_shape(kind, self.shape), repr(item))
            else:
                yield item

    def is_complete(self) -> bool:
        return True


def _arrivals_in_order(items: Sequence[AdapterItem]) -> bool:
    """Whether no ``Arriving`` item arrives before an earlier item (its arrival, or without
    one its sync time) and none is a ``Cti`` (``InputAdapter.arrivals_in_order``)."""
    latest = None
    for item in items:
        inner = item.item if isinstance(item, Arriving) else item
        if isinstance(inner, Cti):
            return False
        if isinstance(inner, InvalidInput):
            continue
        own = item.arrival if isinstance(item, Arriving) else inner.sync_time
        if isinstance(item, Arriving) and latest is not None and own < latest:
            return False
        latest = own if latest is None else max(latest, own)
    return True


class MemoryInputAdapterFactory:
    """``create(items, shape)``: config is the list of items.

    ``advance_time_settings``, when given, is what the factory declares for its streams
    (``declare_advance_time_properties``); binding settings still replace it.
    """

    def __init__(self, advance_time_settings: AdapterAdvanceTimeSettings | None = None) -> None:
        self.advance_time_settings = advance_time_settings

    def create(self, config: Sequence[AdapterItem], shape: EventShape) -> MemoryInputAdapter:
        return MemoryInputAdapter(config, shape)

    def declare_advance_time_properties(
        self, config: Any, shape: EventShape
    ) -> AdapterAdvanceTimeSettings | None:
        return self.advance_time_settings

    def fields(self, config: Sequence[AdapterItem]) -> list[str] | None:
        """The payload fields of the items' events (every field any event has; the list is
        in memory already), or None when there are no events."""
        if not isinstance(config, Sequence):
            return None
        found: set[str] = set()
        seen = False
        for item in config:
            payload = getattr(item.item if isinstance(item, Arriving) else item, "payload", None)
            if isinstance(payload, dict):
                found.update(payload)
                seen = True
        return sorted(found) if seen else None


class CollectingOutputAdapter:
    """Keeps every item written to it, in batch order (in-process runs only)."""

    def __init__(self) -> None:
        self.batches: dict[int, list[StreamItem]] = {}
        self.closed = False

    @property
    def items(self) -> list[StreamItem]:
        return [item for b in sorted(self.batches) for item in self.batches[b]]

    def write(self, items: Sequence[StreamItem], batch_id: int) -> None:
        self.batches[batch_id] = list(items)

    def close(self) -> None:
        self.closed = True


class CollectingOutputAdapterFactory:
    """Hands out one ``CollectingOutputAdapter`` per config key: ``factory.adapters[key]``."""

    def __init__(self) -> None:
        self.adapters: dict[Any, CollectingOutputAdapter] = {}

    def create(self, config: Any, shape: EventShape) -> CollectingOutputAdapter:
        return self.adapters.setdefault(config, CollectingOutputAdapter())
