"""A sliding window over the TollApp entries: per booth, the number of cars and the average
toll over the last 3 minutes, whenever it changes (StreamInsight's ``AlterEventDuration`` then
``SnapshotWindow``).

``alter_event_duration(3 min)`` makes each entry last 3 minutes; ``snapshot_window()`` cuts
each booth's time at every start and end of those lifetimes, so each result is an interval
during which the same cars count. Each result is checked against the entries themselves.

Run: ``python examples/toll_snapshot.py`` (in-process with ``--runtime local``).
"""

from __future__ import annotations

import argparse
from datetime import timedelta

from _tolldata import bind_entries, hhmm, read_json, ticks

from cti import Application, Cti, IntervalEvent, agg

MINUTE = 60_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="spark", choices=["spark", "local"])
    args = parser.parse_args()

    entries = bind_entries(Application("toll-snapshot"))
    last_3_minutes = entries.alter_event_duration(timedelta(minutes=3)).group_by(
        "TollId").apply(lambda booth: booth.snapshot_window().aggregate(
            cars=agg.count(), avg_toll=agg.avg("TollAmount")))
    out = last_3_minutes.collect(args.runtime)

    print("== per booth, cars and average toll over the last 3 minutes (times UTC)")
    windows = [i for i in out if isinstance(i, IntervalEvent)]
    for w in sorted(windows, key=lambda w: (w.payload["TollId"], w.start)):
        p = w.payload
        print(f"  booth {p['TollId']} {hhmm(w.start)}-{hhmm(w.end)}: {p['cars']} cars, "
              f"average toll {p['avg_toll']:.2f}")

    # Straight from the data: in each window the cars whose 3 minutes cover it, and no
    # start or end of a car's 3 minutes inside it.
    rows = [(ticks(r["EntryTime"]), r) for r in read_json("Entry.json")]
    for w in windows:
        booth = [(t, r) for t, r in rows if r["TollId"] == w.payload["TollId"]]
        active = [r["TollAmount"] for t, r in booth if t <= w.start < t + 3 * MINUTE]
        assert w.payload["cars"] == len(active) > 0
        assert abs(w.payload["avg_toll"] - sum(active) / len(active)) < 1e-9
        assert not any(w.start < x < w.end for t, _ in booth for x in (t, t + 3 * MINUTE))
    # Every moment a booth has a car within the last 3 minutes lies in one of its windows.
    for t, r in rows:
        assert any(w.payload["TollId"] == r["TollId"] and w.start <= t < w.end
                   for w in windows)
    ctis = [c.time for c in out if isinstance(c, Cti)]
    assert ctis == sorted(set(ctis))
    print(f"\n{len(windows)} snapshot windows match the data; runtime: {args.runtime}")


if __name__ == "__main__":
    main()
