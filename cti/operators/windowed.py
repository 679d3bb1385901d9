"""The snapshot and count windows of a stream, and TopK over a window: the stream API's side
(``stream.snapshot_window()``, ``stream.count_window(n)``, ``windowed.top_k(...)``). Settings
are checked here, when the query is built; the operators are ``cti.operators.snapshot``,
``count_window`` and ``top_k``."""

from __future__ import annotations

from typing import Any

import attrs

from cti.errors import InvalidSettingsError
from cti.forms.schema import check_field
from cti.operators import aggregates as agg
from cti.operators import plan
from cti.operators.aggregates import Aggregate, check_aggregates

_DIRECTIONS = ("asc", "desc")


def checked_aggregates(stream: Any, aggregates: dict[str, Any]) -> dict[str, Any]:
    """The aggregates, each built-in one's field checked against the stream's fields."""
    aggregates = check_aggregates(aggregates)
    for name, a in aggregates.items():
        if isinstance(a, Aggregate):
            check_field(a.field, f"aggregate({name}=agg.{a.op}({a.field!r}))",
                        stream._label(), stream.fields)
    return aggregates


def check_policy(what: str, policy: Any) -> plan.WindowOutputPolicy:
    if not isinstance(policy, plan.WindowOutputPolicy):
        raise InvalidSettingsError(f"{what}: output_policy must be a WindowOutputPolicy, got "
                                   f"{policy!r}")
    return policy


def _order_by(stream: Any, order_by: Any) -> tuple[tuple[str, str], ...]:
    """``[(field, "asc" | "desc"), ...]`` checked: at least one pair, known fields."""
    pairs = [order_by] if isinstance(order_by, tuple) and len(order_by) == 2 and isinstance(
        order_by[1], str) and order_by[1] in _DIRECTIONS else order_by
    if isinstance(pairs, str | bytes) or not isinstance(pairs, list | tuple) or not pairs or \
            not all(isinstance(p, list | tuple) and len(p) == 2 and isinstance(p[0], str)
                    and p[0] and p[1] in _DIRECTIONS for p in pairs):
        raise InvalidSettingsError(
            f"top_k order_by is a list of (field, 'asc' | 'desc') pairs, got {order_by!r}")
    for field, _ in pairs:
        check_field(field, f"top_k(order_by=[({field!r}, ...)])", stream._label(),
                    stream.fields)
    return tuple((f, d) for f, d in pairs)


def top_k_node(stream: Any, window: Any, k: Any, order_by: Any, rank_field: Any,
               label: str) -> Any:
    """``stream``'s events ranked in each window of ``window`` (a plan node made with no
    aggregates: ``Window`` or ``SnapshotWindow``), the best ``k`` of each kept."""
    from cti.operators.top_k import RESULT, Ranked

    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidSettingsError(f"top_k: k is a whole number >= 1, got {k!r}")
    pairs = _order_by(stream, order_by)
    if not isinstance(rank_field, str) or not rank_field:
        raise InvalidSettingsError(f"top_k: rank_field is a field name, got {rank_field!r}")
    if stream.fields is not None and rank_field in stream.fields:
        raise InvalidSettingsError(
            f"top_k: rank_field {rank_field!r} is already a field of stream "
            f"{stream._label()}; pass another name, rank_field='...'")
    inner = attrs.evolve(window, aggregates={RESULT: agg.udf(Ranked(k, pairs, rank_field))})
    node = plan.TopK(stream._node(), inner, k, pairs, rank_field)
    return stream._derive(node, stream._label(
        f"{label}.top_k({k}, order_by={[list(p) for p in pairs]!r})"))


@attrs.frozen
class SnapshotWindowedStream:
    """A stream cut into snapshot windows: ``aggregate(...)`` or ``top_k(...)``."""

    stream: Any
    output_policy: plan.WindowOutputPolicy

    def _window(self, aggregates: dict[str, Any]) -> plan.SnapshotWindow:
        return plan.SnapshotWindow(self.stream._node(), self.output_policy, aggregates)

    def aggregate(self, **aggregates: Any) -> Any:
        """One output per non-empty snapshot window (and group): one field per aggregate."""
        aggregates = checked_aggregates(self.stream, aggregates)
        return self.stream._derive(self._window(aggregates), self.stream._label(
            f"snapshot_window().aggregate({', '.join(aggregates)})"))

    def top_k(self, k: int, order_by: Any, rank_field: str = "rank") -> Any:
        """The events ranked ``k`` or better in each window by ``order_by``, ``[(field,
        "asc" | "desc"), ...]`` (SQL RANK: ties share a rank), each with its rank."""
        return top_k_node(self.stream, self._window({}), k, order_by, rank_field,
                          "snapshot_window()")

    def apply_operator(self, fn: Any, time_sensitive: bool = False) -> Any:
        """A user-defined operator per snapshot window (and group), as a hopping window's
        (``cti.operators.udo``): ``fn(payloads)`` -> payloads with the window's output
        lifetime, or with ``time_sensitive=True`` ``fn(events, window)`` -> events inside
        the window."""
        from cti.operators import udo

        return udo.apply_operator(self, fn, time_sensitive,
                                  "snapshot_window().apply_operator(...)")


@attrs.frozen
class CountWindowedStream:
    """A stream cut into count windows of ``n`` distinct start times: ``aggregate(...)``."""

    stream: Any
    n: int
    output_policy: plan.WindowOutputPolicy

    def aggregate(self, **aggregates: Any) -> Any:
        """One point per window (and group), at its last start + 1 tick: one field per
        aggregate."""
        aggregates = checked_aggregates(self.stream, aggregates)
        node = plan.CountWindow(self.stream._node(), self.n, self.output_policy, aggregates)
        return self.stream._derive(node, self.stream._label(
            f"count_window({self.n}).aggregate({', '.join(aggregates)})"))

    def apply_operator(self, fn: Any, time_sensitive: bool = False) -> Any:
        """A user-defined operator per count window (and group) (``cti.operators.udo``):
        ``fn(payloads)`` -> payloads, each a point at the window's end; with
        ``time_sensitive=True`` ``fn(events, window)`` -> events inside the window
        ``[first start, last start + 1 tick)``, whose output CTIs then go back to the start
        of the earliest window not yet complete."""
        from cti.operators import udo

        return udo.apply_operator(self, fn, time_sensitive,
                                  f"count_window({self.n}).apply_operator(...)")

    def top_k(self, *args: Any, **kwargs: Any) -> Any:
        """Refused, as in StreamInsight: TopK needs a snapshot, hopping or tumbling window."""
        raise InvalidSettingsError(
            f"top_k over count_window({self.n}) of stream {self.stream._label()}: TopK runs "
            "over snapshot, hopping and tumbling windows, not count windows (StreamInsight "
            "refuses it too); use snapshot_window() or tumbling_window(size)")


def snapshot_window(stream: Any, output_policy: Any) -> SnapshotWindowedStream:
    return SnapshotWindowedStream(stream, check_policy("snapshot_window", output_policy))


def count_window(stream: Any, n: Any, output_policy: Any) -> CountWindowedStream:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidSettingsError(f"count_window: n is a whole number of distinct start "
                                   f"times >= 1, got {n!r}")
    policy = check_policy(f"count_window({n})", output_policy)
    if policy is not plan.WindowOutputPolicy.POINT_ALIGN_TO_WINDOW_END:
        raise InvalidSettingsError(
            f"count_window({n}): output_policy {policy.name} is not supported; a count "
            "window gives a point at its end (POINT_ALIGN_TO_WINDOW_END, StreamInsight's only "
            "count-window policy)")
    return CountWindowedStream(stream, n, policy)
