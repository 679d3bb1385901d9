"""Where a query's input rows go: the route input rows are sent to shards by
(``cti.engine.batch.routed``) and the shards read them by (``cti.engine.shard``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from cti.events import EventShape
from cti.ingress.spec import StreamSpec
from cti.ingress.vectorized import eligible
from cti.operators.sharding import shard_fields


@attrs.frozen
class QueryRoute:
    """Where one query's input rows go (``cti.engine.batch.routed``): ``fields[(group,
    stream)]`` is the payload field that spreads the stream over ``shards`` (None: shard 0 owns
    every event) for each stream the query reads; ``edges`` are the edge streams of the groups
    it reads. ``timed[(group, stream)]``: (event count, event kind) of each stream whose shards
    take their time from the source's generation points (``cti.engine.timed``) instead of
    every row."""

    query: int
    shards: int
    fields: dict[tuple[int, int], str | None]
    edges: frozenset[tuple[int, int]]
    with_inputs: bool
    timed: dict[tuple[int, int], tuple[int, str]] = attrs.field(factory=dict)

    @property
    def groups(self) -> set[int]:
        return {g for g, _ in self.fields}


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
        edges = frozenset((g, i) for g in read for i, s in enumerate(groups[g].streams)
                          if s.shape is EventShape.EDGE)
        spread = shards if fields else 1
        timed = {} if spread == 1 else {
            (g, i): timed_stream(groups[g].specs()) for g, i in refs[q]}
        out.append(QueryRoute(q, spread,
                              {r: fields[j] if fields else None for j, r in enumerate(refs[q])},
                              edges, with_inputs,
                              {r: t for r, t in timed.items() if t is not None}))
    return out


def timed_stream(specs: Sequence[StreamSpec]) -> tuple[int, str] | None:
    """(event count, event kind) where a group's shards can take its time from the source's
    generation points (``cti.engine.timed``): one stream that generates a CTI every N events,
    vectorised, and stops at bad input (a dead-lettered row would shift the count)."""
    if len(specs) != 1 or not eligible(specs):
        return None
    spec = specs[0]
    if spec.event_count is None or spec.dead_letter or spec.arrival_clock != "data":
        return None
    return spec.event_count, spec.shape.value
