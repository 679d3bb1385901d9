"""Input rows routed to query shards in the source, many to a Spark row; and a shard's output
rows, many to a Spark row, on their way to the sink.

A Spark row costs about the same whatever it holds (shuffle, sort, Arrow conversion), so the
source of a query does not hand Spark one row per event: for each piece of input it reads, it
sends each shard of each query that reads the stream ONE row holding all the piece's rows as
an Arrow IPC stream (``blob``). The routing is done there, column-wise: each event's owning
shard (``own``: the hash of the key the query is spread by, modulo the number of shards; -1 for
streams the query does not read), and the payload only where the shard needs it (the owner;
every shard for edge streams, since an edge end finds its start by payload; shard 0 too when it
passes the input through). For the same reason a shard's released events and CTIs of a
micro-batch leave its stateful function as one row (``pack_output``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import IntegerType, StructField, StructType

from cti.adapters import FIELD_COLUMN
from cti.io.dataframes import key_order
from cti.operators.frame import arrow_to_pandas, dense_codes, exact_field
from cti.operators.output import OUTPUT_ARROW, step_table
from cti.rows import clock_row, eos_row, payload_from_json
from cti.runtime.local import read_rows
from cti.runtime.spark.route import QueryRoute
from cti.runtime.spark.schema import IN_SCHEMA, arrow_schema, in_row_to_tuple


def piece(adapter: Any, index: int, start: int, end: int, eos: bool,
          tick: int | None = None) -> pa.Table:
    """Input rows [start, end) of stream ``index`` (and its end of input, and its recorded
    clock tick ``tick``) as an Arrow table of ``IN_SCHEMA`` columns, and the ``field:`` columns
    a columnar adapter gives (null on rows that have none, such as the end-of-input row). The
    clock and end-of-input rows are no events: ``routed`` sends them to every shard."""
    columnar = hasattr(adapter, "read_frame")
    tables = [_in_table(adapter.read_frame(start, end), index, start)] if columnar else []
    rows = [] if columnar or adapter is None else [
        in_row_to_tuple(r) for r in read_rows(index, adapter, start, end)]
    if eos:
        rows.append(in_row_to_tuple(eos_row(index, end)))
    if tick is not None:
        rows.append(in_row_to_tuple(clock_row(index, end, tick)))
    if rows:
        tables.append(pa.table(dict(zip(IN_SCHEMA.fieldNames(), zip(*rows, strict=True),
                                        strict=True)), schema=_IN_ARROW))
    if not tables:
        return _IN_ARROW.empty_table()
    return pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]


def _in_table(frame: pa.Table, index: int, first_seq: int) -> pa.Table:
    """A columnar adapter's rows (``read_frame``: kind, start, end, payload, arrival,
    partition, error, and maybe ``field:`` columns) as ``IN_SCHEMA`` columns and those."""
    n = frame.num_rows
    fields = [name for name in frame.column_names if name.startswith(FIELD_COLUMN)]
    return pa.table({
        "stream": np.full(n, index, np.int32),
        "seq": np.arange(first_seq, first_seq + n, dtype=np.int64),
        **{f.name: frame.column(f.name).cast(f.type) for f in _IN_ARROW
           if f.name not in ("stream", "seq")},
        **{name: frame.column(name).cast(pa.string()) for name in fields},
    }, schema=pa.schema([*_IN_ARROW, *(pa.field(name, pa.string()) for name in fields)]))


def with_group(table: pa.Table, group: int) -> pa.Table:
    """A piece's ``IN_SCHEMA`` columns and its ``group``."""
    return table.select(_IN_ARROW.names).append_column(
        pa.field("group", pa.int32(), nullable=False),
        pa.array(np.full(table.num_rows, group, np.int32)))


def packed(routes: Sequence[QueryRoute], group: int, rows: pa.Table, first_seq: int
            ) -> Iterator[tuple]:
    """A piece of a group's input as one packed row per shard of each query reading it
    (``PACKED_SCHEMA``)."""
    for route in routes:
        if group in route.groups:
            for shard, part in routed(route, group, rows):
                yield route.query, shard, group, first_seq, pack(part, first_seq)


def key_shards(payloads: pa.Array, field: str, shards: int, texts: pa.Array | None = None
               ) -> np.ndarray:
    """The shard of each payload's ``field`` value (JSON text, not null): a hash of the value's
    JSON, the same in every process, so equal values meet in one shard. ``texts``: the value's
    JSON text per row where the adapter gave it (null: not given; maybe dictionary-encoded
    already), so its payload is not read.
    """
    if texts is not None and texts.null_count:  # some rows without: read those payloads
        given = texts.is_valid()
        out = np.empty(len(payloads), np.int32)
        mask = given.to_numpy(zero_copy_only=False)
        out[mask] = key_shards(payloads.filter(given), field, shards, texts.filter(given))
        out[~mask] = key_shards(payloads.filter(pc.invert(given)), field, shards)
        return out
    if texts is not None:  # the value's own JSON text: one per distinct value
        encoded = texts.dictionary_encode()  # (itself, if it is encoded)
        distinct = encoded.dictionary
        codes = encoded.indices.to_numpy(zero_copy_only=False)
    elif (values := exact_field(payloads, field)) is not None:  # Arrow's parse of the payloads
        encoded = values.dictionary_encode()
        distinct = pa.array([json.dumps(v) for v in encoded.dictionary.to_pylist()] + ["null"],
                            pa.string())
        codes = encoded.indices.fill_null(len(distinct) - 1).to_numpy(zero_copy_only=False)
    else:  # row by row (1, 1.0 and True are equal in Python, not in JSON)
        distinct = pa.array([json.dumps(payload_from_json(p).get(field), sort_keys=True)
                             for p in payloads.to_pylist()], pa.string())
        codes = np.arange(len(distinct))
    return (text_hashes(distinct) % np.uint64(shards)).astype(np.int32)[codes]


def text_hashes(texts: pa.Array) -> np.ndarray:
    """A 64-bit hash of each string's UTF-8 bytes (not null), the same in every process:
    the bytes as a polynomial (wrapping), and the length, through MurmurHash3's 64-bit
    finaliser so that every bit depends on every byte. Vectorised: no Python per text."""
    texts = texts.cast(pa.large_string())
    offsets = np.frombuffer(texts.buffers()[1], np.int64)[
        texts.offset:texts.offset + len(texts) + 1]
    data = np.frombuffer(texts.buffers()[2] or b"", np.uint8)[offsets[0]:offsets[-1]]
    lengths = np.diff(offsets)
    starts = offsets[:-1] - offsets[0]
    h = lengths.astype(np.uint64)
    with np.errstate(over="ignore"):
        if len(data):
            powers = np.cumprod(np.full(int(lengths.max()), _MULTIPLIER, np.uint64))
            within = np.arange(len(data)) - np.repeat(starts, lengths)
            weighted = data.astype(np.uint64) * powers[within]
            filled = lengths > 0  # reduceat's segment of a text runs to the next one's start
            h[filled] += np.add.reduceat(weighted, starts[filled])
        for shift, factor in _FMIX64:
            h ^= h >> np.uint64(shift)
            if factor:
                h *= np.uint64(factor)
    return h


_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd: the golden ratio's 64-bit fraction
_FMIX64 = ((33, 0xFF51AFD7ED558CCD), (33, 0xC4CEB9FE1A85EC53), (33, 0))


def owners(payloads: pa.Array, field: str | None, shards: int,
           texts: pa.Array | None = None) -> np.ndarray:
    """The shard that owns each event, by its payload (not null): the hash of its ``field``
    value (``key_shards``), or shard 0 when the query is not spread (``field`` None, one
    shard)."""
    if field is None or shards == 1:
        return np.zeros(len(payloads), np.int32)
    return key_shards(payloads, field, shards, texts)


def routed(route: QueryRoute, group: int, rows: pa.Table) -> Iterable[tuple[int, pa.Table]]:
    """One piece of a group's input rows (``IN_SCHEMA`` columns), for each shard of the query:
    the rows with ``own`` set, payloads kept only where that shard needs them, and ``text``,
    the JSON text of the field that spreads the query, on the shard's own events where the
    adapter gave it (so the shard need not read it from the payloads again)."""
    stream = rows.column("stream").to_numpy()
    kind = rows.column("kind").combine_chunks()
    payload = rows.column("payload").combine_chunks()
    n = rows.num_rows
    own = np.full(n, -1, np.int32)
    text_codes, dictionaries = np.full(n, -1, np.int32), []
    edge = np.zeros(n, bool)
    has_payload = payload.is_valid().to_numpy(zero_copy_only=False)
    for (g, i), field in route.fields.items():
        mine = (stream == i) & (g == group) & has_payload
        if not mine.any():
            continue
        given = FIELD_COLUMN + (field or "")
        texts = (rows.column(given).combine_chunks().filter(pa.array(mine)).dictionary_encode()
                 if given in rows.column_names else None)
        own[mine] = owners(payload.filter(pa.array(mine)), field, route.shards, texts)
        if texts is not None and field is not None:
            codes = texts.indices.fill_null(-1).to_numpy(zero_copy_only=False)
            text_codes[mine] = np.where(codes >= 0, codes + sum(map(len, dictionaries)), -1)
            dictionaries.append(texts.dictionary)
    dictionary = (pa.concat_arrays(dictionaries) if dictionaries
                  else pa.array([], pa.string()))
    for g, i in route.edges:
        edge |= (stream == i) & (g == group)
    shared = edge | ~pc.is_in(kind, pa.array(["point", "interval"])).to_numpy(
        zero_copy_only=False)
    with_own = rows.select(_IN_ARROW.names).append_column(_ARROW.field("own"), pa.array(own))
    at = with_own.schema.get_field_index("payload")
    for shard in range(route.shards):
        keep = shared | (own == shard) | (route.with_inputs and shard == 0)
        yield shard, with_own.set_column(at, _ARROW.field("payload"), pc.if_else(
            pa.array(keep), payload, None)).append_column(
            _ARROW.field("text"), _shard_texts(text_codes, dictionary, own == shard))


def _shard_texts(codes: np.ndarray, dictionary: pa.Array, mine: np.ndarray
                 ) -> pa.DictionaryArray:
    """The texts of the ``mine`` rows (code -1: none), with the dictionary of those alone."""
    mine = mine & (codes >= 0)
    renumbered, used = dense_codes(codes[mine])
    indices = np.zeros(len(codes), np.int32)
    indices[mine] = renumbered
    return pa.DictionaryArray.from_arrays(pa.array(indices, mask=~mine),
                                          dictionary.take(pa.array(used, pa.int64())))


_COMPRESSED = pa.ipc.IpcWriteOptions(compression="lz4")  # a quarter of the bytes to shuffle


def pack(rows: pa.Table, first_seq: int) -> bytes:
    """Rows (``IN_SCHEMA`` columns, ``own`` and maybe ``text``) as an Arrow IPC stream (LZ4
    buffers). Fewer bytes for Spark to carry: ``kind`` (a few distinct values) travels
    dictionary-encoded, and ``seq`` not at all where it counts up from ``first_seq`` (the
    packed row's ``seq``), as it does for a columnar adapter's rows."""
    if "text" not in rows.column_names:
        rows = rows.append_column(_ARROW.field("text"), pa.nulls(rows.num_rows, _TEXT))
    rows = rows.cast(_ARROW)
    seq = rows.column("seq").to_numpy()
    if len(seq) and seq[0] == first_seq and (np.diff(seq) == 1).all():
        rows = rows.drop_columns(["seq"])
    at = rows.schema.get_field_index("kind")
    return _ipc(rows.set_column(at, _KIND, rows.column("kind").dictionary_encode().cast(
        _KIND.type)))


def unpack(packed: pd.DataFrame, next_seq: Callable[[int, int], int] | None = None
           ) -> pd.DataFrame:
    """The rows of packed Spark rows (``PACKED_SCHEMA``), with their ``group``. A DataFrame
    input's pieces (``seq`` -1) are numbered here (``sequenced``), from ``next_seq(group,
    stream)``, the stream's next sequence number."""
    tables, unnumbered = [], {}
    for group, first, blob in zip(packed["group"], packed["seq"], packed["blob"], strict=True):
        table = pa.ipc.open_stream(blob).read_all()
        if first < 0:
            unnumbered.setdefault((int(group), table.column("stream")[0].as_py()),
                                  []).append(table)
            continue
        if "seq" not in table.column_names:
            table = table.append_column("seq", pa.array(
                np.arange(first, first + table.num_rows, dtype=np.int64)))
        tables.append(table.select(_ARROW.names).cast(_ARROW).append_column(
            "group", pa.array(np.full(table.num_rows, group, np.int32))))
    for (group, stream), pieces in unnumbered.items():
        if next_seq is None:
            raise ValueError("unpack: DataFrame pieces need next_seq")
        table = sequenced(pa.concat_tables(pieces), next_seq(group, stream))
        tables.append(table.append_column(
            "group", pa.array(np.full(table.num_rows, group, np.int32))))
    if not tables:
        return _ARROW.empty_table().to_pandas().assign(group=np.int32(0))
    return arrow_to_pandas(pa.concat_tables(tables))


def sequenced(rows: pa.Table, first_seq: int) -> pa.Table:
    """One micro-batch of a DataFrame input's rows (``_ARROW`` columns and the sort key's
    ``order:`` columns, any order), in the order of the sort key and numbered from
    ``first_seq``: every shard, and a replay, numbers them the same way."""
    rows = rows.take(key_order(rows)).select(_ARROW.names)
    seq = pa.array(np.arange(first_seq, first_seq + rows.num_rows, dtype=np.int64))
    return rows.set_column(rows.schema.get_field_index("seq"), "seq", seq).cast(_ARROW)


def pack_unnumbered(rows: pa.Table, order: pa.Table) -> bytes:
    """A piece of a DataFrame input's rows for one shard (``routed``), with their sort key
    (``order:`` columns), unnumbered (the packed row's ``seq`` is -1)."""
    rows = rows.cast(_ARROW)
    for name in order.column_names:
        rows = rows.append_column(name, order.column(name))
    return _ipc(rows)


def pack_output(events: pd.DataFrame, ctis: Sequence[int]) -> bytes | None:
    """A shard's released events (with ``release``) and output CTIs of one step as ONE Arrow
    IPC stream (``output.step_table``), so Spark carries one row per shard and step, not one
    per result (each result row cost Spark more than the shard's whole work on it); None when
    there is nothing."""
    return _ipc(step_table(events, ctis)) if len(events) + len(ctis) else None


def unpack_output(blobs: Iterable[bytes]) -> pa.Table:
    """The output rows of packed output blobs (``pack_output``), one table."""
    tables = [pa.ipc.open_stream(b).read_all().cast(OUTPUT_ARROW) for b in blobs]
    return pa.concat_tables(tables) if tables else OUTPUT_ARROW.empty_table()


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_COMPRESSED) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


_TEXT = pa.dictionary(pa.int32(), pa.string())  # the spreading field's JSON text (``routed``)
_ARROW = pa.schema([*arrow_schema(StructType([*IN_SCHEMA.fields,
                                              StructField("own", IntegerType(), False)])),
                    pa.field("text", _TEXT)])
_IN_ARROW = arrow_schema(IN_SCHEMA)
_KIND = pa.field("kind", pa.dictionary(pa.int8(), pa.string()), nullable=False)
