"""Input adapters as one Spark streaming source (PySpark Python Data Source API).

One source reads every stream of a query: its options carry the pickled list of streams
(group, index in group, factory, config, shape). The driver asks each adapter how far its input
goes (``latestOffset``: one entry per stream), executors re-create the adapters and read the
rows of their offset ranges (each stream's new rows cut into pieces, ``cuts``), so a micro-batch
can be replayed after a failure. When a bounded adapter (``is_complete()``) is exhausted, its last
batch ends with an end-of-input row, where ingress flushes at shutdown. Factories are pickled
with cloudpickle, so classes defined in a script or notebook work too.
"""

from __future__ import annotations

import base64
import pickle
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

from cti.rows import eos_row
from cti.runtime.spark.schema import IN_SCHEMA, in_row_to_tuple

FORMAT = "cti_adapter"
READ_CHUNK = 500_000  # at most this many rows per input partition of one stream
MIN_PIECE = 10_000  # a range is not cut into pieces smaller than this to fill the cores

SourceStream = tuple[int, int, Any, Any, Any]  # group, index in group, factory, config, shape


def encode_sources(streams: Sequence[SourceStream], batch_sizes: Sequence[int] | None,
                   routes: Sequence[QueryRoute] | None = None, cores: int = 1) -> str:
    """The source's ``spec`` option. With ``routes`` the source reads for queries: it sends
    each query shard packed rows (``cti.runtime.spark.packing``), else one row per input row.
    ``cores``: how many read tasks can run at once (a large range is cut into a multiple)."""
    blob = cloudpickle.dumps((list(streams), list(batch_sizes or []), routes, max(1, cores)))
    return base64.b64encode(blob).decode("ascii")


def _decode(text: str) -> tuple[list[SourceStream], list[int], list[QueryRoute] | None, int]:
    return pickle.loads(base64.b64decode(text))


def cuts(start: int, end: int, cores: int) -> list[int]:
    """Where rows [start, end) are cut into pieces read in parallel: pieces of at most
    ``READ_CHUNK`` rows, as many as a multiple of ``cores`` where that leaves each at least
    ``MIN_PIECE`` rows, of equal size. ``[start]`` for an empty range."""
    n = end - start
    needed = max(1, -(-n // READ_CHUNK))
    pieces = min(-(-needed // cores) * cores, max(needed, n // MIN_PIECE))
    return sorted({start + n * p // pieces for p in range(pieces)})


class _Range(InputPartition):
    def __init__(self, stream: int, start: int, end: int, eos: bool) -> None:
        super().__init__((stream, start, end, eos))


class CtiAdapterStreamReader(DataSourceStreamReader):
    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.streams, self.batch_sizes, _, self.cores = _decode(spec)

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
                at = cuts(s["pos"], e["pos"], self.cores)
                for a, b in zip(at, [*at[1:], e["pos"]], strict=True):
                    last = b == e["pos"]
                    parts.append(_Range(k, a, b, last and e["eos"] and not s["eos"]))
        return parts

    def read(self, partition: InputPartition) -> Iterator[tuple | Any]:
        streams, _, routes, _ = _decode(self.spec)
        k, start, end, eos = partition.value
        group, index, factory, config, shape = streams[k]
        adapter = factory.create(config, shape) if end > start else None
        # Executor side only: the driver's source process never imports pandas or pyarrow.
        from cti.runtime.local import read_rows
        from cti.runtime.spark.packing import packed, piece, with_group

        if routes is not None:
            yield from packed(routes, group, piece(adapter, index, start, end, eos), start)
            return
        if hasattr(adapter, "read_frame"):  # a columnar adapter: Arrow batches, no row loop
            yield from with_group(piece(adapter, index, start, end, eos), group).to_batches()
            return
        if adapter is not None:
            for row in read_rows(index, adapter, start, end):
                yield (*in_row_to_tuple(row), group)
        if eos:
            yield (*in_row_to_tuple(eos_row(index, end)), group)

    def commit(self, end: dict) -> None:
        pass


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
PACKED_SCHEMA = StructType([
    StructField("query", IntegerType(), False),
    StructField("shard", IntegerType(), False),
    StructField("group", IntegerType(), False),
    StructField("seq", LongType(), False),  # the piece's first sequence number
    StructField("blob", BinaryType(), False),
])


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
