"""Windows and aggregates on the TollApp entries: cars and tolls per booth per 3 minutes.

- ``group_by("TollId").apply(... tumbling_window(3 min).aggregate(...))`` (the toll-booth
  job's ``per_booth``): per booth and 3-minute window, the number of cars, the toll taken, the
  average and the largest toll, and a user-defined aggregate (the sorted plates), each an
  interval covering its window;
- a hopping window (10 minutes every 5) over all booths, with ``CLIP_TO_WINDOW_END``: each
  result is an interval covering its window, and the output CTI waits for the window's start;
- an incremental user-defined aggregate (distinct states).

Each result is checked against the same numbers computed directly from the data.

Run: ``python examples/toll_windows.py`` (in-process with ``--runtime local``).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from datetime import timedelta

from _tolldata import bind_entries, hhmm, read_json, ticks
from toll_booth import MINUTE, per_booth

from cti import Application, Cti, IntervalEvent, WindowOutputPolicy, agg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="spark", choices=["spark", "local"])
    args = parser.parse_args()

    entries = bind_entries(Application("toll-windows"))
    booths = per_booth(  # the toll-booth job's windows (toll_booth.py), more aggregates
        entries, cars=agg.count(), tolls=agg.sum("TollAmount"), avg=agg.avg("TollAmount"),
        top=agg.max("TollAmount"),
        plates=agg.udf(lambda cars: sorted(c["LicensePlate"] for c in cars)))
    busy = entries.hopping_window(timedelta(minutes=10), timedelta(minutes=5),
                                  output_policy=WindowOutputPolicy.CLIP_TO_WINDOW_END).aggregate(
        cars=agg.count(),
        states=agg.incremental(set, lambda seen, car: seen | {car["State"]}, sorted))

    booth_out = booths.collect(args.runtime)
    print("== cars per booth per 3 minutes (an interval per window; times UTC)")
    for item in booth_out:
        if isinstance(item, IntervalEvent):
            p = item.payload
            print(f"  {hhmm(item.start)}-{hhmm(item.end)} booth {p['TollId']}: {p['cars']} cars, "
                  f"tolls "
                  f"{p['tolls']:.2f} (avg {p['avg']:.2f}, top {p['top']:.2f}) {p['plates']}")

    # The same numbers, straight from the data.
    want: dict[tuple, list] = defaultdict(list)
    for row in read_json("Entry.json"):
        t = ticks(row["EntryTime"])
        want[(t - t % (3 * MINUTE), row["TollId"])].append(row)
    got = {(i.start, i.payload["TollId"]): i.payload for i in booth_out
           if isinstance(i, IntervalEvent)}
    assert set(got) == set(want)
    for k, rows in want.items():
        assert got[k]["cars"] == len(rows)
        assert abs(got[k]["tolls"] - sum(r["TollAmount"] for r in rows)) < 1e-9
        assert got[k]["plates"] == sorted(r["LicensePlate"] for r in rows)

    busy_out = busy.collect(args.runtime)
    print("== cars in 10-minute windows every 5 minutes (intervals: CLIP_TO_WINDOW_END)")
    windows = [i for i in busy_out if isinstance(i, IntervalEvent)]
    for w in windows:
        print(f"  [{hhmm(w.start)}, {hhmm(w.end)}): {w.payload['cars']} cars from "
              f"{', '.join(w.payload['states'])}")
    times = [ticks(r["EntryTime"]) for r in read_json("Entry.json")]
    for w in windows:
        assert w.payload["cars"] == sum(w.start <= t < w.end for t in times)
    ctis = [c.time for c in busy_out if isinstance(c, Cti)]
    # Output CTIs stop at the start of the earliest incomplete window (every 5 minutes).
    assert all(c % (5 * MINUTE) == 0 for c in ctis[:-1]) and ctis == sorted(set(ctis))
    print(f"\n{len(got)} booth windows and {len(windows)} hopping windows match the data; "
          f"runtime: {args.runtime}")


if __name__ == "__main__":
    main()
