"""Input adapters as one Spark streaming source (PySpark Python Data Source API).

One source reads every stream of a query: its options carry the pickled list of streams
(group, index in group, factory, config, shape). The driver asks each adapter how far its input
goes (``latestOffset``: one entry per stream), executors re-create the adapters and read the
rows of their offset ranges (one partition per stream with new rows), so a micro-batch can be
replayed after a failure. When a bounded adapter (``is_complete()``) is exhausted, its last
batch ends with an end-of-input row, where ingress flushes at shutdown. Factories are pickled
with cloudpickle, so classes defined in a script or notebook work too.
"""

from __future__ import annotations

import base64
import pickle
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import IntegerType, StructField, StructType

from cti.rows import eos_row
from cti.runtime.local import read_rows
from cti.runtime.spark.packing import PACKED_SCHEMA, QueryRoute, pack, routed
from cti.runtime.spark.schema import IN_SCHEMA, arrow_schema, in_row_to_tuple

FORMAT = "cti_adapter"
READ_CHUNK = 250_000  # rows per input partition of one stream

SourceStream = tuple[int, int, Any, Any, Any]  # group, index in group, factory, config, shape


def encode_sources(streams: Sequence[SourceStream], batch_sizes: Sequence[int] | None,
                   routes: Sequence[QueryRoute] | None = None) -> str:
    """The source's ``spec`` option. With ``routes`` the source reads for queries: it sends
    each query shard packed rows (``cti.runtime.spark.packing``), else one row per input row."""
    blob = cloudpickle.dumps((list(streams), list(batch_sizes or []), routes))
    return base64.b64encode(blob).decode("ascii")


def _decode(text: str) -> tuple[list[SourceStream], list[int], list[QueryRoute] | None]:
    return pickle.loads(base64.b64decode(text))


class _Range(InputPartition):
    def __init__(self, stream: int, start: int, end: int, eos: bool) -> None:
        super().__init__((stream, start, end, eos))


class CtiAdapterStreamReader(DataSourceStreamReader):
    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.streams, self.batch_sizes, _ = _decode(spec)

    def initialOffset(self) -> dict:
        return {"batch": 0, **{str(k): {"pos": 0, "eos": False} for k in range(len(self.streams))}}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        start = start or self.initialOffset()
        size = self.batch_sizes[start["batch"] % len(self.batch_sizes)] if self.batch_sizes \
            else None
        end: dict[str, Any] = {"batch": start["batch"]}
        moved = False
        for k, (_g, _i, factory, config, shape) in enumerate(self.streams):
            s = start[str(k)]
            if s["eos"]:
                end[str(k)] = s
                continue
            adapter = factory.create(config, shape)
            available = adapter.latest_offset()
            pos = available if size is None else min(available, s["pos"] + size)
            eos = pos == available and adapter.is_complete()
            end[str(k)] = {"pos": pos, "eos": eos}
            moved = moved or pos != s["pos"] or eos
        if not moved:
            return start
        end["batch"] += 1
        return end

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        parts: list[InputPartition] = []
        for k in range(len(self.streams)):
            s, e = start[str(k)], end[str(k)]
            if e["pos"] > s["pos"] or (e["eos"] and not s["eos"]):
                # Large ranges are read in pieces, in parallel (rows carry their sequence
                # numbers, so ingress restores the order); end of input rides on the last.
                cuts = list(range(s["pos"], e["pos"], READ_CHUNK)) or [s["pos"]]
                for a, b in zip(cuts, [*cuts[1:], e["pos"]], strict=True):
                    last = b == e["pos"]
                    parts.append(_Range(k, a, b, last and e["eos"] and not s["eos"]))
        return parts

    def read(self, partition: InputPartition) -> Iterator[tuple | pa.RecordBatch]:
        streams, _, routes = _decode(self.spec)
        k, start, end, eos = partition.value
        group, index, factory, config, shape = streams[k]
        adapter = factory.create(config, shape) if end > start else None
        if routes is not None:
            yield from _packed(routes, group, _piece(adapter, index, start, end, eos), start)
            return
        if hasattr(adapter, "read_frame"):  # a columnar adapter: Arrow batches, no row loop
            yield from _with_group(_piece(adapter, index, start, end, eos), group).to_batches()
            return
        if adapter is not None:
            for row in read_rows(index, adapter, start, end):
                yield (*in_row_to_tuple(row), group)
        if eos:
            yield (*in_row_to_tuple(eos_row(index, end)), group)

    def commit(self, end: dict) -> None:
        pass


def _piece(adapter: Any, index: int, start: int, end: int, eos: bool) -> pa.Table:
    """Input rows [start, end) of stream ``index`` (and its end of input) as an Arrow table of
    ``IN_SCHEMA`` columns."""
    tables = []
    if hasattr(adapter, "read_frame"):
        tables.append(_in_table(adapter.read_frame(start, end), index, start))
    elif adapter is not None:
        rows = [in_row_to_tuple(r) for r in read_rows(index, adapter, start, end)]
        columns = list(zip(*rows, strict=True)) if rows else [[] for _ in IN_SCHEMA.fields]
        tables.append(pa.table(dict(zip(IN_SCHEMA.fieldNames(), columns, strict=True)),
                               schema=_IN_ARROW))
    if eos:
        row = in_row_to_tuple(eos_row(index, end))
        tables.append(pa.table({k: [v] for k, v in zip(IN_SCHEMA.fieldNames(), row,
                                                       strict=True)}, schema=_IN_ARROW))
    return pa.concat_tables(tables) if tables else _IN_ARROW.empty_table()


def _in_table(frame: pa.Table, index: int, first_seq: int) -> pa.Table:
    """A columnar adapter's rows (``read_frame``: kind, start, end, payload, arrival,
    partition, error) as ``IN_SCHEMA`` columns."""
    n = frame.num_rows
    return pa.table({
        "stream": np.full(n, index, np.int32),
        "seq": np.arange(first_seq, first_seq + n, dtype=np.int64),
        **{f.name: frame.column(f.name).cast(f.type) for f in _IN_ARROW
           if f.name not in ("stream", "seq")},
    }, schema=_IN_ARROW)


def _with_group(table: pa.Table, group: int) -> pa.Table:
    return table.append_column(pa.field("group", pa.int32(), nullable=False),
                               pa.array(np.full(table.num_rows, group, np.int32)))


def _packed(routes: Sequence[QueryRoute], group: int, rows: pa.Table, first_seq: int
            ) -> Iterator[tuple]:
    """A piece of a group's input as one packed row per shard of each query reading it."""
    for route in routes:
        if group in route.groups:
            for shard, part in routed(route, group, rows):
                yield route.query, shard, group, first_seq, pack(part)


class CtiAdapterSource(DataSource):
    """``spark.readStream.format("cti_adapter").option("spec", encode_sources(...)).load()``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> Any:
        return PACKED_SCHEMA if _decode(self.options["spec"])[2] is not None else SOURCE_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return CtiAdapterStreamReader(self.options["spec"])


SOURCE_SCHEMA = StructType([*IN_SCHEMA.fields, StructField("group", IntegerType(), False)])
_IN_ARROW = arrow_schema(IN_SCHEMA)
