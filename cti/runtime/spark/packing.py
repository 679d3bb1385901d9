"""Input rows routed to query shards in the source, many to a Spark row; and a shard's output
rows, many to a Spark row, on their way to the sink.

A Spark row costs about the same whatever it holds (shuffle, sort, Arrow conversion), so the
source of a query does not hand Spark one row per event: for each piece of input it reads, it
sends each shard of each query that reads the stream ONE row holding all the piece's rows as
an Arrow IPC stream (``blob``), routed there column-wise (``cti.engine.batch.routed``: each
event's owning shard, and the payload only where the shard needs it). For the same reason a
shard's released events and CTIs of a micro-batch leave its stateful function as one row
(``pack_output``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cti.adapters import FIELD_COLUMN
from cti.engine.batch import ROUTED_ARROW, routed, routed_cast, routed_frame, text_rows
from cti.engine.route import QueryRoute
from cti.io.dataframes import key_order
from cti.operators.output import OUTPUT_ARROW, ordered_table, step_table
from cti.runtime.spark.partitioning import shard_slots


def with_group(table: pa.Table, group: int) -> pa.Table:
    """A piece's ``IN_ARROW`` columns (its payloads' text written: ``text_rows``) and its
    ``group``."""
    return text_rows(table).append_column(
        pa.field("group", pa.int32(), nullable=False),
        pa.array(np.full(table.num_rows, group, np.int32)))


def packed(routes: Sequence[QueryRoute], group: int, rows: pa.Table, first_seq: int,
           events_only: bool = False, in_order: Callable[[], bool] = lambda: False
           ) -> Iterator[tuple]:
    """A piece of a group's input as one packed row per shard of each query reading it
    (``PACKED_SCHEMA``); ``events_only``, ``in_order``: see ``routed``."""
    for route in routes:
        if group in route.groups:
            slots = shard_slots(route.query, route.shards, route.shards)
            for shard, part in routed(route, group, rows, events_only, in_order):
                yield route.query, slots[shard], group, first_seq, pack(part, first_seq)


_COMPRESSED = pa.ipc.IpcWriteOptions(compression="lz4")  # a quarter of the bytes to shuffle


def pack(rows: pa.Table, first_seq: int) -> bytes:
    """Rows (``IN_ARROW`` columns, ``own`` and maybe typed payload columns) as an Arrow IPC
    stream (LZ4 buffers). Fewer bytes for Spark to carry: ``kind`` (a few distinct values)
    and the typed string columns (keys) travel dictionary-encoded, and ``seq`` not at all
    where it counts up from ``first_seq`` (the packed row's ``seq``), as it does for a
    columnar adapter's rows, else as 32-bit steps from one row to the next (``seq_step``: a
    shard's own events, ``cti.ingress.timed``)."""
    rows = routed_cast(rows)
    seq = rows.column("seq").to_numpy()
    steps = np.diff(seq, prepend=first_seq)
    if len(seq) and seq[0] == first_seq and (steps[1:] == 1).all():
        rows = rows.drop_columns(["seq"])
    elif len(seq) and np.abs(steps).max() < 2**31:  # a shard's own events: small steps
        at = rows.schema.get_field_index("seq")
        rows = rows.set_column(at, _STEP, pa.array(steps.astype(np.int32)))
    at = rows.schema.get_field_index("kind")
    rows = rows.set_column(at, _KIND, rows.column("kind").dictionary_encode().cast(_KIND.type))
    for name in rows.column_names:  # a typed string column: keys repeat, so do the others
        if name.startswith(FIELD_COLUMN) and pa.types.is_string(rows.schema.field(name).type):
            at = rows.schema.get_field_index(name)
            rows = rows.set_column(at, name, rows.column(name).dictionary_encode())
    return _ipc(rows)


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
        if _STEP.name in table.column_names:
            table = table.append_column("seq", pa.array(first + np.cumsum(
                table.column(_STEP.name).to_numpy().astype(np.int64))))
        elif "seq" not in table.column_names:
            table = table.append_column("seq", pa.array(
                np.arange(first, first + table.num_rows, dtype=np.int64)))
        tables.append(routed_cast(table).append_column(
            "group", pa.array(np.full(table.num_rows, group, np.int32))))
    for (group, stream), pieces in unnumbered.items():
        if next_seq is None:
            raise ValueError("unpack: DataFrame pieces need next_seq")
        table = sequenced(pa.concat_tables(pieces), next_seq(group, stream))
        tables.append(table.append_column(
            "group", pa.array(np.full(table.num_rows, group, np.int32))))
    if not tables:
        return routed_frame(_ARROW.empty_table(), 0)
    return routed_frame(pa.concat_tables(tables, promote_options="default"))


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
    rows = routed_cast(rows)
    for name in order.column_names:
        rows = rows.append_column(name, order.column(name))
    return _ipc(rows)


def pack_output(events: pd.DataFrame, ctis: Sequence[int]) -> bytes | None:
    """A shard's released events (with ``release``) and output CTIs of one step as ONE Arrow
    IPC stream (``output.step_table``), so Spark carries one row per shard and step, not one
    per result (each result row cost Spark more than the shard's whole work on it); None when
    there is nothing. In output order (``output.ordered_table``): the shards sort their own
    rows in parallel, and Arrow's sort of the sink's task, which orders the shards' rows
    together, takes half the time over sorted runs."""
    if not len(events) + len(ctis):
        return None
    return _ipc(_compact(ordered_table(step_table(events, ctis))))


def pack_rows(rows: pa.Table) -> bytes:
    """Output rows (``OUTPUT_ARROW``) as one packed blob (``_compact``), as they come (on
    their way to a stage that orders them itself)."""
    return _ipc(_compact(rows))


def unpack_output(blobs: Iterable[bytes]) -> pa.Table:
    """The output rows of packed output blobs (``pack_output``, ``pack_rows``), one table:
    the one way to read them (``_compact`` says how they are written)."""
    tables = [_output_table(pa.ipc.open_stream(b).read_all()) for b in blobs]
    return pa.concat_tables(tables) if tables else OUTPUT_ARROW.empty_table()


def _output_table(table: pa.Table) -> pa.Table:
    """A packed table of output rows as ``OUTPUT_ARROW`` (``_compact`` undone)."""
    meta = table.schema.metadata or {}
    if _FIRST + b"start" in meta:
        release = _stepped(table.column("release"), int(meta[_FIRST + b"release"]))
        start = _stepped(table.column("start"), int(meta[_FIRST + b"start"]))
        end = start + table.column("end").to_numpy().astype(np.int64)  # (modulo 2**64)
        table = pa.table([release, table.column("kind"), start, end,
                          table.column("payload")], names=OUTPUT_ARROW.names)
    return table if table.schema == OUTPUT_ARROW else table.cast(OUTPUT_ARROW)


def _stepped(steps: pa.ChunkedArray, first: int) -> np.ndarray:
    """Values written as their steps from the one before (``_steps``), back."""
    values = np.cumsum(steps.to_numpy(), dtype=np.int64)
    values += np.int64(first)  # (modulo 2**64, as the steps were taken)
    return values


def _compact(rows: pa.Table) -> pa.Table:
    """Output rows (``OUTPUT_ARROW``) in fewer bytes for Spark to carry (a shard's two million
    snapshot results: 52.7 MB as they were, LZ4'd): ``kind`` dictionary-encoded, ``release``
    and ``start`` as steps from the row before, ``end`` as its distance from ``start`` (each
    32-bit where the values fit: times in sync-time or output order take small steps), the
    payload texts dictionary-encoded where they repeat (a count per key: thousands of texts
    for millions of rows). Where a time is null the rows go as they are."""
    if not rows.num_rows or any(rows.column(c).null_count for c in ("release", "start", "end")):
        return rows
    start = rows.column("start").to_numpy()
    release, first_release = _steps(rows.column("release").to_numpy())
    steps, first_start = _steps(start)
    with np.errstate(over="ignore"):  # (modulo 2**64: undone the same way)
        length = _narrow(rows.column("end").to_numpy() - start)
    kind = _kind_codes(rows.column("kind"))
    return pa.table([release, kind, steps, length, _repeated(rows.column("payload"))],
                    names=OUTPUT_ARROW.names,
                    metadata={_FIRST + b"release": str(first_release).encode(),
                              _FIRST + b"start": str(first_start).encode()})


def _kind_codes(kinds: pa.ChunkedArray) -> pa.Array:
    """The kinds dictionary-encoded (``_KIND``): over the output's kinds (``_KINDS``), a chunk
    of one kind (a step's events of one shape, its CTIs) by one comparison a row, not hashed;
    by a dictionary of their own where one is not an output kind."""
    codes = []
    for chunk in kinds.chunks:
        one = len(chunk) > 0 and pc.all(pc.equal(chunk, chunk[0])).as_py()
        got = pc.index_in(chunk[:1] if one else chunk, value_set=_KINDS)
        if got.null_count:
            return pc.dictionary_encode(kinds).combine_chunks().cast(_KIND.type)
        got = got.to_numpy().astype(np.int8)
        codes.append(got.repeat(len(chunk)) if one else got)
    return pa.DictionaryArray.from_arrays(pa.array(np.concatenate(codes)), _KINDS)


def _steps(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Each value's step from the one before (the first's 0), and the first value."""
    with np.errstate(over="ignore"):
        return _narrow(np.diff(values, prepend=values[:1])), int(values[0])


def _narrow(values: np.ndarray) -> np.ndarray:
    """32-bit integers where they fit, else as they are."""
    if len(values) and -(1 << 31) <= values.min() and values.max() < 1 << 31:
        return values.astype(np.int32)
    return values


def _repeated(texts: pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Texts dictionary-encoded where at most half of them are distinct (as they come where
    a window wrote them: ``output.step_table``'s ``encoded``), else as they are."""
    if pa.types.is_dictionary(texts.type):  # (one dictionary for all the chunks)
        return texts.unify_dictionaries().combine_chunks()
    encoded = pc.dictionary_encode(texts).combine_chunks()
    return encoded if 2 * len(encoded.dictionary) <= len(texts) else texts


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_COMPRESSED) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


_ARROW = ROUTED_ARROW
_KIND = pa.field("kind", pa.dictionary(pa.int8(), pa.string()), nullable=False)
_STEP = pa.field("seq_step", pa.int32(), nullable=False)
_KINDS = pa.array(["point", "interval", "edge_start", "edge_end", "cti"])  # output rows'
_FIRST = b"cti:first:"  # a compact output table's first value of a column of steps
