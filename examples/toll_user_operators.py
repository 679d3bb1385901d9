"""User-defined operators on the TollApp data (StreamInsight's ``CepOperator``,
``CepTimeSensitiveOperator`` and ``CepTimeSensitiveAggregate``).

- ``apply_operator(fn)``: the two dearest cars per booth per 3 minutes (any number of outputs
  per window, each at the window's end);
- ``apply_operator(fn, time_sensitive=True)``: the part of each car's 2-minute stay that falls
  in each 3-minute window, as events of their own inside the window;
- ``agg.udf(fn, time_sensitive=True)``: how busy each booth is per 3 minutes (car-minutes over
  window minutes), from the events' lifetimes clipped to the window;
- ``scan(operator)`` (``CepPointStreamOperator``): each booth's running takings, a
  ``StreamOperator`` with a state per booth, called per entry in time order.

Each is checked against a plain loop over the file. Run: ``python examples/toll_user_operators.py``
(in-process with ``--runtime local``).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from datetime import timedelta

from _tolldata import bind_entries, read_json, ticks

from cti import Application, IntervalEvent, PointEvent, StreamOperator, agg

MINUTE = 60_000_000
WINDOW = 3 * MINUTE
STAY = 2 * MINUTE


def two_dearest(payloads: list[dict]) -> list[dict]:
    best = sorted(payloads, key=lambda p: (-p["TollAmount"], p["LicensePlate"]))[:2]
    return [{"plate": p["LicensePlate"], "toll": p["TollAmount"]} for p in best]


def parts(events: list, window) -> list:
    return [IntervalEvent(e.start, e.end, {"plate": e.payload["LicensePlate"]})
            for e in events]


def busy(events: list, window) -> float:
    return sum(e.end - e.start for e in events) / (window.end - window.start)


class Takings(StreamOperator):
    """A booth's takings so far, after each car."""

    def initial_state(self) -> float:
        return 0.0

    def process(self, event) -> list[dict]:
        self.state += event.payload["TollAmount"]
        return [{"takings": self.state}]


def windows_of(start: int, end: int) -> list[int]:
    """The starts of the 3-minute tumbling windows [start, end) overlaps."""
    return list(range(start - start % WINDOW, end, WINDOW))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="spark", choices=["spark", "local"])
    args = parser.parse_args()
    entries = bind_entries(Application("toll-user-operators"))
    rows = read_json("Entry.json")
    booths: dict[tuple[int, int], list[dict]] = defaultdict(list)  # (booth, window) -> rows
    for r in rows:
        for w in windows_of(ticks(r["EntryTime"]), ticks(r["EntryTime"]) + STAY):
            booths[(r["TollId"], w)].append(r)

    dearest = entries.group_by("TollId").apply(
        lambda g: g.tumbling_window(timedelta(minutes=3)).apply_operator(two_dearest))
    got = sorted((e.payload["TollId"], e.start, e.payload["plate"])
                 for e in dearest.collect(args.runtime) if isinstance(e, PointEvent))
    want = sorted((b, w + WINDOW, p["plate"]) for (b, w), rs in booths.items()
                  for p in two_dearest([r for r in rs if ticks(r["EntryTime"]) >= w]))
    assert got == want
    print(f"apply_operator: {len(got)} of the dearest cars per booth and 3 minutes")

    stays = entries.alter_event_duration(timedelta(minutes=2))
    split = stays.tumbling_window(timedelta(minutes=3)).apply_operator(parts,
                                                                       time_sensitive=True)
    pieces = sorted((e.start, e.end) for e in split.collect(args.runtime)
                    if isinstance(e, IntervalEvent))
    t = [ticks(r["EntryTime"]) for r in rows]
    assert pieces == sorted((max(s, w), min(s + STAY, w + WINDOW)) for s in t
                            for w in windows_of(s, s + STAY))
    print(f"apply_operator(time_sensitive=True): {len(t)} stays cut into {len(pieces)} parts")

    load = stays.group_by("TollId").apply(lambda g: g.tumbling_window(
        timedelta(minutes=3)).aggregate(busy=agg.udf(busy, time_sensitive=True)))
    got_load = {(e.payload["TollId"], e.start - WINDOW): e.payload["busy"]
                for e in load.collect(args.runtime) if isinstance(e, PointEvent)}
    want_load = {(b, w): sum(min(ticks(r["EntryTime"]) + STAY, w + WINDOW) -
                             max(ticks(r["EntryTime"]), w) for r in rs) / WINDOW
                 for (b, w), rs in booths.items()}
    assert got_load.keys() == want_load.keys()
    assert all(abs(got_load[k] - want_load[k]) < 1e-12 for k in want_load)
    print(f"agg.udf(time_sensitive=True): busiest booth-window "
          f"{max(got_load.values()):.2f} car-minutes per minute")

    takings = entries.group_by("TollId").apply(lambda g: g.scan(Takings()))
    got_takings: dict[tuple[int, int], float] = {}  # after the last car of each time
    for e in takings.collect(args.runtime):
        if isinstance(e, PointEvent):
            at = (e.payload["TollId"], e.start)
            got_takings[at] = max(got_takings.get(at, 0.0), e.payload["takings"])
    want_takings = {(r["TollId"], ticks(r["EntryTime"])): sum(
        o["TollAmount"] for o in rows if o["TollId"] == r["TollId"] and
        ticks(o["EntryTime"]) <= ticks(r["EntryTime"])) for r in rows}
    assert got_takings.keys() == want_takings.keys()
    assert all(abs(got_takings[k] - want_takings[k]) < 1e-9 for k in want_takings)
    print(f"scan: running takings per booth, booth 1 ends at "
          f"{max(t for (b, _), t in got_takings.items() if b == 1):.2f}")
    print(f"\nuser-defined operators match the data; runtime: {args.runtime}")


if __name__ == "__main__":
    main()
