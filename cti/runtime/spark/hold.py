"""The hold stage: a query whose output CTIs depend on the events, spread over shards
(``QueryRoute.held``), has its shards' output combined after them (``cti.engine.hold``).

The shards' stateful function sends, for such a query, each shard's released events and its
tagged output CTIs (``hold.tagged_table``) as ONE packed row to its own slot, and its tagged
CTIs alone to every other slot (``routed_rows``: role ``hold``, the slot in ``stream``, the
sending shard in ``seq``). This stage, a ``transformWithStateInPandas`` keyed by (query,
slot) (PySpark 4.3 runs it chained after the shards' ``applyInPandasWithState``), runs
``hold.hold_step`` per shard: every slot computes the same combined CTIs from the shards'
levels, lets its own shard's events leave by them, and keeps the rest in its state (in the
checkpoint, committed with the micro-batch, so a restart is exactly once); the slot of shard
0 emits the combined CTIs. Its output is the shards' output as before (``OP`` rows with a
packed blob, ``operators.OUTPUT_SCHEMA``), so every sink reads it as it reads the shards':
a shard's events stay in the partition of its slot, and no row meets the others in one task.
Where the query's output adapter is partitioned and every task runs one shard (one slot
each), the stage writes the released rows to it itself (``sink.write_partition``, as the
shards do for a query without the stage): they are not packed again, carried out of the
stage and unpacked by another task's Python worker. The stage's processor is
``hold_processor.Hold``, in a module of its own that Spark's driver unpickles without pandas.
Every other row (another query's, ingress rows passed on, metrics) passes through as it came,
in the partition of the shard that made it (each row names its slot: ``SLOTTED_SCHEMA``).
Only a query plan that needs the stage gets it (``SparkRuntime.query_frame``;
``hold_processor.hold_stage``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from cti.engine.hold import HoldState, Levels, cti_rows, split, tagged_table
from cti.engine.hold import hold_step as step
from cti.engine.route import QueryRoute
from cti.operators.output import OUTPUT_ARROW
from cti.runtime.spark.packing import pack_rows, unpack_output
from cti.runtime.spark.partitioning import shard_slots
from cti.runtime.spark.sink import write_partition
from cti.runtime.spark.worker import settle

HOLD = "hold"  # the role of a shard's rows into the hold stage


def routed_rows(route: QueryRoute, shard: int, events: pd.DataFrame, ctis: Sequence[int],
                tags: Sequence[int]) -> list[tuple[int, int, bytes]]:
    """A held query's shard's step for the hold stage, as (slot, shard, blob): its events and
    tagged CTIs to its own slot, its tagged CTIs to every other (none where it has none)."""
    slots = shard_slots(route.query, route.shards, route.shards)
    out = []
    if len(events) or len(ctis):  # (by sync time; the sink orders what is released)
        out.append((slots[shard], shard, pack_rows(tagged_table(events, ctis, tags))))
    if len(ctis):
        levels = pack_rows(tagged_table(events.iloc[:0], ctis, tags))
        out += [(slot, shard, levels) for s, slot in enumerate(slots) if s != shard]
    return out


def hold_rows(hold: Any, key: tuple, rows: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """``Hold.handleInputRows``: every row not of role ``hold`` passed on; a held query's
    rows to its slot's shard's step (``_step``). ``hold``: the stage's processor
    (``hold_processor.Hold``, not imported here: it imports this module on first use)."""
    settle("hold")
    frame = pd.concat(list(rows), ignore_index=True)
    mine = (frame["role"] == HOLD).to_numpy()
    if (~mine).any():
        yield frame.loc[~mine, hold.columns]
    if mine.any():
        got = _step(hold, int(key[0]), int(key[1]), frame[mine])
        if got is not None:
            yield got


def _step(hold: Any, query: int, slot: int, rows: pd.DataFrame) -> pd.DataFrame | None:
    """``hold.hold_step`` of the slot's shard on its rows, its state in ``hold.state``: the
    released rows (and at shard 0 the combined CTIs) written to ``hold.sink(query)``, or as one
    ``OP`` row of a packed blob."""
    shards = hold.shards[query]
    shard = slot % shards
    state = _load(hold.state, shards)
    rises: dict[int, Levels] = {}
    events = OUTPUT_ARROW.empty_table()
    for sender, blob in zip(rows["seq"].to_numpy(), rows["blob"], strict=True):
        got, levels = split(unpack_output([blob]))
        rises[int(sender)] = levels
        if int(sender) == shard:
            events = got
    released, gs = step(state, rises, events)
    hold.state.update((np.asarray(state.levels, np.int64).tobytes(), int(state.cti),
                       pack_rows(state.held) if state.held.num_rows else None))
    out = pa.concat_tables([released, cti_rows(gs)]) if shard == 0 else released
    sink = hold.sink(query)
    if sink is not None:
        write_partition(sink, out)
        return None
    blob = pack_rows(out) if out.num_rows else None  # (the sink orders them)
    if blob is None:
        return None
    row = rows.iloc[:1, :].copy()
    row["role"], row["query"], row["seq"], row["stream"], row["blob"] = (
        "op", np.int32(query), np.int64(0), np.int32(-1), [blob])
    return row[hold.columns]


def _load(value: Any, shards: int) -> HoldState:
    """A shard's ``HoldState`` from its ``ValueState`` (``hold_processor.STATE``)."""
    if not value.exists():
        return HoldState.new(shards)
    levels, cti, held = value.get()
    return HoldState(np.frombuffer(levels, np.int64).tolist(), int(cti),
                     unpack_output([held]) if held is not None else OUTPUT_ARROW.empty_table())
