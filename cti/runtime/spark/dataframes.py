"""DataFrames in and out of a Spark query: a streaming DataFrame's rows routed to the query's
shards as the adapter source's are, and a query's output as a streaming DataFrame.

In: ``input_rows`` (``cti.io.dataframes``) turns the user's rows into cti input rows in Spark
SQL; a ``mapInArrow`` over them routes and packs each Spark partition's rows of a micro-batch
for every shard of every query reading the stream (``packing.routed``), as the adapter source
does, with the rows' sort key and ``seq`` -1. Where the shard's stateful function meets the
micro-batch, the stream's rows are put in the order of their key and numbered from the
stream's next sequence number in the ingress state (``packing.sequenced``), so every shard
numbers them the same way, a replayed micro-batch (Spark sources are replayable) gets the same
numbers, and ingress then sees a stream like any other.

Out: the query's packed output rows unpacked by a ``mapInArrow`` into one row per event or
CTI (``OUTPUT_COLUMNS``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

from cti.engine.batch import IN_ARROW, routed
from cti.engine.route import QueryRoute
from cti.io.dataframes import ORDER, input_rows
from cti.runtime.spark.packing import pack_unnumbered, unpack_output
from cti.runtime.spark.partitioning import shard_slots
from cti.runtime.spark.source import PACKED_SCHEMA
from cti.runtime.spark.worker import settle

OUTPUT_COLUMNS = "release long, kind string, start long, end long, payload string"


def packed_frame(stream: Any, group: int, index: int, routes: Sequence[QueryRoute]
                 ) -> DataFrame:
    """A DataFrame input's rows, packed for the query shards (``PACKED_SCHEMA``)."""
    if not stream.config.streaming:
        raise TypeError(f"stream {stream.name!r} reads a batch DataFrame: on SparkRuntime give "
                        "a streaming one (spark.readStream...), or run on LocalRuntime")
    rows = input_rows(stream.config, stream.name, stream.shape, index)
    return rows.mapInArrow(partial(_pack, list(routes), group), PACKED_SCHEMA)


def _pack(routes: list[QueryRoute], group: int, batches: Iterator[pa.RecordBatch]
          ) -> Iterator[pa.RecordBatch]:
    settle("pack")
    for batch in batches:
        if not batch.num_rows:
            continue
        table = pa.Table.from_batches([batch])
        rows = pa.table({f.name: table.column(f.name).cast(f.type) for f in IN_ARROW},
                        schema=IN_ARROW)
        order = table.select([c for c in table.column_names if c.startswith(ORDER)])
        out: dict[str, list] = {"query": [], "slot": [], "group": [], "seq": [], "blob": []}
        for route in routes:
            if group in route.groups:
                slots = shard_slots(route.query, route.shards, route.shards)
                for shard, part in routed(route, group, rows):
                    for name, value in (("query", route.query), ("slot", slots[shard]),
                                        ("group", group), ("seq", -1),
                                        ("blob", pack_unnumbered(part, order))):
                        out[name].append(value)
        yield pa.RecordBatch.from_pydict(out, schema=_PACKED_ARROW)


_PACKED_ARROW = pa.schema([("query", pa.int32()), ("slot", pa.int32()), ("group", pa.int32()),
                           ("seq", pa.int64()), ("blob", pa.binary())])


def output_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Packed output blobs (one column) as output rows (``OUTPUT_COLUMNS``)."""
    settle("output")
    for batch in batches:
        yield from unpack_output(batch.column(0).to_pylist()).to_batches()
