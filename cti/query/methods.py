"""The query methods of a stream (StreamInsight's LINQ operators) and derived streams.

``CepStream`` (a bound input) and ``DerivedStream`` (the result of an operator) share these
methods; each returns a new ``DerivedStream`` holding a plan node. Nothing runs until
``collect()``, ``run()`` or ``to(...).run()``. Settings are validated here, at construction.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs

from cti.errors import BindingError, InvalidSettingsError
from cti.events import EventShape
from cti.forms.schema import Fields, check_field
from cti.operators import durations, plan
from cti.operators.aggregates import Aggregate, check_aggregates
from cti.time import DurationLike, positive_duration_ticks, to_duration_ticks, to_ticks

if TYPE_CHECKING:
    from cti.results import RunResult
    from cti.runtime.base import Runtime

Duration = DurationLike


def _duration(name: str, value: Any, positive: bool = True) -> int:
    return positive_duration_ticks(value, name) if positive else to_duration_ticks(value, name)


def _function(name: str, fn: Any) -> Any:
    if not callable(fn):
        raise InvalidSettingsError(f"{name} must be a function, got {fn!r}")
    return fn


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidSettingsError(f"{name} is True or False, got {value!r}")
    return value


def _join_keys(on: Any) -> tuple[str | None, str | None]:
    if on is None:
        return None, None
    if isinstance(on, str) and on:
        return on, on
    if isinstance(on, tuple) and len(on) == 2 and all(isinstance(f, str) and f for f in on):
        return on
    raise InvalidSettingsError(
        f"on= is a payload field name or a (left_field, right_field) pair, got {on!r}")


def _same_context(a: plan.Node, b: plan.Node, what: str) -> None:
    """Streams that meet must live in the same group context (both outside any group_by, or
    both the same group's stream)."""
    def grouped(n: plan.Node) -> bool:  # a group's own stream below, not in a nested body
        seen, todo = set(), [n]
        while todo:
            x = todo.pop()
            if isinstance(x, plan.GroupInput):
                return True
            if id(x) not in seen:
                seen.add(id(x))
                todo += list(x.children)
        return False
    if grouped(a) != grouped(b):
        raise BindingError(f"{what}: inside group_by(...).apply(...) a stream can only meet "
                           "streams derived from the same group")


class QueryOperators:
    """The operators; a subclass provides ``_node()``, ``shape`` and ``application``."""

    shape: EventShape | None

    def _node(self) -> plan.Node:
        raise NotImplementedError

    def _derive(self, node: plan.Node, label: str) -> DerivedStream:
        """A stream of ``node``'s output, which messages call ``label``; its payload fields
        and shape as the node's operator says (``registry``)."""
        from cti.operators.registry import unit_of  # the operators, once a query is built

        unit = unit_of(node)
        node = attrs.evolve(node, fields=unit.fields_of(node), shape=unit.shape_of(node),
                            label=label)
        return DerivedStream(node, node.shape, getattr(self, "application", None))

    def _label(self, operator: str = "") -> str:
        """This stream as messages name it, with ``operator`` applied."""
        return self._node().label + (f".{operator}" if operator else "")

    @property
    def fields(self) -> Fields:
        """The payload fields of this stream's events where known (None: unknown)."""
        return self._node().fields

    def to_dataframe(self, runtime: Runtime | str | None = None,
                     payload_schema: Any = None) -> Any:
        """The output (events and CTIs) as a streaming Spark DataFrame to ``writeStream``
        anywhere: ``release``, ``kind``, ``start``, ``end`` (ticks) and ``payload`` (JSON), or
        ``payload_schema``'s columns (a ``StructType`` or DDL string) parsed from it. See
        docs/spark-runtime.md, "DataFrames in and out"."""
        from cti.runtime.base import streaming_runtime

        return streaming_runtime(runtime, "to_dataframe()").output_frame(self, payload_schema)

    # ---- per event --------------------------------------------------------------------------

    def where(self, predicate: Callable[[Any], Any], *, frame: bool = False) -> DerivedStream:
        """Keep the events whose payload satisfies ``predicate(payload)``. ``frame=True``:
        ``predicate`` takes a pandas frame of many events' payloads (a row per event, a column
        per field) and returns one boolean per row, so it can work on whole columns."""
        return self._derive(plan.Where(self._node(), _function("where", predicate),
                                       _flag("where frame", frame)),
                            self._label("where(...)"))

    def select(self, fn: Callable[[Any], Any], *, frame: bool = False) -> DerivedStream:
        """Replace each payload by ``fn(payload)`` (a dict); lifetimes are unchanged.
        ``frame=True``: ``fn`` takes a pandas frame of many events' payloads (a row per event)
        and returns a frame of their new payloads, row for row."""
        return self._derive(plan.Select(self._node(), _function("select", fn),
                                        _flag("select frame", frame)),
                            self._label("select(...)"))

    def shift_event_time(self, offset: Duration) -> DerivedStream:
        """Move every event (and CTI) by ``offset`` (may be negative)."""
        d = _duration("shift_event_time offset", offset, positive=False)
        return self._derive(plan.ShiftEventTime(self._node(), d),
                            self._label("shift_event_time(...)"))

    def alter_event_duration(self, duration: Duration | Callable[[Any], Any]) -> DerivedStream:
        """Every event becomes the interval [start, start + duration). ``duration``: a
        duration, ``MAX_TIME`` (forever: until ``clip_event_duration(clip_stream, on=...)``
        ends it), or a function of the event (``PointEvent``, ``IntervalEvent``, ``EdgeEvent``;
        times in ticks) returning one of those (StreamInsight's ``AlterEventDuration(e =>
        ...)``)."""
        d = durations.duration_of(duration, "alter_event_duration")
        return self._derive(plan.AlterEventDuration(self._node(), d),
                            self._label("alter_event_duration(...)"))

    def alter_event_lifetime(self, start_fn: Callable[[int], int],
                             duration: Duration | Callable[[Any], Any]) -> DerivedStream:
        """Every event becomes [start_fn(start), start_fn(start) + duration). ``start_fn`` takes
        and returns ticks and must not decrease (it is applied to the CTIs too). ``duration``
        as in ``alter_event_duration`` (a function sees the event as it came in)."""
        d = durations.duration_of(duration, "alter_event_lifetime")
        node = plan.AlterEventLifetime(self._node(), _function("start_fn", start_fn), d)
        return self._derive(node, self._label("alter_event_lifetime(...)"))

    def clip_event_duration(self, max_duration: Duration | QueryOperators,
                            on: Any = None) -> DerivedStream:
        """Every lifetime ends at most ``max_duration`` after its start. Or, given a stream
        (StreamInsight's ``ClipEventDuration``): each event ends at the start of the first
        event of that stream whose ``on`` fields match (a field name, or a (this, that) pair)
        and that starts strictly after it, if that comes before its own end; with
        ``alter_event_duration(MAX_TIME)`` first, readings become a signal (each lasts until
        the next reading of its key). Intervals and edges come out as intervals once their
        end is final (``cti.operators.clip``)."""
        if isinstance(max_duration, QueryOperators):
            return self._clip_by(max_duration, on)
        if on is not None:
            raise InvalidSettingsError("clip_event_duration: on= goes with a clip stream, not "
                                       f"with a duration ({max_duration!r})")
        d = _duration("clip_event_duration max_duration", max_duration)
        return self._derive(plan.ClipEventDuration(self._node(), d),
                            self._label("clip_event_duration(...)"))

    def _clip_by(self, other: QueryOperators, on: Any) -> DerivedStream:
        _same_context(self._node(), other._node(), "clip_event_duration")
        lk, rk = _join_keys(on)
        _check_keys("clip_event_duration", self, other, on, lk, rk)
        node = plan.ClipByStream(self._node(), other._node(), lk, rk)
        return self._derive(node, self._label(_join_text("clip_event_duration", other, on)))

    def to_point_event_stream(self) -> DerivedStream:
        """A point at each event's start."""
        return self._derive(plan.ToPointEventStream(self._node()),
                            self._label("to_point_event_stream()"))

    def scan(self, operator: Any) -> DerivedStream:
        """A user-defined stream operator (StreamInsight 2.1's ``CepPointStreamOperator``):
        ``operator`` (a ``cti.StreamOperator``) has ``process(event)`` called per event in
        sync-time order, with ``operator.state`` the state of the event's group key (from
        ``initial_state()``); each payload it returns is a point at the event's start."""
        from cti.operators.scan import StreamOperator

        if not isinstance(operator, StreamOperator):
            raise InvalidSettingsError(f"scan needs an instance of a cti.StreamOperator "
                                       f"subclass, got {operator!r}")
        if self.shape is EventShape.EDGE:
            raise InvalidSettingsError(f"scan on stream {self._label()}: an edge stream; scan "
                                       "takes points and intervals (to_point_event_stream() "
                                       "first)")
        return self._derive(plan.Scan(self._node(), operator),
                            self._label(f"scan({type(operator).__name__})"))

    # ---- several streams --------------------------------------------------------------------

    def union(self, other: QueryOperators) -> DerivedStream:
        """The events of both streams; output CTIs follow the slower input."""
        _check_stream("union", other)
        _same_context(self._node(), other._node(), "union")
        return self._derive(plan.Union(self._node(), other._node()),
                            self._label(f"union({other._label()})"))

    def join(self, other: QueryOperators, on: Any = None,
             predicate: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
             select: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None,
             *, frame: bool = False) -> DerivedStream:
        """Every pair of events whose lifetimes overlap and whose ``on`` fields are equal (and
        ``predicate(left, right)`` holds): lifetime the intersection, payload
        ``select(left, right)`` (default: both payloads merged, the right one winning).
        ``frame=True``: ``predicate`` and ``select`` take two pandas frames of many pairs'
        payloads (the left ones and the right ones, row for row) and return one boolean per
        row, and a frame of the new payloads."""
        _check_stream("join", other)
        _same_context(self._node(), other._node(), "join")
        lk, rk = _join_keys(on)
        _check_keys("join", self, other, on, lk, rk)
        node = plan.Join(self._node(), other._node(), lk, rk,
                         None if predicate is None else _function("predicate", predicate),
                         None if select is None else _function("select", select),
                         _flag("join frame", frame))
        return self._derive(node, self._label(_join_text("join", other, on)))

    def left_anti_semi_join(self, other: QueryOperators, on: Any = None,
                            predicate: Callable[[dict[str, Any], dict[str, Any]], bool] | None
                            = None) -> DerivedStream:
        """The parts of this stream's lifetimes during which no event of ``other`` matches:
        points stay points; intervals and edges give an edge pair per uncovered part."""
        _check_stream("left_anti_semi_join", other)
        _same_context(self._node(), other._node(), "left_anti_semi_join")
        lk, rk = _join_keys(on)
        _check_keys("left_anti_semi_join", self, other, on, lk, rk)
        node = plan.AntiSemiJoin(self._node(), other._node(), lk, rk,
                                 None if predicate is None else _function("predicate", predicate))
        return self._derive(node, self._label(_join_text("left_anti_semi_join", other, on)))

    # ---- windows and groups -----------------------------------------------------------------

    def hopping_window(self, size: Duration, hop: Duration, alignment: Any = 0,
                       output_policy: plan.WindowOutputPolicy =
                       plan.WindowOutputPolicy.POINT_ALIGN_TO_WINDOW_END) -> WindowedStream:
        """Windows [alignment + k*hop, alignment + k*hop + size) for every integer k."""
        size_t = _duration("hopping_window size", size)
        return self._window(size_t, _duration("hopping_window hop", hop), alignment,
                            output_policy)

    def tumbling_window(self, size: Duration, alignment: Any = 0,
                        output_policy: plan.WindowOutputPolicy =
                        plan.WindowOutputPolicy.POINT_ALIGN_TO_WINDOW_END) -> WindowedStream:
        """Back-to-back windows of ``size``: a hopping window whose hop is its size."""
        size_t = _duration("tumbling_window size", size)
        return self._window(size_t, size_t, alignment, output_policy)

    def _window(self, size_t: int, hop_t: int, alignment: Any,
                output_policy: plan.WindowOutputPolicy) -> WindowedStream:
        if hop_t > size_t:
            raise InvalidSettingsError(
                f"window hop ({timedelta(microseconds=hop_t)}) must not exceed its size "
                f"({timedelta(microseconds=size_t)}): events between windows would be lost")
        zone = getattr(getattr(self, "application", None), "time_zone", None)
        try:
            align = to_ticks(alignment, zone, "window alignment")
        except (TypeError, ValueError) as exc:
            raise InvalidSettingsError(f"window alignment: {exc}") from None
        if not isinstance(output_policy, plan.WindowOutputPolicy):
            raise InvalidSettingsError(f"output_policy must be a WindowOutputPolicy, got "
                                       f"{output_policy!r}")
        return WindowedStream(self, size_t, hop_t, align, output_policy)

    def group_by(self, *fields: str, key: Callable[[Any], Any] | None = None,
                 name: str = "key", nulls: str = "raise") -> GroupedStream:
        """Groups of events with equal payload ``fields`` (one or several: events are in one
        group when every field is equal), or with equal ``key(payload)`` (a function; its
        value goes into each output payload under ``name``): ``.apply(fn)`` runs ``fn`` per
        group.

        A null field or key (or a field an event lacks) is never equal to another null (SQL's
        rule); ``nulls`` says what such an event does: ``"raise"`` (``NullKeyError`` naming
        it), ``"group"`` (the nulls make one group of their own) or ``"drop"`` (left out)."""
        if key is not None:
            if fields:
                raise InvalidSettingsError(f"group_by: give payload fields {fields!r} or "
                                           "key=function, not both")
            _function("group_by key", key)
            if not isinstance(name, str) or not name:
                raise InvalidSettingsError(f"group_by(key=...): name is the payload field "
                                           f"the key is written to, got {name!r}")
        elif not fields:
            raise InvalidSettingsError("group_by needs a payload field name (or several, or "
                                       "key=function)")
        for field in fields:
            if not isinstance(field, str) or not field:
                raise InvalidSettingsError(f"group_by needs payload field names, got "
                                           f"{field!r}")
            check_field(field, f"group_by({field!r})", self._label(), self.fields)
        if len(set(fields)) < len(fields):
            raise InvalidSettingsError(f"group_by{fields!r}: a field is named twice")
        if nulls not in _NULLS:
            shown_as = ", ".join(map(repr, fields)) or "key=..."
            raise InvalidSettingsError(f"group_by({shown_as}): nulls is one of {list(_NULLS)}, "
                                       f"got {nulls!r}")
        return GroupedStream(self, fields[0] if fields else key, nulls,
                             name=name if key is not None else None, more=fields[1:])

    def snapshot_window(self, output_policy: plan.WindowOutputPolicy =
                        plan.WindowOutputPolicy.CLIP_TO_WINDOW_END) -> Any:
        """Snapshot windows (StreamInsight's ``SnapshotWindow``): a window between each two
        consecutive event endpoints, so the set of active events is constant inside each;
        ``.aggregate(...)`` or ``.top_k(...)``. Output: an interval per window
        (``CLIP_TO_WINDOW_END``) or a point at its end (``POINT_ALIGN_TO_WINDOW_END``)."""
        from cti.operators import windowed

        return windowed.snapshot_window(self, output_policy)

    def count_window(self, n: int, output_policy: plan.WindowOutputPolicy =
                     plan.WindowOutputPolicy.POINT_ALIGN_TO_WINDOW_END) -> Any:
        """Count windows (StreamInsight's ``CountByStartTimeWindow(n)``): a window over every
        ``n`` consecutive distinct start times, sliding by one; ``.aggregate(...)`` gives a
        point at its last start + 1 tick."""
        from cti.operators import windowed

        return windowed.count_window(self, n, output_policy)


_NULLS = ("raise", "group", "drop")


def _join_text(what: str, other: QueryOperators, on: Any) -> str:
    return f"{what}({other._label()}" + (f", on={on!r})" if on is not None else ")")


def _check_keys(what: str, left: QueryOperators, right: QueryOperators, on: Any,
                lk: str | None, rk: str | None) -> None:
    """A join's key fields exist on their sides."""
    check_field(lk, f"{what}(on={on!r})", left._label(), left.fields)
    check_field(rk, f"{what}(on={on!r})", right._label(), right.fields)


def _check_stream(what: str, other: Any) -> None:
    if not isinstance(other, QueryOperators):
        raise BindingError(f"{what} needs a stream, got {other!r}")


@attrs.frozen
class WindowedStream:
    """A stream cut into windows; ``aggregate(name=agg.count(), ...)`` gives the results."""

    stream: QueryOperators
    size: int
    hop: int
    alignment: int
    output_policy: plan.WindowOutputPolicy

    def aggregate(self, **aggregates: Any) -> DerivedStream:
        aggregates = check_aggregates(aggregates)
        label = self.stream._label()
        for name, a in aggregates.items():
            if isinstance(a, Aggregate):
                check_field(a.field, f"aggregate({name}=agg.{a.op}({a.field!r}))", label,
                            self.stream.fields)
        node = plan.Window(self.stream._node(), self.size, self.hop, self.alignment,
                           self.output_policy, aggregates)
        kind = "tumbling_window" if self.hop == self.size else "hopping_window"
        return self.stream._derive(node, self.stream._label(
            f"{kind}(...).aggregate({', '.join(aggregates)})"))

    def top_k(self, k: int, order_by: Any, rank_field: str = "rank") -> DerivedStream:
        """The events ranked ``k`` or better in each window by ``order_by``, ``[(field,
        "asc" | "desc"), ...]`` (SQL RANK: ties share a rank, so ties at the cut give more
        than ``k``), each with its payload and its rank under ``rank_field``; lifetime as
        the window's output policy says."""
        from cti.operators import windowed

        inner = plan.Window(self.stream._node(), self.size, self.hop, self.alignment,
                            self.output_policy, {})
        kind = "tumbling_window" if self.hop == self.size else "hopping_window"
        return windowed.top_k_node(self.stream, inner, k, order_by, rank_field, f"{kind}(...)")

    def apply_operator(self, fn: Callable[..., Any], time_sensitive: bool = False
                       ) -> DerivedStream:
        """A user-defined operator per window (and group): ``fn(payloads)`` returns output
        payloads, each with the window's output lifetime; with ``time_sensitive=True``,
        ``fn(events, window)`` gets the events with lifetimes clipped to the window and the
        window (``.start``, ``.end``) and returns ``PointEvent`` / ``IntervalEvent`` inside
        the window (``cti.operators.udo``)."""
        from cti.operators import udo

        kind = "tumbling_window" if self.hop == self.size else "hopping_window"
        return udo.apply_operator(self, _function("apply_operator", fn),
                                  _flag("apply_operator time_sensitive", time_sensitive),
                                  f"{kind}(...).apply_operator(...)")


@attrs.frozen
class GroupedStream:
    """A stream grouped by ``field`` (a payload field or a key function, whose value goes to
    ``name``), then by each of ``more`` within those groups (``group_by("a", "b")``)."""

    stream: QueryOperators
    field: str | Callable[[Any], Any]
    nulls: str = "raise"
    name: str | None = attrs.field(default=None, kw_only=True)
    more: tuple[str, ...] = attrs.field(default=(), kw_only=True)

    def apply(self, fn: Callable[[DerivedStream], QueryOperators]) -> DerivedStream:
        """``fn(group)`` builds the query of one group; every group runs it. The group's field
        (or fields, or its key under ``name``) is added to each output payload."""
        _function("apply", fn)
        if self.more:  # several fields: a group_by of the rest inside each group of the first
            inner = attrs.evolve(self, field=self.more[0], more=self.more[1:])
            outer = attrs.evolve(self, more=())
            return outer.apply(lambda group: attrs.evolve(inner, stream=group).apply(fn))
        shown_as = repr(self.field) if isinstance(self.field, str) else "key=..."
        label = self.stream._label(f"group_by({shown_as})")
        group = GroupInputStream(plan.GroupInput(fields=self.stream.fields,
                                                 shape=self.stream.shape, label=label),
                                 self.stream.shape, getattr(self.stream, "application", None))
        body = fn(group)
        if not isinstance(body, QueryOperators):
            raise BindingError(f"group_by({shown_as}).apply: the function must return a "
                               f"stream, got {body!r}")
        if any(isinstance(n, plan.Input) for n in plan.walk(body._node())):
            raise BindingError(f"group_by({shown_as}).apply: the group's query may only "
                               "use the group's stream, not other input streams")
        node = plan.GroupApply(self.stream._node(), self.field, body._node(), nulls=self.nulls,
                               name=self.name)
        return self.stream._derive(node, f"{label}.apply(...)")


@attrs.frozen(eq=False)
class DerivedStream(QueryOperators):
    """The result of an operator: a plan that runs when collected or bound to an output."""

    node: plan.Node
    shape: EventShape | None
    application: Any = None
    name: str = "output"

    def _node(self) -> plan.Node:
        return self.node

    def named(self, name: str) -> DerivedStream:
        """The same stream under ``name`` (its key in ``run()``'s result)."""
        return attrs.evolve(self, name=name)

    def inputs(self) -> list[Any]:
        """The bound input streams this query reads."""
        return plan.inputs_of(self.node)

    def run(self, runtime: Runtime | str | None = None) -> RunResult:
        """Run to the end of the available input: this query's output under ``self.name``
        and every input stream's own result (its ingress output, diagnostics and counts)."""
        from cti.runtime.base import resolve_runtime

        return resolve_runtime(runtime).run_query(self)

    def collect(self, runtime: Runtime | str | None = None) -> list:
        """This query's output: events and CTIs, in order (input results are not kept)."""
        from cti.runtime.base import resolve_runtime

        return resolve_runtime(runtime).run_query(self, with_inputs=False).items(self.name)

    def to(self, factory: Any, config: Any) -> DerivedQuery:
        """Bind the output to an output adapter factory; ``.run()`` the query."""
        if not callable(getattr(factory, "create", None)):
            raise BindingError(f"the output factory must have create(config, shape), got "
                               f"{factory!r}")
        return DerivedQuery(self, factory, config)


@attrs.frozen(eq=False)
class GroupInputStream(DerivedStream):
    """The stream of one group, inside ``group_by(...).apply(fn)``."""

    def run(self, runtime: Runtime | str | None = None) -> RunResult:
        raise BindingError("a group's stream runs as part of its group_by(...).apply(...)")


@attrs.frozen
class DerivedQuery:
    """A query bound to an output adapter."""

    stream: DerivedStream
    factory: Any
    config: Any

    def run(self, runtime: Runtime | str | None = None) -> None:
        """Run to the end of the available input, writing the output to the adapter."""
        from cti.runtime.base import resolve_runtime

        resolve_runtime(runtime).write_query(self)

    def start(self, runtime: Runtime | str | None = None) -> Any:
        """Start writing the output as the input arrives, until stopped: a ``RunningQuery``
        (``cti.runtime.spark.handle``). On ``SparkRuntime`` only; give it a
        ``checkpoint_location`` to resume where a stopped run left off."""
        from cti.runtime.base import streaming_runtime

        return streaming_runtime(runtime, "start()").start_query(self)
