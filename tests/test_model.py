"""The object model: time (SPEC 1), events (SPEC 2) and advance-time settings (SPEC 4-6).

Validation happens at construction, with errors that say what is wrong; ``datetime`` and
``timedelta`` are accepted wherever ticks are; arithmetic saturates at the sentinels.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cti import (
    MAX_TIME,
    MIN_TIME,
    TICK,
    AdapterAdvanceTimeSettings,
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Application,
    BindingError,
    CepStream,
    Cti,
    EdgeEvent,
    EdgeType,
    EventOrderingPolicy,
    EventShape,
    IntervalEvent,
    InvalidEventError,
    InvalidSettingsError,
    PointEvent,
    ticks,
    to_datetime,
    to_duration_ticks,
    to_ticks,
)
from cti.events import item_from_kind, kind_of
from cti.io.memory import MemoryInputAdapterFactory
from cti.runtime.local import LocalRuntime
from cti.time import add, format_time

S = 1_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# ---- time ------------------------------------------------------------------------------------

def test_a_tick_is_a_microsecond():
    assert TICK == 1
    assert to_ticks(datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)) == S
    assert to_ticks(datetime(1970, 1, 1, 0, 0, 0, 7, tzinfo=UTC)) == 7
    assert to_duration_ticks(timedelta(days=1, microseconds=3)) == 86_400 * S + 3
    assert to_duration_ticks(timedelta(seconds=-1)) == -S


def test_aware_datetimes_are_converted_and_naive_ones_need_a_zone():
    plus2 = timezone(timedelta(hours=2))
    utc = to_ticks(datetime(2024, 1, 1, tzinfo=UTC))
    assert to_ticks(datetime(2024, 1, 1, 2, tzinfo=plus2)) == utc
    assert to_ticks(datetime(2024, 1, 1, 2), plus2) == utc
    with pytest.raises(ValueError, match="naive datetime 2024-01-01T00:00:00 has no time zone"):
        to_ticks(datetime(2024, 1, 1))


def test_times_before_the_epoch_are_negative():
    assert to_ticks(datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)) == -1


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)))
def test_datetime_round_trip(dt):
    t = to_ticks(dt.replace(tzinfo=UTC))
    assert to_datetime(t) == dt.replace(tzinfo=UTC)
    assert MIN_TIME < t < MAX_TIME


def test_sentinels_map_to_the_datetime_extremes():
    assert to_datetime(MAX_TIME) == datetime.max.replace(tzinfo=UTC)
    assert to_datetime(MIN_TIME) == datetime.min.replace(tzinfo=UTC)
    assert to_datetime(0) == EPOCH
    assert format_time(MAX_TIME) == "+infinity" and format_time(MIN_TIME) == "-infinity"
    assert format_time(None) == "null"
    assert format_time(5) == "1970-01-01T00:00:00.000005+00:00"


@pytest.mark.parametrize("value", [1.5, "5", None, True, False, [1]])
def test_to_ticks_refuses_what_is_not_a_time(value):
    with pytest.raises(TypeError, match="datetime or int ticks"):
        to_ticks(value)


@pytest.mark.parametrize("value", [MAX_TIME + 1, MIN_TIME - 1, 2**70])
def test_to_ticks_refuses_times_past_the_sentinels(value):
    with pytest.raises(ValueError, match="outside"):
        to_ticks(value)


@pytest.mark.parametrize("value, match", [
    (1.5, "a bare number is not a duration"), (5, "a bare number is not a duration"),
    ("5", "'5' is not a duration"), (None, "expected a duration"), (True, "expected a duration")])
def test_to_duration_ticks_refuses_what_is_not_a_duration(value, match):
    with pytest.raises(InvalidSettingsError, match=match):
        to_duration_ticks(value)


def test_add_saturates_at_the_sentinels():
    assert add(MAX_TIME, -5) == MAX_TIME  # infinity minus a delay is still infinity
    assert add(MAX_TIME, 5) == MAX_TIME
    assert add(MIN_TIME, 5) == MIN_TIME
    assert add(MIN_TIME, -5) == MIN_TIME
    assert add(MAX_TIME - 1, 5) == MAX_TIME
    assert add(MIN_TIME + 1, -5) == MIN_TIME
    assert add(3, -5) == -2
    assert add(3, 0) == 3


@given(st.integers(MIN_TIME, MAX_TIME), st.integers(-(2**64), 2**64))
def test_add_stays_within_the_sentinels(t, d):
    r = add(t, d)
    assert MIN_TIME <= r <= MAX_TIME
    if t in (MIN_TIME, MAX_TIME):
        assert r == t
    elif MIN_TIME < t + d < MAX_TIME:
        assert r == t + d
    else:
        assert r == (MAX_TIME if t + d > 0 else MIN_TIME)


def test_generated_cti_saturates_instead_of_overflowing():
    # A negative delay past MAX_TIME: the CTI saturates at MAX_TIME (and flushing adds no other).
    stream = CepStream.create(
        "s", MemoryInputAdapterFactory(), [PointEvent(MAX_TIME - 2, {"id": 1})],
        EventShape.POINT,
        AdvanceTimeSettings(AdvanceTimeGenerationSettings(1, ticks(-(2**62)), True)),
        application=Application())
    items = LocalRuntime().run(stream.ingress_group()).items("s")
    assert items == [PointEvent(MAX_TIME - 2, {"id": 1}), Cti(MAX_TIME)]


# ---- events ----------------------------------------------------------------------------------

def test_point_event_lifetime_is_one_tick():
    p = PointEvent(10, {"id": 1})
    assert (p.start, p.end, p.sync_time) == (10, 11, 10)
    assert kind_of(p) == "point"


def test_interval_and_edges_sync_times():
    i = IntervalEvent(10, 20)
    assert (i.start, i.end, i.sync_time) == (10, 20, 10)
    s = EdgeEvent.start_edge(10, {"k": 1})
    assert (s.edge_type, s.start, s.end, s.sync_time) == (EdgeType.START, 10, MAX_TIME, 10)
    e = EdgeEvent.end_edge(10, 25, {"k": 1})
    assert (e.edge_type, e.start, e.end, e.sync_time) == (EdgeType.END, 10, 25, 25)
    assert [kind_of(x) for x in (i, s, e, Cti(3))] == ["interval", "edge_start", "edge_end",
                                                       "cti"]
    assert EdgeEvent("start", 10) == EdgeEvent.start_edge(10)
    assert EdgeEvent("end", 10, 25) == EdgeEvent.end_edge(10, 25)


def test_events_accept_datetimes():
    t0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    t1 = t0 + timedelta(seconds=3)
    assert PointEvent(t0).start == to_ticks(t0)
    assert IntervalEvent(t0, t1).end - IntervalEvent(t0, t1).start == 3 * S
    assert EdgeEvent.end_edge(t0, t1).end == to_ticks(t1)
    assert Cti(t1).time == to_ticks(t1)
    naive = datetime(2024, 5, 1, 12)
    for make, where in [(lambda: PointEvent(naive), "PointEvent start"),
                        (lambda: IntervalEvent(t0, naive), "IntervalEvent end"),
                        (lambda: EdgeEvent.start_edge(naive), "EdgeEvent start"),
                        (lambda: Cti(naive), "Cti time")]:
        with pytest.raises(InvalidEventError, match=f"{where}: naive datetime "
                           "2024-05-01T12:00:00 has no time zone; give it a tzinfo"):
            make()


def test_events_are_immutable_values():
    p = PointEvent(10, {"id": 1})
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        p.start = 11
    assert p == PointEvent(10, {"id": 1})
    assert p != PointEvent(10, {"id": 2})
    assert hash(p) == hash(PointEvent(10, {"id": 2}))  # the payload is not hashed


def test_payload_is_copied_and_defaults_to_empty():
    payload = {"id": 1}
    p = PointEvent(10, payload)
    payload["id"] = 2
    assert p.payload == {"id": 1}
    assert PointEvent(10).payload == {} and PointEvent(10, None).payload == {}


@pytest.mark.parametrize("make", [
    lambda: PointEvent(None),
    lambda: PointEvent(1.5),
    lambda: PointEvent("10"),
    lambda: PointEvent(True),
    lambda: IntervalEvent(None, 10),
    lambda: IntervalEvent(5, None),
    lambda: EdgeEvent.start_edge(None),
    lambda: EdgeEvent.end_edge(None, 10),
    lambda: EdgeEvent.end_edge(5, None),
    lambda: Cti(None),
    lambda: Cti(2.0),
])
def test_null_and_non_integer_times_are_refused(make):
    with pytest.raises(InvalidEventError, match="invalid time"):
        make()


@pytest.mark.parametrize("make", [
    lambda: IntervalEvent(10, 10),
    lambda: IntervalEvent(10, 9),
    lambda: EdgeEvent.end_edge(10, 10),
    lambda: EdgeEvent.end_edge(10, 3),
])
def test_end_must_be_after_start(make):
    with pytest.raises(InvalidEventError, match=r"end > start"):
        make()


@pytest.mark.parametrize("make", [
    lambda: PointEvent(MAX_TIME),
    lambda: PointEvent(MIN_TIME),
    lambda: IntervalEvent(MIN_TIME, 5),
    lambda: EdgeEvent.start_edge(MAX_TIME),
    lambda: EdgeEvent.end_edge(MIN_TIME, 5),
])
def test_sentinels_are_not_event_times(make):
    with pytest.raises(InvalidEventError, match="sentinel"):
        make()


@pytest.mark.parametrize("make", [
    lambda: PointEvent(MAX_TIME + 1),
    lambda: Cti(MAX_TIME + 1),
    lambda: IntervalEvent(5, MAX_TIME + 1),
])
def test_times_past_max_time_are_refused(make):
    with pytest.raises(InvalidEventError, match="outside"):
        make()


def test_a_cti_may_be_at_max_time():
    assert Cti(MAX_TIME).time == MAX_TIME


def test_edge_start_has_no_end():
    with pytest.raises(InvalidEventError, match="START has no end"):
        EdgeEvent(EdgeType.START, 5, 10)


def test_unknown_edge_type_is_refused():
    with pytest.raises(ValueError, match="EdgeType"):
        EdgeEvent("middle", 5)


@pytest.mark.parametrize("payload", [[1, 2], "id=1", 5])
def test_payload_must_be_a_mapping(payload):
    with pytest.raises(InvalidEventError, match="mapping"):
        PointEvent(5, payload)


def test_item_from_kind_inverts_kind_of():
    items = [PointEvent(1, {"a": 1}), IntervalEvent(1, 4, {"a": 2}),
             EdgeEvent.start_edge(2, {"a": 3}), EdgeEvent.end_edge(2, 9, {"a": 3}), Cti(7)]
    for item in items:
        end = getattr(item, "end", None)
        start = item.time if isinstance(item, Cti) else item.start
        assert item_from_kind(kind_of(item), start, end, getattr(item, "payload", {})) == item
    with pytest.raises(InvalidEventError, match="unknown event kind"):
        item_from_kind("blob", 1, None, {})
    with pytest.raises(InvalidEventError, match="not an event"):
        kind_of({"start": 1})


# ---- AdvanceTimeGenerationSettings -----------------------------------------------------------

def test_generation_by_event_count():
    g = AdvanceTimeGenerationSettings(10, timedelta(seconds=5), True)
    assert (g.event_count, g.duration, g.delay, g.advance_to_infinity_on_shutdown) == (
        10, None, 5 * S, True)
    assert AdvanceTimeGenerationSettings(event_count=3) == AdvanceTimeGenerationSettings(3, 0)
    assert AdvanceTimeGenerationSettings(event_count=3).advance_to_infinity_on_shutdown is False


def test_generation_by_duration():
    g = AdvanceTimeGenerationSettings(timedelta(minutes=1))
    assert (g.event_count, g.duration, g.delay) == (None, 60 * S, 0)
    assert AdvanceTimeGenerationSettings(duration=ticks(7)).duration == 7
    assert AdvanceTimeGenerationSettings("7us").duration == 7
    assert AdvanceTimeGenerationSettings(duration=timedelta(microseconds=7)).duration == 7


@pytest.mark.parametrize("delay, expected", [
    (0, 0), (ticks(5), 5), (ticks(-1), -1), (timedelta(seconds=2), 2 * S),
    (timedelta(microseconds=-1), -1), ("2s", 2 * S), ("-1us", -1)])
def test_delay_in_ticks_or_timedelta_negative_allowed(delay, expected):
    assert AdvanceTimeGenerationSettings(1, delay).delay == expected


@pytest.mark.parametrize("kwargs, match", [
    ({}, "exactly one frequency"),
    ({"event_count": 2, "duration": ticks(5)}, "exactly one frequency"),
    ({"frequency": 2, "event_count": 2}, "frequency once"),
    ({"frequency": 2, "duration": ticks(5)}, "frequency once"),
    ({"frequency": 0}, "event count must be an int >= 1"),
    ({"frequency": -3}, "event count must be an int >= 1"),
    ({"event_count": 0}, "event count must be an int >= 1"),
    ({"frequency": True}, "event count must be an int >= 1"),
    ({"frequency": 1.5}, "event count must be an int >= 1"),
    ({"frequency": "3"}, "'3' is not a duration"),
    ({"frequency": timedelta(0)}, "duration must be positive"),
    ({"frequency": timedelta(seconds=-1)}, "duration must be positive"),
    ({"duration": 0}, "duration must be positive"),
    ({"duration": ticks(-5)}, "duration must be positive"),
    ({"duration": 5}, "duration=5: a bare number is not a duration"),
    ({"duration": 1.5}, "duration"),
    ({"frequency": 1, "delay": 1.5}, "delay"),
    ({"frequency": 1, "delay": "5"}, "delay"),
    ({"frequency": 1, "delay": 5}, "delay=5: a bare number is not a duration"),
    ({"frequency": 1, "delay": None}, "delay"),
    ({"frequency": 1, "advance_to_infinity_on_shutdown": 1}, "must be a bool"),
])
def test_invalid_generation_settings(kwargs, match):
    with pytest.raises(InvalidSettingsError, match=match):
        AdvanceTimeGenerationSettings(**kwargs)


def test_settings_are_immutable():
    g = AdvanceTimeGenerationSettings(1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        g.delay = 5
    s = AdvanceTimeSettings(g)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        s.policy = AdvanceTimePolicy.ADJUST


# ---- AdvanceTimeSettings, import, adapter settings -------------------------------------------

def test_advance_time_settings_defaults_and_policy_names():
    g = AdvanceTimeGenerationSettings(1)
    s = AdvanceTimeSettings(g)
    assert (s.generation_settings, s.import_settings, s.policy) == (
        g, None, AdvanceTimePolicy.DROP)
    assert AdvanceTimeSettings(g, None, "adjust").policy is AdvanceTimePolicy.ADJUST
    assert AdvanceTimeSettings(g, None, "DROP").policy is AdvanceTimePolicy.DROP
    imp = AdvanceTimeImportSettings("fast")
    assert AdvanceTimeSettings(None, imp).import_settings == imp
    both = AdvanceTimeSettings(g, imp, AdvanceTimePolicy.ADJUST)
    assert (both.generation_settings, both.import_settings) == (g, imp)


@pytest.mark.parametrize("make, match", [
    (lambda: AdvanceTimeSettings(), "generation settings, import settings or both"),
    (lambda: AdvanceTimeSettings(None, None, "adjust"), "generation settings, import settings"),
    (lambda: AdvanceTimeSettings(AdvanceTimeGenerationSettings(1), None, "sometimes"),
     "DROP or ADJUST"),
    (lambda: AdvanceTimeSettings({"event_count": 1}), "AdvanceTimeGenerationSettings"),
    (lambda: AdvanceTimeSettings(None, "fast"), "AdvanceTimeImportSettings"),
    (lambda: AdvanceTimeImportSettings(""), "stream name"),
    (lambda: AdvanceTimeImportSettings(None), "stream name"),
    (lambda: AdvanceTimeImportSettings(5), "stream name"),
    (lambda: AdapterAdvanceTimeSettings(None), "needs generation settings"),
    (lambda: AdapterAdvanceTimeSettings(AdvanceTimeImportSettings("x")),
     "AdvanceTimeGenerationSettings"),
])
def test_invalid_settings(make, match):
    with pytest.raises(InvalidSettingsError, match=match):
        make()


def test_import_settings_take_a_stream_or_its_name():
    app = Application()
    fast = CepStream.create("fast", MemoryInputAdapterFactory(), [], EventShape.POINT,
                            AdvanceTimeSettings.increasing_start_time(), application=app)
    assert AdvanceTimeImportSettings(fast) == AdvanceTimeImportSettings("fast")
    assert AdvanceTimeImportSettings(fast).stream_name == "fast"


def test_adapter_settings_become_advance_time_settings():
    g = AdvanceTimeGenerationSettings(2, ticks(1))
    a = AdapterAdvanceTimeSettings(g, "adjust")
    assert a.to_advance_time_settings() == AdvanceTimeSettings(g, None, AdvanceTimePolicy.ADJUST)
    assert AdapterAdvanceTimeSettings(g).policy is AdvanceTimePolicy.DROP


@pytest.mark.parametrize("preset, delay", [
    (AdvanceTimeSettings.increasing_start_time(), 0),
    (AdvanceTimeSettings.strictly_increasing_start_time(), -TICK),
    (AdvanceTimeSettings.unordered_start_time(timedelta(seconds=3)), 3 * S),
    (AdvanceTimeSettings.unordered_start_time(ticks(4)), 4),
])
def test_presets(preset, delay):
    g = preset.generation_settings
    assert (g.event_count, g.duration, g.delay, g.advance_to_infinity_on_shutdown) == (
        1, None, delay, True)
    assert preset.import_settings is None
    assert preset.policy is AdvanceTimePolicy.DROP


def _run(items, settings, factory=None, shape=EventShape.POINT):
    stream = CepStream.create("s", factory or MemoryInputAdapterFactory(), items, shape,
                              settings, application=Application())
    return LocalRuntime().run(stream.ingress_group())["s"]


def test_presets_behave_as_named():
    items = [PointEvent(10, {"id": "a"}), PointEvent(10, {"id": "b"}),
             PointEvent(8, {"id": "c"}), PointEvent(12, {"id": "d"})]
    inc = _run(items, AdvanceTimeSettings.increasing_start_time())
    assert [x.payload["id"] for x in inc.dropped] == ["c"]  # equal start times are legal
    assert [i.time for i in inc.items if isinstance(i, Cti)] == [10, 12, MAX_TIME]
    strict = _run(items, AdvanceTimeSettings.strictly_increasing_start_time())
    assert [x.payload["id"] for x in strict.dropped] == ["b", "c"]
    assert [i.time for i in strict.items if isinstance(i, Cti)] == [11, 13, MAX_TIME]
    unordered = _run(items, AdvanceTimeSettings.unordered_start_time(ticks(2)))
    assert unordered.dropped == []  # 8 >= 10 - 2
    assert [i.time for i in unordered.items if isinstance(i, Cti)] == [8, 10, MAX_TIME]


# ---- where settings come from (SPEC 6) -------------------------------------------------------

def test_adapter_declared_settings_apply_when_binding_gives_none():
    factory = MemoryInputAdapterFactory(AdapterAdvanceTimeSettings(
        AdvanceTimeGenerationSettings(1, 0), AdvanceTimePolicy.ADJUST))
    items = [IntervalEvent(10, 20, {"id": "a"}), IntervalEvent(5, 15, {"id": "b"})]
    stream = CepStream.create("s", factory, items, EventShape.INTERVAL, application=Application())
    assert stream.settings_origin == "adapter"
    res = LocalRuntime().run(stream.ingress_group())["s"]
    assert IntervalEvent(10, 15, {"id": "b"}) in res.items  # adjusted, the adapter's policy


def test_binding_settings_replace_the_adapters():
    factory = MemoryInputAdapterFactory(AdapterAdvanceTimeSettings(
        AdvanceTimeGenerationSettings(1, 0), AdvanceTimePolicy.ADJUST))
    items = [IntervalEvent(10, 20, {"id": "a"}), IntervalEvent(5, 15, {"id": "b"})]
    stream = CepStream.create("s", factory, items, EventShape.INTERVAL,
                              AdvanceTimeSettings(AdvanceTimeGenerationSettings(1, 0)),
                              application=Application())
    assert stream.settings_origin == "binding"
    res = LocalRuntime().run(stream.ingress_group())["s"]
    assert [x.payload["id"] for x in res.dropped] == ["b"]  # DROP, the binding's policy


def test_no_settings_anywhere():
    stream = CepStream.create("s", MemoryInputAdapterFactory(), [PointEvent(1)],
                              EventShape.POINT, application=Application())
    assert stream.settings_origin == "none" and stream.advance_time_settings is None
    res = LocalRuntime().run(stream.ingress_group())["s"]
    assert res.items == [PointEvent(1)]  # no CTI at all: nothing generates one


def test_declare_is_called_with_the_config_and_shape():
    calls = []

    class Factory(MemoryInputAdapterFactory):
        def declare_advance_time_properties(self, config, shape):
            calls.append((config, shape))
            return None

    items = [PointEvent(1)]
    CepStream.create("s", Factory(), items, EventShape.POINT, application=Application())
    assert calls == [(items, EventShape.POINT)]


# ---- EventOrderingPolicy (construction only; behaviour is in test_event_ordering) ------------

def test_event_ordering_policy_defaults_and_validation():
    p = EventOrderingPolicy()
    assert (p.late_arrival_tolerance, p.out_of_order_tolerance, p.early_arrival_window) == (
        5 * S, 0, 300 * S)
    assert (p.action, p.early_action) == (AdvanceTimePolicy.ADJUST, AdvanceTimePolicy.DROP)
    assert EventOrderingPolicy(early_arrival_window=None).early_arrival_window is None
    with pytest.raises(InvalidSettingsError, match="must not be negative"):
        EventOrderingPolicy(late_arrival_tolerance=ticks(-1))
    with pytest.raises(InvalidSettingsError, match="must not be negative"):
        EventOrderingPolicy(out_of_order_tolerance=timedelta(seconds=-1))
    with pytest.raises(InvalidSettingsError, match="is required"):
        EventOrderingPolicy(late_arrival_tolerance=None)
    with pytest.raises(InvalidSettingsError, match="not both"):
        EventOrderingPolicy(over="k", partitioned=True)
    with pytest.raises(InvalidSettingsError, match="payload field"):
        EventOrderingPolicy(over="")


class _OrderingFactory(MemoryInputAdapterFactory):
    """Declares an event-ordering policy for whatever shape it is bound with."""

    def declare_event_ordering_policy(self, config, shape):
        return EventOrderingPolicy()


@pytest.mark.parametrize("declared", [False, True])
def test_an_edge_stream_cannot_take_an_event_ordering_policy(declared):
    """The policy moves events' start times, and an edge end names its start by start time:
    binding an edge stream with one (given or declared by its adapter) fails, naming it."""
    edges = [EdgeEvent.start_edge(1, {"k": 1}), EdgeEvent.end_edge(1, 5, {"k": 1})]
    factory = _OrderingFactory() if declared else MemoryInputAdapterFactory()
    with pytest.raises(BindingError, match="'r'.*orders point and interval events.*"
                       + ("declared by its adapter" if declared else "given at binding")):
        CepStream.create("r", factory, edges, EventShape.EDGE, application=Application(),
                         event_ordering_policy=None if declared else EventOrderingPolicy())
    for shape, items in ((EventShape.POINT, [PointEvent(1, {})]),
                         (EventShape.INTERVAL, [IntervalEvent(1, 4, {})])):
        CepStream.create("r", factory, items, shape, application=Application(),
                         event_ordering_policy=None if declared else EventOrderingPolicy())


_PAYLOAD = st.dictionaries(st.text(max_size=3), st.none() | st.booleans() | st.integers()
                           | st.floats(allow_nan=False) | st.text(max_size=4)
                           | st.lists(st.integers(), max_size=2), max_size=3)
_ROW = st.tuples(st.sampled_from(["point", "interval", "edge_start", "edge_end", "cti"]),
                 st.integers(-10**15, 10**15), st.integers(1, 10**6), _PAYLOAD | st.none())


@given(st.lists(_ROW, max_size=20))
def test_items_built_in_bulk_equal_items_built_one_by_one(rows):
    """``items_from_rows`` (no checks, payloads parsed at once) builds what ``item_from_kind``
    builds from each row: equal, hashing alike, the same type and ``repr``."""
    import json

    from cti.events import item_from_kind, items_from_rows
    from cti.forms.rows import payload_to_json

    texts = [None if p is None else payload_to_json(p) for _, _, _, p in rows]
    bulk = items_from_rows([k for k, *_ in rows], [s for _, s, _, _ in rows],
                           [s + d for _, s, d, _ in rows], texts)
    one = [item_from_kind(k, s, s + d, json.loads(t) if t else {})
           for (k, s, d, _), t in zip(rows, texts, strict=True)]
    assert bulk == one
    assert [(type(b), hash(b), repr(b)) for b in bulk] == [(type(o), hash(o), repr(o)) for o in one]
