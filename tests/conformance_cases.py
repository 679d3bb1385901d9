"""Load the conformance cases (``../shared/conformance``, or the copy in ``tests/conformance``)
into streams and expectations."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from cti import (
    MAX_TIME,
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimeSettings,
    Application,
    Arriving,
    CepStream,
    Cti,
    EdgeEvent,
    EventShape,
    IntervalEvent,
    PointEvent,
    ticks,
)
from cti.io.memory import MemoryInputAdapterFactory

SHARED = Path(__file__).resolve().parents[2] / "shared"
VENDORED = Path(__file__).resolve().parent / "conformance"
# The workspace's cases beside the project (new ones are picked up there); a clone elsewhere
# runs the copy in tests/conformance, which test_vendored_copies keeps identical to them.
CONFORMANCE = SHARED / "conformance" if (SHARED / "conformance").is_dir() else VENDORED


def case_files(prefix: str) -> list[Path]:
    files = sorted(CONFORMANCE.glob(f"{prefix}*.json"))
    assert files, f"no {prefix}*.json conformance cases under {CONFORMANCE}"
    return files


def _time(value: Any) -> int:
    return MAX_TIME if value == "MAX_TIME" else int(value)


def si_item(e: dict[str, Any]) -> Any:
    kind, payload = e["kind"], e.get("payload", {})
    if kind == "point":
        return PointEvent(e["start"], payload)
    if kind == "interval":
        return IntervalEvent(e["start"], e["end"], payload)
    if kind == "edge_start":
        return EdgeEvent.start_edge(e["start"], payload)
    if kind == "edge_end":
        return EdgeEvent.end_edge(e["start"], e["end"], payload)
    if kind == "cti":
        return Cti(_time(e["time"]))
    raise ValueError(kind)


def _ticks(value: int | None) -> Any:
    """A case's duration in ticks, as a duration (the cases write durations as tick counts)."""
    return None if value is None else ticks(value)


def si_settings(s: dict[str, Any]) -> AdvanceTimeSettings:
    gen = s.get("generation")
    generation = None
    if gen:
        generation = AdvanceTimeGenerationSettings(
            event_count=gen.get("event_count"),
            duration=_ticks(gen.get("duration_ticks")),
            delay=_ticks(gen.get("delay_ticks", 0)),
            advance_to_infinity_on_shutdown=gen.get("advance_to_infinity_on_shutdown", False),
        )
    imp = AdvanceTimeImportSettings(s["import"]) if s.get("import") else None
    return AdvanceTimeSettings(generation, imp, s.get("policy", "drop"))


def bind_si_case(case: dict[str, Any], app: Application) -> list[CepStream]:
    streams = []
    for st in case["streams"]:
        items = [
            Arriving(si_item(e), e["arrival"]) if "arrival" in e else si_item(e)
            for e in st["events"]
        ]
        streams.append(CepStream.create(
            st["name"], MemoryInputAdapterFactory(), items, EventShape(st["shape"]),
            si_settings(st["settings"]), application=app,
        ))
    return streams


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _iso(text: str) -> int:
    from datetime import datetime

    from cti import to_ticks

    return to_ticks(datetime.fromisoformat(text.replace("Z", "+00:00")))


def asa_policy(p: dict[str, Any]) -> Any:
    from cti.settings import EventOrderingPolicy

    def seconds(name: str) -> timedelta | None:
        v = p.get(name)
        return None if v is None else timedelta(seconds=v)

    return EventOrderingPolicy(
        late_arrival_tolerance=seconds("late_arrival_tolerance_s"),
        out_of_order_tolerance=seconds("out_of_order_tolerance_s"),
        early_arrival_window=seconds("early_arrival_window_s"),
        action=p.get("action", "adjust"),
        early_action=p.get("early_action", "drop"),
        over=p.get("over"),
    )


def bind_asa_case(case: dict[str, Any], app: Application) -> CepStream:
    items = [
        Arriving(PointEvent(_iso(e["app_time"]),
                            {"id": e["id"], "key": e.get("key"), "app_time": e["app_time"]}),
                 _iso(e["arrival_time"]), e.get("partition"))
        for e in case["events"]
    ]
    return CepStream.create(case["name"], MemoryInputAdapterFactory(), items, EventShape.POINT,
                            application=app, event_ordering_policy=asa_policy(case["policy"]))


def asa_expected(e: dict[str, Any]) -> tuple[int | None, str, str | None]:
    """(timestamp, status, reason) that the case expects for event e."""
    ts = e["expected"]["timestamp"]
    action = e["expected"]["action"]
    ts = None if ts is None else _iso(ts)
    if action == "accepted":
        return ts, "accepted", None
    status, _, reason = action.partition("_")
    if status == "dropped":
        return None, "dropped", reason
    return ts, "adjusted", action.removesuffix("_adjusted")


# ---- win_*.json: snapshot and count windows, TopK (SPEC 8) ----------------------------------

def _win_event(e: dict[str, Any]) -> list[Any]:
    """A case's event as stream items: an edge gives its start, and its end unless it never
    closes (``end`` MAX_TIME)."""
    shape, start, payload = e["shape"], e["start"], e["payload"]
    if shape == "point":
        return [PointEvent(start, payload)]
    if shape == "interval":
        return [IntervalEvent(start, _time(e["end"]), payload)]
    out = [EdgeEvent.start_edge(start, payload)]
    if _time(e["end"]) != MAX_TIME:
        out.append(EdgeEvent.end_edge(start, _time(e["end"]), payload))
    return out


def bind_win_case(case: dict[str, Any], app: Application, ctis: bool = False) -> CepStream:
    """The case's one stream. Its only CTI is the final one at MAX_TIME (the case's
    premise), or with ``ctis`` one after each event as well (the events in sync-time order,
    so none violates a CTI)."""
    items = [item for e in case["events"] for item in _win_event(e)]
    if ctis:
        items.sort(key=lambda i: i.end if isinstance(i, EdgeEvent) and i.end != MAX_TIME
                   and i.edge_type.name == "END" else i.start)
    shapes = {e["shape"] for e in case["events"]}
    shape = EventShape(shapes.pop()) if len(shapes) == 1 else EventShape.INTERVAL
    generation = AdvanceTimeGenerationSettings(
        event_count=1 if ctis else 10**9, delay=ticks(0), advance_to_infinity_on_shutdown=True)
    return CepStream.create(case["name"], MemoryInputAdapterFactory(), items, shape,
                            AdvanceTimeSettings(generation, None, "drop"), application=app)


def win_query(case: dict[str, Any], stream: CepStream) -> Any:
    """The case's query over its stream."""
    from cti import WindowOutputPolicy, agg

    params = case["params"]
    aggs = {name: getattr(agg, spec[0])(*spec[1:])
            for name, spec in params.get("aggregate", {}).items()}
    policy = params.get("output_policy")
    policy = {} if policy is None else {"output_policy": WindowOutputPolicy[policy]}
    if case["kind"] == "snapshot":
        return stream.snapshot_window(**policy).aggregate(**aggs)
    if case["kind"] == "count_by_start_time":
        return stream.count_window(params["n"], **policy).aggregate(**aggs)
    assert case["kind"] == "top_k", case["kind"]
    w = params["window"]
    if w["kind"] == "snapshot":
        windowed = stream.snapshot_window(**policy)
    elif w["kind"] == "tumbling":
        windowed = stream.tumbling_window(ticks(w["size"]), **policy)
    else:
        windowed = stream.hopping_window(ticks(w["size"]), ticks(w["hop"]), **policy)
    key = params["key"]
    order = [(key, "desc" if params.get("descending") else "asc")] if isinstance(key, str) \
        else [tuple(pair) for pair in key]
    return windowed.top_k(params["k"], order)


def win_expected(case: dict[str, Any]) -> list[tuple[int, int, str]]:
    """The case's output events as sorted (start, end, payload JSON); a TopK output's rank
    is a field of its payload."""
    out = []
    for e in case["expected"]:
        payload = dict(e["payload"])
        if "rank" in e:
            payload["rank"] = e["rank"]
        out.append((int(e["start"]), _time(e["end"]), json.dumps(payload, sort_keys=True)))
    return sorted(out)


def win_got(items: list[Any]) -> list[tuple[int, int, str]]:
    """A run's output events in ``win_expected``'s form."""
    out = []
    for i in items:
        if isinstance(i, Cti):
            continue
        end = i.start + 1 if isinstance(i, PointEvent) else i.end
        out.append((i.start, end, json.dumps(i.payload, sort_keys=True)))
    return sorted(out)
