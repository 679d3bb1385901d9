"""A query spread over several shards, run in process as Spark runs it: each input piece read
and routed as Spark's source routes it (``cti.engine.batch.routed``), each shard's micro-batch
in a random row order (Spark promises none), each shard's step on its own state. Tests compare
the shards together with one shard that saw every row."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from cti.engine.batch import ROUTED_ARROW, piece, routed, routed_frame
from cti.engine.route import QueryRoute, routes
from cti.engine.shard import Shard, ShardOutput
from cti.forms import frame
from cti.operators.output import step_table
from cti.runtime.base import query_inputs

Pieces = Sequence[tuple[int, int, bool]]  # [start, end) of a stream's rows, end of input


def run_shards(query: Any, adapters: Mapping[str, Any],
               batches: Sequence[Mapping[str, Pieces]], shards: int, seed: int = 0,
               with_inputs: bool = False
               ) -> tuple[QueryRoute, list[list[ShardOutput]], list[list[pd.DataFrame]],
                          list[dict[str, Any]]]:
    """Each shard's outputs over the micro-batches, the rows each received and its state at
    the end. ``adapters``: each input stream's adapter by name; ``batches``: per micro-batch,
    each stream's pieces read in it; ``with_inputs``: shard 0 passes the inputs' rows on."""
    groups, refs = query_inputs(query)
    route = routes([query], groups, [refs], shards, with_inputs)[0]
    read = sorted({g for g, _ in refs})
    specs = {g: groups[g].specs() for g in read}
    where = {name: (g, groups[g].names.index(name)) for g in read for name in groups[g].names
             if name in adapters}
    engines = [Shard(query.node, query.inputs(), refs, specs, route, s,
                     tuple(read) if with_inputs and s == 0 else ())
               for s in range(route.shards)]
    states = [e.new_state() for e in engines]
    outs: list[list[ShardOutput]] = [[] for _ in engines]
    received: list[list[pd.DataFrame]] = [[] for _ in engines]
    rng = random.Random(seed)
    for batch in batches:
        parts: list[list[pd.DataFrame]] = [[] for _ in engines]
        for name, pieces in batch.items():
            g, index = where[name]
            adapter = adapters[name]
            for a, b, eos in pieces:
                for s, part in routed(route, g, piece(adapter, index, a, b, eos),
                                      getattr(adapter, "events_only", False),
                                      lambda a=adapter: getattr(a, "arrivals_in_order", False)):
                    parts[s].append(routed_frame(part, g))
        for s, engine in enumerate(engines):
            rows = pd.concat(parts[s], ignore_index=True) if parts[s] else routed_frame(
                ROUTED_ARROW.empty_table(), 0)
            rows = rows.iloc[rng.sample(range(len(rows)), len(rows))].reset_index(drop=True)
            received[s].append(rows)
            outs[s].append(engine.step(states[s], rows))
    return route, outs, received, states


def released(outs: Any) -> list[tuple]:
    """The released events of these outputs, as sorted rows of text."""
    events = [o.events for o in outs]
    table = step_table(frame.stack([e for e in events if len(e)] or events[:1]), [])
    return sorted(map(tuple, table.to_pandas().astype(str).itertuples(index=False)))


def counts(outs_by_shard: Sequence[Sequence[ShardOutput]], group: int = 0) -> dict[str, int]:
    """The ingress rows' statuses the shards report, weighted, added up (what Spark's query
    progress adds up)."""
    total: dict[str, int] = {}
    for outs in outs_by_shard:
        for o in outs:
            rows = o.ingress[group]
            for status, w in zip(rows["status"], rows["weight"], strict=True):
                total[status] = total.get(status, 0) + int(w)
    return total


PROGRESS_COUNTS = (("accepted", "accepted"), ("adjusted", "adjusted"), ("dropped", "dropped"),
                   ("invalid", "invalid"), ("cti", "ctis"))
"""Each ingress count's name in Spark's progress (``<stream>.<name>``) and in a result's
``metrics``."""


def assert_progress_counts(stream: Any, progress: Sequence[Mapping[str, Any]]
                           ) -> dict[str, int]:
    """The stream's ingress counts summed over a Spark run's ``progress`` are the in-process
    run's (each event counted once); those counts."""
    from cti.runtime.local import LocalRuntime

    want = stream.run(LocalRuntime())[stream.name].metrics
    for metric, name in PROGRESS_COUNTS:
        assert sum(b.get(f"{stream.name}.{metric}") or 0 for b in progress) == want[name], \
            (stream.name, metric)
    return want
