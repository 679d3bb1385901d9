"""Rides that come and go: one timeline per ride (``over="ride"``), forgotten when idle.

Each ride reports its position every few seconds for a few minutes, then ends; new rides keep
starting. With ``over="ride"`` each ride is its own timeline (SPEC 7 substreams). Kept for good,
the timelines grow with every ride ever seen; with ``purge_idle_timelines=True`` a ride whose
timeline can change nothing any more (its newest reading is at or below the arrival clock
minus the late-arrival tolerance, nothing of it buffered) is forgotten. The output is the same.

The second part is a silent input: a live reference stream (fares, updated rarely) imports
the CTIs of the readings. With ``arrival_clock="wall"`` the in-process runtime records a clock
tick for it in every micro-batch where it delivers nothing (here from a clock that follows
the readings), so the CTIs it imported go through at once instead of waiting for its next
fare update.

Run: ``python examples/keys_come_and_go.py`` (in-process; ``--runtime spark`` runs the first
part on Spark).
"""

from __future__ import annotations

import argparse
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from cti import (
    MAX_TIME,
    AdvanceTimeImportSettings,
    AdvanceTimeSettings,
    Application,
    Arriving,
    CepStream,
    Cti,
    EdgeEvent,
    EventOrderingPolicy,
    EventShape,
    PointEvent,
    to_ticks,
)
from cti.io.memory import MemoryInputAdapter, MemoryInputAdapterFactory
from cti.runtime.local import LocalRuntime

S = 1_000_000  # ticks per second
START = to_ticks(datetime(2026, 1, 1, 8, tzinfo=UTC))
RIDES, EVERY = 300, 5  # a new ride every 5 s
LATE = timedelta(seconds=30)


def readings(seed: int = 7) -> list[Arriving]:
    """Each ride reports every 10 s for 2-5 min; a reading arrives 0-8 s after it was taken."""
    rng = random.Random(seed)
    out = []
    for ride in range(RIDES):
        t = START + ride * EVERY * S
        for _ in range(rng.randrange(12, 30)):
            out.append(Arriving(PointEvent(t, {"ride": ride}), t + rng.randrange(8 * S)))
            t += 10 * S
    return sorted(out, key=lambda a: a.arrival)


def rides(purge: bool, runtime: Any) -> Any:
    policy = EventOrderingPolicy(late_arrival_tolerance=LATE,
                                 out_of_order_tolerance=timedelta(seconds=10), over="ride",
                                 purge_idle_timelines=purge)
    stream = CepStream.create("rides", MemoryInputAdapterFactory(), readings(), EventShape.POINT,
                              application=Application(), event_ordering_policy=policy)
    return stream.run(runtime)["rides"]


class LiveInput(MemoryInputAdapter):
    def is_complete(self) -> bool:
        return False  # live: more fares may come


class LiveMemory(MemoryInputAdapterFactory):
    def create(self, config: Any, shape: EventShape) -> LiveInput:
        return LiveInput(config, shape)


def fares(clock: str) -> tuple[list[int], list[int]]:
    """The CTIs of the readings and those the silent fare stream took, with ``clock``."""
    app = Application()
    items = [Arriving(PointEvent(a.item.start, a.item.payload), a.arrival) for a in readings()]
    CepStream.create("readings", MemoryInputAdapterFactory(), items, EventShape.POINT,
                     AdvanceTimeSettings.unordered_start_time(timedelta(seconds=8)),
                     application=app)
    fare = CepStream.create(
        "fares", LiveMemory(), [Arriving(EdgeEvent.start_edge(START, {"per_km": 2.5}), START)],
        EventShape.EDGE, AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings(
            "readings"), arrival_clock=clock), application=app)
    batch = 500
    # The wall clock of each micro-batch: here the arrival of its last reading.
    ends = iter([items[min(k + batch, len(items)) - 1].arrival
                 for k in range(0, len(items) + 2 * batch, batch)])
    result = fare.run(LocalRuntime(batch_sizes=[batch], clock=lambda: next(ends)))
    return ([i.time for i in result["readings"].items if isinstance(i, Cti)],
            [i.time for i in result["fares"].items if isinstance(i, Cti)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", default="local", choices=["local", "spark"])
    runtime = ap.parse_args().runtime
    kept, purged = rides(False, runtime), rides(True, runtime)
    assert purged.items == kept.items and purged.diagnostics == kept.diagnostics
    print(f"runtime: {runtime}; {len(readings())} readings of {RIDES} rides")
    print(f"timelines at the end: kept {len(kept.ordering['timelines'])}, purged "
          f"{len(purged.ordering['timelines'])} (forgotten {purged.ordering['purged_timelines']}"
          " times); output identical")
    assert len(purged.ordering["timelines"]) < RIDES // 10

    data_ctis, data_taken = fares("data")
    wall_ctis, wall_taken = fares("wall")
    assert data_ctis == wall_ctis and data_taken == []
    # All but the end-of-input CTI (at MAX_TIME: it arrives after anything the fares may add).
    assert wall_taken == wall_ctis[:-1] and wall_ctis[-1] == MAX_TIME
    print(f"silent fare stream: took {len(data_taken)} of the readings' {len(data_ctis)} CTIs "
          f"with the data clock, {len(wall_taken)} with the wall clock")


if __name__ == "__main__":
    main()
