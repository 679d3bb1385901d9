"""Shared by the toll examples: the TollApp sample data of data/tollapp as streams."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from cti import (
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Application,
    Arriving,
    CepStream,
    EdgeEvent,
    EventShape,
    PointEvent,
    to_datetime,
    to_ticks,
)
from cti.io.memory import MemoryInputAdapterFactory

DATA = Path(__file__).resolve().parents[1] / "data" / "tollapp"


def read_json(name: str) -> list[dict]:
    return json.loads((DATA / name).read_text(encoding="utf-8-sig"))


def ticks(text: str) -> int:
    return to_ticks(datetime.fromisoformat(text))


def hhmm(t: int) -> str:
    return to_datetime(t).strftime("%H:%M:%S")


def points(rows: list[dict], time_field: str) -> list[Arriving]:
    """Point events stamped with the row's time, arriving in file order (never going back)."""
    items, arrival = [], 0
    for row in rows:
        t = ticks(row[time_field])
        arrival = max(arrival, t)
        items.append(Arriving(PointEvent(t, row), arrival))
    return items


def bind_entries(app: Application) -> CepStream:
    """Entries: in time order, a CTI at every entry."""
    return CepStream.create("entries", MemoryInputAdapterFactory(),
                            points(read_json("Entry.json"), "EntryTime"), EventShape.POINT,
                            AdvanceTimeSettings.increasing_start_time(), application=app)


def bind_exits(app: Application, delay_minutes: int = 7) -> CepStream:
    """Exits: up to 6 minutes out of order; CTIs ``delay_minutes`` behind the latest exit."""
    from datetime import timedelta

    return CepStream.create("exits", MemoryInputAdapterFactory(),
                            points(read_json("Exit.json"), "ExitTime"), EventShape.POINT,
                            AdvanceTimeSettings.unordered_start_time(
                                timedelta(minutes=delay_minutes)), application=app)


def bind_registrations(app: Application, plates: set[str]) -> CepStream:
    """Registrations of ``plates`` as edges valid from 05:00 (open-ended): a slow reference
    stream that imports the entries' CTIs."""
    base = ticks("2014-09-10T05:00:00-07:00")
    items = [Arriving(EdgeEvent.start_edge(base, r), base)
             for r in read_json("Registration.json") if r["LicensePlate"] in plates]
    return CepStream.create(
        "registrations", MemoryInputAdapterFactory(), items, EventShape.EDGE,
        AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("entries"),
                            policy=AdvanceTimePolicy.ADJUST), application=app)
