"""Temporal operators on Spark: ingress and operators in one stateful function per shard.

A query runs as ONE ``applyInPandasWithState`` keyed by (query, slot), straight after the
source (PySpark 4.3 allows one such function per streaming query, and a chained
``transformWithStateInPandas`` regroups its input row by row in Python: measured at several
microseconds per event). The slot is the shard under a number Spark's hash partitioning sends
to the shard's own task (``partitioning.shard_slots``). Each shard runs the engine's step
(``cti.engine.shard.Shard``):

- receives what it needs of every ingress group the query reads to run the group's ingress
  itself (vectorised where it can, ``cti.ingress.vectorized``) and compute the same CTIs as
  every other shard: every row's times, or for a stream with a CTI every N events only its
  generation points (``cti.ingress.timed``); the source routes the rows
  (``cti.engine.batch.routed``), packed many to a Spark row (``cti.runtime.spark.packing``),
  and an event's payload travels only to the shard that owns it (the hash of the key the
  query is spread by, ``cti.operators.sharding``; an edge's too, as its end and start have
  one owner; the other shards get its keys alone where its stream's event-ordering policy is
  over a key);
- keeps the events it owns and runs the ``QueryMachine`` over them: all its keys at once,
  vectorised over pandas frames.

The state of a shard (its ingress machines and its query machine: plain data, pickled) is one
binary state row in Spark's state store, checkpointed with the query; its large arrays and
edge books are immutable parts beside the checkpoint that the row names
(``cti.runtime.spark.state``), so the row a micro-batch moves stays small. Every shard computes the
same output CTIs; shard 0 emits them. Output rows carry the CTI that releases each event, which
orders the output at the sink; a shard's output rows of a micro-batch travel packed in one
Spark row (``packing.pack_output``). With ``with_inputs`` shard 0 also emits every input stream's
ingress rows, so a run can return each input stream's own result.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.streaming.state import GroupStateTimeout
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from cti.engine.route import QueryRoute
from cti.engine.shard import Shard
from cti.forms import frame
from cti.ingress.state import next_in_seq, with_stored_books
from cti.operators import plan, usercode
from cti.operators.output import step_table
from cti.runtime.spark.hold import HOLD, routed_rows
from cti.runtime.spark.ingress import GROUP_OUT_SCHEMA
from cti.runtime.spark.metrics import VECTOR, metric_vector
from cti.runtime.spark.packing import pack_output, unpack
from cti.runtime.spark.schema import NULL_TIME
from cti.runtime.spark.shipping import ship_user_functions
from cti.runtime.spark.sink import Sink, batch_id, write_partition
from cti.runtime.spark.state import PartStore, dump_state, load_parts
from cti.runtime.spark.worker import release_memory, settle

OP, PASS, METRIC = "op", "pass", "metric"
OUT_FIELDS = [StructField("query", IntegerType(), False),
              StructField("role", StringType(), False),
              StructField("release", LongType(), False),
              StructField("weight", LongType(), False)]
# ``blob``: an OP row's released events and CTIs, packed (``packing.pack_output``).
OUTPUT_SCHEMA = StructType([*OUT_FIELDS, *GROUP_OUT_SCHEMA.fields,
                            StructField("blob", BinaryType(), True)])
# Before the hold stage, each row also names the slot it goes to there (``slotted``).
SLOT = StructField("slot", IntegerType(), False)
SLOTTED_SCHEMA = StructType([*OUTPUT_SCHEMA.fields, SLOT])
# The stateful function's rows also carry a shard's metric array (``metrics.metric_vector``),
# dropped once ``metrics.observe_vectors`` has added them up.
_METRICS = StructField(VECTOR, ArrayType(LongType()), True)
_STEP_SCHEMA = StructType([*OUTPUT_SCHEMA.fields, _METRICS])
_SLOTTED_STEP_SCHEMA = StructType([*OUTPUT_SCHEMA.fields, _METRICS, SLOT])
_STATE = StructType([StructField("blob", BinaryType(), False)])


def query_function(queries: Sequence[Any], groups: Sequence[Any],
                   refs: Sequence[Sequence[tuple[int, int]]], with_inputs: bool,
                   routes: Sequence[QueryRoute], parts: PartStore | None = None,
                   sinks: Sequence[Sink | None] | None = None, slotted: bool = False
                   ) -> Callable:
    """The stateful function of ``apply_queries``; plans travel without their input streams
    (whose configs may hold all the input). ``parts``: where shards keep their state's large
    arrays (``cti.runtime.spark.state``; a directory per query and shard under it), None:
    in the state value itself. ``sinks``: per query, a partitioned output adapter's (factory,
    config, shape) that each of its shards writes its released rows to itself, as its task's
    partition (a task per shard; see ``apply_queries``), instead of passing them on packed;
    None where the query's rows go on packed. ``slotted``: a
    hold stage follows, and each row names its slot there (``SLOTTED_SCHEMA``): a ``hold`` row
    the one it is sent to, any other the shard's own, so that it stays in its shard's
    partition."""
    plans = [plan.without_inputs(q.node, q.inputs()) for q in queries]
    for p in plans:
        ship_user_functions(p)
    specs = {g: groups[g].specs() for g in {g for rs in refs for g, _ in rs}}
    streams = [len(g.streams) for g in groups]  # (the layout of a metric array)
    reporter: dict[int, int] = {}  # each group's rows are passed through by one query
    for q, rs in enumerate(refs):
        for g, _ in rs:
            reporter.setdefault(g, q)

    def run(key: tuple, batches: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
        settle("query")
        try:
            yield from step(key, batches, state)
        except Exception as exc:
            if not usercode.noted(exc):
                raise
            # The driver raises it again as itself (``usercode.recover``), without Spark's
            # traceback of this frame.
            raise RuntimeError(usercode.carry(exc)) from None
        release_memory()  # (the step's input, its work and the state it wrote: freed now)

    def step(key: tuple, batches: Iterator[pd.DataFrame], state: Any
             ) -> Iterator[pd.DataFrame]:
        q = int(key[0])
        shard = int(key[1]) % routes[q].shards  # its slot (``partitioning.shard_slots``)
        mine = sorted({g for g, _ in refs[q]})
        # Passing a group's rows on, shard 0 reports its metrics (it saw every row); else
        # every shard reports the counts of the rows it judged alone (``Shard.step``).
        reported = [g for g in mine if reporter[g] == q and (shard == 0 or not with_inputs)]
        engine = Shard(plans[q], [], refs[q], specs, routes[q], shard,
                       reported if with_inputs else ())
        store = None if parts is None else attrs.evolve(
            parts, directory=os.path.join(parts.directory, str(q), str(shard)))
        saved, manifest = (load_parts(state.get[0], store) if state.exists
                           else (engine.new_state(), None))
        rows = unpack(pd.concat(list(batches), ignore_index=True),
                      lambda g, i: next_in_seq(saved["ingress"][g], i))
        reports, chunks = engine.ingress(saved, rows)
        del rows  # (the input frame: a first micro-batch's hundreds of MB, free for the query)
        done = engine.query(saved, reports, chunks)
        if store is not None and store.writes:  # large edge books as parts too
            saved["ingress"] = {g: with_stored_books(d, store.min_entries)
                                for g, d in saved["ingress"].items()}
        state.update((dump_state(saved, store, manifest, batch_id()),))
        out = [_passed(done.ingress[g], g) for g in reported] if with_inputs else []
        # The rows whose metrics the shard reports: passed on, all; else those that count.
        counted = {g: done.ingress[g] if with_inputs else _weighted(done.ingress[g])
                   for g in reported}
        if routes[q].held:  # (its CTIs combined after the shards: ``cti.runtime.spark.hold``)
            out.append(_held(routed_rows(routes[q], shard, done.events, done.ctis, done.tags)))
        elif sinks is not None and sinks[q] is not None:
            _write_released(sinks[q], done.events, done.ctis if shard == 0 else [])
        else:
            out.append(_released(done.events, done.ctis if shard == 0 else []))
        result = frame.stack([o for o in out if len(o)] or [_blob_rows([])])
        if not len(result) and any(len(c) for c in counted.values()):
            result = _blob_rows([None], METRIC)  # (a row to carry the metrics)
        result.insert(0, "query", np.int32(q))
        result[VECTOR] = _first_only(metric_vector(streams, counted), len(result))
        if slotted:
            result["slot"] = np.where(result["role"].to_numpy(object) == HOLD,
                                      result["stream"].to_numpy(), int(key[1])).astype(np.int32)
        yield result

    return run


def _write_released(sink: Sink, events: pd.DataFrame, ctis: Sequence[int]) -> None:
    """A shard's released events and CTIs of the step, written as its task's partition."""
    if len(events) + len(ctis):
        write_partition(sink, step_table(events, ctis))


def apply_queries(rows: DataFrame, queries: Sequence[Any], groups: Sequence[Any],
                  refs: Sequence[Sequence[tuple[int, int]]], with_inputs: bool,
                  routes: Sequence[QueryRoute], parts: PartStore | None = None,
                  sinks: Sequence[Sink | None] | None = None, slotted: bool = False
                  ) -> DataFrame:
    """The queries' stateful stage (``query_function``); with ``sinks``, only where every task
    runs one shard of a query, so that each (micro-batch, partition) is written once;
    ``slotted``: a hold stage follows (``query_function``)."""
    return rows.groupBy("query", "slot").applyInPandasWithState(
        query_function(queries, groups, refs, with_inputs, routes, parts, sinks, slotted),
        _SLOTTED_STEP_SCHEMA if slotted else _STEP_SCHEMA,
        _STATE,
        "append",
        GroupStateTimeout.NoTimeout)


def _passed(rows: pd.DataFrame, group: int) -> pd.DataFrame:
    """A group's ingress rows (with their ``weight``), passed through as they are."""
    out = rows.copy()
    out["group"] = np.int32(group)
    out["release"] = np.int64(NULL_TIME)
    out["role"] = PASS
    out["blob"] = None
    return out[[f.name for f in OUTPUT_SCHEMA.fields if f.name != "query"]]


def _weighted(rows: pd.DataFrame) -> pd.DataFrame:
    """A group's ingress rows that count in a shard's metrics when it does not pass them on:
    those of weight above 0 (a row of weight 0 stands for none: ``ShardOutput.ingress``)."""
    if not len(rows):
        return rows
    return rows.iloc[np.flatnonzero(rows["weight"].to_numpy() > 0)]


def _first_only(vector: list[int | None], n: int) -> np.ndarray:
    """A column of ``n`` rows whose first holds ``vector``, the others nothing (the metrics
    are added up over the rows)."""
    column = np.full(n, None, object)
    if n:
        column[0] = vector
    return column


def _released(events: pd.DataFrame, ctis: Sequence[int]) -> pd.DataFrame:
    """Released events and CTIs as ONE output row (none if there are none) that holds them
    packed (``blob``; ``release`` orders them at the sink)."""
    blob = pack_output(events, ctis)
    return _blob_rows([] if blob is None else [blob])


def _held(rows: list[tuple[int, int, bytes]]) -> pd.DataFrame:
    """A held query's shard's rows into the hold stage (``hold.routed_rows``: slot, shard,
    blob): role ``hold``, the slot in ``stream``, the shard in ``seq``."""
    out = _blob_rows([b for _, _, b in rows], HOLD)
    out["stream"] = np.asarray([slot for slot, _, _ in rows], np.int32)
    out["seq"] = np.asarray([shard for _, shard, _ in rows], np.int64)
    return out


def _blob_rows(rows: list[bytes], role: str = OP) -> pd.DataFrame:
    """Packed blobs as rows of ``OUTPUT_SCHEMA`` (its other columns empty)."""
    n = len(rows)
    null = np.full(n, NULL_TIME, np.int64)
    return pd.DataFrame({
        "role": np.full(n, role, object), "release": null, "weight": np.zeros(n, np.int64),
        "group": np.full(n, -1, np.int32), "stream": np.full(n, -1, np.int32),
        "seq": np.zeros(n, np.int64), "in_seq": np.zeros(n, np.int64),
        "kind": np.full(n, "packed", object), "start": null, "end": null,
        "payload": np.full(n, None, object), "status": np.full(n, "output", object),
        "orig_start": null, "orig_end": null, "cti": null,
        "reason": np.full(n, None, object), "partition": np.full(n, None, object),
        "blob": np.asarray(rows, object)})
