"""The vectorised event-ordering ingress (``cti.ingress.ordered``) equals the row machine (the
definition, SPEC 7): the same output rows and the same state, on random streams cut into
random micro-batches (with partitions, combined or each alone, and substreams, clock ticks
and bad input)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from budget import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from ingress_machine import IngressMachine
from sortedcontainers import SortedList

from cti.errors import CtiError
from cti.events import EventShape
from cti.ingress import ordered
from cti.ingress.spec import StreamSpec
from cti.runtime.spark.schema import IN_SCHEMA, in_rows_from_pandas, out_rows_to_pandas
from cti.settings import AdvanceTimePolicy, EventOrderingPolicy
from cti.time import MAX_TIME, MIN_TIME, add, ticks

NULL = MIN_TIME


@st.composite
def specs(draw):
    shape = draw(st.sampled_from([EventShape.POINT, EventShape.INTERVAL]))
    policy = EventOrderingPolicy(
        late_arrival_tolerance=ticks(draw(st.integers(0, 12))),
        out_of_order_tolerance=ticks(draw(st.integers(0, 8))),
        early_arrival_window=draw(st.none() | st.integers(0, 10).map(ticks)),
        action=draw(st.sampled_from(list(AdvanceTimePolicy))),
        early_action=draw(st.sampled_from(list(AdvanceTimePolicy))),
        over=(over := draw(st.sampled_from([None, "k"]))),
        partitioned=over is None and draw(st.booleans()),
        timestamp_by_arrival=draw(st.booleans()), purge_idle_timelines=draw(st.booleans()))
    declared = draw(st.sampled_from([(), ("p0", "p1"), ("p0", "p1", "p2")]))
    return StreamSpec.from_settings("s", shape, None, ordering=policy,
                                    dead_letter=draw(st.booleans()),
                                    declared_partitions=declared)


@st.composite
def rows(draw, spec):
    """Events with arrival times, each partition its own clock (going back now and then
    where ``noisy``), late, early and out of order; in a keyed stream some without a payload
    (another shard's); maybe a bad row, wall-clock ticks (``ticking``: before a row, or after
    the last) or the end of input."""
    out, clocks = [], {}
    noisy, light = draw(st.booleans()), spec.ordering.over is not None and draw(st.booleans())
    ticking = draw(st.booleans())

    def tick(seq):
        if ticking and draw(st.integers(0, 4)) == 0:
            now = max(clocks.values(), default=0) + draw(st.integers(-3, 12))
            out.append((0, seq, now, "clock", NULL, NULL, None, None, None))
    partitions = draw(st.sampled_from([[None], [None, ""], ["p0", "p1"], ["p0", "p1", "p3"],
                                       [f"q{k}" for k in range(80)]]))  # (more than 64)
    kind = "point" if spec.shape is EventShape.POINT else "interval"
    for seq in range(draw(st.integers(0, 40))):
        part = draw(st.sampled_from(partitions))
        clocks[part] = arrival = clocks.get(part, draw(st.integers(0, 10))) + draw(
            st.integers(0, 3))
        arr = arrival - (3 if noisy and draw(st.integers(0, 9)) == 0 else 0)
        t = max(1, arr + draw(st.integers(-15, 15)))
        end = NULL if kind == "point" else t + draw(st.integers(1, 6))
        what = draw(st.integers(0, 19))
        tick(len(out) - sum(r[3] == "clock" for r in out))
        if noisy and what == 0:
            out.append((0, seq, arr, "invalid", NULL, NULL, "{}", "unreadable", part))
        elif noisy and what == 1:  # a row that breaks a rule of an event-ordering stream
            out.append(draw(st.sampled_from([
                (0, seq, arr, "cti", t, NULL, None, None, part),
                (0, seq, NULL, "cti", t, NULL, None, None, part),
                (0, seq, NULL, kind, t, end, '{"k":"a"}', None, part),  # no arrival time
                (0, seq, arr, kind, MAX_TIME, NULL if kind == "point" else MAX_TIME,
                 '{"k":"a"}', None, part),  # a sentinel time
                (0, seq, arr, kind, t, t if kind == "interval" else NULL, '{"k":"a"}', None,
                 part),  # an empty lifetime (a point: good)
                (0, seq, arr, kind, t, end, '{"n":1}', None, part)])))  # no key (with over=)
        elif light and what < 6:
            out.append((0, seq, arr, kind, t, end, None, None, part))
        else:
            key = draw(st.sampled_from(["a", "b", "c", 1]))
            payload = f'{{"k":{key!r},"n":{seq}}}'.replace("'", '"')
            out.append((0, seq, arr, kind, t, end, payload, None, part))
    received = len(out) - sum(r[3] == "clock" for r in out)
    tick(received)
    if draw(st.booleans()):
        out.append((0, received, NULL, "eos", NULL, NULL, None, None, None))
    return out


def frame(batch):
    return pd.DataFrame(batch, columns=[f.name for f in IN_SCHEMA.fields])


def _numpy_values(value) -> bool:
    if isinstance(value, np.generic):
        return True
    if isinstance(value, dict):
        return any(_numpy_values(k) or _numpy_values(v) for k, v in value.items())
    if hasattr(value, "__iter__") and not isinstance(value, str):
        return any(_numpy_values(v) for v in value)
    return False


def canonical(value):
    """State as comparable data: dicts by sorted key (their order means nothing), sorted
    lists as lists."""
    if isinstance(value, dict):
        return sorted((repr(k), canonical(v)) for k, v in value.items())
    if isinstance(value, SortedList):
        return [canonical(v) for v in value]
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    if hasattr(value, "__iter__") and not isinstance(value, str):  # deque
        return [canonical(v) for v in value]
    return value


def _same_step(row_machine: IngressMachine, mixed: IngressMachine, batch: list,
               note=lambda _: None) -> bool | None:
    """Process ``batch`` in the row machine and through the vectorised path (``mixed``) and
    check they give the same output (by stream and sequence) and state, or raise the same
    error (None); the vectorised path takes every batch (True). ``note``:
    ``hypothesis.event`` in a property test."""
    try:
        want = out_rows_to_pandas(row_machine.process(in_rows_from_pandas(frame(batch))))
    except CtiError as exc:  # bad input raises: the vectorised path raises the same
        with pytest.raises(type(exc)) as raised:
            ordered.process_group(mixed, frame(batch))
        assert str(raised.value) == str(exc)
        note("raised, vectorised")
        return None
    got = ordered.process_group(mixed, frame(batch))
    assert got is not None, "the vectorised path declined"
    if (got["status"] == "invalid").any():
        note("dead letters, vectorised")
    if mixed.failing:
        note("another shard's bad event: failing, vectorised")
    order = ["stream", "seq"]
    pd.testing.assert_frame_equal(
        got.sort_values(order, kind="stable").reset_index(drop=True),
        want.sort_values(order, kind="stable").reset_index(drop=True), check_dtype=False)
    assert canonical(mixed.state) == canonical(row_machine.state)
    assert not _numpy_values(mixed.state)  # (plain data, as the row machine's)
    assert mixed.failing == row_machine.failing
    return True


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_vectorised_event_ordering_equals_the_row_machine(data):
    spec = data.draw(specs())
    items = data.draw(rows(spec))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(items)), max_size=4)))
    batches = [items[a:b] for a, b in zip([0, *cuts], [*cuts, len(items)], strict=True)]
    if len(batches) > 1 and batches[0]:  # a replayed row (already seen) is skipped by both
        batches[1] = batches[0][-1:] + batches[1]
    row_machine, mixed = IngressMachine([spec]), IngressMachine([spec])
    used = 0
    for batch in batches:
        step = _same_step(row_machine, mixed, batch, event)
        if step is None:
            return
        used += step
    event(f"vectorised batches: {min(used, 2)}")
    if any(r[3] == "clock" for r in items):
        event("clock ticks")
    event(f"timelines purged: {min(mixed.state.streams[0].ordering.purged, 2)}")


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_the_lowest_timeline_max_equals_the_minimum_over_the_timelines(data):
    """``ordered._lowest`` (a running maximum over the levels the timelines leave) is, after
    each row of a run, the minimum over the alive timelines of each one's max."""
    t = data.draw(st.integers(1, 6))
    current = np.asarray(data.draw(st.lists(st.sampled_from([MIN_TIME, 0, 3, 5, 9]),
                                            min_size=t, max_size=t)), np.int64)
    alive = np.asarray(sorted(data.draw(st.sets(st.integers(0, t - 1), min_size=1))))
    here = np.asarray(data.draw(st.lists(st.sampled_from(alive.tolist()), max_size=30)),
                      np.int64)
    values = np.asarray(data.draw(st.lists(st.integers(-2, 14), min_size=len(here),
                                           max_size=len(here))), np.int64)
    level = current.copy()
    want, after = [], []
    for c, v in zip(here.tolist(), values.tolist(), strict=True):
        level[c] = max(level[c], v)
        after.append(level[c])
        want.append(int(level[alive].min()))
    got = ordered._lowest(current, alive, here, np.asarray(after, np.int64))
    assert got.tolist() == want


@given(values=st.lists(st.sampled_from([MIN_TIME, MAX_TIME, MIN_TIME + 1, MAX_TIME - 1])
                       | st.integers(MIN_TIME, MAX_TIME), max_size=20),
       d=st.sampled_from([MAX_TIME, -MAX_TIME, 2**62, -2**62]) | st.integers(-50, 50),
       each=st.booleans())
def test_saturating_addition_of_arrays_equals_the_time_modules(values, d, each):
    """``ordered._sat`` adds as ``cti.time.add`` does (saturating at the sentinels, which
    stay), one duration for all or one each."""
    array = np.asarray(values, np.int64)
    got = ordered._sat(array, np.full(len(values), d, np.int64) if each else d)
    assert got.tolist() == [add(v, d) for v in values]


def test_the_common_case_takes_the_vectorised_path():
    for over in (None, "k"):
        spec = StreamSpec.from_settings("s", EventShape.POINT, None, ordering=EventOrderingPolicy(
            late_arrival_tolerance=ticks(5), out_of_order_tolerance=ticks(3), over=over))
        batch = [(0, i, 10 * i, "point", 10 * i - i % 4, NULL, f'{{"k":"{i % 3}"}}', None, None)
                 for i in range(20)]
        machine = IngressMachine([spec])
        assert ordered.process_group(machine, frame(batch)) is not None


def test_a_hundred_partitions_combined_take_the_vectorised_path():
    """More than 64 partitions combined by their minimum watermark, new ones appearing in
    every micro-batch: vectorised, the same output and state as the row machine."""
    spec = StreamSpec.from_settings("s", EventShape.POINT, None, ordering=EventOrderingPolicy(
        late_arrival_tolerance=ticks(50), out_of_order_tolerance=ticks(5), partitioned=True))
    rows_machine, machine = IngressMachine([spec]), IngressMachine([spec])
    items = [(0, i, i, "point", i - i % 7, NULL, f'{{"k":{i % 5}}}', None, f"p{i % 100}")
             for i in range(400)]
    for a in range(0, 400, 150):
        assert _same_step(rows_machine, machine, items[a:a + 150])
    assert len(machine.state.streams[0].ordering.timelines) == 100
    assert rows_machine.metrics()[0]["ctis"] > 10


@pytest.mark.parametrize("cut", [None, 3])
@pytest.mark.parametrize("rows, cti", [
    # p1's only event is dropped (early): no max, so the CTI stays at A - L while it is silent
    ([(10, 10, "p0"), (11, 100, "p1"), (20, 20, "p0"), (21, 21, "p2"), (30, 30, "p0"),
      (31, 31, "p2"), (40, 40, "p3"), (70, 70, "p0")], 70 - 50),
    # p0 rises in two runs, then stays silent while p1 and p2 rise: its max (80) is lowest
    ([(10, 10, "p0"), (30, 30, "p1"), (80, 80, "p0"), (81, 50, "p2"), (90, 90, "p1"),
      (95, 95, "p2")], 80 - 2),
    # p0 rises in a run where another is lowest, then stays silent: its max now (100) counts
    ([(t, t, p) for t, p in ((10, "p0"), (30, "p1"), (80, "p0"), (50, "p2"), (90, "p1"),
                             (60, "p3"), (100, "p0"), (120, "p4"), (110, "p2"), (130, "p3"))],
     90 - 2)])
def test_the_combined_cti_follows_the_lowest_partition_across_new_ones(cut, rows, cti):
    """Partitions combined by their minimum, new ones appearing in the micro-batch (each
    starts a run of its own): the stream's CTI follows the lowest partition max, a partition
    without one holding it at A - L; whole or in two micro-batches, as the row machine."""
    spec = StreamSpec.from_settings("s", EventShape.POINT, None, ordering=EventOrderingPolicy(
        late_arrival_tolerance=ticks(50), out_of_order_tolerance=ticks(2),
        early_arrival_window=ticks(5), early_action=AdvanceTimePolicy.DROP))
    items = [(0, i, arrival, "point", t, NULL, "{}", None, part)
             for i, (arrival, t, part) in enumerate(rows)]
    rows_machine, machine = IngressMachine([spec]), IngressMachine([spec])
    for batch in (items[:cut], items[cut:]) if cut else (items,):
        assert _same_step(rows_machine, machine, batch)
    assert machine.state.streams[0].cti == cti


def test_an_arrival_going_back_across_micro_batches_is_dead_lettered():
    """Within a partition, an arrival before the last one of an earlier micro-batch is bad
    input: dead-lettered by the vectorised path, as by the row machine."""
    spec = StreamSpec.from_settings("s", EventShape.POINT, None, dead_letter=True,
                                    ordering=EventOrderingPolicy(late_arrival_tolerance=ticks(5)))
    machine = IngressMachine([spec])
    first = [(0, 0, 10, "point", 10, NULL, "{}", None, "p0"),
             (0, 1, 12, "point", 12, NULL, "{}", None, "p1")]
    assert ordered.process_group(machine, frame(first)) is not None
    later = IngressMachine([spec], pickle.loads(pickle.dumps(machine.state)))
    on_time = [(0, 2, 11, "point", 11, NULL, "{}", None, "p0")]  # p0's clock was at 10
    assert ordered.process_group(later, frame(on_time)) is not None
    back = [(0, 2, 11, "point", 11, NULL, "{}", None, "p1")]  # p1's was at 12
    rows_machine = IngressMachine([spec], pickle.loads(pickle.dumps(machine.state)))
    assert _same_step(rows_machine, machine, back)
    assert rows_machine.metrics()[0]["invalid"] == 1
    # A bad row with a good arrival time still moves its partition's clock.
    cti = [(0, 3, 20, "cti", 20, NULL, None, None, "p2")]
    assert _same_step(rows_machine, machine, cti)
    assert machine.state.streams[0].partition_arrival["p2"] == 20


def test_a_declared_partition_whose_first_event_is_dropped_is_forgotten_at_once():
    """A declared partition's timeline has no max until an event is kept; purging forgets it
    at its first event if that one is dropped, as the row machine does."""
    spec = StreamSpec.from_settings(
        "s", EventShape.POINT, None, declared_partitions=("p0", "p1"),
        ordering=EventOrderingPolicy(late_arrival_tolerance=ticks(2), partitioned=True,
                                     purge_idle_timelines=True))
    batch = [(0, 0, 10, "point", 10, NULL, "{}", None, "p1"),
             (0, 1, 20, "point", 5, NULL, "{}", None, "p0")]  # late: dropped
    row_machine, mixed = IngressMachine([spec]), IngressMachine([spec])
    want = out_rows_to_pandas(row_machine.process(in_rows_from_pandas(frame(batch))))
    got = ordered.process_group(mixed, frame(batch))
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_dtype=False)
    assert canonical(mixed.state) == canonical(row_machine.state)
    assert "p0" not in mixed.state.streams[0].ordering.timelines


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_stream_importing_the_ordered_streams_ctis_takes_them_in_place(data):
    """An event-ordering stream and a slow stream importing its CTIs: the first vectorised,
    its CTIs handed to the row machine at their place in arrival order; the same output and
    state as the row machine alone, batch after batch."""
    spec = data.draw(specs())
    slow = StreamSpec("r", EventShape.POINT, import_from=0,
                      policy=data.draw(st.sampled_from(list(AdvanceTimePolicy))),
                      dead_letter=spec.dead_letter)
    fast = data.draw(rows(spec))
    clock, reference = 0, []
    for seq in range(data.draw(st.integers(0, 8))):
        clock += data.draw(st.integers(0, 12))
        reference.append((1, seq, clock, "point", max(1, clock - data.draw(st.integers(0, 20))),
                          NULL, f'{{"r":{seq}}}', None, None))
    if data.draw(st.booleans()):
        reference.append((1, len(reference), NULL, "eos", NULL, NULL, None, None, None))
    row_machine, mixed = IngressMachine([spec, slow]), IngressMachine([spec, slow])
    cuts = data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=4))
    a = b = used = 0
    for size in cuts * 10:
        batch = fast[a:a + size * 3] + reference[b:b + size]
        a, b = a + size * 3, b + size
        step = _same_step(row_machine, mixed, batch, event)
        if step is None:
            return
        used += step
        if a >= len(fast) and b >= len(reference):
            break
    event(f"vectorised group batches: {min(used, 2)}")
