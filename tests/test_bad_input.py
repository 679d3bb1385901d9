"""Bad input and binding errors (SPEC sections 3, 5, 6 and 9), on the in-process runner.

Bad input gives a clear error naming the stream, the event and the rule, or (with
``on_bad_input="dead_letter"``) a ``Diagnostic`` with status ``invalid`` and a count; never a
silent loss.
"""

from __future__ import annotations

import re

import pytest

from cti import (
    MAX_TIME,
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimeSettings,
    Application,
    Arriving,
    BadInputError,
    BindingError,
    CepStream,
    Cti,
    CtiError,
    CtiViolationError,
    EdgeEvent,
    EnqueuingInputAdapter,
    EventShape,
    IntervalEvent,
    InvalidEventError,
    InvalidSettingsError,
    PointEvent,
)
from cti.io.memory import MemoryInputAdapterFactory
from cti.runtime.local import LocalRuntime
from cti.time import format_time

GEN1 = AdvanceTimeSettings(AdvanceTimeGenerationSettings(1, 0))
T = format_time  # how messages show a time


def bind(items, shape=EventShape.POINT, settings=None, name="trades", factory=None,
         app=None, **kw):
    return CepStream.create(name, factory or MemoryInputAdapterFactory(), items, shape,
                            settings, application=app or Application(), **kw)


def run(stream):
    return LocalRuntime().run(stream.ingress_group())[stream.name]


def test_every_error_is_a_cti_error():
    for cls in (BadInputError, BindingError, CtiViolationError, InvalidEventError,
                InvalidSettingsError):
        assert issubclass(cls, CtiError)


# ---- event constructors ----------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: PointEvent(None, {"id": 1}),
    lambda: IntervalEvent(None, 5),
    lambda: IntervalEvent(1, None),
    lambda: EdgeEvent.start_edge(None),
    lambda: EdgeEvent.end_edge(1, None),
    lambda: Cti(None),
])
def test_null_times_are_rejected_by_the_constructors(make):
    with pytest.raises(InvalidEventError, match="None"):
        make()


@pytest.mark.parametrize("make", [
    lambda: IntervalEvent(5, 5),
    lambda: IntervalEvent(5, 4),
    lambda: EdgeEvent.end_edge(5, 5),
    lambda: EdgeEvent.end_edge(5, 1),
])
def test_end_not_after_start_is_rejected_by_the_constructors(make):
    with pytest.raises(InvalidEventError, match=r"must be after its start .*end > start"):
        make()


def test_events_past_max_time_are_rejected():
    with pytest.raises(InvalidEventError):
        PointEvent(MAX_TIME + 1)
    with pytest.raises(InvalidEventError, match="sentinel"):
        PointEvent(MAX_TIME)


# ---- edge ends with no open start ------------------------------------------------------------

ORPHAN = [EdgeEvent.start_edge(5, {"id": "a"}),
          EdgeEvent.end_edge(5, 9, {"id": "other"}),  # a different payload: closes nothing
          EdgeEvent.end_edge(5, 9, {"id": "a"})]


def test_edge_end_with_no_open_start_raises_by_default():
    stream = bind(ORPHAN, EventShape.EDGE, GEN1, name="ref")
    with pytest.raises(BadInputError) as err:
        run(stream)
    msg = str(err.value)
    assert "'ref'" in msg  # the stream
    assert "#1" in msg and f"edge_end({T(5)}, {T(9)})" in msg and "other" in msg  # the event
    assert "rule: an edge end closes an open start" in msg  # the rule


def test_edge_end_with_no_open_start_is_dead_lettered():
    stream = bind(ORPHAN, EventShape.EDGE, GEN1, name="ref", on_bad_input="dead_letter")
    res = run(stream)
    [d] = res.diagnostics
    assert (d.stream, d.status, d.kind, d.input_seq) == ("ref", "invalid", "edge_end", 1)
    assert (d.original_start, d.original_end) == (5, 9)
    assert d.payload == {"id": "other"}
    assert "edge end closes an open start" in d.reason
    assert res.metrics["invalid"] == 1
    # The run went on: the real end closed its start.
    assert res.items == [EdgeEvent.start_edge(5, {"id": "a"}), Cti(5),
                         EdgeEvent.end_edge(5, 9, {"id": "a"})]
    assert res.metrics["accepted"] == 2


def test_second_end_of_a_closed_edge_is_bad_input():
    items = [EdgeEvent.start_edge(5, {"id": "a"}), EdgeEvent.end_edge(5, 9, {"id": "a"}),
             EdgeEvent.end_edge(5, 9, {"id": "a"})]
    with pytest.raises(BadInputError, match="#2"):
        run(bind(items, EventShape.EDGE, GEN1))


def test_dead_letters_reach_a_diagnostics_output():
    from cti.io.memory import CollectingOutputAdapterFactory

    out = CollectingOutputAdapterFactory()
    stream = bind(ORPHAN, EventShape.EDGE, GEN1, name="ref", on_bad_input="dead_letter")
    stream.diagnostics_to(out, "dead").run(LocalRuntime())
    [d] = out.adapters["dead"].items
    assert (d.status, d.input_seq) == ("invalid", 1)


# ---- binding ---------------------------------------------------------------------------------

def test_import_from_an_unknown_stream_fails_at_create():
    app = Application()
    bind([], settings=GEN1, name="fast", app=app)
    settings = AdvanceTimeSettings(None, AdvanceTimeImportSettings("fsat"))
    with pytest.raises(BindingError, match=r"'slow' imports CTIs from unknown stream 'fsat'"):
        bind([], EventShape.EDGE, settings, name="slow", app=app)
    assert [s.name for s in app.streams] == ["fast"]  # nothing half-bound


def test_import_from_a_stream_of_another_application_fails():
    bind([], settings=GEN1, name="fast", app=Application())
    settings = AdvanceTimeSettings(None, AdvanceTimeImportSettings("fast"))
    with pytest.raises(BindingError, match="unknown stream 'fast'"):
        bind([], EventShape.EDGE, settings, name="slow", app=Application())


def test_self_import_fails_at_create():
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(1),
                                   AdvanceTimeImportSettings("loop"))
    with pytest.raises(BindingError, match=r"'loop' cannot import its own CTIs"):
        bind([], settings=settings, name="loop")


def test_duplicate_stream_name_fails():
    app = Application()
    bind([], settings=GEN1, name="s", app=app)
    with pytest.raises(BindingError, match="already has a stream named 's'"):
        bind([], settings=GEN1, name="s", app=app)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"name": ""}, BindingError, "non-empty name"),
    ({"factory": object()}, BindingError, "create"),
    ({"on_bad_input": "ignore"}, InvalidSettingsError, "on_bad_input"),
    ({"settings": AdvanceTimeGenerationSettings(1)}, InvalidSettingsError,
     "must be AdvanceTimeSettings"),
    ({"shape": "blob"}, InvalidSettingsError, "EventShape"),
])
def test_invalid_binding_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        bind([], **kwargs)


def test_shape_given_by_name():
    assert bind([], shape="edge", settings=GEN1).shape is EventShape.EDGE


@pytest.mark.parametrize("make, match", [
    (lambda: AdvanceTimeSettings(None, None), "generation settings, import settings or both"),
    (lambda: AdvanceTimeGenerationSettings(0), "int >= 1"),
    (lambda: AdvanceTimeGenerationSettings(-2), "int >= 1"),
    (lambda: AdvanceTimeGenerationSettings(duration=0), "positive"),
    (lambda: AdvanceTimeGenerationSettings(duration="-10us"), "positive"),
])
def test_settings_that_cannot_work(make, match):
    with pytest.raises(InvalidSettingsError, match=match):
        make()


# ---- CTI violations on a stream with no settings ---------------------------------------------

@pytest.mark.parametrize("items, shape, described", [
    ([Cti(10), PointEvent(5, {"id": "late"})], EventShape.POINT, f"point({T(5)})"),
    ([Cti(10), IntervalEvent(5, 30, {"id": "late"})], EventShape.INTERVAL,
     f"interval({T(5)}, {T(30)})"),
    ([Cti(10), EdgeEvent.start_edge(5, {"id": "late"})], EventShape.EDGE, f"edge_start({T(5)})"),
    ([EdgeEvent.start_edge(5, {"id": "late"}), Cti(10), EdgeEvent.end_edge(5, 8, {"id": "late"})],
     EventShape.EDGE, f"edge_end({T(5)}, {T(8)})"),
])
def test_violating_an_adapter_cti_without_settings_raises(items, shape, described):
    stream = bind(items, shape, name="sensor")
    with pytest.raises(CtiViolationError) as err:
        run(stream)
    msg = str(err.value)
    assert "'sensor'" in msg  # the stream
    assert described in msg and "late" in msg  # the event
    assert f"CTI {T(10)}" in msg  # the CTI
    assert "no AdvanceTimePolicy" in msg


def test_events_at_the_cti_do_not_violate_it():
    items = [Cti(10), PointEvent(10, {"id": 1}), PointEvent(11, {"id": 2})]
    assert run(bind(items, name="sensor")).metrics["accepted"] == 2
    edges = [EdgeEvent.start_edge(5, {"id": "a"}), Cti(10), EdgeEvent.end_edge(5, 10, {"id": "a"})]
    res = run(bind(edges, EventShape.EDGE, name="sensor"))
    assert res.items[-1] == EdgeEvent.end_edge(5, 10, {"id": "a"})  # end == CTI is legal


def test_violation_without_settings_can_be_dead_lettered():
    stream = bind([Cti(10), PointEvent(5, {"id": "late"}), PointEvent(12, {"id": "ok"})],
                  name="sensor", on_bad_input="dead_letter")
    res = run(stream)
    [d] = res.diagnostics
    assert (d.status, d.input_seq, d.cti) == ("invalid", 1, 10)
    assert f"violates CTI {T(10)}" in d.reason
    assert res.items == [Cti(10), PointEvent(12, {"id": "ok"})]


def test_violation_of_an_adapter_cti_with_settings_gets_the_policy():
    # With settings, an adapter CTI is obeyed like a generated one: the policy applies.
    stream = bind([Cti(10), PointEvent(5, {"id": "late"})], settings=GEN1, name="sensor")
    res = run(stream)
    assert [(d.status, d.input_seq) for d in res.diagnostics] == [("dropped", 1)]


# ---- CTI regressions -------------------------------------------------------------------------

@pytest.mark.parametrize("settings", [None, GEN1])
def test_cti_regression_is_ignored_and_counted(settings):
    items = [PointEvent(10, {"id": 1}), Cti(20), Cti(15), Cti(20), Cti(25), Cti(22),
             PointEvent(25, {"id": 2})]
    res = run(bind(items, settings=settings))
    ctis = [i.time for i in res.items if isinstance(i, Cti)]
    assert ctis == ([20, 25] if settings is None else [10, 20, 25])
    assert res.metrics["cti_regressions"] == 3
    regs = [d for d in res.diagnostics if d.status == "cti_regression"]
    assert [d.input_seq for d in regs] == [2, 3, 5]
    # Time never moved back: the CTI in force stays 20, then 25.
    assert [d.cti for d in regs] == [20, 20, 25]
    assert [d.original_start if d.original_start is not None else d.start for d in regs] == [
        15, 20, 22]
    assert res.metrics["accepted"] == 2 and res.diagnostics == regs


def test_adapter_cti_at_a_generated_cti_is_a_regression():
    res = run(bind([PointEvent(10), Cti(10), Cti(11)], settings=GEN1))
    assert [i.time for i in res.items if isinstance(i, Cti)] == [10, 11]
    assert res.metrics["cti_regressions"] == 1


# ---- shape mismatch and unreadable input -----------------------------------------------------

def test_interval_on_a_point_stream_is_reported():
    stream = bind([PointEvent(1), IntervalEvent(2, 5, {"id": "x"})], settings=GEN1, name="pts")
    with pytest.raises(BadInputError) as err:
        run(stream)
    msg = str(err.value)
    assert "'pts'" in msg and "#1" in msg
    assert "interval event on a point stream" in msg


def test_shape_mismatch_is_dead_lettered():
    stream = bind([PointEvent(1), IntervalEvent(2, 5, {"id": "x"}), PointEvent(3)],
                  settings=GEN1, name="pts", on_bad_input="dead_letter")
    res = run(stream)
    [d] = res.diagnostics
    assert (d.status, d.input_seq) == ("invalid", 1)
    assert "interval event on a point stream" in d.reason
    assert res.metrics["invalid"] == 1 and res.metrics["accepted"] == 2


class _Adapter(EnqueuingInputAdapter):
    def __init__(self, produce):
        super().__init__()
        self._produce = produce

    def produce(self):
        self._produce(self)


class _Factory:
    """Adapters built from a function of the adapter (``config``); no declared settings."""

    def create(self, config, shape):
        return _Adapter(config)


def test_shape_mismatch_from_a_custom_adapter_is_caught_by_ingress():
    # No help from the memory adapter: the engine itself checks the shape.
    def produce(a):
        a.enqueue(PointEvent(1))
        a.enqueue(EdgeEvent.start_edge(2, {"id": "e"}))

    stream = bind(produce, settings=GEN1, name="pts", factory=_Factory())
    with pytest.raises(BadInputError, match=r"'pts'.*edge_start event on a point stream"):
        run(stream)


def test_unreadable_rows_are_reported_with_the_adapters_reason():
    def produce(a):
        a.enqueue(PointEvent(1))
        a.enqueue_invalid("column 'ts' is null", raw="ts=,id=7")
        a.enqueue(PointEvent(2))

    with pytest.raises(BadInputError, match=r"'feed'.*#1.*column 'ts' is null"):
        run(bind(produce, settings=GEN1, name="feed", factory=_Factory()))
    res = run(bind(produce, settings=GEN1, name="feed", factory=_Factory(),
                   on_bad_input="dead_letter"))
    [d] = res.diagnostics
    assert (d.status, d.input_seq, d.reason) == ("invalid", 1, "column 'ts' is null")
    assert d.payload == "ts=,id=7"
    assert res.metrics == {"accepted": 2, "adjusted": 0, "dropped": 0, "invalid": 1,
                           "cti_regressions": 0, "ctis": 2}


def test_an_adapter_item_that_is_no_event_is_bad_input():
    class Raw:
        def create(self, config, shape):
            return self

        def latest_offset(self):
            return 2

        def read(self, start, end):
            return [PointEvent(1), {"start": None, "id": 7}][start:end]

        def is_complete(self):
            return True

    with pytest.raises(BadInputError, match=r"'raw'.*#1"):
        run(bind(None, settings=GEN1, name="raw", factory=Raw()))


def test_arrival_time_going_back_is_bad_input():
    items = [Arriving(PointEvent(5, {"id": 1}), 5), Arriving(PointEvent(6, {"id": 2}), 3)]
    match = rf"'s'.*#1.*arrival time {re.escape(T(3))} is before .* {re.escape(T(5))}"
    with pytest.raises(BadInputError, match=match):
        run(bind(items, settings=GEN1, name="s"))


def test_interval_to_max_time_is_refused_at_construction():
    # MAX_TIME is a sentinel (SPEC 1): construction and ingress agree that no event reaches it.
    with pytest.raises(InvalidEventError, match=r"interval end \+infinity is a sentinel"):
        IntervalEvent(5, MAX_TIME, {"id": 1})
