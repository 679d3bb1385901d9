"""Property tests of event-ordering policies (SPEC section 7) with random inputs and policies.

A case is a list of events (application time, arrival time, partition, key) in arrival order
and a random ``EventOrderingPolicy`` (tolerances including 0, early rule on or off, ADJUST or
DROP, substreams over a key, partitioned or combined, declared partitions). Besides invariants
(every event accounted for once, nothing below an emitted CTI, CTIs strictly increase, batch
splits do not matter, Spark equals in-process), each case is compared with ``reference``: a
direct transcription of the steps of SPEC 7, one event at a time.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import past_the_simplest

from cti import (
    MAX_TIME,
    MIN_TIME,
    AdvanceTimePolicy,
    Application,
    Arriving,
    BadInputError,
    CepStream,
    Cti,
    EventOrderingPolicy,
    EventShape,
    PointEvent,
    ticks,
)
from cti.io.memory import MemoryInputAdapterFactory
from cti.results import RunResult, StreamResult
from cti.runtime.local import LocalRuntime

S = 1_000_000  # ticks per second; times are whole seconds, so ties are frequent
PARTITIONS = ("p0", "p1", "p2")
KEYS = ("a", "b", 1, None)  # substream key values (any JSON value; None is a value too)
ADJUST, DROP = AdvanceTimePolicy.ADJUST, AdvanceTimePolicy.DROP

LOCAL = settings(max_examples=examples(150), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])


class PartitionedFactory(MemoryInputAdapterFactory):
    """The memory adapter, declaring input partitions (``declare_partitions``).

    Partitions are read once, at binding; the executors only ``create`` adapters. So it pickles
    as the plain memory factory, which Spark's Python workers can import (this test module is
    not on their path).
    """

    def __init__(self, partitions: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.partitions = partitions

    def declare_partitions(self, config: Any, shape: EventShape) -> tuple[str, ...]:
        return self.partitions

    def __reduce__(self) -> tuple:
        return (MemoryInputAdapterFactory, ())


@dataclass(frozen=True)
class Ev:
    app: int  # seconds
    arrival: int  # seconds
    partition: str | None
    key: Any


@dataclass(frozen=True)
class Case:
    events: tuple[Ev, ...]  # in arrival order
    policy: EventOrderingPolicy
    declared: tuple[str, ...] = ()

    def items(self) -> list[Arriving]:
        return [Arriving(PointEvent(e.app * S, payload(i, e)), e.arrival * S, e.partition)
                for i, e in enumerate(self.events)]

    def bind(self, name: str = "s", app: Application | None = None,
             items: list[Any] | None = None, on_bad_input: str = "raise") -> CepStream:
        return CepStream.create(name, PartitionedFactory(self.declared),
                                self.items() if items is None else items, EventShape.POINT,
                                application=app or Application(), on_bad_input=on_bad_input,
                                event_ordering_policy=self.policy)

    def __str__(self) -> str:
        p = self.policy
        lines = [f"policy: late={p.late_arrival_tolerance // S}s ooo="
                 f"{p.out_of_order_tolerance // S}s early="
                 f"{None if p.early_arrival_window is None else p.early_arrival_window // S}s "
                 f"action={p.action.value} early_action={p.early_action.value} over={p.over} "
                 f"partitioned={p.partitioned} by_arrival={p.timestamp_by_arrival} "
                 f"declared={self.declared}"]
        lines += [f"  #{i} app={e.app} arrival={e.arrival} partition={e.partition} key={e.key!r}"
                  for i, e in enumerate(self.events)]
        return "\n".join(lines)


def payload(i: int, e: Ev) -> dict[str, Any]:
    return {"id": i, "key": e.key, "app": e.app, "note": f"reading {i}"}


# ---- strategies ---------------------------------------------------------------------------------

@st.composite
def event_lists(draw: st.DrawFn, max_size: int = 20) -> tuple[Ev, ...]:
    """Events in arrival order. Each partition has its own arrival clock (starting at a random
    skew), advanced by a delta >= 0 per event, so arrival never goes back within a partition but
    may across partitions. Application time is the arrival time plus an offset (negative: it
    arrived late; positive: early)."""
    partitioned = draw(st.booleans())
    skew = {p: draw(st.integers(0, 8)) for p in (*PARTITIONS, None)}
    clock = dict(skew)
    out = []
    for _ in range(draw(st.integers(0, max_size))):
        p = draw(st.sampled_from((*PARTITIONS, None))) if partitioned else None
        clock[p] += draw(st.integers(0, 5))
        app = clock[p] + draw(st.integers(-20, 10))
        out.append(Ev(app, clock[p], p, draw(st.sampled_from(KEYS))))
    return tuple(out)


@st.composite
def policies(draw: st.DrawFn) -> tuple[EventOrderingPolicy, tuple[str, ...]]:
    mode = draw(st.sampled_from(["combined", "over", "partitioned"]))
    policy = EventOrderingPolicy(
        late_arrival_tolerance=timedelta(seconds=draw(st.sampled_from([0, 1, 2, 5, 12, 1000]))),
        out_of_order_tolerance=timedelta(seconds=draw(st.sampled_from([0, 1, 3, 8, 1000]))),
        early_arrival_window=draw(st.sampled_from([None, None, 0, "2s", "6s"])),
        action=draw(st.sampled_from([ADJUST, DROP])),
        early_action=draw(st.sampled_from([ADJUST, DROP])),
        over="key" if mode == "over" else None,
        partitioned=mode == "partitioned",
        timestamp_by_arrival=draw(st.sampled_from([False, False, False, True])),
    )
    # With over= declared partitions are not timelines (the keys are); they must change nothing.
    declared = tuple(draw(st.lists(st.sampled_from(PARTITIONS), unique=True, max_size=3)))
    return policy, declared


def _evolve(p: EventOrderingPolicy, **changes: Any) -> EventOrderingPolicy:
    fields = dict(late_arrival_tolerance=p.late_arrival_tolerance,
                  out_of_order_tolerance=p.out_of_order_tolerance,
                  early_arrival_window=p.early_arrival_window, action=p.action,
                  early_action=p.early_action, over=p.over, partitioned=p.partitioned,
                  timestamp_by_arrival=p.timestamp_by_arrival, arrival_clock=p.arrival_clock,
                  purge_idle_timelines=p.purge_idle_timelines)
    fields.update(changes)
    for name in ("late_arrival_tolerance", "out_of_order_tolerance", "early_arrival_window"):
        if isinstance(fields[name], int):  # the policy's own fields are ticks
            fields[name] = ticks(fields[name])
    return EventOrderingPolicy(**fields)


@st.composite
def cases(draw: st.DrawFn, max_size: int = 20) -> Case:
    events = draw(event_lists(max_size))
    policy, declared = draw(policies())
    return Case(events, policy, declared)


# ---- the reference: SPEC 7, step by step --------------------------------------------------------

def timeline_of(policy: EventOrderingPolicy, e: Ev) -> str:
    if policy.over is not None:
        return json.dumps(e.key, sort_keys=True)
    return e.partition or ""


@dataclass
class RefTimeline:
    partition: str | None
    floor: int  # the stream's CTI when the timeline was first seen
    max: int | None = None
    last_arrival: int | None = None
    counts: Counter = field(default_factory=Counter)


def add(t: int, d: int) -> int:
    return t if t in (MIN_TIME, MAX_TIME) else t + d


def reference(case: Case) -> dict[str, Any]:
    """What SPEC 7 says, per event: (status, reason, timestamp); the stream's CTIs; the output
    sequence; and the final per-timeline watermarks.

    - w_p = max(max_p - O, A - L) (O, L: the out-of-order and late-arrival tolerances), never
      below the CTI in force when p was first seen (a CTI is a promise for partitions not seen
      yet). A declared partition that has not delivered counts with w_p = A - L.
    - CTI: min of w_p over timelines when combined; A - L with independent timelines.
    - Kept events are released in (timestamp, arrival) order once the CTI reaches them; with
      independent timelines once their timeline's watermark does.
    """
    pol = case.policy
    late, ooo, window = (pol.late_arrival_tolerance, pol.out_of_order_tolerance,
                         pol.early_arrival_window)
    indep = pol.over is not None or pol.partitioned
    A, cti = MIN_TIME, MIN_TIME
    tls: dict[str, RefTimeline] = {} if pol.over else \
        {p: RefTimeline(p, MIN_TIME) for p in case.declared}
    verdicts: list[tuple[str, str | None, int | None]] = []
    ctis: list[int] = []
    buffer: list[tuple[int, int, str]] = []  # (timestamp, id, timeline)
    output: list[tuple] = []  # ("event", id, timestamp) and ("cti", t)

    def w(tl: RefTimeline) -> int:
        a_term = add(A, -late)
        own = a_term if tl.max is None else max(tl.max - ooo, a_term)
        return max(own, tl.floor)

    def release(limit: int, tid: str | None = None) -> None:
        for entry in sorted(buffer):
            if entry[0] <= limit and (tid is None or entry[2] == tid):
                buffer.remove(entry)
                output.append(("event", entry[1], entry[0]))

    for i, e in enumerate(case.events):
        tid = timeline_of(pol, e)
        tl = tls.setdefault(tid, RefTimeline(e.partition, cti))
        arrival = e.arrival * S
        A = max(A, arrival)
        tl.counts["input"] += 1
        tl.last_arrival = arrival
        wm = w(tl)  # as it stood before this event
        app = arrival if pol.timestamp_by_arrival else e.app * S
        verdict: tuple[str, str | None, int | None] = ("accepted", None, app)
        ts = app
        if window is not None and app > arrival + window:  # 1. early
            tl.counts["early"] += 1
            ts = arrival + window
            verdict = ("dropped", "early", None) if pol.early_action is DROP else \
                ("adjusted", "early", ts)
        if verdict[0] != "dropped" and app < arrival - late:  # 2. late
            tl.counts["late"] += 1
            ts = arrival - late
            verdict = ("dropped", "late", None) if pol.action is DROP else ("adjusted", "late", ts)
        if verdict[0] != "dropped" and ts < wm:  # 3. out of order
            tl.counts["out_of_order"] += 1
            ts = wm
            verdict = ("dropped", "out_of_order", None) if pol.action is DROP else \
                ("adjusted", "out_of_order", ts)
        tl.counts[verdict[0]] += 1
        verdicts.append(verdict)
        if verdict[0] != "dropped":  # 4. kept events move max_p
            tl.max = ts if tl.max is None else max(tl.max, ts)
            buffer.append((ts, i, tid))
        # 5. the stream's CTI, and release
        new = add(A, -late) if indep else min(w(t) for t in tls.values())
        if indep:
            release(add(A, -late))
            release(w(tl), tid)
        else:
            release(max(cti, new))
        if new > cti:
            cti = new
            ctis.append(cti)
            output.append(("cti", cti))
    release(MAX_TIME)
    ctis.append(MAX_TIME)
    output.append(("cti", MAX_TIME))
    policy_cti = add(A, -late) if indep or not tls else min(w(t) for t in tls.values())
    timelines = {}
    for tid, tl in tls.items():
        wm = w(tl)
        timelines[tid] = {
            **{k: tl.counts[k] for k in ("input", "accepted", "adjusted", "dropped", "late",
                                         "early", "out_of_order")},
            "partition": tl.partition, "watermark": wm,
            "watermark_delay": None if A == MIN_TIME else A - wm,
            "last_arrival": tl.last_arrival,
            "not_progressing": A != MIN_TIME and (tl.last_arrival is None
                                                  or tl.last_arrival < A - late),
        }
    return {"verdicts": verdicts, "ctis": ctis, "output": output, "timelines": timelines,
            "arrival_clock": A, "cti": policy_cti}


# ---- helpers ------------------------------------------------------------------------------------

def run_local(case: Case, sizes: list[int] | None = None) -> StreamResult:
    return LocalRuntime(batch_sizes=sizes).run(case.bind().ingress_group())["s"]


def events_of(res: StreamResult) -> list[PointEvent]:
    return [i for i in res.items if not isinstance(i, Cti)]


def ctis_of(res: StreamResult) -> list[int]:
    return [i.time for i in res.items if isinstance(i, Cti)]


def sequence_of(res: StreamResult) -> list[tuple]:
    return [("cti", i.time) if isinstance(i, Cti) else ("event", i.payload["id"], i.start)
            for i in res.items]


# ---- invariants ---------------------------------------------------------------------------------

@LOCAL
@given(case=cases())
def test_every_event_is_accepted_adjusted_or_dropped_exactly_once(case):
    res = run_local(case)
    n = len(case.events)
    m = res.metrics
    assert m["accepted"] + m["adjusted"] + m["dropped"] == n, case
    assert m["invalid"] == m["cti_regressions"] == 0
    out_ids = [e.payload["id"] for e in events_of(res)]
    diags = {d.input_seq: d for d in res.diagnostics}
    assert len(diags) == len(res.diagnostics), "one diagnostic per event at most"
    dropped = [d.payload["id"] for d in res.dropped]
    assert sorted(out_ids + dropped) == list(range(n)), case
    assert len(res.adjusted) == m["adjusted"] and len(res.dropped) == m["dropped"]
    for e in events_of(res):  # an output event is adjusted iff it has a diagnostic
        d = diags.get(e.payload["id"])
        if d is None:
            continue
        assert d.status == "adjusted" and d.start == e.start, case
    # Per-timeline counters add up to the stream's.
    timelines = res.ordering["timelines"].values()
    assert sum(tl["input"] for tl in timelines) == n
    for status in ("accepted", "adjusted", "dropped"):
        assert sum(tl[status] for tl in timelines) == m[status], case
    for tl in timelines:
        assert tl["accepted"] + tl["adjusted"] + tl["dropped"] == tl["input"]
    # Each rule's counter covers at least the events that ended with that reason.
    reasons = Counter(d.reason for d in res.diagnostics)
    for rule in ("late", "early", "out_of_order"):
        assert sum(tl[rule] for tl in timelines) >= reasons[rule], case
    # Diagnostics name the event's partition, key and times.
    for d in res.diagnostics:
        e = case.events[d.input_seq]
        assert d.payload["id"] == d.input_seq and d.partition == e.partition, case
        assert d.original_start == e.app * S and d.kind == "point"
        assert d.key == (e.key if case.policy.over else None)
        assert (d.start is None) == (d.status == "dropped")


@LOCAL
@given(case=cases())
def test_no_output_event_is_below_an_emitted_cti_and_ctis_strictly_increase(case):
    res = run_local(case)
    current = MIN_TIME
    for item in res.items:
        if isinstance(item, Cti):
            assert item.time > current, case
            current = item.time
        else:
            assert item.start >= current, case
    assert res.items[-1] == Cti(MAX_TIME)  # bounded input: the policy flushes at the end
    # Kept events come out in timestamp order (ties in arrival order): for the whole stream
    # when timelines are combined, within each timeline when they are independent.
    pol = case.policy
    per: dict[str, list] = {}
    for e in events_of(res):
        tid = "" if not (pol.over or pol.partitioned) else \
            timeline_of(pol, case.events[e.payload["id"]])
        per.setdefault(tid, []).append((e.start, e.payload["id"]))
    for seq in per.values():
        assert seq == sorted(seq), case


@LOCAL
@given(case=cases())
def test_payloads_are_untouched_and_events_only_move_forward(case):
    res = run_local(case)
    items = case.items()
    for e in events_of(res):
        i = e.payload["id"]
        assert e.payload == items[i].item.payload
        assert e.end == e.start + 1  # still a point
        by_arrival = case.policy.timestamp_by_arrival
        original = items[i].arrival if by_arrival else items[i].item.start
        early = case.policy.early_arrival_window
        if early is None or original <= items[i].arrival + early:
            assert e.start >= original, case  # only the early rule moves an event back
    for d in res.diagnostics:
        assert d.payload == items[d.input_seq].item.payload


@LOCAL
@given(events=event_lists(), data=st.data())
def test_in_order_input_within_the_tolerances_is_not_touched(events, data):
    """With out_of_order_tolerance >= the real disorder, a late tolerance that nothing exceeds
    and no early rule, nothing is adjusted and the output is the input sorted by (timestamp,
    arrival order): per timeline with independent timelines, for the stream otherwise."""
    policy, declared = data.draw(policies())
    indep = policy.over is not None or policy.partitioned
    disorder, lateness, newest, clock = 0, 0, {}, MIN_TIME
    for e in events:
        group = timeline_of(policy, e) if indep else ""
        if group in newest:
            disorder = max(disorder, newest[group] - e.app)
        newest[group] = max(newest.get(group, e.app), e.app)
        clock = max(clock, e.arrival)
        lateness = max(lateness, clock - e.app)
    extra = data.draw(st.integers(0, 3))
    policy = _evolve(policy, out_of_order_tolerance=(disorder + extra) * S,
                     late_arrival_tolerance=(lateness + data.draw(st.integers(0, 3))) * S,
                     early_arrival_window=None, timestamp_by_arrival=False)
    case = Case(events, policy, declared)
    res = run_local(case)
    assert res.metrics["adjusted"] == res.metrics["dropped"] == 0, case
    assert res.diagnostics == []
    expected = sorted(range(len(events)), key=lambda i: (events[i].app, i))
    got = [e.payload["id"] for e in events_of(res)]
    if indep:
        for tid in {timeline_of(policy, e) for e in events}:
            mine = [i for i in expected if timeline_of(policy, events[i]) == tid]
            assert [i for i in got if timeline_of(policy, events[i]) == tid] == mine, case
        assert sorted(got) == list(range(len(events)))
    else:
        assert got == expected, case
    assert all(e.start == events[e.payload["id"]].app * S for e in events_of(res))


@LOCAL
@given(case=cases(), k=st.integers(1, 8))
def test_results_do_not_depend_on_how_the_input_is_batched(case, k):
    whole = case.bind().ingress_group()
    assert LocalRuntime(batch_sizes=[k]).run(whole) == LocalRuntime().run(whole), case


@LOCAL
@given(case=cases(max_size=14), data=st.data())
def test_dead_lettered_rows_change_nothing_else(case, data):
    """Bad rows (no arrival time; arrival going back within its partition; with over=, no key
    field) go to the diagnostics as invalid, and the rest is as if they were not there."""
    good = case.items()
    mixed: list[Any] = []
    last: dict[str | None, int] = {}  # partition -> last good arrival so far
    for k in range(len(good) + 1):
        kinds = ["none", "none", "no_arrival"]
        if last:
            kinds.append("back")
            if case.policy.over:
                kinds.append("no_key")
        kind = data.draw(st.sampled_from(kinds))
        bad = {"id": f"bad{k}"}
        if kind == "no_arrival":
            mixed.append(PointEvent(k * S, {**bad, "key": "a"}))
        elif kind in ("back", "no_key"):
            p = data.draw(st.sampled_from(sorted(last, key=str)))
            if kind == "back":
                mixed.append(Arriving(PointEvent(k * S, {**bad, "key": "a"}),
                                      last[p] - data.draw(st.integers(1, 3 * S)), p))
            else:  # at the partition's last arrival: an arrival that changes nothing
                mixed.append(Arriving(PointEvent(k * S, bad), last[p], p))
        if k < len(good):
            mixed.append(good[k])
            last[good[k].partition] = good[k].arrival
    n_bad = len(mixed) - len(good)
    clean = LocalRuntime().run(case.bind().ingress_group())["s"]
    dirty = LocalRuntime().run(case.bind(items=mixed, on_bad_input="dead_letter")
                               .ingress_group())["s"]
    assert dirty.items == clean.items, case
    assert dirty.ordering == clean.ordering, case
    assert dirty.metrics == {**clean.metrics, "invalid": n_bad}
    invalid = [d for d in dirty.diagnostics if d.status == "invalid"]
    assert sorted(d.payload["id"] for d in invalid) == \
        sorted(m.item.payload["id"] if isinstance(m, Arriving) else m.payload["id"]
               for m in mixed if m not in good)
    assert all("rule" in d.reason for d in invalid)
    others = [attrs.evolve(d, input_seq=0) for d in dirty.diagnostics if d.status != "invalid"]
    assert others == [attrs.evolve(d, input_seq=0) for d in clean.diagnostics], case
    if n_bad:
        with pytest.raises(BadInputError, match="stream 's'"):
            LocalRuntime().run(case.bind(items=mixed).ingress_group())


# ---- the reference ------------------------------------------------------------------------------

@LOCAL
@given(case=cases())
def test_each_event_gets_the_timestamp_and_status_of_the_spec_steps(case):
    res = run_local(case)
    ref = reference(case)
    out = {e.payload["id"]: e.start for e in events_of(res)}
    diags = {d.input_seq: d for d in res.diagnostics}
    for i, (status, reason, ts) in enumerate(ref["verdicts"]):
        d = diags.get(i)
        got = ("accepted", None, out.get(i)) if d is None else (d.status, d.reason, d.start)
        assert got == (status, reason, ts), f"event #{i}\n{case}"
    assert ctis_of(res) == ref["ctis"], case


@LOCAL
@given(case=cases())
def test_output_sequence_and_metrics_equal_the_reference(case):
    res = run_local(case)
    ref = reference(case)
    got = sequence_of(res)
    if case.policy.over or case.policy.partitioned:
        # Independent timelines: the CTIs, and each timeline's events in order, are defined.
        assert [x for x in got if x[0] == "cti"] == [x for x in ref["output"] if x[0] == "cti"]
        tids = {i: timeline_of(case.policy, e) for i, e in enumerate(case.events)}
        for tid in set(tids.values()):
            assert [x for x in got if x[0] == "event" and tids[x[1]] == tid] == \
                [x for x in ref["output"] if x[0] == "event" and tids[x[1]] == tid], case
    else:
        assert got == ref["output"], case
    snapshot = res.ordering
    assert snapshot["arrival_clock"] == ref["arrival_clock"]
    assert snapshot["cti"] == ref["cti"], case
    assert snapshot["timelines"] == ref["timelines"], case


# ---- regressions: bugs these properties found (fixed) -------------------------------------------

def test_declared_partitions_are_not_key_timelines():
    items = [Arriving(PointEvent(t * S, {"id": t, "key": "a"}), t * S, "p0") for t in (10, 20)]
    stream = CepStream.create("s", PartitionedFactory(("p0", "p1")), items, EventShape.POINT,
                              application=Application(),
                              event_ordering_policy=EventOrderingPolicy(over="key"))
    res = stream.run("local")["s"]
    # p0 delivered at the arrival clock: it is progressing. And the timelines are the keys.
    assert "p0" not in res.not_progressing
    assert set(res.ordering["timelines"]) == {'"a"'}


def test_snapshot_cti_is_never_below_the_emitted_cti():
    # p0 makes the CTI 1 s; p1 first delivers after it, at 0 s: out of order, dropped.
    items = [Arriving(PointEvent(1 * S, {"id": 0}), 0, "p0"),
             Arriving(PointEvent(0, {"id": 1}), 0, "p1")]
    policy = EventOrderingPolicy(late_arrival_tolerance=0, early_arrival_window=None,
                                 action=DROP)
    stream = CepStream.create("s", MemoryInputAdapterFactory(), items, EventShape.POINT,
                              application=Application(), event_ordering_policy=policy)
    res = stream.run("local")["s"]
    assert ctis_of(res) == [1 * S, MAX_TIME]
    assert res.ordering["timelines"]["p1"]["watermark"] == 1 * S  # p1 starts at the CTI
    # min over partitions of w_p = min(1 s, 1 s): the CTI in force, not 0.
    assert res.ordering["cti"] == 1 * S


# ---- docs/event-ordering.md --------------------------------------------------------------------

DOC = Path(__file__).resolve().parents[1] / "docs" / "event-ordering.md"


def test_the_snippets_of_the_event_ordering_page_print_what_it_shows():
    """Each ```python block of the page runs (in order, one namespace); where a ```text block
    follows, it is the block's output. (```python spark blocks start Spark: not run here.)"""
    blocks = re.findall(r"```([^\n]*)\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    namespace: dict[str, Any] = {"__name__": "event_ordering_doc"}
    printed = None
    checked = 0
    for info, body in blocks:
        if info == "python":
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(body, str(DOC), "exec"), namespace)
            printed = out.getvalue()
            continue
        if info == "text" and printed is not None:
            assert printed == body, f"{DOC.name}: a snippet printed\n{printed}\nnot\n{body}"
            checked += 1
        printed = None
    assert checked >= 10


# ---- Spark --------------------------------------------------------------------------------------

@pytest.mark.spark
@settings(max_examples=examples(2), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=st.lists(cases(max_size=12), min_size=20, max_size=25),
       sizes=past_the_simplest(st.lists(st.integers(2, 8), min_size=1, max_size=3)))
def test_spark_equals_in_process(spark, batch, sizes):
    """~25 random cases, each its own ingress group, in ONE Spark query with random
    micro-batch sizes: every stream's items, diagnostics, metrics and ordering snapshot equal
    the in-process run."""
    from cti.runtime.spark import SparkRuntime

    streams = [c.bind(f"c{i}") for i, c in enumerate(batch)]
    groups = [s.ingress_group() for s in streams]
    results = SparkRuntime(spark, batch_sizes=sizes).run_groups(groups)
    for case, stream, group, got in zip(batch, streams, groups, results, strict=True):
        expected: RunResult = LocalRuntime().run(group)
        g, e = got[stream.name], expected[stream.name]
        assert g.items == e.items, case
        assert g.diagnostics == e.diagnostics, case
        assert g.metrics == e.metrics, case
        assert g.ordering == e.ordering, case
