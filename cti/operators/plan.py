"""The logical plan: immutable operator nodes built by the ``CepStream`` query methods.

A node names its inputs; ``Input`` nodes are bound streams, ``GroupInput`` is the stream of one
group inside ``group_by(...).apply(...)``. The planner (``cti.operators.machine``) turns a tree of
nodes into executors; the nodes themselves hold only settings and user functions.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import attrs

from cti.events import EventShape
from cti.operators.aggregates import AnyAggregate


class WindowOutputPolicy(enum.Enum):
    """Where a window's result lies (StreamInsight's ``WindowOutputPolicy``)."""

    POINT_ALIGN_TO_WINDOW_END = "point_align_to_window_end"
    CLIP_TO_WINDOW_END = "clip_to_window_end"


@attrs.frozen(eq=False)
class Node:
    """Base of every plan node; ``children`` are its input nodes. ``fields``: the payload
    fields of its output where known when the query was built (None: unknown), ``shape``: its
    output's ``EventShape`` (None: mixed), ``label``: its output stream as messages name it
    (``'tolls'.where(...)``). The stream API fills ``fields`` and ``shape`` from the node's
    operator (``OperatorUnit``)."""

    fields: tuple[str, ...] | None = attrs.field(default=None, kw_only=True)
    shape: EventShape | None = attrs.field(default=None, kw_only=True)
    label: str = attrs.field(default="", kw_only=True)

    @property
    def children(self) -> tuple[Node, ...]:
        return ()


@attrs.frozen(eq=False)
class Input(Node):
    """A bound input stream (its ingress output)."""

    stream: Any  # CepStream


@attrs.frozen(eq=False)
class GroupInput(Node):
    """The stream of one group inside ``group_by(...).apply(fn)``."""


@attrs.frozen(eq=False)
class Unary(Node):
    source: Node

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.source,)


@attrs.frozen(eq=False)
class Where(Unary):
    predicate: Callable[[dict[str, Any]], bool]
    frame: bool = False  # the predicate takes a frame of payloads (``frame.payload_frame``)


@attrs.frozen(eq=False)
class Select(Unary):
    fn: Callable[[dict[str, Any]], dict[str, Any]]
    frame: bool = False  # the function maps a frame of payloads to one of new payloads


@attrs.frozen(eq=False)
class ShiftEventTime(Unary):
    offset: int


@attrs.frozen(eq=False)
class AlterEventDuration(Unary):
    duration: int | Callable[[Any], Any]  # ticks, or a function of the event (``durations``)


@attrs.frozen(eq=False)
class AlterEventLifetime(Unary):
    start_fn: Callable[[int], int]
    duration: int | Callable[[Any], Any]  # ticks, or a function of the event (``durations``)


@attrs.frozen(eq=False)
class ClipEventDuration(Unary):
    max_duration: int


@attrs.frozen(eq=False)
class ToPointEventStream(Unary):
    pass


@attrs.frozen(eq=False)
class Window(Unary):
    """A hopping window (tumbling when ``hop == size``) with its aggregates."""

    size: int
    hop: int
    alignment: int
    output_policy: WindowOutputPolicy
    aggregates: dict[str, AnyAggregate]


@attrs.frozen(eq=False)
class GroupApply(Unary):
    """``fn`` applied to each group of events with equal ``field``; ``body`` is its plan.
    ``nulls``: what an event whose ``field`` is null does: ``"raise"`` (``NullKeyError``),
    ``"group"`` (null is a group of its own) or ``"drop"`` (the event is left out)."""

    field: str | Callable[[dict[str, Any]], Any]  # a payload field, or a key function
    body: Node
    nulls: str = attrs.field(default="raise", kw_only=True)
    name: str | None = attrs.field(default=None, kw_only=True)  # a key function's field name

    @property
    def key_name(self) -> str:
        """The payload field the group's value is written to in the output."""
        return self.name if self.name is not None else self.field


@attrs.frozen(eq=False)
class Binary(Node):
    left: Node
    right: Node

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@attrs.frozen(eq=False)
class Union(Binary):
    pass


@attrs.frozen(eq=False)
class Join(Binary):
    left_key: str | None
    right_key: str | None
    predicate: Callable[[dict[str, Any], dict[str, Any]], bool] | None
    select: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None
    frame: bool = False  # predicate and select take frames of the pairs' payloads


@attrs.frozen(eq=False)
class AntiSemiJoin(Binary):
    left_key: str | None
    right_key: str | None
    predicate: Callable[[dict[str, Any], dict[str, Any]], bool] | None


def walk(node: Node) -> list[Node]:
    """Every node of the tree below and including ``node`` (group bodies included), once."""
    seen: dict[int, Node] = {}
    todo = [node]
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen[id(n)] = n
        todo += list(n.children)
        if isinstance(n, GroupApply):
            todo.append(n.body)
    return list(seen.values())


def inputs_of(node: Node) -> list[Any]:
    """The bound input streams a plan reads, in a stable order (first use, depth first)."""
    out: list[Any] = []

    def visit(n: Node) -> None:
        if isinstance(n, Input) and all(s is not n.stream for s in out):
            out.append(n.stream)
        for c in n.children:
            visit(c)

    visit(node)
    return out


@attrs.frozen
class InputRef:
    """Stands for the n-th input stream in a plan that travels without its streams."""

    index: int


def without_inputs(root: Node, inputs: list[Any]) -> Node:
    """The same plan with each ``Input`` stream replaced by an ``InputRef`` to its position in
    ``inputs``: what Spark ships to its workers (factories and configs, which may hold all the
    input data, stay with the sources)."""
    done: dict[int, Node] = {}

    def rebuild(node: Node) -> Node:
        if id(node) in done:
            return done[id(node)]
        if isinstance(node, Input):
            new: Node = attrs.evolve(node, stream=InputRef(next(
                i for i, s in enumerate(inputs) if s is node.stream)))
        else:
            changes = {f.name: rebuild(getattr(node, f.name)) for f in attrs.fields(type(node))
                       if isinstance(getattr(node, f.name), Node)}
            new = attrs.evolve(node, **changes) if changes else node
        done[id(node)] = new
        return new

    return rebuild(root)


@attrs.frozen(eq=False)
class SnapshotWindow(Unary):
    """A snapshot window (StreamInsight's ``SnapshotWindow``) with its aggregates: a window
    between each two consecutive event endpoints (``cti.operators.snapshot``)."""

    output_policy: WindowOutputPolicy
    aggregates: dict[str, AnyAggregate]


@attrs.frozen(eq=False)
class CountWindow(Unary):
    """A count window (StreamInsight's ``CountByStartTimeWindow(n)``) with its aggregates: a
    window over every ``n`` consecutive distinct start times (``cti.operators.count_window``)."""

    n: int
    output_policy: WindowOutputPolicy
    aggregates: dict[str, AnyAggregate]


@attrs.frozen(eq=False)
class TopK(Unary):
    """The ``k`` best-ranked events of each window (StreamInsight's ``orderby ... Take(k)``):
    ``window`` is the window (a ``Window`` or ``SnapshotWindow`` over ``source``) whose one
    aggregate ranks its events (``cti.operators.top_k``)."""

    window: Node
    k: int
    order_by: tuple[tuple[str, str], ...]
    rank_field: str


@attrs.frozen(eq=False)
class ClipByStream(Binary):
    """``left.clip_event_duration(right, on=...)``: each left event ends at the first matching
    right event that starts after it (``cti.operators.clip``)."""

    left_key: str | None
    right_key: str | None


@attrs.frozen(eq=False)
class WindowOperator(Unary):
    """``windowed.apply_operator(fn, time_sensitive)``: ``inner`` is the window node (over
    ``source``) whose one user-defined aggregate calls ``fn`` (``cti.operators.udo``)."""

    inner: Node
    fn: Callable[..., Any]
    time_sensitive: bool


@attrs.frozen(eq=False)
class Scan(Unary):
    """``stream.scan(operator)``: a ``StreamOperator`` called per event in sync-time order,
    with a state per group key (``cti.operators.scan``)."""

    operator: Any
