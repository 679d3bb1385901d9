"""Joins on the TollApp data: reference data, anti-semi-join, entry with exit, union.

- **Reference-data join**: each entry joined with the registration valid at its time. The
  registrations are a slow edge stream that imports the entries' CTIs, so the join's output CTIs
  follow the fast stream and each match is released as soon as the next entry's CTI passes it.
  Its ``select`` once over one pair's payloads, once over frames of many pairs
  (``frame=True``, pandas columns at once): the same events.
- **Left anti-semi-join**: entries whose plate has no registration on file.
- **Time in the booth**: each entry, extended to a 15-minute interval
  (``alter_event_duration``), joined with the exit of the same car at the same booth: the result
  is a point at the exit time whose payload holds how long the car took (the toll-booth job's
  ``time_at_booth``, from ``toll_booth.py``).
- **Union**: entries and exits as one stream of booth events, counted per booth per 5 minutes.

Every result is checked against the same question answered directly from the data.

Run: ``python examples/toll_joins.py`` (in-process with ``--runtime local``).
"""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import timedelta

import pandas as pd
from _tolldata import (
    bind_entries,
    bind_exits,
    bind_registrations,
    hhmm,
    read_json,
    ticks,
)
from toll_booth import MINUTE, expected, keys, time_at_booth

from cti import Application, Cti, PointEvent, agg


def events(items: list) -> list[PointEvent]:
    return [i for i in items if not isinstance(i, Cti)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="spark", choices=["spark", "local"])
    args = parser.parse_args()
    entry_rows, exit_rows = read_json("Entry.json"), read_json("Exit.json")
    registered = {r["LicensePlate"] for r in read_json("Registration.json")}

    app = Application("toll-joins")
    entries, exits = bind_entries(app), bind_exits(app)
    registrations = bind_registrations(app, {r["LicensePlate"] for r in entry_rows})

    checked = entries.join(registrations, on="LicensePlate", select=lambda car, reg: {
        "plate": car["LicensePlate"], "booth": car["TollId"], "expired": reg["Expired"] == "1"})
    unregistered = entries.left_anti_semi_join(registrations, on="LicensePlate")
    stay = time_at_booth(entries, exits)  # the toll-booth job's query (toll_booth.py)
    traffic = entries.select(lambda p: {"TollId": p["TollId"], "dir": "in"}).union(
        exits.select(lambda p: {"TollId": p["TollId"], "dir": "out"})).group_by(
        "TollId").apply(lambda b: b.tumbling_window(timedelta(minutes=5)).aggregate(
            moves=agg.count()))

    out = checked.collect(args.runtime)
    print("== entries with a registration on file (reference-data join; times UTC)")
    for e in events(out):
        print(f"  {hhmm(e.start)} {e.payload['plate']} at booth {e.payload['booth']}: "
              f"{'EXPIRED' if e.payload['expired'] else 'valid'}")
    want = sorted(ticks(r["EntryTime"]) for r in entry_rows if r["LicensePlate"] in registered)
    assert sorted(e.start for e in events(out)) == want
    entry_ctis = [i.time for i in entries.collect(args.runtime) if isinstance(i, Cti)]
    assert [i.time for i in out if isinstance(i, Cti)] == entry_ctis, "CTIs follow the entries"

    # The same join with its select over frames of pairs (whole columns at once, no Python
    # call per pair): the same answer.
    by_frame = entries.join(registrations, on="LicensePlate", frame=True,
                            select=lambda car, reg: pd.DataFrame({
                                "plate": car["LicensePlate"], "booth": car["TollId"],
                                "expired": reg["Expired"] == "1"}))
    assert by_frame.collect(args.runtime) == out
    print("== the same join with select over frames (frame=True): the same events")

    missing = events(unregistered.collect(args.runtime))
    print(f"== {len(missing)} entries with no registration on file (left anti-semi-join)")
    assert sorted(e.payload["LicensePlate"] for e in missing) == sorted(
        r["LicensePlate"] for r in entry_rows if r["LicensePlate"] not in registered)

    stays = events(stay.collect(args.runtime))
    print("== time in the booth (entry joined with exit within 15 minutes)")
    for s in stays:
        print(f"  {s.payload['LicensePlate']} booth {s.payload['TollId']}: "
              f"{s.payload['DurationInMinutes']:.0f} min, out at {hhmm(s.start)}")
    assert keys("time_at_booth", stays) == expected()["time_at_booth"]

    moves = events(traffic.collect(args.runtime))
    print("== entries and exits per booth per 5 minutes (union, then windows)")
    print("  " + ", ".join(f"{hhmm(m.start)} booth {m.payload['TollId']}: {m.payload['moves']}"
                           for m in moves))
    want_moves = Counter()
    for r, field in [(r, "EntryTime") for r in entry_rows] + [(r, "ExitTime")
                                                              for r in exit_rows]:
        t = ticks(r[field])
        want_moves[(t - t % (5 * MINUTE) + 5 * MINUTE, r["TollId"])] += 1
    assert {(m.start, m.payload["TollId"]): m.payload["moves"] for m in moves} == want_moves
    print(f"\nall four answers match the data; runtime: {args.runtime}")


if __name__ == "__main__":
    main()
