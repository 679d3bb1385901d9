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
           events_only: bool = False) -> Iterator[tuple]:
    """A piece of a group's input as one packed row per shard of each query reading it
    (``PACKED_SCHEMA``); ``events_only``: see ``routed``."""
    for route in routes:
        if group in route.groups:
            slots = shard_slots(route.query, route.shards, route.shards)
            for shard, part in routed(route, group, rows, events_only):
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
    return _ipc(ordered_table(step_table(events, ctis)))


def pack_rows(rows: pa.Table) -> bytes:
    """Output rows (``OUTPUT_ARROW``) as one packed blob, as they come (on their way to a
    stage that orders them itself), their chunks kept."""
    return _ipc(rows)


def unpack_output(blobs: Iterable[bytes]) -> pa.Table:
    """The output rows of packed output blobs (``pack_output``), one table."""
    tables = [_output_table(pa.ipc.open_stream(b).read_all()) for b in blobs]
    return pa.concat_tables(tables) if tables else OUTPUT_ARROW.empty_table()


def _output_table(table: pa.Table) -> pa.Table:
    """A table of output rows as ``OUTPUT_ARROW`` (cast only where its schema differs)."""
    return table if table.schema == OUTPUT_ARROW else table.cast(OUTPUT_ARROW)


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_COMPRESSED) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


_ARROW = ROUTED_ARROW
_KIND = pa.field("kind", pa.dictionary(pa.int8(), pa.string()), nullable=False)
_STEP = pa.field("seq_step", pa.int32(), nullable=False)
