"""Signals and durations from the event on the TollApp data (StreamInsight's
``AlterEventDuration(e => ...)``, ``ClipEventDuration`` against a stream, group-and-apply on
several fields or a key function).

- ``alter_event_duration(fn)``: each entry lasts one minute per dollar of its toll;
- ``alter_event_duration(MAX_TIME).clip_event_duration(entries, on="TollId")``: the entries
  as a signal, the last car at each booth: each entry lasts until the next entry at its booth
  (checked against a plain loop over the file);
- ``group_by("TollId", "State")`` and ``group_by(key=fn, name=...)``: cars per booth and state,
  and per weight class, in 3-minute tumbling windows.

Run: ``python examples/toll_signals.py`` (in-process with ``--runtime local``).
"""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import timedelta

from _tolldata import bind_entries, hhmm, read_json, ticks

from cti import MAX_TIME, Application, IntervalEvent, PointEvent, agg

MINUTE = 60_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="spark", choices=["spark", "local"])
    args = parser.parse_args()
    entries = bind_entries(Application("toll-signals"))
    rows = read_json("Entry.json")

    stays = entries.alter_event_duration(lambda e: timedelta(minutes=e.payload["TollAmount"]))
    spans = sorted((e.start, e.end) for e in stays.collect(args.runtime)
                   if isinstance(e, IntervalEvent))
    assert spans == sorted((ticks(r["EntryTime"]), ticks(r["EntryTime"]) +
                            int(r["TollAmount"] * MINUTE)) for r in rows)
    print(f"alter_event_duration(fn): {len(spans)} entries, one minute per toll dollar")

    last_car = entries.alter_event_duration(MAX_TIME).clip_event_duration(entries, on="TollId")
    signal = sorted((e.payload["TollId"], e.start, e.end, e.payload["LicensePlate"])
                    for e in last_car.collect(args.runtime) if isinstance(e, IntervalEvent))
    loop = []
    for r in rows:  # the same by hand: until the next later entry at the booth
        t = ticks(r["EntryTime"])
        later = [ticks(o["EntryTime"]) for o in rows
                 if o["TollId"] == r["TollId"] and ticks(o["EntryTime"]) > t]
        loop.append((r["TollId"], t, min(later, default=MAX_TIME - 1), r["LicensePlate"]))
    assert signal == sorted(loop)
    booth, start, end, plate = signal[0]
    print(f"signal: {len(signal)} readings; booth {booth}: {plate} from {hhmm(start)} until "
          f"{hhmm(end)}")

    per_state = entries.group_by("TollId", "State").apply(
        lambda g: g.tumbling_window(timedelta(minutes=3)).aggregate(cars=agg.count()))
    got = Counter()
    for e in per_state.collect(args.runtime):
        if isinstance(e, PointEvent):
            got[(e.payload["TollId"], e.payload["State"])] += e.payload["cars"]
    assert got == Counter((r["TollId"], r["State"]) for r in rows)
    print(f"group_by('TollId', 'State'): {len(got)} groups, {sum(got.values())} cars")

    heavy = entries.group_by(key=lambda p: p["CarModel"]["VehicleType"], name="type").apply(
        lambda g: g.tumbling_window(timedelta(minutes=3)).aggregate(cars=agg.count()))
    types = Counter()
    for e in heavy.collect(args.runtime):
        if isinstance(e, PointEvent):
            types[e.payload["type"]] += e.payload["cars"]
    assert types == Counter(r["CarModel"]["VehicleType"] for r in rows)
    print(f"group_by(key=vehicle type): {dict(sorted(types.items()))}")
    print(f"\nsignals and computed durations match the data; runtime: {args.runtime}")


if __name__ == "__main__":
    main()
