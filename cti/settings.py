"""Advance-time settings, mirroring StreamInsight's ``AdvanceTime*`` classes.

All settings are immutable and validated at construction.
"""

from __future__ import annotations

import enum
from datetime import timedelta
from typing import Any

import attrs

from cti.errors import InvalidSettingsError
from cti.time import TICK, DurationLike, Ticks, ticks, to_duration_ticks


class AdvanceTimePolicy(enum.Enum):
    """What happens to an event that violates a CTI (SPEC section 3)."""

    DROP = "drop"
    ADJUST = "adjust"


def _policy(value: Any) -> AdvanceTimePolicy:
    if isinstance(value, AdvanceTimePolicy):
        return value
    try:
        return AdvanceTimePolicy(str(value).lower())
    except ValueError:
        raise InvalidSettingsError(
            f"policy must be AdvanceTimePolicy.DROP or ADJUST, got {value!r}"
        ) from None


@attrs.frozen(init=False)
class AdvanceTimeGenerationSettings:
    """Generate CTIs from the events: every ``event_count`` events or every ``duration``.

    ``AdvanceTimeGenerationSettings(10, timedelta(seconds=5))`` is a CTI after every 10th event,
    ``AdvanceTimeGenerationSettings(timedelta(minutes=1))`` (or ``"1min"``) a CTI whenever an
    event is at least a minute past the event that made the previous one. A positional int
    frequency is an event count; durations are ``timedelta``, strings or ``ticks(n)``. The CTI
    is the largest start seen minus ``delay`` (negative delays allowed).
    ``advance_to_infinity_on_shutdown`` adds a CTI at MAX_TIME when the input ends.
    """

    event_count: int | None
    duration: int | None
    delay: int
    advance_to_infinity_on_shutdown: bool

    def __init__(
        self,
        frequency: int | DurationLike | None = None,
        delay: DurationLike = 0,
        advance_to_infinity_on_shutdown: bool = False,
        *,
        event_count: int | None = None,
        duration: DurationLike | None = None,
    ) -> None:
        if frequency is not None:
            if event_count is not None or duration is not None:
                raise InvalidSettingsError(
                    "give the frequency once: positionally, or as event_count= or duration="
                )
            if isinstance(frequency, timedelta | str | Ticks):
                duration = frequency
            else:
                event_count = frequency
        if (event_count is None) == (duration is None):
            raise InvalidSettingsError(
                "AdvanceTimeGenerationSettings needs exactly one frequency: an event count "
                "(int >= 1) or a duration (a timedelta, a string such as '5s', or ticks(n); > 0)"
            )
        if event_count is not None:
            if isinstance(event_count, bool) or not isinstance(event_count, int) or event_count < 1:
                raise InvalidSettingsError(
                    f"event count must be an int >= 1, got {event_count!r}"
                )
        dur_ticks = None
        if duration is not None:
            dur_ticks = to_duration_ticks(duration, "AdvanceTimeGenerationSettings duration")
            if dur_ticks <= 0:
                raise InvalidSettingsError(f"duration must be positive, got {duration!r}")
        if not isinstance(advance_to_infinity_on_shutdown, bool):
            raise InvalidSettingsError("advance_to_infinity_on_shutdown must be a bool")
        delay_ticks = to_duration_ticks(delay, "AdvanceTimeGenerationSettings delay")
        self.__attrs_init__(event_count, dur_ticks, delay_ticks, advance_to_infinity_on_shutdown)


@attrs.frozen(init=False)
class AdvanceTimeImportSettings:
    """Import every CTI of the stream named ``stream_name`` (a name or a bound ``CepStream``)."""

    stream_name: str

    def __init__(self, stream_name: Any) -> None:
        name = getattr(stream_name, "name", stream_name)
        if not isinstance(name, str) or not name:
            raise InvalidSettingsError(
                f"AdvanceTimeImportSettings needs a stream name or stream, got {stream_name!r}"
            )
        self.__attrs_init__(name)


ARRIVAL_CLOCKS = ("data", "wall")


def _arrival_clock(value: Any) -> str:
    """``"data"``: the arrival clock moves only with the arrival times of the input;
    ``"wall"``: a live source also advances it from the wall clock while the stream delivers
    nothing, recording each tick as input (SPEC 7)."""
    if value not in ARRIVAL_CLOCKS:
        raise InvalidSettingsError(
            f"arrival_clock must be 'data' or 'wall', got {value!r}")
    return value


def _check_gen(_inst: Any, _attr: Any, value: Any) -> None:
    if value is not None and not isinstance(value, AdvanceTimeGenerationSettings):
        raise InvalidSettingsError(
            f"generation_settings must be AdvanceTimeGenerationSettings, got {value!r}"
        )


def _check_import(_inst: Any, _attr: Any, value: Any) -> None:
    if value is not None and not isinstance(value, AdvanceTimeImportSettings):
        raise InvalidSettingsError(
            f"import_settings must be AdvanceTimeImportSettings, got {value!r}"
        )


@attrs.frozen
class AdvanceTimeSettings:
    """Advance-time settings given at query binding; they replace the adapter's own.

    ``arrival_clock="wall"``: while the stream delivers nothing, a live source advances its
    arrival time from the wall clock (recorded ticks), so the CTIs it imports, and the rows of
    the streams that import its CTIs, do not wait for its next delivery.
    """

    generation_settings: AdvanceTimeGenerationSettings | None = attrs.field(
        default=None, validator=_check_gen
    )
    import_settings: AdvanceTimeImportSettings | None = attrs.field(
        default=None, validator=_check_import
    )
    policy: AdvanceTimePolicy = attrs.field(default=AdvanceTimePolicy.DROP, converter=_policy)
    arrival_clock: str = attrs.field(default="data", converter=_arrival_clock, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.generation_settings is None and self.import_settings is None:
            raise InvalidSettingsError(
                "AdvanceTimeSettings needs generation settings, import settings or both"
            )

    @classmethod
    def increasing_start_time(cls) -> AdvanceTimeSettings:
        """A CTI at every event's start; equal start times are legal."""
        return cls(AdvanceTimeGenerationSettings(1, 0, True), None, AdvanceTimePolicy.DROP)

    @classmethod
    def strictly_increasing_start_time(cls) -> AdvanceTimeSettings:
        """A CTI one tick after every event: each event is final at once."""
        return cls(AdvanceTimeGenerationSettings(1, ticks(-TICK), True), None,
                   AdvanceTimePolicy.DROP)

    @classmethod
    def unordered_start_time(cls, delay: DurationLike) -> AdvanceTimeSettings:
        """A CTI at every event, ``delay`` behind the largest start (tolerates that disorder)."""
        count = to_duration_ticks(delay, "AdvanceTimeSettings.unordered_start_time: delay")
        return cls(AdvanceTimeGenerationSettings(1, ticks(count), True), None,
                   AdvanceTimePolicy.DROP)


@attrs.frozen
class AdapterAdvanceTimeSettings:
    """What an input adapter factory declares (no import at this level)."""

    generation_settings: AdvanceTimeGenerationSettings = attrs.field(validator=_check_gen)
    policy: AdvanceTimePolicy = attrs.field(default=AdvanceTimePolicy.DROP, converter=_policy)

    def __attrs_post_init__(self) -> None:
        if self.generation_settings is None:
            raise InvalidSettingsError("AdapterAdvanceTimeSettings needs generation settings")

    def to_advance_time_settings(self) -> AdvanceTimeSettings:
        return AdvanceTimeSettings(self.generation_settings, None, self.policy)


def _tolerance(name: str, value: Any, allow_none: bool = False) -> int | None:
    if value is None:
        if allow_none:
            return None
        raise InvalidSettingsError(f"{name} is required")
    count = to_duration_ticks(value, f"EventOrderingPolicy {name}")
    if count < 0:
        raise InvalidSettingsError(f"{name} must not be negative, got {value!r}")
    return count


@attrs.frozen(init=False)
class EventOrderingPolicy:
    """Azure Stream Analytics' event-ordering policy, on events with an arrival time (SPEC 7).

    Durations are ``timedelta``, strings such as ``"5s"``, or ``ticks(n)``.
    ``early_arrival_window=None`` turns the early rule off. ``action`` (ADJUST or DROP) applies
    to late and out-of-order events, ``early_action`` to early ones. ``over`` names a payload
    field: each value gets its own timeline (substreams). ``partitioned=True`` makes each input
    partition its own timeline (Stream Analytics' ``PARTITION BY PartitionId``).
    ``timestamp_by_arrival=True`` stamps events with their arrival time (no application time).
    ``arrival_clock="wall"``: a live source advances the arrival clock from the wall clock
    while the stream delivers nothing (recorded ticks). ``purge_idle_timelines=True``: a
    substream or partition timeline (``over`` / ``partitioned``) whose watermark is back at the
    arrival clock minus the late-arrival tolerance, with nothing buffered, is forgotten (it can
    change no output; its
metrics leave the snapshot), so keys that come and go do not grow the state.
    """

    late_arrival_tolerance: int
    out_of_order_tolerance: int
    early_arrival_window: int | None
    action: AdvanceTimePolicy
    early_action: AdvanceTimePolicy
    over: str | None
    partitioned: bool
    timestamp_by_arrival: bool
    arrival_clock: str
    purge_idle_timelines: bool

    def __init__(
        self,
        late_arrival_tolerance: DurationLike = timedelta(seconds=5),
        out_of_order_tolerance: DurationLike = 0,
        early_arrival_window: DurationLike | None = timedelta(minutes=5),
        action: AdvanceTimePolicy | str = AdvanceTimePolicy.ADJUST,
        early_action: AdvanceTimePolicy | str = AdvanceTimePolicy.DROP,
        over: str | None = None,
        partitioned: bool = False,
        timestamp_by_arrival: bool = False,
        arrival_clock: str = "data",
        purge_idle_timelines: bool = False,
    ) -> None:
        if over is not None and (not isinstance(over, str) or not over):
            raise InvalidSettingsError(f"over must name a payload field, got {over!r}")
        if over is not None and partitioned:
            raise InvalidSettingsError("give over= or partitioned=True, not both")
        self.__attrs_init__(
            _tolerance("late_arrival_tolerance", late_arrival_tolerance),
            _tolerance("out_of_order_tolerance", out_of_order_tolerance),
            _tolerance("early_arrival_window", early_arrival_window, allow_none=True),
            _policy(action),
            _policy(early_action),
            over,
            bool(partitioned),
            bool(timestamp_by_arrival),
            _arrival_clock(arrival_clock),
            bool(purge_idle_timelines),
        )
