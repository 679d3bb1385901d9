"""Lifetime operators on the TollApp data: shift, alter, clip, back to points.

- ``shift_event_time(3 min)``: each entry moved to when the car is expected out (the CTIs move
  with it);
- ``alter_event_lifetime(start_fn, 2 min)``: each exit becomes the 2-minute interval starting at
  the minute before it (``start_fn`` must not decrease: it moves the CTIs too);
- ``alter_event_duration(15 min)`` then ``clip_event_duration(5 min)``: intervals of at most
  5 minutes;
- ``clip_event_duration`` on an edge stream: a registration that stays open is closed 10
  minutes after it started, as an edge end, once the CTI passes that time;
- ``to_point_event_stream()``: the intervals as points again, equal to the original entries.

Run: ``python examples/toll_lifetimes.py`` (in-process with ``--runtime local``).
"""

from __future__ import annotations

import argparse
from datetime import timedelta

from _tolldata import bind_entries, bind_exits, bind_registrations, hhmm, read_json, ticks

from cti import Application, Cti, EdgeEvent, EdgeType, IntervalEvent, PointEvent

MINUTE = 60_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="spark", choices=["spark", "local"])
    args = parser.parse_args()
    app = Application("toll-lifetimes")
    entries, exits = bind_entries(app), bind_exits(app)
    registrations = bind_registrations(app, {"BAC 1005"})
    entry_times = sorted(ticks(r["EntryTime"]) for r in read_json("Entry.json"))
    exit_times = sorted(ticks(r["ExitTime"]) for r in read_json("Exit.json"))

    shifted = entries.shift_event_time(timedelta(minutes=3)).collect(args.runtime)
    assert sorted(e.start for e in shifted if isinstance(e, PointEvent)) == [
        t + 3 * MINUTE for t in entry_times]
    original_ctis = [c.time for c in entries.collect(args.runtime) if isinstance(c, Cti)]
    assert [c.time for c in shifted if isinstance(c, Cti)][:-1] == [
        c + 3 * MINUTE for c in original_ctis[:-1]]
    print(f"shift: {len(entry_times)} entries and their CTIs moved 3 minutes; first expected "
          f"exit {hhmm(entry_times[0] + 3 * MINUTE)} (UTC)")

    windows = exits.alter_event_lifetime(lambda t: t - t % MINUTE - MINUTE,
                                         timedelta(minutes=2)).collect(args.runtime)
    spans = sorted((e.start, e.end) for e in windows if isinstance(e, IntervalEvent))
    assert spans == sorted((t - t % MINUTE - MINUTE, t - t % MINUTE + MINUTE)
                           for t in exit_times)
    print(f"alter_event_lifetime: {len(spans)} exits as 2-minute intervals, first "
          f"[{hhmm(spans[0][0])}, {hhmm(spans[0][1])})")

    clipped = entries.alter_event_duration(timedelta(minutes=15)).clip_event_duration(
        timedelta(minutes=5))
    intervals = [e for e in clipped.collect(args.runtime) if isinstance(e, IntervalEvent)]
    assert all(e.end - e.start == 5 * MINUTE for e in intervals)
    back = clipped.to_point_event_stream().collect(args.runtime)
    assert sorted(e.start for e in back if isinstance(e, PointEvent)) == entry_times
    print(f"alter_event_duration + clip_event_duration: {len(intervals)} intervals of 5 "
          f"minutes; to_point_event_stream gives the entries back")

    edges = [e for e in registrations.clip_event_duration(timedelta(minutes=10)).collect(
        args.runtime) if isinstance(e, EdgeEvent)]
    ends = [e for e in edges if e.edge_type is EdgeType.END]
    assert len(ends) == len(edges) // 2 and all(e.end - e.start == 10 * MINUTE for e in ends)
    print(f"clip_event_duration on edges: {len(ends)} open registration(s) closed at "
          f"{', '.join(hhmm(e.end) for e in ends)}")
    print(f"\nall lifetime operators match the data; runtime: {args.runtime}")


if __name__ == "__main__":
    main()
