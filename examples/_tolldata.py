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
    EventShape,
    PointEvent,
    to_datetime,
    to_ticks,
)
from cti.io.memory import MemoryInputAdapterFactory
from cti.io.reference import ReferenceDataConfig, ReferenceDataInputAdapterFactory, reference_data

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


LOAD_TIME = "2014-09-10T05:00:00-07:00"  # when the registrations are loaded: before any entry


def bind_registrations(app: Application, plates: set[str] | None = None) -> CepStream:
    """Registrations (reference data without a time column) as open-ended edges from the load
    time, 05:00: a slow reference stream that imports the entries' CTIs. All of them, read from
    the file, or only those of ``plates``."""
    config: object
    if plates is None:
        factory, config = ReferenceDataInputAdapterFactory(), ReferenceDataConfig(
            DATA / "Registration.json", ticks(LOAD_TIME))
    else:
        factory, config = MemoryInputAdapterFactory(), reference_data(
            [r for r in read_json("Registration.json") if r["LicensePlate"] in plates],
            ticks(LOAD_TIME))
    return CepStream.create(
        "registrations", factory, config, EventShape.EDGE,
        AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("entries"),
                            policy=AdvanceTimePolicy.ADJUST), application=app)
