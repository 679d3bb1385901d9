"""Input rows routed to query shards in the source, many to a Spark row.

A Spark row costs about the same whatever it holds (shuffle, sort, Arrow conversion), so the
source of a query does not hand Spark one row per event: for each piece of input it reads, it
sends each shard of each query that reads the stream ONE row holding all the piece's rows as
an Arrow IPC stream (``blob``). The routing is done there, column-wise: each event's owning
shard (``own``: the hash of the key the query is spread by, modulo the number of shards; -1 for
streams the query does not read), and the payload only where the shard needs it (the owner;
every shard for edge streams, since an edge end finds its start by payload; shard 0 too when it
passes the input through).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable

import attrs
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

from cti.rows import payload_from_json
from cti.runtime.spark.schema import IN_SCHEMA, arrow_schema

PACKED_SCHEMA = StructType([
    StructField("query", IntegerType(), False),
    StructField("shard", IntegerType(), False),
    StructField("group", IntegerType(), False),
    StructField("seq", LongType(), False),  # the piece's first sequence number
    StructField("blob", BinaryType(), False),
])


@attrs.frozen
class QueryRoute:
    """Where one query's input rows go: ``fields[(group, stream)]`` is the payload field that
    spreads the stream over ``shards`` (None: shard 0 owns every event) for each stream the
    query reads; ``edges`` are the edge streams of the groups it reads."""

    query: int
    shards: int
    fields: dict[tuple[int, int], str | None]
    edges: frozenset[tuple[int, int]]
    with_inputs: bool

    @property
    def groups(self) -> set[int]:
        return {g for g, _ in self.fields}


def key_shards(payloads: pa.Array, field: str, shards: int) -> np.ndarray:
    """The shard of each payload's ``field`` value (JSON text, not null): a hash of the value's
    JSON, the same in every process, so equal values meet in one shard."""
    values = _exact_values(payloads, field)
    if values is not None:  # Arrow's parse: one JSON text per distinct value
        encoded = values.dictionary_encode()
        texts = [json.dumps(v) for v in encoded.dictionary.to_pylist()]
        codes = encoded.indices.fill_null(len(texts)).to_numpy(zero_copy_only=False)
        texts.append("null")
    else:  # row by row (1, 1.0 and True are equal in Python, not in JSON)
        texts = [json.dumps(payload_from_json(p).get(field), sort_keys=True)
                 for p in payloads.to_pylist()]
        codes = np.arange(len(texts))
    shard = np.asarray([zlib.crc32(t.encode()) % shards for t in texts], np.int32)
    return shard[codes]


def _exact_values(payloads: pa.Array, field: str) -> pa.Array | None:
    """``field`` of each JSON payload by Arrow's JSON reader, where its values come out as
    strings, integers or booleans (then they equal ``json.loads``'s); else None."""
    if not len(payloads):
        return None
    lines = pc.binary_join_element_wise(payloads, "\n", "")
    offsets = np.frombuffer(lines.buffers()[1], np.int32)
    body = lines.buffers()[2][int(offsets[lines.offset]):int(offsets[lines.offset + len(lines)])]
    try:
        table = pa_json.read_json(pa.BufferReader(body))
    except pa.ArrowInvalid:
        return None
    if table.num_rows != len(payloads):
        return None
    if field not in table.column_names:
        return pa.nulls(len(payloads), pa.string())
    column = table.column(field).combine_chunks()
    return column if column.type in (pa.string(), pa.int64(), pa.bool_()) else None


def routed(route: QueryRoute, group: int, rows: pa.Table) -> Iterable[tuple[int, pa.Table]]:
    """One piece of a group's input rows (``IN_SCHEMA`` columns), for each shard of the query:
    the rows with ``own`` set and payloads kept only where that shard needs them."""
    stream = rows.column("stream").to_numpy()
    kind = rows.column("kind").combine_chunks()
    payload = rows.column("payload").combine_chunks()
    own = np.full(rows.num_rows, -1, np.int32)
    edge = np.zeros(rows.num_rows, bool)
    has_payload = payload.is_valid().to_numpy(zero_copy_only=False)
    for (g, i), field in route.fields.items():
        mine = (stream == i) & (g == group) & has_payload
        if not mine.any():
            continue
        own[mine] = 0 if field is None or route.shards == 1 else key_shards(
            payload.filter(pa.array(mine)), field, route.shards)
    for g, i in route.edges:
        edge |= (stream == i) & (g == group)
    shared = edge | ~pc.is_in(kind, pa.array(["point", "interval"])).to_numpy(
        zero_copy_only=False)
    with_own = rows.append_column(_ARROW.field("own"), pa.array(own))
    at = with_own.schema.get_field_index("payload")
    for shard in range(route.shards):
        keep = shared | (own == shard) | (route.with_inputs and shard == 0)
        yield shard, with_own.set_column(at, _ARROW.field("payload"),
                                         pc.if_else(pa.array(keep), payload, None))


_COMPRESSED = pa.ipc.IpcWriteOptions(compression="lz4")  # a quarter of the bytes to shuffle


def pack(rows: pa.Table) -> bytes:
    """Rows (``IN_SCHEMA`` columns and ``own``) as an Arrow IPC stream (LZ4 buffers)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, _ARROW, options=_COMPRESSED) as writer:
        writer.write_table(rows.cast(_ARROW))
    return sink.getvalue().to_pybytes()


def unpack(packed: pd.DataFrame) -> pd.DataFrame:
    """The rows of packed Spark rows (``PACKED_SCHEMA``), with their ``group``."""
    tables = []
    for group, blob in zip(packed["group"], packed["blob"], strict=True):
        table = pa.ipc.open_stream(blob).read_all()
        tables.append(table.append_column("group", pa.array(
            np.full(table.num_rows, group, np.int32))))
    if not tables:
        return _ARROW.empty_table().to_pandas().assign(group=np.int32(0))
    return pa.concat_tables(tables).to_pandas()


_ARROW = arrow_schema(StructType([*IN_SCHEMA.fields, StructField("own", IntegerType(), False)]))
