"""Count windows over the TollApp entries: per booth, the tolls of every 3 consecutive cars
(StreamInsight's ``CountByStartTimeWindow(3)``), sliding by one car.

``count_window(3)`` makes a window of every 3 consecutive distinct entry times of a booth
(cars entering at the same time count as one); each result is a point one tick after its
last car. Each result is checked against the entries themselves.

Run: ``python examples/toll_count_window.py`` (in-process with ``--runtime local``).
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from _tolldata import bind_entries, hhmm, read_json, ticks

from cti import Application, PointEvent, agg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="spark", choices=["spark", "local"])
    args = parser.parse_args()

    entries = bind_entries(Application("toll-count-window"))
    every_3 = entries.group_by("TollId").apply(lambda booth: booth.count_window(3).aggregate(
        cars=agg.count(), tolls=agg.sum("TollAmount"),
        plates=agg.udf(lambda cars: [c["LicensePlate"] for c in cars])))
    out = [e for e in every_3.collect(args.runtime) if isinstance(e, PointEvent)]

    print("== per booth, the tolls of every 3 consecutive cars (times UTC)")
    for e in sorted(out, key=lambda e: (e.payload["TollId"], e.start)):
        p = e.payload
        print(f"  booth {p['TollId']} at {hhmm(e.start)}: {p['cars']} cars, tolls "
              f"{p['tolls']:.2f} {p['plates']}")

    # Straight from the data: each booth's distinct entry times, 3 at a time.
    by_booth: dict[int, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in read_json("Entry.json"):
        by_booth[row["TollId"]][ticks(row["EntryTime"])].append(row)
    want = {}
    for booth, at in by_booth.items():
        times = sorted(at)
        for i in range(len(times) - 2):
            rows = [r for t in times[i:i + 3] for r in at[t]]
            want[(booth, times[i + 2] + 1)] = (len(rows), sum(r["TollAmount"] for r in rows))
    got = {(e.payload["TollId"], e.start): (e.payload["cars"], e.payload["tolls"]) for e in out}
    assert got.keys() == want.keys()
    for k, (cars, tolls) in want.items():
        assert got[k][0] == cars and abs(got[k][1] - tolls) < 1e-9
    print(f"\n{len(got)} count windows match the data; runtime: {args.runtime}")


if __name__ == "__main__":
    main()
