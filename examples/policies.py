"""AdvanceTimePolicy DROP vs ADJUST on the same out-of-order input (SPEC section 3).

Each shape gets one input with events that arrive after a CTI has passed them. The stream
generates a CTI at every event's start (``AdvanceTimeGenerationSettings(1)``, like
``AdvanceTimeSettings.increasing_start_time()``), and is bound twice: once with
``AdvanceTimePolicy.DROP``, once with ``AdvanceTimePolicy.ADJUST``. For each run the script
prints the stream's output (events and CTIs), its diagnostics (the side output: which event was
dropped or adjusted, why, at which CTI) and its counts, and checks them.

- points: a late point is dropped under both policies (its lifetime [s, s+1) cannot reach the
  CTI).
- intervals: a late interval that still reaches past the CTI is clipped to start at the CTI
  under ADJUST; one that ends before the CTI is dropped under both.
- edges: a late edge start moves to the CTI under ADJUST (and its end follows it), or is dropped
  with its end under DROP; a late edge end moves to the CTI under ADJUST, or is dropped under
  DROP (its start edge then stays open).

Run: ``python examples/policies.py`` (in-process; ``--runtime spark`` runs the same on embedded
Spark and checks that both runtimes agree).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from cti import (
    MAX_TIME,
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Application,
    CepStream,
    Cti,
    EdgeEvent,
    EdgeType,
    EventShape,
    IntervalEvent,
    PointEvent,
    StreamResult,
)
from cti.events import StreamItem
from cti.io.memory import MemoryInputAdapterFactory

DROP, ADJUST = AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST

# Times are plain ticks (microseconds) to keep the output short; datetimes work the same way.
INPUTS: dict[EventShape, list[StreamItem]] = {
    EventShape.POINT: [
        PointEvent(10, {"id": "p1"}),
        PointEvent(20, {"id": "p2"}),  # CTI 20
        PointEvent(15, {"id": "late"}),  # 15 < 20: violates the CTI
        PointEvent(20, {"id": "same time"}),  # 20 >= 20: legal
        PointEvent(30, {"id": "p3"}),
    ],
    EventShape.INTERVAL: [
        IntervalEvent(10, 30, {"id": "i1"}),
        IntervalEvent(20, 25, {"id": "i2"}),  # CTI 20
        IntervalEvent(12, 18, {"id": "ends before CTI"}),  # [12, 18): nothing left after 20
        IntervalEvent(15, 40, {"id": "reaches past CTI"}),  # [15, 40): [20, 40) is left
        IntervalEvent(25, 26, {"id": "i3"}),
    ],
    EventShape.EDGE: [
        EdgeEvent.start_edge(10, {"id": "a"}),
        EdgeEvent.start_edge(20, {"id": "b"}),  # CTI 20 (edge ends never move the clock)
        EdgeEvent.start_edge(15, {"id": "late start"}),  # 15 < 20
        EdgeEvent.end_edge(10, 18, {"id": "a"}),  # closes a at 18 < 20: a late end
        EdgeEvent.end_edge(15, 35, {"id": "late start"}),  # follows its start
        EdgeEvent.end_edge(20, 22, {"id": "b"}),  # 22 >= 20: legal
        EdgeEvent.start_edge(30, {"id": "c"}),  # CTI 30
    ],
}

# What each run must give: (ids accepted, ids adjusted, ids dropped), counting every input
# event once (an edge's start and end are two events).
EXPECTED: dict[tuple[EventShape, AdvanceTimePolicy], tuple[list[str], list[str], list[str]]] = {
    (EventShape.POINT, DROP): (["p1", "p2", "same time", "p3"], [], ["late"]),
    (EventShape.POINT, ADJUST): (["p1", "p2", "same time", "p3"], [], ["late"]),
    (EventShape.INTERVAL, DROP): (
        ["i1", "i2", "i3"], [], ["ends before CTI", "reaches past CTI"]),
    (EventShape.INTERVAL, ADJUST): (
        ["i1", "i2", "i3"], ["reaches past CTI"], ["ends before CTI"]),
    (EventShape.EDGE, DROP): (
        ["a", "b", "b", "c"], [], ["late start", "a", "late start"]),
    (EventShape.EDGE, ADJUST): (
        ["a", "b", "b", "c"], ["late start", "a", "late start"], []),
}


def show(t: int | None) -> str:
    return "-" if t is None else "+inf" if t == MAX_TIME else str(t)


def describe(item: StreamItem) -> str:
    if isinstance(item, Cti):
        return f"CTI {show(item.time)}"
    name = item.payload["id"]
    if isinstance(item, PointEvent):
        return f"point {item.start}  {name}"
    if isinstance(item, IntervalEvent):
        return f"interval [{item.start}, {item.end})  {name}"
    if item.edge_type is EdgeType.START:
        return f"edge start {item.start}  {name}"
    return f"edge end [{item.start}, {item.end})  {name}"


def bind(app: Application, shape: EventShape, policy: AdvanceTimePolicy) -> CepStream:
    settings = AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(1, delay=0, advance_to_infinity_on_shutdown=True),
        policy=policy,
    )
    name = f"{shape.value}_{policy.value}"
    return CepStream.create(name, MemoryInputAdapterFactory(), INPUTS[shape], shape, settings,
                            application=app)


def report(res: StreamResult) -> None:
    print(f"\n== {res.name}")
    for item in res.items:
        print("   ", describe(item))
    for d in res.diagnostics:
        print(f"    {d.status:8} {d.kind:10} {d.payload['id']!r:20} "
              f"[{show(d.original_start)}, {show(d.original_end)}) -> "
              f"[{show(d.start)}, {show(d.end)})  CTI {show(d.cti)}  reason {d.reason}")
    print("   ", res.metrics)


def check(res: StreamResult, shape: EventShape, policy: AdvanceTimePolicy) -> None:
    accepted, adjusted, dropped = EXPECTED[(shape, policy)]
    m = res.metrics
    assert m["accepted"] + m["adjusted"] + m["dropped"] == len(INPUTS[shape]), m
    assert (m["accepted"], m["adjusted"], m["dropped"]) == (
        len(accepted), len(adjusted), len(dropped)), (res.name, m)
    assert [d.payload["id"] for d in res.adjusted] == adjusted, res.name
    assert [d.payload["id"] for d in res.dropped] == dropped, res.name
    events = [i for i in res.items if not isinstance(i, Cti)]
    ctis = [i.time for i in res.items if isinstance(i, Cti)]
    assert ctis == sorted(set(ctis)) and ctis[-1] == MAX_TIME, "CTIs strictly increase"
    # Every event in the output respects every CTI before it.
    cti = None
    for item in res.items:
        if isinstance(item, Cti):
            cti = item.time
        elif cti is not None:
            sync = item.end if isinstance(item, EdgeEvent) and \
                item.edge_type is EdgeType.END else item.start
            assert sync >= cti, (res.name, item, cti)
    for d in res.adjusted:
        assert d.start is not None and d.start >= d.original_start, d
    assert len(events) == m["accepted"] + m["adjusted"]


def expectations(results: dict[tuple[EventShape, AdvanceTimePolicy], StreamResult]) -> None:
    """The rules of SPEC section 3, on the runs above."""
    iv = [i for i in results[(EventShape.INTERVAL, ADJUST)].items
          if isinstance(i, IntervalEvent) and i.payload["id"] == "reaches past CTI"]
    assert [(i.start, i.end) for i in iv] == [(20, 40)], "clipped to start at the CTI"
    edges = results[(EventShape.EDGE, ADJUST)].items
    late = [(e.edge_type, e.start, e.end) for e in edges
            if isinstance(e, EdgeEvent) and e.payload["id"] == "late start"]
    assert late == [(EdgeType.START, 20, MAX_TIME), (EdgeType.END, 20, 35)], late
    a_end = [e for e in edges if isinstance(e, EdgeEvent) and e.payload["id"] == "a"
             and e.edge_type is EdgeType.END]
    assert [(e.start, e.end) for e in a_end] == [(10, 20)], "a late end moves to the CTI"
    reasons = [d.reason for d in results[(EventShape.EDGE, DROP)].dropped]
    assert reasons == ["cti_violation", "cti_violation", "start_dropped"], reasons
    open_a = [e for e in results[(EventShape.EDGE, DROP)].items
              if isinstance(e, EdgeEvent) and e.payload["id"] == "a"]
    assert [e.edge_type for e in open_a] == [EdgeType.START], "under DROP, a stays open"


def run_all(runtime: str) -> dict[tuple[EventShape, AdvanceTimePolicy], StreamResult]:
    app = Application("policies")
    streams = {(shape, policy): bind(app, shape, policy)
               for shape in INPUTS for policy in (DROP, ADJUST)}
    if runtime == "spark":
        from cti.runtime.spark import SparkRuntime

        groups = [s.ingress_group() for s in streams.values()]  # one group per stream
        results: Sequence = SparkRuntime().run_groups(groups)  # all six in one Spark query
        return {key: res[s.name] for (key, s), res in zip(streams.items(), results, strict=True)}
    return {key: s.run("local")[s.name] for key, s in streams.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="local", choices=["local", "spark"])
    args = parser.parse_args()

    results = run_all(args.runtime)
    for (shape, policy), res in results.items():
        report(res)
        check(res, shape, policy)
    expectations(results)
    if args.runtime == "spark":
        assert results == run_all("local"), "Spark and in-process results agree"
    print(f"\nall {len(results)} runs checked; runtime: {args.runtime}")


if __name__ == "__main__":
    main()
