"""A user-written input adapter factory that declares its own advance-time properties (SPEC 6).

``TollExitAdapterFactory`` reads toll-booth exits (Stream Analytics' TollApp ``Exit.json``) as
point events. Its adapter is written in StreamInsight's push style: a subclass of
``EnqueuingInputAdapter`` whose ``produce()`` calls ``enqueue(event)`` for each row and
``enqueue_invalid(reason, raw)`` for a row it cannot read. The factory also implements
``declare_advance_time_properties(config, shape)`` (StreamInsight's
``IDeclareAdvanceTimeProperties``): it knows its source delivers exits up to
``config.max_delay`` out of order, so it declares a CTI at every exit, that far behind the
latest one, and DROP for anything later still.

The same file is bound twice:

- ``exits``: no settings at binding, so the factory's declaration is used. Three exits arrive
  more than 3 minutes behind a later one; they violate a CTI and are dropped.
- ``exits_rebound``: binding passes ``AdvanceTimeSettings`` (CTIs 6 minutes behind, every
  second exit). Binding settings *replace* the factory's: nothing is dropped now.

Spark re-creates factories and adapters in its worker processes from a pickle (cloudpickle,
so a class defined in a script or notebook, like these, travels by value).

Run: ``python examples/custom_adapter_factory.py`` (in-process; ``--runtime spark`` runs the same
on embedded Spark and checks that both runtimes agree).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cti import (
    MAX_TIME,
    AdapterAdvanceTimeSettings,
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Application,
    CepStream,
    Cti,
    EnqueuingInputAdapter,
    EventShape,
    InvalidSettingsError,
    PointEvent,
    StreamResult,
    to_datetime,
    to_ticks,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "tollapp"
PACIFIC = timezone(timedelta(hours=-7))


@dataclass(frozen=True)
class ExitFileConfig:
    """The adapter's configuration: plain, picklable data."""

    path: str
    max_delay: timedelta  # how far behind the newest exit the source may deliver one


class TollExitAdapter(EnqueuingInputAdapter):
    """Exits as point events at ``ExitTime``, in file order."""

    # It enqueues events and invalid rows only, never a CTI or an arrival time: a query on
    # Spark spread over shards by key then sends each shard only its own exits (docs/adapters.md).
    events_only = True

    def __init__(self, config: ExitFileConfig) -> None:
        super().__init__()  # sets up the queue that enqueue() fills
        self.config = config

    def produce(self) -> None:
        # Called once per adapter instance; must enqueue the same items every time (the
        # runtime reads them back by offset, and Spark may read a range again after a failure).
        with open(self.config.path, encoding="utf-8-sig") as f:
            rows = json.load(f)
        for row in rows:
            try:
                t = to_ticks(datetime.fromisoformat(row["ExitTime"]))
            except (KeyError, TypeError, ValueError) as exc:
                self.enqueue_invalid(f"ExitTime: {exc}", json.dumps(row))
                continue
            self.enqueue(PointEvent(t, {"plate": row["LicensePlate"], "toll": row["TollId"]}))


class TollExitAdapterFactory:
    """``create(ExitFileConfig, EventShape.POINT)``; declares its advance-time properties."""

    def create(self, config: ExitFileConfig, shape: EventShape) -> TollExitAdapter:
        if shape is not EventShape.POINT:
            raise InvalidSettingsError(f"exits are point events, not {shape.value} events")
        return TollExitAdapter(config)

    def declare_advance_time_properties(
        self, config: ExitFileConfig, shape: EventShape
    ) -> AdapterAdvanceTimeSettings:
        # Called with the same config and shape as create(), for each stream bound to it.
        return AdapterAdvanceTimeSettings(
            AdvanceTimeGenerationSettings(1, delay=config.max_delay,
                                          advance_to_infinity_on_shutdown=True),
            AdvanceTimePolicy.DROP,
        )


def show(t: int) -> str:
    return "+inf" if t == MAX_TIME else to_datetime(t).astimezone(PACIFIC).strftime("%H:%M")


def report(stream: CepStream, res: StreamResult) -> None:
    gen = stream.advance_time_settings.generation_settings
    print(f"\n== {res.name}: settings from the {stream.settings_origin}: CTI every "
          f"{gen.event_count} exit(s), {gen.delay / 60e6:g} min behind; {res.metrics}")
    ctis = [show(i.time) for i in res.items if isinstance(i, Cti)]
    print("   CTIs:", " ".join(ctis))
    for d in res.diagnostics:
        print(f"   {d.status}: exit {show(d.original_start)} {d.payload['plate']} at booth "
              f"{d.payload['toll']} (CTI {show(d.cti)}: {d.reason})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="local", choices=["local", "spark"])
    args = parser.parse_args()
    app = Application("exits")
    factory = TollExitAdapterFactory()
    config = ExitFileConfig(str(DATA / "Exit.json"), max_delay=timedelta(minutes=3))
    declared = CepStream.create("exits", factory, config, EventShape.POINT, application=app)
    rebound = CepStream.create(
        "exits_rebound", factory, config, EventShape.POINT,
        AdvanceTimeSettings(AdvanceTimeGenerationSettings(2, delay=timedelta(minutes=6),
                                                          advance_to_infinity_on_shutdown=True),
                            policy=AdvanceTimePolicy.DROP),
        application=app)

    results = {}
    for stream in (declared, rebound):
        res = stream.run(args.runtime)[stream.name]
        if args.runtime != "local":
            assert res == stream.run("local")[stream.name], "Spark and in-process agree"
        report(stream, res)
        results[stream.name] = res

    assert declared.settings_origin == "adapter" and rebound.settings_origin == "binding"
    exits, exits_rebound = results["exits"], results["exits_rebound"]
    n = exits.metrics["accepted"] + exits.metrics["dropped"]
    assert n == 23 and exits.metrics["invalid"] == 0
    late = [(show(d.original_start), d.payload["plate"]) for d in exits.dropped]
    assert late == [("05:10", "YZX 1009"), ("05:12", "BCD 1002"), ("05:18", "EDC 3109")], late
    assert exits_rebound.metrics["dropped"] == 0 and exits_rebound.metrics["accepted"] == 23
    ctis = [i.time for i in exits_rebound.items if isinstance(i, Cti)]
    assert ctis == sorted(set(ctis)) and ctis[-1] == MAX_TIME, "CTIs strictly increase"
    # At most one CTI per two exits (one that would not move time forward is skipped); the
    # first comes after the second exit (05:03), 6 minutes behind it.
    assert len(ctis) - 1 <= 23 // 2 and show(ctis[0]) == "04:57", ctis
    print(f"\nthe factory's settings dropped {len(late)} exits; binding settings replaced "
          f"them and kept all 23; runtime: {args.runtime}")


if __name__ == "__main__":
    main()
