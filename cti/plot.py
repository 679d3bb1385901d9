"""Pictures of time: each event's application time against its arrival, the CTI and watermark
lines, adjusted events as arrows from the time they came with to the time they were given,
dropped events marked; one panel per partition or substream (``over=`` key).

``plot_time(stream, "ingress.png")`` draws the input streams a bound stream (or query) reads.
The picture is computed in-process: the streams' ingress groups run on the in-process runtime
one input row per batch (the results equal a whole run's), so the CTI after each arrival is
known. Arrival times come from the adapters' items (``Arriving``); a stream whose items carry
none is drawn against its input position instead. A ``RunResult`` does not keep arrival
times, so it cannot be drawn: pass the stream.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from cti.events import EVENT_STATUSES
from cti.forms.rows import EOS, INVALID, InRow
from cti.ingress.ordering import timeline_id
from cti.time import MAX_TIME, MIN_TIME

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from cti.query import CepStream, IngressGroup

FORMATS = {".png": "png", ".svg": "svg"}
_DATES_FROM = 315_532_800_000_000  # 1980-01-01 in ticks: later times are drawn as dates


@attrs.frozen
class PlotEvent:
    """One input event: where it is drawn and what ingress did with it.

    ``x`` is its arrival time (ticks) or, for a stream without arrival times, its input
    position; ``original`` the start time it came with (an edge end: its end time);
    ``assigned`` that time after the policy (None when dropped, or when it was never
    released); ``status`` accepted, adjusted, dropped or pending (still held when the input
    ended).
    """

    seq: int
    x: int
    timeline: str
    original: int
    assigned: int | None
    status: str
    reason: str | None = None


@attrs.frozen
class StreamPicture:
    """What a panel set shows for one input stream.

    ``ctis``: (x, CTI) each time the stream's CTI advanced, at the arrival of the stream's
    latest input row; ``watermarks``: the same per timeline, for an event-ordering policy
    (timeline ids: the partition, or the ``over=`` key as JSON; "" for a single one).
    """

    name: str
    settings: str
    by_arrival: bool
    over: str | None
    events: list[PlotEvent]
    ctis: list[tuple[int, int]]
    watermarks: dict[str, list[tuple[int, int]]]

    @property
    def timelines(self) -> list[str]:
        """The panels: every timeline an event or a watermark belongs to ("" for one)."""
        found = {e.timeline for e in self.events} | set(self.watermarks)
        return sorted(found) or [""]

    def timeline_title(self, tid: str) -> str:
        if tid == "":
            return ""
        return f"{self.over} = {json.loads(tid)!r}" if self.over else f"partition {tid}"


# ---- what to draw --------------------------------------------------------------------------


def input_streams(sources: Any) -> list[CepStream]:
    """The bound input streams that ``sources`` (a stream, a query, or several) read, once
    each, in order."""
    from cti.query import CepStream

    if isinstance(sources, CepStream) or hasattr(sources, "inputs"):
        sources = [sources]
    if not isinstance(sources, Iterable) or isinstance(sources, str | bytes):
        raise TypeError(_NOT_A_STREAM.format(sources))
    found: dict[int, CepStream] = {}
    for source in sources:
        if isinstance(source, CepStream):
            found.setdefault(id(source), source)
        elif callable(getattr(source, "inputs", None)):
            for s in source.inputs():
                found.setdefault(id(s), s)
        else:
            raise TypeError(_NOT_A_STREAM.format(source))
    return list(found.values())


_NOT_A_STREAM = ("plot_time draws bound streams or queries (CepStream, or a stream built from "
                 "one), got {!r}; a RunResult keeps no arrival times: pass the stream it ran")


def _span(ticks: Any, dates: bool) -> str:
    """A duration: in hours, minutes and seconds on a time axis or when it is whole seconds
    ("4min", "1min 30s", "0.5s"), else in ticks."""
    if isinstance(ticks, timedelta):
        ticks = ticks // timedelta(microseconds=1)
    ticks = int(ticks)
    if ticks == 0:
        return "0"
    if not dates and ticks % 1_000_000:
        return f"{ticks} ticks"
    seconds, micros = divmod(abs(ticks), 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{hours}h"] * bool(hours) + [f"{minutes}min"] * bool(minutes)
    if seconds or micros:
        parts.append(f"{seconds + micros / 1_000_000:g}s")
    return ("-" if ticks < 0 else "") + " ".join(parts)


def describe_settings(stream: CepStream, dates: bool) -> str:
    """The stream's advance-time settings or ordering policy, in a few words."""
    policy = stream.event_ordering_policy
    if policy is not None:
        parts = [f"late tolerance {_span(policy.late_arrival_tolerance, dates)}",
                 f"out-of-order tolerance {_span(policy.out_of_order_tolerance, dates)}"]
        if policy.early_arrival_window is not None:
            parts.append(f"early window {_span(policy.early_arrival_window, dates)} "
                         f"({policy.early_action.value})")
        parts.append(policy.action.value)
        if policy.over:
            parts.append(f"over {policy.over}")
        return ", ".join(parts)
    settings = stream.advance_time_settings
    if settings is None:
        return "no advance-time settings"
    parts = []
    gen = settings.generation_settings
    if gen is not None:
        every = (f"every {gen.event_count} events" if gen.event_count
                 else f"every {_span(gen.duration or 0, dates)}")
        parts.append(f"CTI {every}, delay {_span(gen.delay, dates)}")
    if settings.import_settings is not None:
        parts.append(f"CTIs imported from {settings.import_settings.stream_name}")
    parts.append(settings.policy.value)
    return ", ".join(parts)


def _finite(t: Any) -> bool:
    return t is not None and MIN_TIME < t < MAX_TIME


def _timeline(stream: CepStream, row: InRow) -> str:
    policy = stream.event_ordering_policy
    if policy is None:
        return ""
    tid, _ = timeline_id(policy, row)
    return tid or ""


def _imported_at(ctis: list[tuple[int, int]], source: list[tuple[int, int]]
                 ) -> list[tuple[int, int]]:
    """Imported CTIs drawn where the source stream's CTI reached them (the importing stream
    issues them once its own input has passed that arrival, which is later)."""
    placed = []
    for x, t in ctis:
        reached = [sx for sx, st in source if st >= t]
        placed.append((min(x, reached[0]) if reached else x, t))
    return placed


def group_pictures(group: IngressGroup, max_steps: int = 2000) -> dict[str, StreamPicture]:
    """Each stream of an ingress group as a ``StreamPicture``, from an in-process run of at
    most ``max_steps`` batches (one input row per batch up to that many rows per stream; a
    longer input is read several rows a batch, so its CTI line is coarser)."""
    from cti.runtime.local import LocalRuntime, read_inputs

    inputs = read_inputs(group)
    events_of = [[r for r in rows if r.kind not in (EOS, INVALID, "cti")] for rows in inputs]
    by_arrival = [bool(ev) and all(r.arrival is not None for r in ev) for ev in events_of]

    def x_of(i: int, row: InRow) -> int:
        return row.arrival if by_arrival[i] else row.seq

    size = max(1, -(-max((len(rows) for rows in inputs), default=0) // max_steps))
    outcome: dict[tuple[int, int], Any] = {}
    ctis: list[list[tuple[int, int]]] = [[] for _ in inputs]
    marks: list[dict[str, list[tuple[int, int]]]] = [{} for _ in inputs]
    now: list[int | None] = [None] * len(inputs)
    for k, out in enumerate(LocalRuntime([size]).batches(group, inputs)):
        for i, rows in enumerate(inputs):
            read = [r for r in rows[k * size:(k + 1) * size]
                    if r.kind != EOS and (r.arrival is not None or not by_arrival[i])]
            if read:
                now[i] = x_of(i, read[-1])
        for r in out:
            x = now[r.stream]
            if r.status in EVENT_STATUSES:
                outcome[(r.stream, r.in_seq)] = r
            elif r.status == "cti" and x is not None and _finite(r.start):
                ctis[r.stream].append((x, r.start))
            elif r.status == "metrics" and x is not None:
                for tid, tl in json.loads(r.payload)["timelines"].items():
                    line = marks[r.stream].setdefault(tid, [])
                    w = tl["watermark"]
                    if _finite(w) and (not line or line[-1][1] != w):
                        line.append((x, w))
    for i, stream in enumerate(group.streams):
        imp = stream.advance_time_settings.import_settings if stream.advance_time_settings \
            else None
        source = group.names.index(imp.stream_name) if imp else None
        if source is not None and by_arrival[i] and by_arrival[source]:
            ctis[i] = _imported_at(ctis[i], ctis[source])
    pictures = {}
    for i, stream in enumerate(group.streams):
        events = []
        for row in events_of[i]:
            o = outcome.get((i, row.seq))
            status = o.status if o is not None else "pending"
            assigned = o.start if o is not None and o.status != "dropped" else None
            original = row.start
            if row.kind == "edge_end":  # an edge end happens at its end
                original = row.end
                assigned = o.end if assigned is not None else None
            events.append(PlotEvent(row.seq, x_of(i, row), _timeline(stream, row), original,
                                    assigned, status, o.reason if o is not None else None))
        dates = bool(events) and min(e.original for e in events) >= _DATES_FROM
        policy = stream.event_ordering_policy
        pictures[stream.name] = StreamPicture(
            stream.name, describe_settings(stream, dates), by_arrival[i],
            policy.over if policy else None, events, ctis[i], marks[i])
    return pictures


def stream_pictures(sources: Any, streams: Sequence[str] | None = None,
                    max_steps: int = 2000) -> list[StreamPicture]:
    """The pictures of the input streams ``sources`` reads (all, or those named in
    ``streams``), each ingress group run once."""
    inputs = input_streams(sources)
    known = [s.name for s in inputs]
    wanted = list(streams) if streams is not None else known
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"no input stream named {unknown}; the inputs are {known}")
    done: dict[str, StreamPicture] = {}
    for s in inputs:
        if s.name in wanted and s.name not in done:
            done.update(group_pictures(s.ingress_group(), max_steps))
    return [done[n] for n in wanted]


# ---- drawing -------------------------------------------------------------------------------


def _axis(values: Iterable[int]) -> bool:
    """Whether times on an axis are drawn as dates (they are later than 1980)."""
    finite = [v for v in values if _finite(v)]
    return bool(finite) and min(finite) >= _DATES_FROM


def _coords(values: Sequence[int | None], dates: bool) -> np.ndarray:
    """Ticks as plot coordinates: matplotlib date numbers, or the ticks themselves."""
    array = np.array([np.nan if v is None else v for v in values], dtype=float)
    if not dates:
        return array
    from matplotlib.dates import date2num

    return date2num(np.array(values, dtype="datetime64[us]")) if len(values) else array


def _date_axis(axis: Any, span: int | None = None) -> None:
    """Dates on an axis: concise labels with the date beside the axis, or, given the span of
    the times (ticks), whole times (no offset text to crowd a panel's title)."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, DateFormatter

    locator = AutoDateLocator()
    axis.set_major_locator(locator)
    if span is None:
        axis.set_major_formatter(ConciseDateFormatter(locator))
    else:
        fmt = ("%H:%M:%S" if span < 3_600_000_000 else "%H:%M" if span < 86_400_000_000
               else "%Y-%m-%d %H:%M")
        axis.set_major_formatter(DateFormatter(fmt))


def _step(ax: Axes, points: list[tuple[int, int]], right: int | None, xd: bool, yd: bool,
          **style: Any) -> None:
    if not points:
        return
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    if right is not None and right > xs[-1]:
        xs, ys = [*xs, right], [*ys, ys[-1]]
    ax.step(_coords(xs, xd), _coords(ys, yd), where="post", **style)


def draw_panel(ax: Axes, picture: StreamPicture, tid: str) -> None:
    """One timeline of one stream: its events, its watermark, and the stream's CTI."""
    from matplotlib.ticker import MaxNLocator

    events = [e for e in picture.events if e.timeline == tid]
    # One combined timeline's watermark is the stream's CTI: drawn once, as the CTI.
    watermark = picture.watermarks.get(tid, []) if tid else []
    xd = picture.by_arrival and _axis([e.x for e in picture.events])
    yd = _axis([e.original for e in picture.events])
    right = max((e.x for e in picture.events), default=None)

    def mark(chosen: list[PlotEvent], times: list[int | None], fmt: str, **style: Any) -> None:
        if chosen:
            ax.plot(_coords([e.x for e in chosen], xd), _coords(times, yd), fmt, linestyle="none",
                    **style)

    accepted = [e for e in events if e.status == "accepted"]
    adjusted = [e for e in events if e.status == "adjusted"]
    dropped = [e for e in events if e.status == "dropped"]
    pending = [e for e in events if e.status == "pending"]
    mark(accepted, [e.assigned for e in accepted], "o", color="C0", ms=5, label="accepted")
    mark(adjusted, [e.original for e in adjusted], "o", color="C1", ms=5, mfc="none",
         label="time it came with")
    mark(adjusted, [e.assigned for e in adjusted], "o", color="C1", ms=5, label="adjusted")
    moved = [e for e in adjusted if e.assigned != e.original]
    if moved:  # one artist for every arrow: thousands of annotations draw slowly
        x = _coords([e.x for e in moved], xd)
        came = _coords([e.original for e in moved], yd)
        given = _coords([e.assigned for e in moved], yd)
        ax.quiver(x, came, np.zeros_like(x), given - came, angles="xy", scale_units="xy",
                  scale=1, color="C1", width=0.003, headwidth=4, headlength=5,
                  headaxislength=4.5, label="adjustment")
    mark(dropped, [e.original for e in dropped], "x", color="C3", ms=8, mew=2, label="dropped")
    mark(pending, [e.original for e in pending], "o", color="0.6", ms=5, mfc="none",
         label="not released")
    if watermark:
        _step(ax, watermark, right, xd, yd, color="C2", lw=1.5, label="watermark")
    _step(ax, picture.ctis, right, xd, yd, color="k", lw=1.0,
          linestyle="--" if watermark else "-", label="stream CTI" if watermark else "CTI")
    title = picture.name + (f" · {picture.timeline_title(tid)}" if tid else "")
    ax.set_title(f"{title}\n{picture.settings}", fontsize=9, loc="left")
    ax.set_xlabel("arrival time" if picture.by_arrival else "input position (no arrival times)",
                  fontsize=8)
    ax.set_ylabel("application time", fontsize=8)
    ax.tick_params(labelsize=7)
    if xd:
        _date_axis(ax.xaxis)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if yd:
        times = [t for e in picture.events for t in (e.original, e.assigned) if _finite(t)]
        _date_axis(ax.yaxis, max(times) - min(times))
    _own_range(ax, [e.x for e in picture.events], xd, "x")
    _own_range(ax, [t for e in picture.events for t in (e.original, e.assigned)], yd, "y")
    ax.grid(True, color="0.92")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


_MINUTE = 60_000_000


def _own_range(ax: Axes, ticks: Iterable[int | None], dates: bool, which: str) -> None:
    """An axis whose times are all one time (reference data loaded at once) spans a minute
    either side of it, not the years matplotlib widens a single date to."""
    finite = {t for t in ticks if _finite(t)}
    if len(finite) == 1:
        (t,) = finite
        lo, hi = _coords([t - _MINUTE, t + _MINUTE], dates)
        (ax.set_xlim if which == "x" else ax.set_ylim)(lo, hi)


def _label(payload: Any, fields: Sequence[str]) -> str:
    return ", ".join(f"{f}={payload.get(f)}" for f in fields)[:40] or "events"


def _row_fields(events: Sequence[Any], most: int = 12) -> list[str]:
    """The payload fields that name a result's row (a group's key, a booth): the text fields
    with a few values (2 to ``most``), at most two; without one, the integer field with the
    most values up to ``most``."""
    values: dict[str, set[Any]] = {}
    for e in events:
        for k, v in (e.payload or {}).items():
            if isinstance(v, str | int) and not isinstance(v, bool):
                values.setdefault(k, set()).add(v)
    few = {k: v for k, v in values.items() if 2 <= len(v) <= most}
    texts = sorted(k for k, v in few.items() if all(isinstance(x, str) for x in v))
    if texts:
        return texts[:2]
    return sorted(few, key=lambda k: (-len(few[k]), k))[:1]


def draw_results(ax: Axes, name: str, items: Sequence[Any]) -> None:
    """A query's output: each event's lifetime as a bar from its start to its end (a point
    as a dot), a row per value of its text fields (a group's key, a join's names), the
    output CTIs as ticks along the top; numbers written beside the bars when there are few."""
    from cti.events import Cti

    events = [i for i in items if hasattr(i, "start")]
    ctis = [i.time for i in items if isinstance(i, Cti) and _finite(i.time)]
    texts = _row_fields(events)
    rows = sorted({_label(e.payload or {}, texts) for e in events})
    at = {label: k for k, label in enumerate(rows)}
    times = [t for e in events for t in (e.start, getattr(e, "end", None)) if _finite(t)]
    dates = _axis(times + ctis)
    for e in events:
        y = at[_label(e.payload or {}, texts)]
        end = getattr(e, "end", None)
        start = _coords([e.start], dates)[0]
        if _finite(end) and end > e.start + 1:
            ax.plot(_coords([e.start, end], dates), [y, y], color="C0", lw=5,
                    solid_capstyle="butt", alpha=0.8)
        else:
            ax.plot([start], [y], "o", color="C0", ms=5)
        if len(events) <= 60:
            numbers = ", ".join(f"{v:g}" if isinstance(v, float) else str(v)
                                for v in (e.payload or {}).values()
                                if isinstance(v, int | float) and not isinstance(v, bool))
            ax.annotate(numbers, (start, y), xytext=(2, 5), textcoords="offset points",
                        fontsize=6)
    top = max(len(rows), 1) - 0.45
    if ctis:  # a tick per output CTI along the top (there may be one per input event)
        ax.plot(_coords(ctis, dates), [top] * len(ctis), "|", color="k", ms=8,
                label="output CTI")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.set_ylim(-0.7, top + 0.25)
    ax.set_title(f"{name}: {len(events)} results, their lifetimes", fontsize=9, loc="left")
    ax.set_xlabel("application time", fontsize=8)
    ax.tick_params(labelsize=7)
    if dates:
        _date_axis(ax.xaxis)
    _own_range(ax, times, dates, "x")
    ax.grid(True, color="0.92")


def plot_time(source: Any, path: str | os.PathLike[str] | None = None, *,
              streams: Sequence[str] | None = None, title: str | None = None,
              max_steps: int = 2000, results: Mapping[str, Sequence[Any]] | None = None
              ) -> Figure:
    """Draw the input streams that ``source`` (a bound stream, a query, or several) reads:
    per event, application time against arrival time; the CTI line (and, with an
    event-ordering policy, each timeline's watermark) as steps; adjusted events as an arrow
    from the time they came with to the time they were given; dropped events as crosses; one
    panel per partition or substream. ``streams`` names the inputs to draw (default all).
    ``results`` (name -> a query's output items, such as ``query.collect()``) adds a panel
    per query below the inputs: its events' lifetimes (``draw_results``).
    With ``path`` (``.png`` or ``.svg``) the figure is also written there."""
    from matplotlib.figure import Figure

    fmt = None
    if path is not None:
        fmt = FORMATS.get(os.path.splitext(os.fspath(path))[1].lower())
        if fmt is None:
            raise ValueError(f"plot path {os.fspath(path)!r}: the file name ends in .png or .svg")
    pictures = stream_pictures(source, streams, max_steps)
    panels = [(p, tid) for p in pictures for tid in p.timelines]
    results = dict(results or {})
    figure = Figure(figsize=(9, 0.6 + 2.9 * (len(panels) + len(results))),
                    layout="constrained")
    axes = figure.subplots(len(panels) + len(results), 1, squeeze=False)[:, 0]
    for ax, (picture, tid) in zip(axes, panels, strict=False):
        draw_panel(ax, picture, tid)
    for ax, (name, items) in zip(axes[len(panels):], results.items(), strict=True):
        draw_results(ax, name, items)
    if title:
        figure.suptitle(title, fontsize=11)
    if path is not None:
        figure.savefig(path, format=fmt, dpi=110)
    return figure
