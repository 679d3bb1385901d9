"""What the ingress machine needs to know about one stream: plain, picklable data."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from cti.events import EventShape
from cti.settings import AdvanceTimePolicy, AdvanceTimeSettings, EventOrderingPolicy


@attrs.frozen
class StreamSpec:
    """One input stream of an ingress group, resolved at binding time.

    ``import_from`` is the index (within the group) of the stream whose CTIs this one imports.
    ``policy`` is None when the stream has no advance-time settings at all: then only the
    adapter's own CTIs advance it, and a violation raises ``CtiViolationError``.
    ``arrival_clock`` is ``"wall"`` where a live source is to record wall-clock ticks (clock
    rows) while the stream delivers nothing.
    """

    name: str
    shape: EventShape
    event_count: int | None = None
    duration: int | None = None
    delay: int = 0
    advance_to_infinity_on_shutdown: bool = False
    import_from: int | None = None
    policy: AdvanceTimePolicy | None = None
    dead_letter: bool = False
    ordering: EventOrderingPolicy | None = None
    declared_partitions: tuple[str, ...] = ()
    arrival_clock: str = "data"

    @property
    def generates(self) -> bool:
        return self.event_count is not None or self.duration is not None

    @classmethod
    def from_settings(
        cls,
        name: str,
        shape: EventShape,
        settings: AdvanceTimeSettings | None,
        import_from: int | None = None,
        dead_letter: bool = False,
        ordering: EventOrderingPolicy | None = None,
        declared_partitions: tuple[str, ...] = (),
    ) -> StreamSpec:
        if ordering is not None:
            return cls(name, shape, dead_letter=dead_letter, ordering=ordering,
                       declared_partitions=tuple(declared_partitions),
                       arrival_clock=ordering.arrival_clock)
        if settings is None:
            return cls(name, shape, dead_letter=dead_letter)
        gen = settings.generation_settings
        return cls(
            name,
            shape,
            event_count=gen.event_count if gen else None,
            duration=gen.duration if gen else None,
            delay=gen.delay if gen else 0,
            advance_to_infinity_on_shutdown=gen.advance_to_infinity_on_shutdown if gen else False,
            import_from=import_from,
            policy=settings.policy,
            dead_letter=dead_letter,
            arrival_clock=settings.arrival_clock,
        )


def rooted_at(specs: Sequence[StreamSpec], i: int) -> bool:
    """Whether every other stream of the group imports its CTIs from stream ``i``, directly or
    up a chain (a fast stream, the slow reference streams that take its CTIs, and those that
    take theirs), or ``i`` is the group's only stream."""
    for j in range(len(specs)):
        seen = 0
        while j != i:
            j = specs[j].import_from
            seen += 1
            if j is None or seen > len(specs):
                return False
    return True
