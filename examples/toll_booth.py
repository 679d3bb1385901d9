"""The toll-booth job: the three classic TollApp questions on the real sample data.

- ``time_at_booth``: each entry joined with the exit of the same car (LicensePlate) at the same
  booth (TollId) within 15 minutes of entering: a point at the exit, with the minutes taken;
- ``expired_registrations``: each entry joined with the registration of its plate, where the
  registration has expired (``Expired == "1"``). The registrations are reference data without a
  time column: edges from their load time that never end (``cti.io.reference``), a slow stream
  that imports the entries' CTIs;
- ``cars_per_booth``: the cars per booth per 3-minute tumbling window, an interval event
  covering the window [start, end).

As a job, writing each output as a Delta table ``DIR/<name>``::

    cti run examples/toll_booth.py --until-idle --output DIR

(``streams()`` below is what ``cti run`` writes). As a script, it prints the outputs and checks
each against the same question answered directly from the data:
``python examples/toll_booth.py`` (in-process with ``--runtime local``).
"""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import datetime, timedelta

from _tolldata import bind_entries, bind_exits, bind_registrations, hhmm, read_json, ticks

from cti import Application, IntervalEvent, PointEvent, WindowOutputPolicy, agg

MINUTE = 60_000_000


def minutes_between(start: str, end: str) -> float:
    """Minutes from one ISO time to another (used inside a query: it runs on Spark's workers,
    so it is defined here, not imported from a helper module the workers cannot import)."""
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds() / 60


def time_at_booth(entries, exits):
    """Entry extended to 15 minutes, joined with the exit of the same car at the same booth."""
    return entries.alter_event_duration(timedelta(minutes=15)).join(
        exits, on="LicensePlate", predicate=lambda e, x: e["TollId"] == x["TollId"],
        select=lambda e, x: {"LicensePlate": e["LicensePlate"], "TollId": e["TollId"],
                             "EntryTime": e["EntryTime"], "ExitTime": x["ExitTime"],
                             "DurationInMinutes": minutes_between(e["EntryTime"],
                                                                  x["ExitTime"])})


def expired_registrations(entries, registrations):
    """Entries whose plate's registration has expired (a reference-data join)."""
    return entries.join(
        registrations.where(lambda r: r["Expired"] == "1"), on="LicensePlate",
        select=lambda car, reg: {"LicensePlate": car["LicensePlate"], "TollId": car["TollId"],
                                 "RegistrationId": reg["RegistrationId"]})


def per_booth(entries, **aggregates):
    """Aggregates per booth per 3-minute tumbling window, each an interval [start, end)."""
    return entries.group_by("TollId").apply(lambda booth: booth.tumbling_window(
        timedelta(minutes=3), output_policy=WindowOutputPolicy.CLIP_TO_WINDOW_END).aggregate(
        **aggregates))


def streams() -> dict:
    """The job's outputs by name (what ``cti run`` writes)."""
    app = Application("toll-booth")
    entries, exits = bind_entries(app), bind_exits(app)
    registrations = bind_registrations(app)
    return {
        "time_at_booth": time_at_booth(entries, exits),
        "expired_registrations": expired_registrations(entries, registrations),
        "cars_per_booth": per_booth(entries, Count=agg.count()),
    }


def expected() -> dict[str, Counter]:
    """Each output's events answered directly from the data, as comparable keys."""
    entries, exits = read_json("Entry.json"), read_json("Exit.json")
    expired = {r["LicensePlate"] for r in read_json("Registration.json") if r["Expired"] == "1"}
    stays, booths = Counter(), Counter()
    for e in entries:
        for x in exits:
            d = ticks(x["ExitTime"]) - ticks(e["EntryTime"])
            if (e["LicensePlate"], e["TollId"]) == (x["LicensePlate"], x["TollId"]) \
                    and 0 <= d < 15 * MINUTE:
                stays[(ticks(x["ExitTime"]), e["LicensePlate"], d / MINUTE)] += 1
        t = ticks(e["EntryTime"])
        booths[(t - t % (3 * MINUTE), e["TollId"])] += 1
    return {
        "time_at_booth": stays,
        "expired_registrations": Counter((ticks(e["EntryTime"]), e["LicensePlate"])
                                         for e in entries if e["LicensePlate"] in expired),
        "cars_per_booth": booths,
    }


def keys(name: str, events: list) -> Counter:
    """Output events as the keys of ``expected``."""
    if name == "time_at_booth":
        return Counter((e.start, e.payload["LicensePlate"], e.payload["DurationInMinutes"])
                       for e in events)
    if name == "expired_registrations":
        return Counter((e.start, e.payload["LicensePlate"]) for e in events)
    assert all(e.end - e.start == 3 * MINUTE for e in events), "windows are [start, end)"
    return Counter({(e.start, e.payload["TollId"]): e.payload["Count"] for e in events})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="spark", choices=["spark", "local"])
    args = parser.parse_args()
    want = expected()
    for name, stream in streams().items():
        events = [e for e in stream.collect(args.runtime)
                  if isinstance(e, PointEvent | IntervalEvent)]
        print(f"== {name}: {len(events)} events (times UTC)")
        for e in events:
            p = e.payload
            span = hhmm(e.start) + (f"-{hhmm(e.end)}" if isinstance(e, IntervalEvent) else "")
            print(f"  {span} " + ", ".join(f"{k}={v}" for k, v in sorted(p.items())))
        assert keys(name, events) == want[name], f"{name} does not match the data"
    print(f"\nall three outputs match the data; runtime: {args.runtime}")


if __name__ == "__main__":
    main()
