"""A slow reference stream keeps pace with a fast stream by importing its CTIs (SPEC section 5).

- ``entries`` (fast): the 23 toll-booth entries of Stream Analytics' TollApp sample, as point
  events in time order, each arriving at its entry time. A CTI at every entry
  (``AdvanceTimeSettings.increasing_start_time()``).
- ``registrations`` (slow): the registration status of the first few vehicles of
  ``Registration.json``, as edge events: each status is valid from 05:00 until a new status
  replaces it. The stream has only a handful of events and generates no CTIs of its own; with
  ``AdvanceTimeImportSettings("entries")`` every CTI of ``entries`` is also inserted into it,
  at the place in arrival order where it occurred. So its time advances as fast as the entries',
  and a join of entries with registrations (a reference-data join) is final at each CTI.

Two status changes happen during the morning:
- XLZ 3463's registration lapses at 05:20; the change is entered on time (arrives at 05:20).
- BAC 1005 renews its expired registration at 05:10, but the change is entered at 05:13. By then
  the entries' CTI (imported) is 05:12, so with ``AdvanceTimePolicy.ADJUST`` the old status is
  closed, and the new one starts, at 05:12: the reference data never changes the past.

Run: ``python examples/reference_data_import.py`` (in-process; ``--runtime spark`` runs the same
on embedded Spark and checks that both runtimes agree, and that loading the registrations two
rows per micro-batch, ``SparkRuntime(reference_rows_per_batch=2)``, changes nothing).
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

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
    EdgeType,
    EventShape,
    PointEvent,
    RunResult,
    to_datetime,
    to_ticks,
)
from cti.io.memory import MemoryInputAdapterFactory

DATA = Path(__file__).resolve().parents[1] / "data" / "tollapp"
PACIFIC = timezone(timedelta(hours=-7))  # the sample's local time (its times carry -07:00)
PLATES = 3  # how many registrations the reference stream carries


def read_json(name: str) -> list[dict]:
    with open(DATA / name, encoding="utf-8-sig") as f:  # the files may start with a BOM
        return json.load(f)


def at(hhmm: str) -> int:
    """A time on the sample's morning (2014-09-10, -07:00) as ticks."""
    return to_ticks(datetime.fromisoformat(f"2014-09-10T{hhmm}:00-07:00"))


def show(t: int) -> str:
    return "+inf" if t == MAX_TIME else to_datetime(t).astimezone(PACIFIC).strftime("%H:%M")


def entries(rows: list[dict]) -> list[Arriving]:
    """Each entry arrives at its entry time (the file is in time order)."""
    items = []
    for row in rows:
        t = to_ticks(datetime.fromisoformat(row["EntryTime"]))
        payload = {"plate": row["LicensePlate"], "toll": row["TollId"]}
        items.append(Arriving(PointEvent(t, payload), t))
    return items


def registrations(rows: list[dict]) -> list[Arriving]:
    """The first registrations as edges from 05:00, then the two status changes."""
    def status(row: dict, expired: str) -> dict:
        return {"plate": row["LicensePlate"], "registration": row["RegistrationId"],
                "expired": expired}

    first = rows[:PLATES]
    items = [Arriving(EdgeEvent.start_edge(at("05:00"), status(r, r["Expired"])), at("05:00"))
             for r in first]
    by_plate = {r["LicensePlate"]: r for r in first}
    for plate, effective, arrives, new in (("BAC 1005", "05:10", "05:13", "0"),
                                           ("XLZ 3463", "05:20", "05:20", "1")):
        row = by_plate[plate]
        old = status(row, row["Expired"])
        items.append(Arriving(EdgeEvent.end_edge(at("05:00"), at(effective), old), at(arrives)))
        items.append(Arriving(EdgeEvent.start_edge(at(effective), status(row, new)), at(arrives)))
    return items


def describe(item: object) -> str:
    if isinstance(item, Cti):
        return f"CTI {show(item.time)}"
    p = item.payload
    if isinstance(item, PointEvent):
        return f"entry {show(item.start)}  {p['plate']} at booth {p['toll']}"
    if item.edge_type is EdgeType.START:
        return f"status from {show(item.start)}  {p['plate']} expired={p['expired']}"
    return f"status [{show(item.start)}, {show(item.end)})  {p['plate']} expired={p['expired']}"


def status_at(result: RunResult, plate: str, t: int) -> str | None:
    """The reference stream's status of ``plate`` at time ``t``: what a reference-data join of
    an entry at ``t`` would pick. Reconstructed from the edges in the output."""
    valid: dict[int, tuple[int, str]] = {}  # start -> (end, expired)
    for item in result.items("registrations"):
        if isinstance(item, EdgeEvent) and item.payload["plate"] == plate:
            valid[item.start] = (item.end, item.payload["expired"])
    hits = [expired for start, (end, expired) in valid.items() if start <= t < end]
    assert len(hits) <= 1, f"{plate} has overlapping statuses at {show(t)}"
    return hits[0] if hits else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="local", choices=["local", "spark"])
    args = parser.parse_args()

    entry_rows, registration_rows = read_json("Entry.json"), read_json("Registration.json")
    app = Application("tollapp")
    memory = MemoryInputAdapterFactory()
    fast = CepStream.create(
        "entries", memory, entries(entry_rows), EventShape.POINT,
        AdvanceTimeSettings.increasing_start_time(), application=app)
    # The importing stream is bound after the stream it imports from (binding checks the name).
    CepStream.create(
        "registrations", memory, registrations(registration_rows), EventShape.EDGE,
        AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("entries"),
                            policy=AdvanceTimePolicy.ADJUST),
        application=app)

    result = fast.run(args.runtime)  # runs the ingress group: entries and registrations
    if args.runtime != "local":
        assert result == fast.run("local"), "Spark and in-process results agree"
        # On Spark a stream that imports its CTIs comes at most 100,000 rows per micro-batch
        # (a large table loads over several): here two at a time, the same result.
        from cti.runtime.spark import SparkRuntime

        assert fast.run(SparkRuntime(reference_rows_per_batch=2)) == result

    for name in ("entries", "registrations"):
        stream = result[name]
        print(f"== {name} (times at -07:00): {stream.metrics}")
        for item in stream.items:
            print("   ", describe(item))
        for d in stream.diagnostics:
            print(f"    {d.status} {d.kind} {d.payload['plate']}: "
                  f"[{show(d.original_start)}, {show(d.original_end or MAX_TIME)}) -> "
                  f"[{show(d.start)}, {show(d.end or MAX_TIME)}) at CTI {show(d.cti)} "
                  f"({d.reason})")

    entry_ctis = [i.time for i in result.items("entries") if isinstance(i, Cti)]
    reg_ctis = [i.time for i in result.items("registrations") if isinstance(i, Cti)]
    print("\n   entries CTI   registrations CTI")
    for a, b in zip(entry_ctis, reg_ctis, strict=True):
        print(f"   {show(a):>11}   {show(b):>17}")

    # The slow stream has every CTI of the fast one, though it has only 7 events of its own.
    assert reg_ctis == entry_ctis and reg_ctis[-1] == MAX_TIME
    assert result["registrations"].metrics["ctis"] == result["entries"].metrics["ctis"]
    # The late renewal was adjusted to the CTI in force when it arrived; the on-time change not.
    adjusted = [(d.payload["plate"], d.kind, d.start) for d in result["registrations"].adjusted]
    assert adjusted == [("BAC 1005", "edge_end", at("05:00")),
                        ("BAC 1005", "edge_start", at("05:12"))], adjusted
    ends = {(d.payload["plate"], d.kind): d.end for d in result["registrations"].adjusted}
    assert ends[("BAC 1005", "edge_end")] == at("05:12")
    assert result["registrations"].metrics["dropped"] == 0
    # What a reference-data join would see for BAC 1005's two entries (05:06 and 05:15).
    seen = {show(e.start): status_at(result, "BAC 1005", e.start)
            for e in result.items("entries")
            if isinstance(e, PointEvent) and e.payload["plate"] == "BAC 1005"}
    assert seen == {"05:06": "1", "05:15": "0"}, seen
    print(f"\nBAC 1005 entries see registration expired={seen}; "
          f"registrations imported all {len(reg_ctis)} CTIs of entries; runtime: {args.runtime}")


if __name__ == "__main__":
    main()
