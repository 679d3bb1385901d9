"""The vectorised ingress path equals the row machine (the definition, SPEC 3-5): same output
rows and the same state, on random batches, bad input, clock ticks and raised errors
included."""

from __future__ import annotations

import json
import pickle

import attrs
import pandas as pd
import pyarrow as pa
import pytest
from budget import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from ingress_machine import IngressMachine
from strategies import POLICIES, SHAPES, StreamDef, arrivals, batch_sizes, bind, stream_defs

from cti.adapters import Arriving
from cti.engine.batch import read_rows
from cti.errors import BadInputError, CtiError
from cti.events import EdgeEvent, EventShape, IntervalEvent, PointEvent
from cti.forms import edges
from cti.forms.edges import writable
from cti.forms.rows import clock_row, eos_row
from cti.ingress import columns, importing, vectorized
from cti.ingress.spec import StreamSpec
from cti.runtime.spark.schema import (
    IN_SCHEMA,
    in_row_to_tuple,
    in_rows_from_pandas,
    out_rows_to_pandas,
)
from cti.settings import (
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
)
from cti.time import MAX_TIME, MIN_TIME

NULL = MIN_TIME


@st.composite
def specs(draw):
    """A stream that generates its CTIs (by count or span) or not (its adapter's CTIs only),
    with a policy or, without settings, none (a violation of its adapter's CTI is an error)."""
    shape = draw(st.sampled_from([EventShape.POINT, EventShape.INTERVAL]))
    generation = draw(st.sampled_from(["count", "span", "adapter", "no settings"]))
    if generation == "no settings":
        return StreamSpec("s", shape, dead_letter=draw(st.booleans()))
    count = draw(st.integers(1, 4)) if generation == "count" else None
    return StreamSpec(
        "s", shape, event_count=count,
        duration=draw(st.integers(1, 8)) if generation == "span" else None,
        delay=draw(st.integers(-2, 6)),
        advance_to_infinity_on_shutdown=draw(st.booleans()),
        policy=draw(st.sampled_from(list(AdvanceTimePolicy))), dead_letter=draw(st.booleans()))


@st.composite
def rows(draw, shape):
    out = []
    arrival, noisy = draw(st.booleans()), draw(st.booleans())
    kinds = ["event"] * 6 + ["cti"] + (["bad", "back"] if noisy else [])
    clock = 0
    for seq in range(draw(st.integers(0, 30))):
        what = draw(st.sampled_from(kinds))
        t = draw(st.integers(0, 40))
        clock = max(clock, t) if what != "back" else clock - 3
        arr = clock if arrival or what == "back" else NULL
        if what == "cti":
            out.append((0, seq, arr, "cti", t, NULL, None, None, None))
        elif what == "bad":
            out.append((0, seq, arr, "invalid", NULL, NULL, "{}", "unreadable", None))
        else:
            kind = "point" if shape is EventShape.POINT else "interval"
            end = NULL if kind == "point" else t + draw(st.integers(1, 10))
            out.append((0, seq, arr, kind, t, end, f'{{"n":{seq}}}', None, None))
    if draw(st.booleans()):
        out.append((0, len(out), NULL, "eos", NULL, NULL, None, None, None))
    return out


def frame(batch):
    return pd.DataFrame(batch, columns=[f.name for f in IN_SCHEMA.fields])


@settings(max_examples=examples(150), deadline=None)
@given(data=st.data())
def test_vectorised_ingress_equals_the_row_machine(data):
    spec = data.draw(specs())
    items = data.draw(rows(spec.shape))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(items)), max_size=4)))
    batches = [items[a:b] for a, b in zip([0, *cuts], [*cuts, len(items)], strict=True)]
    # A replayed row (already seen) is skipped by both.
    if len(batches) > 1 and batches[0]:
        batches[1] = batches[0][-1:] + batches[1]
    row_machine, mixed = IngressMachine([spec]), IngressMachine([spec])
    want, got, used, dead = [], [], 0, 0
    for batch in batches:
        try:
            want.append(out_rows_to_pandas(row_machine.process(in_rows_from_pandas(frame(batch)))))
        except CtiError as exc:  # bad input raises: the vectorised path raises the same
            with pytest.raises(type(exc)) as raised:
                vectorized.process(spec, mixed.state.streams[0], frame(batch))
            assert str(raised.value) == str(exc)
            event(f"raised: {type(exc).__name__}")
            return
        fast = vectorized.process(spec, mixed.state.streams[0], frame(batch))
        if fast is None:
            fast = out_rows_to_pandas(mixed.process(in_rows_from_pandas(frame(batch))))
        else:
            used += 1
            dead += int((fast["status"] == "invalid").sum())
            if fast["reason"].str.contains("declares no AdvanceTimePolicy").any():
                event("a violation of the adapter's CTI dead-lettered, vectorised")
        got.append(fast)
        assert pickle.dumps(mixed.state) == pickle.dumps(row_machine.state)
    event(f"vectorised batches: {min(used, 2)}")
    event(f"{'generated' if spec.generates else 'adapter'} CTIs, "
          f"{'a' if spec.policy else 'no'} policy")
    event(f"dead letters vectorised: {min(dead, 2)}")
    w, g = pd.concat(want, ignore_index=True), pd.concat(got, ignore_index=True)
    pd.testing.assert_frame_equal(g, w, check_dtype=False)


def test_the_common_case_takes_the_vectorised_path():
    spec = StreamSpec("s", EventShape.POINT, event_count=2, delay=1,
                      advance_to_infinity_on_shutdown=True, policy=AdvanceTimePolicy.DROP)
    batch = [(0, k, NULL, "point", t, NULL, "{}", None, None) for k, t in enumerate([5, 3, 9, 1])]
    batch.append((0, 4, NULL, "eos", NULL, NULL, None, None, None))
    machine = IngressMachine([spec])
    out = vectorized.process(spec, machine.state.streams[0], frame(batch))
    assert out is not None
    assert list(out["status"]) == ["accepted", "accepted", "cti", "accepted", "dropped", "cti",
                                   "cti"]
    assert list(out["start"])[2] == 4 and list(out["start"])[-1] == MAX_TIME


@pytest.mark.parametrize("bad_first", [True, False])
def test_a_stream_without_settings_raises_for_what_comes_first(bad_first):
    """A stream with no advance-time settings, vectorised: an event behind its adapter's CTI
    raises ``CtiViolationError``, an unreadable row ``BadInputError``; whichever comes first,
    as the row machine has it."""
    spec = StreamSpec("s", EventShape.POINT)
    bad = (0, 0, NULL, "invalid", NULL, NULL, "x,y", "unreadable", None)
    late = (0, 0, NULL, "point", 3, NULL, '{"n":1}', None, None)
    batch = [(0, 0, NULL, "cti", 10, NULL, None, None, None), *([bad, late] if bad_first
                                                                else [late, bad])]
    batch = [row[:1] + (k,) + row[2:] for k, row in enumerate(batch)]
    with pytest.raises(CtiError) as want:
        IngressMachine([spec]).process(in_rows_from_pandas(frame(batch)))
    with pytest.raises(type(want.value), match="unreadable" if bad_first else "violates CTI"):
        vectorized.process(spec, IngressMachine([spec]).state.streams[0], frame(batch))


@settings(max_examples=examples(75), deadline=None, suppress_health_check=list(HealthCheck))
@given(defs=stream_defs(second_stream=None, stray_edge_ends=True, no_settings=None),
       sizes=batch_sizes,
       noise=st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["tick", "back"])),
                      max_size=2))
def test_group_path_equals_the_row_machine(defs, sizes, noise):
    """A stream alone, or a fast stream and a stream importing its CTIs: the fast one
    vectorised (its CTIs generated, or only its adapter's without settings), its CTIs handed
    to the row machine at their place in arrival order; the same output and state as the row
    machine alone, batch after batch; wall-clock ticks among the fast stream's rows (a batch
    after one, its merge arrival ahead of the data's, vectorised too), and arrivals that go
    back (bad input)."""
    specs, inputs = _group_inputs(defs)
    if any(r.arrival is not None for r in inputs[0]):
        inputs[0] = noisy(inputs[0], noise)
    event(f"{len(specs)} streams, the first {specs[0].shape.value} with"
          f"{'out' if specs[0].policy is None else ''} settings")
    taken, ahead = [], []
    original, process = importing.process, vectorized._process

    def spy(*args):
        got = original(*args)
        taken.append(got is not None)
        return got

    def spy_fast(spec, st_, *args, **kwargs):
        behind = st_.data_arrival < st_.last_arrival
        got = process(spec, st_, *args, **kwargs)
        ahead.append(behind and got is not None)
        return got

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(importing, "process", spy)
        patch.setattr(vectorized, "_process", spy_fast)
        _group_steps(specs, inputs, sizes)
    if len(specs) > 1 and any(taken):
        event("the importing stream vectorised" + (
            ", its own CTIs generated" if specs[1].generates else ""))
    if any(ahead):
        event("vectorised after a clock tick ahead of the data")


@settings(max_examples=examples(75), deadline=None, suppress_health_check=list(HealthCheck))
@given(defs=st.one_of(*(stream_defs(chain=n, adapter_ctis=None, no_settings=None,
                                     max_size=16 // n) for n in (2, 3, 4))),
       sizes=batch_sizes)
def test_an_importing_stream_with_ctis_of_its_own_equals_the_row_machine(defs, sizes):
    """A stream that imports another's CTIs and generates its own, or gets CTIs from its
    adapter, alone or along a chain a -> b -> c (-> d): each CTI, imported or its own, moves
    its time in processing order, as the row machine has them (``importing.process``), and
    goes down the chain in its place in arrival order."""
    specs, inputs = _group_inputs(defs)
    took = []
    original = importing.process

    def spy(machine, rows, exporter, j):
        got = original(machine, rows, exporter, j)
        took.append(got is not None and bool(len(got[1])) and exporter == 1)
        return got

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(importing, "process", spy)
        _group_steps(specs, inputs, sizes)
    own = ("generated" if specs[1].generates else "") + (
        " adapter" if any(r.kind == "cti" for r in inputs[1]) else "")
    event(f"{len(specs)} streams; b's own CTIs: {own or 'none'}")
    if any(took):
        event("CTIs passed down the chain from a vectorised stream")


def _group_steps(specs, inputs, sizes) -> None:
    """The group's inputs in batches of ``sizes`` rows per stream, by the row machine and the
    vectorised group path side by side (``same_step``)."""
    rows_machine, mixed = IngressMachine(specs), IngressMachine(specs)
    pos, k, used = [0] * len(inputs), 0, 0
    while any(p < len(rows) for p, rows in zip(pos, inputs, strict=True)):
        size = sizes[k % len(sizes)]
        batch = [r for i, rows in enumerate(inputs) for r in rows[pos[i]:pos[i] + size]]
        pos = [p + size for p in pos]
        k += 1
        step = same_step(rows_machine, mixed, batch)
        if step is None:
            event("raised, vectorised")
            return
        if mixed.failing:
            event("another shard's bad event: failing, vectorised")
        used += step
    event(f"vectorised group batches: {min(used, 2)}")



def _group_inputs(defs) -> tuple[list, list[list]]:
    """A group's stream specs and each stream's input rows, ended."""
    group = bind(defs)[0].ingress_group()
    inputs = []
    for i, s in enumerate(group.streams):
        adapter = s.factory.create(s.config, s.shape)
        n = adapter.latest_offset()
        inputs.append(read_rows(i, adapter, 0, n) + [eos_row(i, n)])
    return group.specs(), inputs


@st.composite
def reference_groups(draw):
    """A fast stream ``a`` that generates its CTIs and one to three slow ones that only import
    CTIs, as reference data: each from ``a`` or from a slow stream before it (a chain: a -> b
    -> c); points, intervals or edges (some sharing a start and payload; ends of edges that
    started before, now and then one that closes nothing), DROP or ADJUST, with arrival times
    or without (arriving at their sync times)."""
    fast = draw(stream_defs(second_stream=False, shapes=(EventShape.POINT,
                                                          EventShape.INTERVAL),
                            adapter_ctis=False, with_arrival=True))[0]
    names = "abcd"[:draw(st.integers(2, 4))]
    return [fast, *(draw(slow_stream(name, draw(st.sampled_from(names[:k + 1]))))
                    for k, name in enumerate(names[1:]))]


@st.composite
def slow_stream(draw, name, exporter="a"):
    """A slow stream ``name`` that imports stream ``exporter``'s CTIs (see
    ``reference_groups``)."""
    shape = draw(st.sampled_from(SHAPES))
    n = draw(st.integers(0, 12))
    items, opened = [], []
    timed = draw(st.booleans())  # else each row arrives at its sync time
    for k, t in enumerate(draw(arrivals(n, max_step=6))):
        start = draw(st.integers(0, 40))
        payload = {"id": f"{name}{draw(st.integers(0, k))}"}
        if shape is EventShape.EDGE and opened and draw(st.integers(0, 2)) == 0:
            # A reference row replaced: an end of an edge that started before, or now and
            # then one that closes nothing (bad input, for the row machine).
            start, payload = opened.pop(draw(st.integers(0, len(opened) - 1))) if draw(
                st.integers(0, 5)) else (start, payload)
            event_ = EdgeEvent.end_edge(start, start + draw(st.integers(1, 60)), payload)
        else:
            event_ = (PointEvent(start, payload) if shape is EventShape.POINT else
                      IntervalEvent(start, start + draw(st.integers(1, 9)), payload)
                      if shape is EventShape.INTERVAL else EdgeEvent.start_edge(start, payload))
            opened.append((start, payload))
        items.append(Arriving(event_, t) if timed else event_)
    return StreamDef(name, shape, tuple(items), AdvanceTimeSettings(
        import_settings=AdvanceTimeImportSettings(exporter),
        policy=draw(st.sampled_from(POLICIES))), draw(st.sampled_from(["dead_letter", "raise"])))


NOISE = ["unreadable", "sentinel", "empty", "back", "shape", "tick"]


def noisy(rows: list, noise: list[tuple[int, str]]) -> list:
    """The input ``rows`` (ended) with bad rows: at each (position, what) of ``noise``, the
    row made unreadable, a sentinel start (or end), an empty lifetime, an arrival gone back, or an
    event of another shape; or a wall-clock tick before it (not bad input), a little or further
    ahead of its arrival."""
    rows, done = list(rows), set()
    ticks = []
    for at, what in noise:
        k = at % max(len(rows) - 1, 1)
        if k >= len(rows) - 1 or k in done:
            continue  # (the end of input stays; one problem a row)
        done.add(k)
        row = rows[k]
        if what == "tick":
            ahead = (row.arrival or 0) + 1 + 20 * (k % 3)
            ticks.append((k, clock_row(row.stream, row.seq, ahead)))
            continue
        rows[k] = {
            "unreadable": lambda r: r._replace(kind="invalid", start=None, end=None,
                                               error="unreadable"),
            "sentinel": lambda r: r._replace(start=MAX_TIME) if r.end is None or r.seq % 2
            else r._replace(end=MAX_TIME),
            "empty": lambda r: r._replace(end=r.start) if r.end is not None else r,
            "back": lambda r: r._replace(arrival=r.arrival - 100) if r.arrival else r,
            "shape": lambda r: r._replace(kind="interval" if r.kind == "point" else "point",
                                          end=None if r.kind != "point" else r.start + 1),
        }[what](row)
    for k, tick in sorted(ticks, key=lambda t: -t[0]):
        rows.insert(k, tick)
    return rows


@settings(max_examples=examples(100), deadline=None, suppress_health_check=list(HealthCheck))
@given(defs=reference_groups(), sizes=batch_sizes,
       noise=st.lists(st.tuples(st.integers(0, 30), st.sampled_from(NOISE)), max_size=3))
def test_a_slow_stream_that_only_imports_runs_vectorised_as_the_row_machine(defs, sizes,
                                                                            noise):
    """Each slow stream's rows and imported CTIs merged by arrival without the row machine
    (``cti.ingress.importing``), one to three slow streams, some down a chain: the same
    output and state, batch after batch, rows held back until the streams up their chain
    pass them included; bad rows dead-lettered in their place (the row machine raises where
    the stream raises)."""
    specs, inputs = _group_inputs(defs)
    inputs = [noisy(rows, noise) for rows in inputs]  # (the fast stream's too: which raises)
    taken, dead, down, ticked = [], [], [], []
    original = importing.process

    def spy(machine, rows, exporter, j):
        got = original(machine, rows, exporter, j)
        taken.append(got is not None)
        down.append(got is not None and exporter != 0 and bool(len(got[0])))
        dead.append(got is not None and bool((got[0]["status"] == "invalid").any()))
        ticked.append(got is not None and bool((rows["kind"] == "clock").any()))
        return got

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(importing, "process", spy)
        _group_steps(specs, inputs, sizes)
    chain = max(_depth(specs, j) for j in range(len(specs)))
    event(f"{len(specs) - 1} slow streams, chain of {chain + 1}; batches vectorised: "
          f"{min(sum(taken), 3)}")
    if any(down):
        event("a stream down a chain vectorised")
    if any(dead):
        event("dead letters, vectorised")
    if any(ticked):
        event("clock ticks, vectorised")


@pytest.mark.parametrize("tables", [1, 2])
def test_reference_data_before_the_fast_stream_takes_the_vectorised_path(tables):
    """Reference rows (of one or two reference streams) loaded before the first fast event,
    in one batch with it: no row machine step, and the same result."""
    fast = StreamDef("a", EventShape.POINT, tuple(
        Arriving(PointEvent(t, {"k": t % 3}), t) for t in range(10, 30)),
        AdvanceTimeSettings.increasing_start_time())
    slow = [StreamDef(name, EventShape.EDGE, tuple(
        Arriving(EdgeEvent.start_edge(5, {"k": k}), 5) for k in range(3)),
        AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("a"),
                            policy=AdvanceTimePolicy.ADJUST)) for name in "bc"[:tables]]
    specs, inputs = _group_inputs([fast, *slow])
    rows_machine, mixed = IngressMachine(specs), IngressMachine(specs)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(IngressMachine, "_process_row", lambda *a: pytest.fail("row machine"))
        got = vectorized.process_group(mixed, frame([in_row_to_tuple(r) for rows in inputs
                                                     for r in rows]))
    want = out_rows_to_pandas(rows_machine.process([r for rows in inputs for r in rows]))
    order = ["stream", "seq"]
    pd.testing.assert_frame_equal(got.sort_values(order).reset_index(drop=True),
                                  want.sort_values(order).reset_index(drop=True),
                                  check_dtype=False)
    assert mixed.state == rows_machine.state
    for j in range(1, tables + 1):
        assert (got["stream"] == j).sum() > 3  # the edges and the CTIs imported


@pytest.mark.parametrize("end", [MAX_TIME, 5])
def test_a_reference_edge_end_at_infinity_or_empty_is_dead_lettered_vectorised(end):
    """An edge end (a rare row among a reference stream's starts) at the sentinel time or
    with an empty lifetime is bad input, dead-lettered in its place by the vectorised path."""
    fast = StreamDef("a", EventShape.POINT, tuple(
        Arriving(PointEvent(t, {"k": t % 3}), t) for t in range(10, 30)),
        AdvanceTimeSettings.increasing_start_time())
    slow = StreamDef("b", EventShape.EDGE, (
        Arriving(EdgeEvent.start_edge(5, {"k": 1}), 5),
        Arriving(EdgeEvent.end_edge(5, 12, {"k": 1}), 12)),
        AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("a"),
                            policy=AdvanceTimePolicy.ADJUST), "dead_letter")
    specs, inputs = _group_inputs([fast, slow])
    inputs[1][1] = inputs[1][1]._replace(end=end)
    rows_machine, mixed = IngressMachine(specs), IngressMachine(specs)
    taken = []
    original = importing.process

    def spy(*args):
        taken.append(original(*args))
        return taken[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(importing, "process", spy)
        assert same_step(rows_machine, mixed, [r for rows in inputs for r in rows])
    assert taken[0] is not None and rows_machine.metrics()[1]["invalid"] == 1


def _depth(specs: list[StreamSpec], j: int) -> int:
    """How many imports stream ``j`` is from the stream that imports nothing."""
    return 0 if specs[j].import_from is None else 1 + _depth(specs, specs[j].import_from)


def same_step(rows_machine: IngressMachine, mixed: IngressMachine, batch: list) -> bool | None:
    """Process ``batch`` in the row machine and through the vectorised group path (``mixed``)
    and check they give the same output and state, or raise the same ``CtiError`` (None);
    the vectorised path takes every batch (True)."""
    table = frame([in_row_to_tuple(r) for r in batch])
    try:
        want = out_rows_to_pandas(rows_machine.process(batch))
    except CtiError as exc:  # the vectorised path raises the same error
        with pytest.raises(type(exc)) as raised:
            vectorized.process_group(mixed, table)
        assert str(raised.value) == str(exc)
        return None
    got = vectorized.process_group(mixed, table)
    assert got is not None, "the vectorised path declined"
    used = True
    order = ["stream", "seq"]
    pd.testing.assert_frame_equal(
        got.sort_values(order, kind="stable").reset_index(drop=True),
        want.sort_values(order, kind="stable").reset_index(drop=True), check_dtype=False)
    assert mixed.state == rows_machine.state
    return used


def _as_shard_1(specs: list[StreamSpec], rows: pd.DataFrame, routed: pd.DataFrame,
                shard: IngressMachine | None = None
                ) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The row machine's output for ``rows`` and shard 1's vectorised output for ``routed``
    (the same rows with ``own``; ``shard``: its machine, new by default), after checking both
    leave the same state (the vectorised path takes every batch); None where the row machine
    raises."""
    row_machine, shard = IngressMachine(specs), shard or IngressMachine(specs)
    try:
        want = out_rows_to_pandas(row_machine.process(in_rows_from_pandas(rows)))
    except CtiError:
        return None
    got = vectorized.process_group(shard, routed, owner=1)
    assert got is not None, "the vectorised path declined"
    assert pickle.dumps(shard.state) == pickle.dumps(row_machine.state)
    assert shard.failing == row_machine.failing  # (going on after another shard's bad event)
    return want, got


@settings(max_examples=examples(200), deadline=None)
@given(data=st.data(), routed=st.booleans())
def test_owner_mode_outputs_the_owned_events_and_counts_the_rest(data, routed):
    """A query shard's ingress (``owner``): the same state as the row machine; of the events
    only its own rows, with their row numbers; every CTI row; and one weighted summary row per
    event status that counts all the stream's events. ``routed``: the other shards' events
    come without their payloads, as the source routes them, and the stream raises for bad
    input: where another shard's event is the first bad row, its owner raises and this shard
    goes on as the row machine does, outputting and counting no bad row."""
    spec = data.draw(specs())
    if routed:
        spec = attrs.evolve(spec, dead_letter=False)
    items = [r for r in data.draw(rows(spec.shape)) if r[3] != "invalid"]
    items = [(*r[:1], seq, *r[2:]) for seq, r in enumerate(items)]
    owners = data.draw(st.lists(st.integers(0, 2), min_size=len(items), max_size=len(items)))
    table = frame(items).assign(own=owners)
    if routed:
        table["payload"] = table["payload"].where(table["own"] == 1, None)
    machine = IngressMachine([spec])
    done = _as_shard_1([spec], table.drop(columns="own") if routed else frame(items), table,
                       machine)
    if done is None:
        return
    if machine.failing:
        event("another shard's bad event first: vectorised, going on")
    want, got = done
    statuses = ("accepted", "adjusted", "dropped")
    own = dict(zip(table["seq"], table["own"], strict=True))
    mine = want[~want["status"].isin(statuses) | want["in_seq"].map(own).eq(1)]
    listed = got[got["kind"] != "summary"]
    pd.testing.assert_frame_equal(listed.drop(columns="weight").reset_index(drop=True),
                                  mine.reset_index(drop=True), check_dtype=False)
    assert (listed["weight"] == (~listed["status"].isin(statuses)).astype(int)).all()
    counted = got[got["kind"] == "summary"].set_index("status")["weight"].to_dict()
    expected = want[want["status"].isin(statuses)]["status"].value_counts().to_dict()
    assert counted == expected


# Typed payload columns (``cti.adapters.FIELD_COLUMN``): a type and values of it (or null).
TYPED_VALUES = {pa.int64(): st.integers(-2**63, 2**63 - 1), pa.float64(): st.floats(),
                pa.bool_(): st.booleans(), pa.string(): st.text(max_size=3)}


@settings(max_examples=examples(200), deadline=None)
@given(data=st.data())
def test_a_shards_chunk_straight_from_the_arrays_is_the_chunk_of_its_rows(data):
    """``shard_chunk`` (a shard that passes no rows on): the same state as ``process_group``,
    its rows without the owner's event rows, the chunk ``_chunk`` takes from those rows, and,
    where every kept event has its typed payload columns, those columns of exactly the kept
    events (each value the one its payload's JSON text has); else none. A row whose typed
    columns are its payload has no text (the chunk writes it: the same texts)."""
    from cti.adapters import FIELD_COLUMN, field_marker
    from cti.engine.shard import chunk as _chunk
    from cti.engine.shard import written

    spec = data.draw(specs())
    items = [r for r in data.draw(rows(spec.shape)) if r[3] != "invalid"]
    items = [(*r[:1], seq, *r[2:]) for seq, r in enumerate(items)]
    kind = data.draw(st.sampled_from(sorted(TYPED_VALUES, key=str)))
    values = data.draw(st.lists(st.none() | TYPED_VALUES[kind], min_size=len(items),
                                max_size=len(items)))
    given_ = [r[6] is not None and data.draw(st.integers(0, 9)) > 0 for r in items]
    items = [(*r[:6], json.dumps({"k": v, "n": r[1]}, sort_keys=True)
              if r[6] is not None else None, *r[7:])
             for v, r in zip(values, items, strict=True)]
    owners = data.draw(st.lists(st.integers(0, 2), min_size=len(items), max_size=len(items)))
    typed = {FIELD_COLUMN: pa.array([field_marker(["k", "n"]) if g else None for g in given_],
                                    pa.string()),
             FIELD_COLUMN + "k": pa.array(values, kind),
             FIELD_COLUMN + "n": pa.array(range(len(items)), pa.int64())}
    items = [(*r[:6], None if g else r[6], *r[7:]) for r, g in zip(items, given_, strict=True)]
    table = frame(items).assign(own=owners, **{
        name: pd.arrays.ArrowExtensionArray(column) for name, column in typed.items()})
    full, shard = IngressMachine([spec]), IngressMachine([spec])
    try:
        want = vectorized.process_group(full, written(table), owner=1)
    except CtiError:
        return
    got = vectorized.shard_chunk(shard, table, 1)
    assert (got is None) == (want is None)
    if want is None:
        return
    event("vectorised")
    assert pickle.dumps(shard.state) == pickle.dumps(full.state)
    rows_got, chunk = got
    pd.testing.assert_frame_equal(rows_got.reset_index(drop=True),
                                  want[want["weight"] != 0].reset_index(drop=True))
    expected = _chunk(want, 0, 1, "k", 3)
    pd.testing.assert_frame_equal(chunk.events, expected.events)
    assert chunk.ctis == expected.ctis
    if not len(chunk.events):
        return
    parsed = [json.loads(p) for p in chunk.events["payload"]]
    if not all(given_[p["n"]] for p in parsed):
        assert chunk.columns == {}
        return
    event("typed columns known")
    assert sorted(chunk.columns) == ["k", "n"]
    for name, column in chunk.columns.items():
        assert column.type == typed[FIELD_COLUMN + name].type
        assert [json.dumps(v) for v in column.to_pylist()] == [json.dumps(p[name])
                                                               for p in parsed]


@settings(max_examples=examples(300), deadline=None)
@given(starts=st.lists(st.integers(0, 200).map(lambda k: 50 * k) | st.integers(0, 10_000),
                      max_size=60),
       span=st.integers(1, 60).map(lambda k: 50 * k) | st.integers(1, 3_000),
       gen_ref=st.none() | st.integers(0, 200).map(lambda k: 50 * k),
       before=st.integers(0, 10_000))
def test_span_points_are_the_generators_of_the_rule(starts, span, gen_ref, before):
    """``span_points`` (one search per generator, or a step per record) marks exactly the
    events SPEC 4's rule, applied event by event, makes generate a CTI (times on a grid of 50
    as often as not, so that a start lands exactly a span past a generator)."""
    import numpy as np

    if gen_ref is None:  # (no generator yet: no counted event yet either)
        before = MIN_TIME
    else:  # every event since the last generator started less than a span after it
        before = min(max(before, gen_ref), gen_ref + span - 1)
    want, ref = [], gen_ref
    for s in starts:
        want.append(ref is None or s - ref >= span)
        ref = s if want[-1] else ref
    got, new_ref = columns.span_points(np.asarray(starts, np.int64), before, gen_ref, span)
    assert got.tolist() == want and new_ref == ref


def _books(machine: IngressMachine) -> list[list]:
    """Each stream's open edges in the book's order (``==`` on dicts ignores it; a bulk
    book's as the dict it stands for)."""
    return [list(writable(s.open_edges).items()) for s in machine.state.streams]


@settings(max_examples=examples(250), deadline=None, suppress_health_check=list(HealthCheck))
@given(defs=stream_defs(second_stream=False, shapes=(EventShape.EDGE,), max_time_cti=True,
                        stray_edge_ends=True, no_settings=None), sizes=batch_sizes,
       data=st.data())
def test_an_edge_stream_runs_vectorised_as_the_row_machine(defs, sizes, data):
    """An edge stream that generates its CTIs, or has none but its adapter's and no policy:
    starts judged by the arrays, ends paired in arrival order with the earliest open start of
    their identity (dropped with it, dropped or moved behind the CTI, moved past an adjusted
    start); the same output and state, the book's order included, batch after batch. Bad rows
    (an end that closes nothing, a row the adapter could not read, a point on the edge stream;
    without a policy a start behind the adapter's CTI, never opened, and an end behind it that
    closes a start, which stays open) are dead-lettered, or the first one raises the row
    machine's error."""
    specs, inputs = _group_inputs(defs)
    specs = [attrs.evolve(specs[0], dead_letter=data.draw(st.booleans()))]
    rows = inputs[0]
    for at in data.draw(st.lists(st.integers(0, len(rows) - 2), max_size=2)
                        if len(rows) > 1 else st.just([])):
        rows[at] = rows[at]._replace(**data.draw(st.sampled_from([
            {"kind": "point"}, {"kind": "invalid", "error": "unreadable"}])))
    rows_machine, mixed = IngressMachine(specs), IngressMachine(specs)
    size, pos, used = sizes[0], 0, 0
    while pos < len(inputs[0]):
        step = same_step(rows_machine, mixed, inputs[0][pos:pos + size])
        if step is None:
            return
        assert _books(mixed) == _books(rows_machine)
        used += step
        pos += size
    event(f"vectorised edge batches: {min(used, 2)}")
    if specs[0].policy is None:
        event(f"no policy, vectorised edge batches: {min(used, 2)}")


def test_an_edge_stream_with_bulk_books_runs_vectorised_as_the_row_machine():
    """The same with every batch's starts, where no end comes and the book is empty, opened
    as a ``BulkBook`` (``edges.BULK_STARTS`` 1: a large reference table's form)."""
    saved, edges.BULK_STARTS = edges.BULK_STARTS, 1
    try:
        test_an_edge_stream_runs_vectorised_as_the_row_machine()
    finally:
        edges.BULK_STARTS = saved


def test_an_edge_stream_with_ends_takes_the_vectorised_path():
    spec = StreamSpec("s", EventShape.EDGE, event_count=1, delay=0,
                      advance_to_infinity_on_shutdown=True, policy=AdvanceTimePolicy.DROP)
    p, q = '{"id":"p"}', '{"id":"q"}'
    batch = [(0, 0, NULL, "edge_start", 5, NULL, p, None, None),
             (0, 1, NULL, "edge_start", 7, NULL, q, None, None),
             (0, 2, NULL, "edge_end", 5, 6, p, None, None),     # behind CTI 7: dropped
             (0, 3, NULL, "edge_end", 5, 9, p, None, None),     # closes the start at 5
             (0, 4, NULL, "edge_start", 3, NULL, p, None, None)]  # behind CTI 7: dropped
    machine = IngressMachine([spec])
    out = vectorized.process(spec, machine.state.streams[0], frame(batch))
    assert out is not None
    events = out[out["status"] != "cti"]
    assert list(events["status"]) == ["accepted", "accepted", "dropped", "accepted", "dropped"]
    assert list(events["end"])[3] == 9
    assert machine.state.streams[0].open_edges == {(7, q): [7], (3, p): [None]}


@pytest.mark.parametrize("dead_letter", [True, False])
def test_an_edge_stream_without_settings_takes_its_adapters_ctis_vectorised(dead_letter):
    """No settings, no policy: a start behind the adapter's CTI is an error and never opens
    (its end then closes nothing); an end behind it that closes a start is an error and the
    start stays open, for a later end to close. Dead-lettered, or the first raises, as the row
    machine has it, and the batch takes the vectorised path."""
    spec = StreamSpec("s", EventShape.EDGE, dead_letter=dead_letter)
    p, q = '{"id":"p"}', '{"id":"q"}'
    batch = [(0, 0, NULL, "edge_start", 5, NULL, p, None, None),
             (0, 1, NULL, "cti", 10, NULL, None, None, None),
             (0, 2, NULL, "edge_end", 5, 8, p, None, None),     # behind CTI 10: an error
             (0, 3, NULL, "edge_start", 7, NULL, q, None, None),  # behind CTI 10: an error
             (0, 4, NULL, "edge_end", 5, 12, p, None, None),    # closes the start at 5
             (0, 5, NULL, "edge_end", 7, 11, q, None, None)]    # closes nothing
    rows = IngressMachine([spec])
    mixed = IngressMachine([spec])
    if not dead_letter:
        with pytest.raises(CtiError) as want:
            rows.process(in_rows_from_pandas(frame(batch)))
        with pytest.raises(type(want.value)) as got:
            vectorized.process(spec, mixed.state.streams[0], frame(batch))
        assert str(got.value) == str(want.value)
        assert "input #2" in str(got.value) and "violates CTI" in str(got.value)
        return
    want = out_rows_to_pandas(rows.process(in_rows_from_pandas(frame(batch))))
    out = vectorized.process(spec, mixed.state.streams[0], frame(batch))
    assert out is not None
    pd.testing.assert_frame_equal(out, want, check_dtype=False)
    events = out[out["status"] != "cti"].set_index("in_seq")
    assert list(events["status"]) == ["accepted", "invalid", "invalid", "accepted", "invalid"]
    assert events.loc[4, "end"] == 12
    assert "violates CTI" in events.loc[2, "reason"] and "violates CTI" in events.loc[3, "reason"]
    assert "closes" in events.loc[5, "reason"]
    assert mixed.state == rows.state


@settings(max_examples=examples(200), deadline=None, suppress_health_check=list(HealthCheck))
@given(defs=stream_defs(second_stream=False, shapes=(EventShape.EDGE,), adapter_ctis=False,
                        no_settings=None), data=st.data())
def test_a_shard_pairs_and_reports_its_own_edges_only(defs, data):
    """A query shard's ingress of an edge stream: the other shards' edges come without their
    payloads, count for the CTIs and are neither paired nor output; the shard's own edges are
    paired and output with weight 1 (it reports them), as the row machine does. Some rows
    may be points, which do not fit the stream: where the stream raises and the first is
    another shard's, its owner raises and this shard goes on, as the row machine does."""
    specs, inputs = _group_inputs(defs)
    rows = inputs[0]
    for at in data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=2)
                        if rows else st.just([])):
        rows[at] = rows[at]._replace(kind="point")
    owner_of = {}  # an edge's identity -> its shard
    table = frame([in_row_to_tuple(r) for r in rows])
    mine = []
    for kind, s, p in zip(table["kind"], table["start"], table["payload"], strict=True):
        if kind in ("edge_start", "edge_end", "point"):
            mine.append(owner_of.setdefault((s, p), data.draw(st.integers(0, 1))) == 1)
        else:
            mine.append(True)
    routed = table.assign(payload=table["payload"].where(mine, None),
                          own=[1 if m else 0 for m in mine])
    done = _as_shard_1(specs, routed, routed)
    if done is None:
        return
    want, got = done
    pd.testing.assert_frame_equal(got.drop(columns="weight").reset_index(drop=True),
                                  want.reset_index(drop=True), check_dtype=False)
    assert (got["weight"] == 1).all()


@pytest.mark.parametrize("fast_first", [True, False])
def test_the_first_bad_row_in_arrival_order_raises_whichever_stream_it_is_in(fast_first):
    """A micro-batch with bad rows in a fast stream and in a slow stream that imports its
    CTIs, both raising for bad input: the error is the one of the row that arrived first,
    though the fast stream (the first processed) met its own earlier; the same by the row
    machine and by the vectorised path."""
    fast = StreamDef("a", EventShape.POINT, tuple(
        Arriving(PointEvent(t, {"k": t}), t) for t in range(10, 70, 10)),
        AdvanceTimeSettings.increasing_start_time(), "raise")
    slow = StreamDef("b", EventShape.POINT, tuple(
        Arriving(PointEvent(t, {"r": t}), t) for t in (15, 25, 35)),
        AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("a"),
                            policy=AdvanceTimePolicy.ADJUST), "raise")
    specs, inputs = _group_inputs([fast, slow])
    unreadable = {"kind": "invalid", "start": None, "end": None, "error": "unreadable"}
    inputs[0][4] = inputs[0][4]._replace(**unreadable)  # arrives at 50
    inputs[1][2] = inputs[1][2]._replace(arrival=55 if fast_first else 35, **unreadable)
    batch = [r for rows in inputs for r in rows]
    first = "'a'" if fast_first else "'b'"
    for run in (lambda m: m.process(batch),
                lambda m: vectorized.process_group(m, frame([in_row_to_tuple(r)
                                                             for r in batch]))):
        with pytest.raises(BadInputError, match=f"stream {first}.*unreadable"):
            run(IngressMachine(specs))
