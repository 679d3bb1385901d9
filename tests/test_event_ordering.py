"""Event-ordering policies beyond the conformance cases: partitions, idle partitions, metrics,
arrival-time stamping, bad input and the diagnostics side output (SPEC section 7)."""

from __future__ import annotations

import pytest

from cti import (
    MAX_TIME,
    Application,
    Arriving,
    BadInputError,
    CepStream,
    Cti,
    EventOrderingPolicy,
    EventShape,
    InvalidSettingsError,
    PointEvent,
)
from cti.io.memory import MemoryInputAdapterFactory
from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output

S = 1_000_000  # ticks per second


class PartitionedFactory(MemoryInputAdapterFactory):
    """A memory adapter that declares its input partitions; ``live`` inputs never end."""

    def __init__(self, partitions, live=False):
        super().__init__()
        self.partitions = partitions
        self.live = live

    def declare_partitions(self, config, shape):
        return self.partitions

    def create(self, config, shape):
        adapter = super().create(config, shape)
        if self.live:
            adapter.is_complete = lambda: False
        return adapter


def ev(i, app, arrival, partition=None, **payload):
    return Arriving(PointEvent(app * S, {"id": i, **payload}), arrival * S, partition)


def bind(items, factory=None, on_bad_input="raise", **policy):
    return CepStream.create("s", factory or MemoryInputAdapterFactory(), items, EventShape.POINT,
                            application=Application(), on_bad_input=on_bad_input,
                            event_ordering_policy=EventOrderingPolicy(**policy))


def ctis(items):
    return [i.time for i in items if isinstance(i, Cti)]


def events(items):
    return [i for i in items if not isinstance(i, Cti)]


def test_partitions_combine_by_minimum_watermark():
    items = [ev(1, 100, 100, "p0"), ev(2, 50, 100, "p1"), ev(3, 120, 120, "p0"),
             ev(4, 60, 121, "p1")]
    res = bind(items, PartitionedFactory(["p0", "p1"]), late_arrival_tolerance="100s",
               early_arrival_window=None).run("local")["s"]
    # CTI = min over the declared partitions of max(max_p, A - 100 s): held back by p1.
    assert ctis(res.items)[:-1] == [0, 50 * S, 60 * S]
    assert res.metrics["adjusted"] == 0
    assert [e.payload["id"] for e in events(res.items)] == [2, 4, 1, 3]  # timestamp order
    tl = res.ordering["timelines"]
    assert tl['p0']["watermark"] == 120 * S and tl['p1']["watermark"] == 60 * S
    assert res.ordering["arrival_clock"] == 121 * S


def test_a_partition_first_seen_after_the_cti_cannot_go_below_it():
    items = [ev(1, 100, 100, "p0"), ev(2, 50, 100, "p1"), ev(3, 120, 120, "p0")]
    res = bind(items, late_arrival_tolerance="100s", early_arrival_window=None).run("local")["s"]
    # p1 was not declared: the CTI reached 100 on p0 alone, so p1 starts at 100.
    assert ctis(res.items)[0] == 100 * S
    assert [(d.payload["id"], d.reason, d.start) for d in res.adjusted] == [
        (2, "out_of_order", 100 * S)]
    for item in events(res.items):
        assert item.start >= 100 * S


def test_silent_declared_partition_is_reported_and_bounded_by_late_tolerance():
    items = [ev(k, t, t, "p0") for k, t in enumerate([10, 20, 30, 40])]
    stream = bind(items, PartitionedFactory(["p0", "p1"]), late_arrival_tolerance="15s",
                  early_arrival_window=None)
    res = stream.run("local")["s"]
    # p1 never delivers: it counts with w = A - 15 s, so the CTI trails the arrival clock by 15 s.
    assert ctis(res.items)[:-1] == [-5 * S, 5 * S, 15 * S, 25 * S]
    assert set(res.not_progressing) == {"p1"}
    assert res.not_progressing["p1"]["last_arrival"] is None
    assert res.ordering["timelines"]["p1"]["watermark_delay"] == 15 * S


def test_partitioned_processing_gives_each_partition_its_own_timeline():
    items = [ev(1, 100, 100, "fast"), ev(2, 5, 100, "slow"), ev(3, 200, 200, "fast")]
    factory = PartitionedFactory(["fast", "slow"], live=True)  # no end of input: no flush
    policy = dict(late_arrival_tolerance="1000s", early_arrival_window=None)

    def released(**extra):
        res = bind(items, factory, **policy, **extra).run("local")["s"]
        assert Cti(MAX_TIME) not in res.items
        return [e.payload["id"] for e in events(res.items)]

    # Combined, the slow partition (max 5) holds back the fast one's events.
    assert released() == [2]
    # Partitioned, each partition releases by its own watermark.
    assert released(partitioned=True) == [1, 2, 3]


def test_timestamp_by_arrival():
    items = [ev(1, 500, 10), ev(2, 3, 11), ev(3, 40, 12)]
    res = bind(items, timestamp_by_arrival=True).run("local")["s"]
    assert [e.start for e in events(res.items)] == [10 * S, 11 * S, 12 * S]
    assert res.metrics["adjusted"] == res.metrics["dropped"] == 0
    assert [e.payload["id"] for e in events(res.items)] == [1, 2, 3]


def test_substream_key_missing_is_bad_input():
    items = [ev(1, 10, 10, deviceId="a"), ev(2, 11, 11)]
    with pytest.raises(BadInputError, match=r"stream 's'.*deviceId.*over="):
        bind(items, over="deviceId").run("local")
    res = bind(items, on_bad_input="dead_letter", over="deviceId").run("local")["s"]
    assert [(d.status, d.payload["id"]) for d in res.diagnostics] == [("invalid", 2)]
    assert res.metrics["invalid"] == 1 and res.metrics["accepted"] == 1


def test_missing_arrival_and_arrival_going_back_within_a_partition():
    no_arrival = [PointEvent(5 * S, {"id": 1})]
    with pytest.raises(BadInputError, match="arrival time"):
        bind(no_arrival).run("local")
    back = [ev(1, 10, 10, "p0"), ev(2, 9, 9, "p1"), ev(3, 8, 8, "p0")]
    with pytest.raises(BadInputError, match=r"partition 'p0'.*never goes back"):
        bind(back, late_arrival_tolerance="100s").run("local")
    res = bind(back, on_bad_input="dead_letter", late_arrival_tolerance="100s").run("local")
    assert [d.payload["id"] for d in res["s"].diagnostics if d.status == "invalid"] == [3]
    # Going back across partitions is fine: event 2 (p1) is accepted.
    assert 2 in [e.payload["id"] for e in events(res["s"].items)]


def test_settings_are_validated():
    with pytest.raises(InvalidSettingsError, match=r"late_arrival_tolerance=5: a bare number"):
        EventOrderingPolicy(late_arrival_tolerance=5)
    with pytest.raises(InvalidSettingsError):
        EventOrderingPolicy(out_of_order_tolerance="-1s")
    with pytest.raises(InvalidSettingsError):
        EventOrderingPolicy(over="")
    with pytest.raises(InvalidSettingsError):
        EventOrderingPolicy(over="k", partitioned=True)


ITEMS = [ev(1, 0, 601), ev(2, 1, 601), ev(3, 600, 602), ev(4, 540, 603), ev(5, 360, 604),
         ev(6, 2000, 605, deviceId="x")]
POLICY = dict(late_arrival_tolerance="600s", out_of_order_tolerance="180s",
              early_arrival_window="300s")


@pytest.mark.parametrize("runtime", ["local", "spark"])
def test_diagnostics_side_output(runtime, tmp_path, request):
    if runtime == "spark":
        from cti.runtime.spark import SparkRuntime

        runtime = SparkRuntime(request.getfixturevalue("spark"), batch_sizes=[2])
    stream = bind(ITEMS, **POLICY)
    stream.diagnostics_to(JsonLinesOutputAdapterFactory(), str(tmp_path)).run(runtime)
    written = read_json_lines_output(tmp_path)
    expected = stream.run("local")["s"].diagnostics
    assert written == expected
    assert [(d.payload["id"], d.status, d.reason) for d in written] == [
        (1, "adjusted", "late"), (5, "adjusted", "out_of_order"), (6, "dropped", "early")]
    assert written[1].original_start == 360 * S and written[1].start == 420 * S
