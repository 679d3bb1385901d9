"""Quick start: three toll-booth streams with different advance-time settings, on embedded Spark.

- ``entries``: cars entering the booths (point events, in time order): a CTI at every event.
- ``exits``: cars leaving (point events, up to 6 minutes out of order): CTIs 3 minutes behind
  the latest exit, so most of the disorder is tolerated and the rest is dropped and reported.
- ``registrations``: a slow reference stream of registration versions (edge events) that
  imports the CTIs of ``entries``, so its time keeps pace with the fast stream.
- a query: each entry joined with the registration version valid at its time (a reference-data
  join); its output CTIs follow the fast stream.

Run: ``python examples/quickstart.py`` (add ``--runtime local`` for the in-process runner).
"""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta

from _tolldata import points, read_json

from cti import (
    MAX_TIME,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Application,
    Arriving,
    CepStream,
    Cti,
    EdgeEvent,
    EventShape,
    to_datetime,
    to_duration_ticks,
    to_ticks,
)
from cti.io.memory import MemoryInputAdapterFactory


def registration_versions(plates: list[str]) -> list[Arriving]:
    """Registration versions as edges: valid from 05:00; two are renewed during the morning."""
    base = to_ticks(datetime.fromisoformat("2014-09-10T05:00:00-07:00"))
    minute = to_duration_ticks(timedelta(minutes=1))
    items = [Arriving(EdgeEvent.start_edge(base, {"plate": p, "expired": "1"}), base)
             for p in plates]
    for k, plate in enumerate(plates[:2]):
        renewed = base + (8 + 6 * k) * minute
        old, new = {"plate": plate, "expired": "1"}, {"plate": plate, "expired": "0"}
        items.append(Arriving(EdgeEvent.end_edge(base, renewed, old), renewed))
        items.append(Arriving(EdgeEvent.start_edge(renewed, new), renewed))
    return items


def show(t: int) -> str:
    return "+inf" if t == MAX_TIME else to_datetime(t).strftime("%H:%M:%S")


def describe(item: object) -> str:
    if isinstance(item, Cti):
        return f"CTI {show(item.time)}"
    p = item.payload
    if isinstance(item, EdgeEvent):
        end = "" if item.end == MAX_TIME else f" to {show(item.end)}"
        return f"edge {item.edge_type.value:5} {show(item.start)}{end}  {p['plate']} " \
               f"expired={p['expired']}"
    return f"point {show(item.start)}  booth {p['TollId']} {p['LicensePlate']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="spark", choices=["spark", "local"])
    args = parser.parse_args()

    entries_rows, exit_rows = read_json("Entry.json"), read_json("Exit.json")
    app = Application("tollbooth")
    memory = MemoryInputAdapterFactory()
    entries = CepStream.create(
        "entries", memory, points(entries_rows, "EntryTime"), EventShape.POINT,
        AdvanceTimeSettings.increasing_start_time(), application=app)
    exits = CepStream.create(
        "exits", memory, points(exit_rows, "ExitTime"), EventShape.POINT,
        AdvanceTimeSettings.unordered_start_time(timedelta(minutes=3)), application=app)
    plates = sorted({r["LicensePlate"] for r in entries_rows})[:4]
    registrations = CepStream.create(
        "registrations", memory, registration_versions(plates), EventShape.EDGE,
        AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("entries"),
                            policy=AdvanceTimePolicy.ADJUST),
        application=app)

    # entries and registrations form one ingress group (CTIs flow by import); exits another.
    result, exit_result = entries.run(args.runtime), exits.run(args.runtime)
    for stream in (result["entries"], result["registrations"], exit_result["exits"]):
        print(f"== {stream.name} (times in UTC): {stream.metrics}")
        for item in stream.items:
            print("  ", describe(item))
        for d in stream.diagnostics:
            print("   diagnostic:", d.status, d.reason, show(d.original_start),
                  "booth", d.payload["TollId"], d.payload["LicensePlate"])

    checked = entries.join(registrations, on=("LicensePlate", "plate"),
                           select=lambda car, reg: {"plate": car["LicensePlate"],
                                                    "expired": reg["expired"]})
    joined = checked.collect(args.runtime)
    print("== entries joined with the registration valid at their time")
    for item in joined:
        if not isinstance(item, Cti):
            print(f"   point {show(item.start)}  {item.payload['plate']} "
                  f"expired={item.payload['expired']}")

    entry_ctis = [i.time for i in result.items("entries") if isinstance(i, Cti)]
    assert [i.time for i in joined if isinstance(i, Cti)] == entry_ctis, "the join keeps pace"
    matched = [i for i in joined if not isinstance(i, Cti)]
    assert len(matched) == sum(e.item.payload["LicensePlate"] in plates
                               for e in points(entries_rows, "EntryTime"))
    reg_ctis = [i.time for i in result.items("registrations") if isinstance(i, Cti)]
    assert reg_ctis == entry_ctis, "the reference stream keeps pace with the fast stream"
    assert exit_result["exits"].metrics["dropped"] == len(exit_result["exits"].dropped)
    print(f"\nregistrations imported all {len(reg_ctis)} CTIs of entries "
          f"(last before shutdown: {show(reg_ctis[-2])}); runtime: {args.runtime}")


if __name__ == "__main__":
    main()
