"""Binding streams: ``CepStream.create`` and the application that holds the streams by name."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import tzinfo
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from cti.adapters import check_config, declared_settings
from cti.errors import BindingError, InvalidSettingsError
from cti.events import EventShape, items_from_rows
from cti.forms.rows import OUTPUT_STATUSES, OutRow
from cti.forms.schema import Fields, check_field, field_names, stream_fields
from cti.ingress.spec import StreamSpec
from cti.operators import plan
from cti.query.methods import DerivedStream, QueryOperators
from cti.settings import AdvanceTimeSettings, EventOrderingPolicy
from cti.time import to_time_zone

if TYPE_CHECKING:
    from cti.results import RunResult
    from cti.runtime.base import Runtime


class Application:
    """A namespace of bound streams (StreamInsight's ``Application``).

    Streams find the streams they import CTIs from by name here. ``Application.default()`` is
    the one ``CepStream.create`` uses when no application is given.

    ``time_zone`` (an IANA name such as ``"Europe/Paris"``, or a ``tzinfo``) is where naive
    times are read: adapters whose config has a ``time_zone`` field left None (the file and
    Parquet inputs) read offset-less times in it, and window alignments may be naive. Without
    it a naive time is an error. Events built in code always need an aware ``datetime``.
    """

    _default: ClassVar[Application | None] = None
    _count: ClassVar[int] = 0

    def __init__(self, name: str | None = None, time_zone: str | tzinfo | None = None) -> None:
        Application._count += 1
        self.name = name or f"application-{Application._count}"
        self.time_zone = to_time_zone(time_zone, f"Application {self.name!r} time_zone")
        self._streams: dict[str, CepStream] = {}

    @classmethod
    def default(cls) -> Application:
        if cls._default is None:
            cls._default = cls("default")
        return cls._default

    def stream(self, name: str) -> CepStream:
        try:
            return self._streams[name]
        except KeyError:
            raise BindingError(
                f"application {self.name!r} has no stream {name!r}; it has {sorted(self._streams)}"
            ) from None

    @property
    def streams(self) -> list[CepStream]:
        return list(self._streams.values())

    def _register(self, stream: CepStream) -> None:
        if stream.name in self._streams:
            raise BindingError(
                f"application {self.name!r} already has a stream named {stream.name!r}; "
                "choose another name or bind into a new Application()"
            )
        self._streams[stream.name] = stream


def _with_time_zone(config: Any, app: Application) -> Any:
    """The adapter config, given the application's time zone if it has a ``time_zone`` field
    left None (an attrs class): the adapter then reads naive times in that zone."""
    if (app.time_zone is not None and attrs.has(type(config))
            and "time_zone" in attrs.fields_dict(type(config))
            and config.time_zone is None):
        return attrs.evolve(config, time_zone=app.time_zone)
    return config


def _check_shape(value: Any) -> EventShape:
    if isinstance(value, EventShape):
        return value
    try:
        return EventShape(str(value).lower())
    except ValueError:
        raise InvalidSettingsError(f"shape must be an EventShape, got {value!r}") from None


@attrs.frozen(eq=False)
class CepStream(QueryOperators):
    """An input stream bound to an adapter factory, with its effective advance-time settings.

    The query methods (``where``, ``join``, ``hopping_window``, ...) come from
    ``QueryOperators`` and return derived streams.
    """

    name: str
    factory: Any
    config: Any
    shape: EventShape
    advance_time_settings: AdvanceTimeSettings | None
    settings_origin: str  # "binding", "adapter" or "none"
    application: Application
    dead_letter: bool = False
    event_ordering_policy: EventOrderingPolicy | None = None
    declared_partitions: tuple[str, ...] = ()
    payload_fields: Fields = None

    @classmethod
    def create(
        cls,
        name: str,
        factory: Any,
        config: Any,
        shape: EventShape | str,
        advance_time_settings: AdvanceTimeSettings | None = None,
        *,
        application: Application | None = None,
        on_bad_input: str = "raise",
        event_ordering_policy: EventOrderingPolicy | None = None,
        fields: Sequence[str] | None = None,
    ) -> CepStream:
        """Bind a stream. Settings given here replace what the factory declares.

        ``event_ordering_policy`` (instead of advance-time settings) stamps and orders events by
        Azure Stream Analytics' rules (arrival time, tolerances) and produces the stream's CTIs;
        a factory may declare one with ``declare_event_ordering_policy(config, shape)`` and its
        partitions with ``declare_partitions(config, shape)``.
        A factory's ``check_config(config, shape)``, if it has one, runs here: a missing or
        unreadable file, or columns the data lacks, raise ``BindingError`` naming the stream.
        ``on_bad_input``: ``"raise"`` (default) stops with an error naming the stream, event and
        rule; ``"dead_letter"`` keeps going and reports the row in the diagnostics output.
        ``fields``: the payload fields of the stream's events, where the factory cannot tell
        (``fields(config)``); the fields a query names are checked against them.
        """
        if not isinstance(name, str) or not name:
            raise BindingError(f"a stream needs a non-empty name, got {name!r}")
        if not callable(getattr(factory, "create", None)):
            raise BindingError(
                f"stream {name!r}: the factory must have create(config, shape), got {factory!r}"
            )
        if on_bad_input not in ("raise", "dead_letter"):
            raise InvalidSettingsError(
                f"stream {name!r}: on_bad_input is 'raise' or 'dead_letter', got {on_bad_input!r}"
            )
        if advance_time_settings is not None and not isinstance(
            advance_time_settings, AdvanceTimeSettings
        ):
            raise InvalidSettingsError(
                f"stream {name!r}: advance_time_settings must be AdvanceTimeSettings, "
                f"got {advance_time_settings!r}"
            )
        shape = _check_shape(shape)
        check_config(name, factory, config, shape)
        app = application or Application.default()
        config = _with_time_zone(config, app)
        if advance_time_settings is not None and event_ordering_policy is not None:
            raise InvalidSettingsError(
                f"stream {name!r}: give advance_time_settings or event_ordering_policy, not both"
            )
        if event_ordering_policy is not None and not isinstance(
            event_ordering_policy, EventOrderingPolicy
        ):
            raise InvalidSettingsError(
                f"stream {name!r}: event_ordering_policy must be EventOrderingPolicy, "
                f"got {event_ordering_policy!r}"
            )
        ordering = event_ordering_policy
        if ordering is None and advance_time_settings is None:
            declare = getattr(factory, "declare_event_ordering_policy", None)
            ordering = declare(config, shape) if declare else None
        if ordering is not None and shape is EventShape.EDGE:
            raise BindingError(
                f"stream {name!r}: an event-ordering policy orders point and interval events "
                f"({'given at binding' if event_ordering_policy else 'declared by its adapter'}"
                "); an edge end names its start by start time, which the policy would move: "
                "give an edge stream AdvanceTimeSettings instead")
        declare_parts = getattr(factory, "declare_partitions", None)
        partitions = tuple(str(p) for p in (declare_parts(config, shape) or ())) \
            if declare_parts else ()
        origin = "binding"
        settings = advance_time_settings
        if ordering is not None:
            settings, origin = None, "binding" if event_ordering_policy else "adapter"
        elif settings is None:
            declared = declared_settings(factory, config, shape)
            settings = declared.to_advance_time_settings() if declared else None
            origin = "adapter" if declared else "none"
        imp = settings.import_settings if settings else None
        if imp is not None:
            if imp.stream_name == name:
                raise BindingError(f"stream {name!r} cannot import its own CTIs (import cycle)")
            if imp.stream_name not in app._streams:
                raise BindingError(
                    f"stream {name!r} imports CTIs from unknown stream {imp.stream_name!r}; "
                    f"bind that stream first (known: {sorted(app._streams)})"
                )
        known = field_names(fields) if fields is not None else stream_fields(name, factory, config)
        if ordering is not None:
            check_field(ordering.over, "EventOrderingPolicy(over=...)", repr(name), known)
        stream = cls(name, factory, config, shape, settings, origin, app,
                     on_bad_input == "dead_letter", ordering, partitions, known)
        app._register(stream)
        return stream

    @classmethod
    def from_dataframe(
        cls,
        name: str,
        frame: Any,
        shape: EventShape | str,
        *,
        start: str,
        end: str | None = None,
        edge: str | None = None,
        arrival: str | None = None,
        order_by: Sequence[str] | str = (),
        partition: str | None = None,
        payload: Sequence[str] | None = None,
        advance_time_settings: AdvanceTimeSettings | None = None,
        application: Application | None = None,
        on_bad_input: str = "raise",
        event_ordering_policy: EventOrderingPolicy | None = None,
    ) -> CepStream:
        """Bind a stream to a Spark DataFrame's columns (``cti.io.dataframes``): a streaming
        one (any Spark source: Kafka, Delta, files, rate) on ``SparkRuntime``, a batch one on
        either runtime. ``start`` (``end``; ``edge``, the edge kind column) are timestamp or
        integer-tick columns; ``arrival`` and ``order_by`` give the rows' order; ``payload``:
        the payload columns (default: every other column)."""
        from cti.io.dataframes import DataFrameInputAdapterFactory, DataFrameInputConfig

        config = DataFrameInputConfig(frame, start, end, edge, arrival, order_by, partition,
                                      payload)
        config.check(name, _check_shape(shape))
        for where, value in (("advance_time_settings", advance_time_settings),
                             ("event_ordering_policy", event_ordering_policy)):
            if getattr(value, "arrival_clock", "data") == "wall":
                raise BindingError(
                    f"stream {name!r}: {where} has arrival_clock='wall', which a stream read "
                    "from a DataFrame cannot have: its offsets are its Spark source's, so no "
                    "clock tick can be recorded for a replay (give the DataFrame a row now and "
                    "then instead, e.g. a union with the rate source)")
        return cls.create(name, DataFrameInputAdapterFactory(name), config, shape,
                          advance_time_settings, application=application,
                          on_bad_input=on_bad_input, event_ordering_policy=event_ordering_policy)

    def _node(self) -> plan.Node:
        return plan.Input(self, fields=self.payload_fields, shape=self.shape,
                          label=repr(self.name))

    def as_query(self) -> DerivedStream:
        """This stream as a query whose output is the stream's own (its ingress output): how
        a runtime that runs only queries (a stream read from a DataFrame) runs it."""
        return DerivedStream(self._node(), self.shape, self.application, f"{self.name}$output")

    # ---- ingress group ------------------------------------------------------------------------

    def ingress_group(self) -> IngressGroup:
        """This stream and every stream linked to it by CTI imports, in declaration order."""
        streams = self.application.streams
        by_name = {s.name: s for s in streams}
        links: dict[str, set[str]] = {s.name: set() for s in streams}
        for s in streams:
            imp = s.advance_time_settings.import_settings if s.advance_time_settings else None
            if imp is not None:
                links[s.name].add(imp.stream_name)
                links[imp.stream_name].add(s.name)
        seen, todo = {self.name}, [self.name]
        while todo:
            for other in links[todo.pop()]:
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        return IngressGroup([by_name[n] for n in by_name if n in seen])

    # ---- running ------------------------------------------------------------------------------

    def run(self, runtime: Runtime | str | None = None) -> RunResult:
        """Run this stream's ingress group to the end of its input; results of every stream."""
        from cti.runtime.base import resolve_runtime

        return resolve_runtime(runtime).run(self.ingress_group())

    def collect(self, runtime: Runtime | str | None = None) -> list:
        """This stream's output: its events (after the policy) and CTIs, in order."""
        return self.run(runtime).items(self.name)

    def to(self, factory: Any, config: Any) -> Query:
        """Bind this stream's output to an output adapter factory; ``.run()`` the query."""
        if not callable(getattr(factory, "create", None)):
            raise BindingError(
                f"stream {self.name!r}: the output factory must have create(config, shape), "
                f"got {factory!r}"
            )
        return Query(self, factory, config)

    def diagnostics_to(self, factory: Any, config: Any) -> Query:
        """Bind this stream's side output (``Diagnostic`` rows: adjusted, dropped, invalid
        events and ignored CTIs) to an output adapter; ``.run()`` the query."""
        return attrs.evolve(self.to(factory, config), diagnostics=True)


@attrs.frozen
class OutputBinding:
    """Stream ``stream`` (index in its ingress group) written to ``factory.create(config)``.

    With ``diagnostics`` the adapter gets the stream's ``Diagnostic`` rows instead of its output.
    """

    stream: int
    factory: Any
    config: Any
    shape: EventShape
    name: str = ""
    diagnostics: bool = False
    over: str | None = None

    def select(self, rows: Iterable[OutRow]) -> list[Any]:
        """What this binding writes, from one batch's output rows (in order)."""
        from cti.results import DIAGNOSTIC_STATUSES, diagnostic_from_row

        mine = sorted((r for r in rows if r.stream == self.stream), key=lambda r: r.seq)
        if self.diagnostics:
            return [diagnostic_from_row(self.name, r, self.over)
                    for r in mine if r.status in DIAGNOSTIC_STATUSES]
        out = [r for r in mine if r.status in OUTPUT_STATUSES]
        return items_from_rows([r.kind for r in out], [r.start for r in out],
                               [r.end for r in out], [r.payload for r in out])


@attrs.frozen
class Query:
    """A stream bound to an output adapter."""

    stream: CepStream
    factory: Any
    config: Any
    diagnostics: bool = False

    def output_binding(self, group: IngressGroup) -> OutputBinding:
        policy = self.stream.event_ordering_policy
        return OutputBinding(group.names.index(self.stream.name), self.factory, self.config,
                             self.stream.shape, self.stream.name, self.diagnostics,
                             policy.over if policy else None)

    def run(self, runtime: Runtime | str | None = None) -> None:
        """Run to the end of the available input, writing the stream's output to the adapter."""
        from cti.runtime.base import resolve_runtime

        group = self.stream.ingress_group()
        resolve_runtime(runtime).write(group, [self.output_binding(group)])

    def start(self, runtime: Runtime | str | None = None) -> Any:
        """Start writing the stream's output as its input arrives, until stopped: a
        ``RunningQuery`` (``cti.runtime.spark.handle``). On ``SparkRuntime`` only; give it a
        ``checkpoint_location`` to resume where a stopped run left off."""
        from cti.runtime.base import streaming_runtime

        group = self.stream.ingress_group()
        return streaming_runtime(runtime, "start()").start_write(
            group, [self.output_binding(group)])


@attrs.frozen
class IngressGroup:
    """Streams whose ingress runs together because CTIs flow between them by import."""

    streams: Sequence[CepStream]

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.streams]

    @property
    def overs(self) -> list[str | None]:
        """Each stream's substream key field (``EventOrderingPolicy.over``), or None."""
        return [s.event_ordering_policy.over if s.event_ordering_policy else None
                for s in self.streams]

    def specs(self) -> list[StreamSpec]:
        index = {s.name: i for i, s in enumerate(self.streams)}
        specs = []
        for s in self.streams:
            imp = s.advance_time_settings.import_settings if s.advance_time_settings else None
            specs.append(StreamSpec.from_settings(
                s.name, s.shape, s.advance_time_settings,
                import_from=index[imp.stream_name] if imp else None,
                dead_letter=s.dead_letter,
                ordering=s.event_ordering_policy,
                declared_partitions=s.declared_partitions,
            ))
        return specs
