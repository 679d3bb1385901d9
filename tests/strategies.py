"""Hypothesis strategies for random input streams (SPEC sections 2-6), reusable across runtimes.

A drawn value is a list of :class:`StreamDef`: plain, picklable data (the items are the same
objects an in-memory adapter would enqueue). :func:`bind` turns it into bound streams of a fresh
``Application``, so the same definitions can run on the in-process runner and on Spark::

    @given(defs=stream_defs())
    def test_something(defs):
        streams = bind(defs)
        result = LocalRuntime().run(streams[0].ingress_group())

Generated input is *valid*: times are finite, every edge end closes an edge start that came
earlier in its stream with the same start and payload, and (for several streams) arrival times
never go back within a stream. Only ``stray_edge_ends=True`` adds edge ends that close nothing
(bad input; those streams dead-letter instead of raising).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hypothesis import strategies as st

from cti import (
    MAX_TIME,
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Application,
    Arriving,
    CepStream,
    Cti,
    EdgeEvent,
    EventShape,
    IntervalEvent,
    PointEvent,
    Ticks,
    ticks,
)
from cti.io.memory import MemoryInputAdapterFactory

SHAPES = (EventShape.POINT, EventShape.INTERVAL, EventShape.EDGE)
POLICIES = (AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST)

# Small times make collisions (equal starts, events exactly at a CTI) frequent.
TIME_MIN, TIME_MAX = 0, 40


@dataclass(frozen=True)
class StreamDef:
    """One input stream: what ``CepStream.create`` needs, as plain data.

    ``items`` are in arrival order: events, ``Cti`` (adapter-enqueued) or ``Arriving`` wrappers.
    ``import_from`` repeats the name in ``settings.import_settings`` (None: no import).
    """

    name: str
    shape: EventShape
    items: tuple[Any, ...]
    settings: AdvanceTimeSettings | None
    on_bad_input: str = "raise"

    @property
    def import_from(self) -> str | None:
        imp = self.settings.import_settings if self.settings else None
        return imp.stream_name if imp else None

    @property
    def n_events(self) -> int:
        """Input events (everything but CTIs): what ends accepted, adjusted, dropped or invalid."""
        return sum(1 for it in self.items if not isinstance(unwrap(it), Cti))

    @property
    def n_ctis(self) -> int:
        """Adapter-enqueued CTIs."""
        return sum(1 for it in self.items if isinstance(unwrap(it), Cti))


def unwrap(item: Any) -> Any:
    """The event or CTI inside an ``Arriving`` wrapper (or the item itself)."""
    return item.item if isinstance(item, Arriving) else item


def arrival_of(item: Any) -> int | None:
    return item.arrival if isinstance(item, Arriving) else None


def bind(defs: Sequence[StreamDef], app: Application | None = None) -> list[CepStream]:
    """Bind the definitions, in order, into ``app`` (a fresh ``Application`` by default)."""
    app = app if app is not None else Application()
    return [
        CepStream.create(d.name, MemoryInputAdapterFactory(), list(d.items), d.shape, d.settings,
                         application=app, on_bad_input=d.on_bad_input)
        for d in defs
    ]


def describe(defs: Sequence[StreamDef]) -> str:
    """A readable dump of definitions (for assertion messages and bug reports)."""
    lines = []
    for d in defs:
        lines.append(f"{d.name} ({d.shape.value}, {d.settings}, on_bad_input={d.on_bad_input}):")
        for seq, it in enumerate(d.items):
            lines.append(f"  #{seq} {it!r}")
    return "\n".join(lines)


# ---- settings ---------------------------------------------------------------------------------

def _ticks_or_timedelta(value: int, as_timedelta: bool) -> Ticks | timedelta:
    return timedelta(microseconds=value) if as_timedelta else ticks(value)


@st.composite
def generation_settings(
    draw: st.DrawFn,
    *,
    max_count: int = 4,
    max_duration: int = 15,
    min_delay: int = -3,
    max_delay: int = 8,
    advance_to_infinity: bool | None = None,
) -> AdvanceTimeGenerationSettings:
    """An event count (1..max_count) or a duration (1..max_duration ticks, as ``ticks(n)`` or
    ``timedelta``), a delay in [min_delay, max_delay] (negative allowed), and a random
    ``advance_to_infinity_on_shutdown`` unless given."""
    flush = draw(st.booleans()) if advance_to_infinity is None else advance_to_infinity
    delay = _ticks_or_timedelta(draw(st.integers(min_delay, max_delay)), draw(st.booleans()))
    if draw(st.booleans()):
        count = draw(st.integers(1, max_count))
        if draw(st.booleans()):
            return AdvanceTimeGenerationSettings(count, delay, flush)
        return AdvanceTimeGenerationSettings(event_count=count, delay=delay,
                                             advance_to_infinity_on_shutdown=flush)
    duration = _ticks_or_timedelta(draw(st.integers(1, max_duration)), draw(st.booleans()))
    return AdvanceTimeGenerationSettings(duration=duration, delay=delay,
                                         advance_to_infinity_on_shutdown=flush)


@st.composite
def advance_time_settings(
    draw: st.DrawFn,
    *,
    import_from: str | None = None,
    policies: Sequence[AdvanceTimePolicy] = POLICIES,
    advance_to_infinity: bool | None = None,
) -> AdvanceTimeSettings:
    """Binding settings: generation (always, unless importing; then optional), the import, and
    a policy. The policy is given as the enum or as its name, both accepted."""
    policy = draw(st.sampled_from(list(policies)))
    if draw(st.booleans()):
        policy = policy.value.upper() if draw(st.booleans()) else policy.value
    gen = None
    if import_from is None or draw(st.booleans()):
        gen = draw(generation_settings(advance_to_infinity=advance_to_infinity))
    imp = AdvanceTimeImportSettings(import_from) if import_from else None
    return AdvanceTimeSettings(gen, imp, policy)


# ---- items ------------------------------------------------------------------------------------

def _times() -> st.SearchStrategy[int]:
    return st.integers(TIME_MIN, TIME_MAX)


@st.composite
def stream_items(
    draw: st.DrawFn,
    shape: EventShape,
    *,
    prefix: str = "e",
    min_size: int = 0,
    max_size: int = 16,
    adapter_ctis: bool = True,
    max_time_cti: bool = False,
    stray_edge_ends: bool = False,
) -> list[Any]:
    """Items of one stream in arrival order (no arrival times).

    Events of ``shape`` with payload ``{"id": ...}``; sometimes a payload is reused (and for
    edges a whole (start, payload) pair, so several open starts share a key and ends match
    first-in, first-out). Every edge end closes an edge start that is still open in the
    generator's view, with the same start and payload. ``stray_edge_ends`` adds ends that close
    nothing, or a second end for a start already closed (which closes it if the first end was
    dropped and left it open). ``adapter_ctis`` mixes in adapter-enqueued CTIs at random times
    (regressions included); ``max_time_cti`` lets some of them be at MAX_TIME.
    """
    n = draw(st.integers(min_size, max_size))
    items: list[Any] = []
    payloads: list[dict[str, Any]] = []
    open_starts: list[tuple[int, dict[str, Any]]] = []
    closed: list[tuple[int, dict[str, Any]]] = []  # starts the generator has closed already
    actions = ["event", "event", "event"]
    if adapter_ctis:
        actions.append("cti")
    for k in range(n):
        choices = list(actions)
        if shape is EventShape.EDGE and open_starts:
            choices += ["end", "end"]
        if shape is EventShape.EDGE and stray_edge_ends:
            choices.append("stray")
        action = draw(st.sampled_from(choices))
        if action == "cti":
            at_max = max_time_cti and draw(st.integers(0, 9)) == 0
            items.append(Cti(MAX_TIME if at_max else draw(_times())))
            continue
        if action == "end":
            s, payload = open_starts.pop(draw(st.integers(0, len(open_starts) - 1)))
            closed.append((s, payload))
            items.append(EdgeEvent.end_edge(s, s + draw(st.integers(1, 15)), payload))
            continue
        if action == "stray":
            if closed and draw(st.integers(0, 2)) > 0:
                # A second end for a start already closed: it closes the start if the first end
                # was dropped (the start stayed open), else it is bad input.
                s, payload = closed[draw(st.integers(0, len(closed) - 1))]
            else:
                s, payload = draw(_times()), {"id": f"{prefix}stray{k}"}
            items.append(EdgeEvent.end_edge(s, s + draw(st.integers(1, 15)), payload))
            continue
        if shape is EventShape.EDGE and open_starts and draw(st.integers(0, 5)) == 0:
            s, payload = open_starts[draw(st.integers(0, len(open_starts) - 1))]
            open_starts.append((s, payload))
            items.append(EdgeEvent.start_edge(s, payload))
            continue
        if payloads and draw(st.integers(0, 5)) == 0:
            payload = payloads[draw(st.integers(0, len(payloads) - 1))]
        else:
            payload = {"id": f"{prefix}{k}"}
        payloads.append(payload)
        s = draw(_times())
        if shape is EventShape.POINT:
            items.append(PointEvent(s, payload))
        elif shape is EventShape.INTERVAL:
            items.append(IntervalEvent(s, s + draw(st.integers(1, 15)), payload))
        else:
            open_starts.append((s, payload))
            items.append(EdgeEvent.start_edge(s, payload))
    return items


@st.composite
def arrivals(draw: st.DrawFn, n: int, max_step: int = 3) -> list[int]:
    """n non-decreasing arrival times (ties frequent)."""
    t = draw(st.integers(0, 2))
    out = []
    for _ in range(n):
        t += draw(st.integers(0, max_step))
        out.append(t)
    return out


# ---- whole definitions ----------------------------------------------------------------------

@st.composite
def stream_defs(
    draw: st.DrawFn,
    *,
    shapes: Sequence[EventShape] = SHAPES,
    policies: Sequence[AdvanceTimePolicy] = POLICIES,
    second_stream: bool | None = None,
    max_size: int = 16,
    adapter_ctis: bool | None = None,
    max_time_cti: bool = False,
    stray_edge_ends: bool = False,
    with_arrival: bool | None = None,
    advance_to_infinity: bool | None = None,
    no_settings: bool | None = False,
    chain: int | None = None,
) -> list[StreamDef]:
    """One stream ``a`` that generates CTIs (see ``no_settings``), and (``second_stream``;
    random when None) a stream
    ``b`` that imports a's CTIs (and may generate its own too). With two streams every item
    carries an arrival time; with one, only when ``with_arrival`` (random when None).

    ``stray_edge_ends``: edge streams may get edge ends that close nothing; such a stream is
    bound with ``on_bad_input="dead_letter"``.

    ``no_settings`` (True; random when None): stream ``a`` has no advance-time settings at
    all; only its adapter's CTIs move it, and it dead-letters the events that violate them
    (SPEC 3: with no policy such a violation is an error).

    ``chain`` (2 to 4): streams ``a``, ``b``, ``c``, ``d`` where each imports the CTIs of the one
    before it (a -> b -> c -> d), instead of ``second_stream``.
    """
    two = draw(st.booleans()) if second_stream is None else second_stream
    names = list("abcd"[:chain]) if chain else ["a", "b"] if two else ["a"]
    two = len(names) > 1
    defs = []
    for name in names:
        shape = draw(st.sampled_from(list(shapes)))
        bare = name == "a" and (draw(st.booleans()) if no_settings is None else no_settings)
        ctis = draw(st.booleans()) if adapter_ctis is None else adapter_ctis
        ctis = ctis or bare
        items = draw(stream_items(shape, prefix=name, max_size=max_size, adapter_ctis=ctis,
                                  max_time_cti=max_time_cti, stray_edge_ends=stray_edge_ends))
        timed = two or (draw(st.booleans()) if with_arrival is None else with_arrival)
        if timed:
            items = [Arriving(it, t) for it, t in zip(items, draw(arrivals(len(items))),
                                                      strict=True)]
        settings = None if bare else draw(advance_time_settings(
            import_from=names[names.index(name) - 1] if name != "a" else None,
            policies=policies,
            advance_to_infinity=advance_to_infinity))
        stray = stray_edge_ends and shape is EventShape.EDGE
        defs.append(StreamDef(name, shape, tuple(items), settings,
                              "dead_letter" if stray or bare else "raise"))
    return defs


batch_sizes = st.lists(st.integers(1, 4), min_size=1, max_size=3)
"""A ``LocalRuntime(batch_sizes=...)`` argument: each stream's input cut into batches."""


def _at_least(caps: list[int], events: int) -> list[int]:
    """``caps``, then one more cap if they take fewer than ``events`` between them."""
    return caps if sum(caps) >= events else [*caps, events - sum(caps)]


spark_caps = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(
    lambda caps: _at_least(caps, 12))
"""``SparkRuntime(batch_sizes=...)``: micro-batch caps, in turn, from one event up, whose turn
takes at least 12 events (one-event micro-batches, up to three in a row, without a
micro-batch per event over a long case: a micro-batch costs Spark a second or more)."""

spark_splits = st.one_of(st.none(), spark_caps)
"""``spark_caps`` or None (each micro-batch takes all there is)."""


def past_the_simplest(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``strategy`` without its simplest value, for the properties that run on Spark.

    Hypothesis's first example is always the simplest (every draw at its minimum: the fewest
    cases, each the smallest, no split); on Spark an example is a streaming query of seconds,
    and that one checks little the in-process properties do not. A coin drawn beside the value
    must come up heads, which the simplest example's never does, so each example a Spark test
    pays for is a random one."""
    return st.tuples(st.booleans(), strategy).filter(lambda drawn: drawn[0]).map(
        lambda drawn: drawn[1])
