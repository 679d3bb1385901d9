"""Where a query's input rows go: the route the source packs them by (``packing``) and the
shards read them by (``operators``)."""

from __future__ import annotations

import attrs


@attrs.frozen
class QueryRoute:
    """Where one query's input rows go (``cti.runtime.spark.packing``): ``fields[(group,
    stream)]`` is the payload field that spreads the stream over ``shards`` (None: shard 0 owns
    every event) for each stream the query reads; ``edges`` are the edge streams of the groups
    it reads."""

    query: int
    shards: int
    fields: dict[tuple[int, int], str | None]
    edges: frozenset[tuple[int, int]]
    with_inputs: bool

    @property
    def groups(self) -> set[int]:
        return {g for g, _ in self.fields}
