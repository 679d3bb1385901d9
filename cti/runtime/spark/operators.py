"""Temporal operators on Spark: one ``transformWithStateInPandas`` keyed by (query, shard).

After ingress (``applyInPandasWithState``, one key per ingress group), every output row of an
input stream that a query reads is routed to the query's shards: events to the shard of their
key (``cti.operators.sharding``: the hash of a payload field, computed by Spark from the JSON
payload), CTIs to every shard. Each shard runs a ``QueryMachine`` over the keys it holds,
vectorised over pandas batches; the machine's state (plain data, pickled) lives in one
``ValueState`` of the shard, in Spark's RocksDB state store, and is checkpointed with the query.
Every shard sees every CTI, so every shard computes the same output CTIs; shard 0 emits them.
The output rows carry the CTI that releases each event, which gives the output order at the
sink. With ``with_inputs`` the ingress rows are also passed through (to shard 0), so a run can
return every input stream's own result as well.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from cti.operators import frame, plan
from cti.operators.machine import QueryMachine
from cti.operators.sharding import shard_fields
from cti.runtime.spark.ingress import GROUP_OUT_SCHEMA
from cti.runtime.spark.schema import NULL_TIME

OP, PASS = "op", "pass"
OUT_FIELDS = [StructField("query", IntegerType(), False),
              StructField("role", StringType(), False),
              StructField("release", LongType(), False)]
OUTPUT_SCHEMA = StructType([*OUT_FIELDS, *GROUP_OUT_SCHEMA.fields])
_STATE = StructType([StructField("machine", BinaryType(), True)])
_ROUTED = ("accepted", "adjusted", "cti")


def _field_path(field: str) -> str:
    return "$['" + field.replace("'", "\\'") + "']"


def route(ingress: DataFrame, queries: Sequence[Any],
          groups: Sequence[Any], refs: Sequence[Sequence[tuple[int, int]]], shards: int,
          with_inputs: bool) -> DataFrame:
    """Ingress rows -> (query, shard) rows: events by key, CTIs to every shard. Spark SQL
    expressions only (no join, no Python)."""
    targets: dict[tuple[int, int], list[tuple[int, int, str]]] = {}
    for q, rs in enumerate(refs):
        for j, (g, i) in enumerate(rs):
            targets.setdefault((g, i), []).append((q, j, OP))
    if with_inputs:  # each group's rows once, to the first query that reads it
        first: dict[int, int] = {}
        for q, rs in enumerate(refs):
            for g, _ in rs:
                first.setdefault(g, q)
        for g, q in first.items():
            for i in range(len(groups[g].streams)):
                targets.setdefault((g, i), []).append((q, -1, PASS))
    routed = F.col("status").isin(*_ROUTED)
    choice: Column | None = None
    for (g, i), ts in targets.items():
        cond = (F.col("group") == g) & (F.col("stream") == i)
        arr = F.filter(F.array(*[F.struct(F.lit(q).alias("query"), F.lit(j).alias("input"),
                                          F.lit(role).alias("role")) for q, j, role in ts]),
                       lambda t: (t["role"] == PASS) | routed)
        choice = F.when(cond, arr) if choice is None else choice.when(cond, arr)
    rows = ingress.withColumn("_to", F.explode(choice)).select(
        *ingress.columns, F.col("_to.query").cast("int").alias("query"),
        F.col("_to.input").cast("int").alias("input"), F.col("_to.role").alias("role"))
    key: Column = F.lit(0)
    for q, query in enumerate(queries):
        fields = shard_fields(query.node, query.inputs()) if shards > 1 else None
        for j, field in enumerate(fields or []):
            hashed = F.pmod(F.xxhash64(F.get_json_object("payload", _field_path(field))),
                            F.lit(shards)).cast("int")
            key = F.when((F.col("query") == q) & (F.col("input") == j), hashed).otherwise(key)
    every = F.sequence(F.lit(0), F.lit(shards - 1))
    shard = F.when(F.col("role") == PASS, F.array(F.lit(0))).when(
        F.col("status") == "cti", every).otherwise(F.array(key))
    return rows.withColumn("shard", F.explode(shard))


class QueryProcessor(StatefulProcessor):
    """Runs the queries' machines; the key is (query, shard)."""

    def __init__(self, queries: Sequence[Any]) -> None:
        # Plans travel without their input streams (whose configs may hold all the input).
        self.plans = [(plan.without_inputs(q.node, q.inputs()), len(q.inputs()))
                      for q in queries]

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("machine", _STATE)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],
                        timerValues: Any) -> Iterator[pd.DataFrame]:
        query, shard = int(key[0]), int(key[1])
        pdf = pd.concat(list(rows), ignore_index=True)
        out = [_passed(pdf[pdf["role"] == PASS])]
        ops = pdf[pdf["role"] == OP]
        if len(ops):
            root, n_inputs = self.plans[query]
            saved = self.state.get() if self.state.exists() else None
            machine = QueryMachine(root, [], pickle.loads(saved[0]) if saved else None)
            chunks = []
            for j in range(n_inputs):
                mine = ops[ops["input"] == j].sort_values("seq")
                chunks.append(frame.chunk_of(*(mine[c].to_numpy() for c in (
                    "status", "kind", "start", "end", "payload"))))
            events, ctis = machine.step(chunks)
            self.state.update((pickle.dumps(machine.state, protocol=pickle.HIGHEST_PROTOCOL),))
            out.append(_released(events, ctis if shard == 0 else []))
        out = [o for o in out if len(o)]
        if out:
            result = pd.concat(out, ignore_index=True)
            result.insert(0, "query", np.int32(query))
            yield result

    def close(self) -> None:
        pass


def _passed(rows: pd.DataFrame) -> pd.DataFrame:
    """Ingress rows passed through as they are."""
    cols = [f.name for f in GROUP_OUT_SCHEMA.fields]
    out = rows[cols].copy()
    out.insert(0, "release", np.int64(NULL_TIME))
    out.insert(0, "role", PASS)
    return out


def _released(events: pd.DataFrame, ctis: Sequence[int]) -> pd.DataFrame:
    """Released events and CTIs as output rows (``release`` orders them at the sink)."""
    n, m = len(events), len(ctis)
    ctis = np.asarray(ctis, dtype=np.int64)
    kind = np.concatenate([events["kind"].to_numpy(dtype=object), np.full(m, "cti", object)])
    start = np.concatenate([events["start"].to_numpy(np.int64), ctis])
    end = np.concatenate([events["end"].to_numpy(np.int64), ctis])
    payload = np.concatenate([events["payload"].to_numpy(dtype=object),
                              np.full(m, None, object)])
    release = np.concatenate([events["release"].to_numpy(np.int64), ctis])
    null = np.full(n + m, NULL_TIME, np.int64)
    return pd.DataFrame({
        "role": OP, "release": release, "group": np.int32(-1), "stream": np.int32(-1),
        "seq": np.int64(0), "in_seq": np.int64(0), "kind": kind, "start": start, "end": end,
        "payload": payload, "status": "output", "orig_start": null, "orig_end": null,
        "cti": null, "reason": None, "partition": None})


def apply_queries(rows: DataFrame, queries: Sequence[Any]) -> DataFrame:
    return rows.groupBy("query", "shard").transformWithStateInPandas(
        QueryProcessor(queries), OUTPUT_SCHEMA, "Append", "None")
