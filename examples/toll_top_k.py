"""TopK on the TollApp entries: the 2 busiest booths of every 3 minutes (StreamInsight's
``orderby ... descending`` then ``Take(2)`` with ``e.Rank``).

Cars per booth per 3 minutes (``group_by`` and a tumbling window, as in toll_booth.py), then
over each 3-minute window of those counts ``top_k(2, order_by=[("cars", "desc")])``: the
booths ranked by SQL RANK, so booths tied at the cut all come back. Each result is checked
against the entries themselves.

Run: ``python examples/toll_top_k.py`` (in-process with ``--runtime local``).
"""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import timedelta

from _tolldata import bind_entries, hhmm, read_json, ticks
from toll_booth import MINUTE, per_booth

from cti import Application, IntervalEvent, WindowOutputPolicy, agg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="spark", choices=["spark", "local"])
    args = parser.parse_args()

    entries = bind_entries(Application("toll-top-k"))
    busiest = per_booth(entries, cars=agg.count()).tumbling_window(
        timedelta(minutes=3), output_policy=WindowOutputPolicy.CLIP_TO_WINDOW_END).top_k(
        2, order_by=[("cars", "desc")], rank_field="rank")
    out = [e for e in busiest.collect(args.runtime) if isinstance(e, IntervalEvent)]

    print("== the 2 busiest booths of every 3 minutes (ties share a rank; times UTC)")
    for e in sorted(out, key=lambda e: (e.start, e.payload["rank"], e.payload["TollId"])):
        p = e.payload
        print(f"  {hhmm(e.start)}-{hhmm(e.end)} #{p['rank']}: booth {p['TollId']} "
              f"({p['cars']} cars)")

    # Straight from the data: cars per (window, booth), ranked within each window.
    cars: Counter = Counter()
    for row in read_json("Entry.json"):
        t = ticks(row["EntryTime"])
        cars[(t - t % (3 * MINUTE), row["TollId"])] += 1
    want = set()
    for w in {w for w, _ in cars}:
        counts = {b: n for (v, b), n in cars.items() if v == w}
        for b, n in counts.items():
            rank = 1 + sum(m > n for m in counts.values())
            if rank <= 2:
                want.add((w, b, n, rank))
    got = {(e.start, e.payload["TollId"], e.payload["cars"], e.payload["rank"]) for e in out}
    assert got == want and len(got) == len(out)
    print(f"\n{len(got)} ranked booths match the data; runtime: {args.runtime}")


if __name__ == "__main__":
    main()
