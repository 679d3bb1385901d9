"""Where a query's input rows go: the route input rows are sent to shards by
(``cti.engine.batch.routed``) and the shards read them by (``cti.engine.shard``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from cti.events import EventShape
from cti.ingress.progress import reference_streams
from cti.ingress.timed import timed_streams
from cti.operators import plan
from cti.operators.projection import union
from cti.operators.registry import inputs_read
from cti.operators.sharding import data_ctis, shard_fields

# What spreads a stream over shards: a payload field, or a ``group_by(key=fn)``'s function
# (``cti.engine.batch.owners``); None: one shard owns every event.
ShardKey = str | Callable[[Any], Any] | None


@attrs.frozen
class QueryRoute:
    """Where one query's input rows go (``cti.engine.batch.routed``): ``fields[(group,
    stream)]`` is the payload field (or a ``group_by``'s key function) that spreads the stream
    over ``shards`` (None: shard 0 owns every event) for each stream the query reads;
    ``substreams``: the streams of the groups it reads whose events every shard needs with a
    field of their payloads (the field an event-ordering policy is over: each shard keeps
    every key's watermark).
    ``timed[(group, stream)]``: (event count, or None for CTIs by time span; event kind) of
    each stream whose shards take their time from the source's generation points
    (``cti.ingress.timed``) instead of every row.
    ``referenced[(group, stream)]``: the event kind of each stream the query reads that
    imports its CTIs and whose shards take the other shards' rows as their arrival progress
    (``cti.ingress.progress``) where a piece allows it.
    ``reads[(group, stream)]``: the payload fields the query needs of a stream's events
    (``cti.operators.projection``); a stream not named there is read whole.
    ``held``: the query's output CTIs depend on the events its shards hold, and it is spread
    over several: each shard's CTIs carry their tags, and its output goes through the hold
    stage that combines the shards' levels (``cti.engine.hold``)."""

    query: int
    shards: int
    fields: dict[tuple[int, int], ShardKey]
    with_inputs: bool
    substreams: dict[tuple[int, int], str] = attrs.field(factory=dict)
    timed: dict[tuple[int, int], tuple[int | None, str]] = attrs.field(factory=dict)
    reads: dict[tuple[int, int], frozenset[str]] = attrs.field(factory=dict)
    held: bool = False
    referenced: dict[tuple[int, int], str] = attrs.field(factory=dict)

    @property
    def groups(self) -> set[int]:
        return {g for g, _ in self.fields}

    def keyed_substreams(self, group: int) -> set[int]:
        """The streams of ``group`` spread over several shards by their substream key (the
        field of ``EventOrderingPolicy(over=...)``): a key's timeline is its owner's alone."""
        return {i for (g, i), over in self.substreams.items()
                if g == group and self.shards > 1 and self.fields.get((g, i)) == over}

    def by_owner(self, group: int) -> set[int]:
        """The streams of ``group`` whose events each shard reports its own of: spread by
        their substream key, or taken as progress (``referenced``: the other shards' events
        are no rows there)."""
        return self.keyed_substreams(group) | {i for g, i in self.referenced if g == group}


def routes(queries: Sequence[Any], groups: Sequence[Any],
           refs: Sequence[Sequence[tuple[int, int]]], shards: int,
           with_inputs: bool, keyed: bool = False) -> list[QueryRoute]:
    """Where each query's input rows go: to ``shards`` shards by the key that spreads the query
    (``cti.operators.sharding``), or to one. ``keyed``: name that key even with one shard (the
    shard's chunks then carry its values as codes where the adapter gives their texts)."""
    out = []
    for q, query in enumerate(queries):
        fields = shard_fields(query.node, query.inputs()) if shards > 1 or keyed else None
        read = {g for g, _ in refs[q]}
        spread = shards if fields else 1
        substreams = {(g, i): s.event_ordering_policy.over
                      for g in read for i, s in enumerate(groups[g].streams)
                      if s.event_ordering_policy is not None and s.event_ordering_policy.over}
        timed = {} if spread == 1 else {
            (g, i): t for g in read for i, t in timed_streams(groups[g].specs()).items()}
        referenced = {} if spread == 1 else {
            (g, i): kind for g in read
            for i, kind in reference_streams(groups[g].specs()).items() if (g, i) in refs[q]}
        out.append(QueryRoute(q, spread,
                              {r: fields[j] if fields else None for j, r in enumerate(refs[q])},
                              with_inputs, substreams, timed,
                              {} if with_inputs else _reads(query, groups, refs[q]),
                              spread > 1 and data_ctis(query.node), referenced))
    return out


def _reads(query: Any, groups: Sequence[Any], refs: Sequence[tuple[int, int]]
           ) -> dict[tuple[int, int], frozenset[str]]:
    """The payload fields the query's output needs of each stream it reads, where that is not
    every field: not of an edge stream (ingress pairs its edges by whole payloads), and with
    the field of a stream's substreams (``EventOrderingPolicy(over=...)``)."""
    inputs, need = query.inputs(), inputs_read(query.node)
    out: dict[tuple[int, int], frozenset[str] | None] = {}
    for node in plan.walk(query.node):
        if isinstance(node, plan.Input):
            ref = refs[next(j for j, s in enumerate(inputs) if s is node.stream)]
            stream = groups[ref[0]].streams[ref[1]]
            policy = stream.event_ordering_policy
            fields = None if stream.shape is EventShape.EDGE else need[id(node)]
            if fields is not None and policy is not None and policy.over:
                fields |= {policy.over}
            out[ref] = union(out.get(ref, frozenset()), fields)
    return {ref: fields for ref, fields in out.items() if fields is not None}


def stream_reads(routes: Sequence[QueryRoute], group: int, stream: int
                 ) -> frozenset[str] | None:
    """The payload fields the queries ``routes`` need of a stream (None: every field)."""
    need: frozenset[str] | None = frozenset()
    for route in routes:
        if group in route.groups:
            need = union(need, route.reads.get((group, stream)))
    return need
