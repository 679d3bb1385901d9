"""Table outputs: a stream's events as typed columns, and a Parquet directory sink.

``output_table(rows)`` turns one batch of output rows (``kind``, ``start``, ``end`` in ticks,
``payload`` as canonical JSON text: the Arrow table ``write_table`` receives) into one whose
columns are ``kind``, ``start``, ``end`` (UTC timestamps, microseconds: exactly the ticks; an
open end, ``MAX_TIME``, is null, as is a point's or a start edge's end) and one typed column per
payload field, parsed by Arrow's JSON reader for the whole batch at once (nested objects become
structs). CTIs are punctuation, not rows: they are left out.

``ParquetOutputAdapterFactory`` writes each batch as ``directory/batch-NNNNNNNNNN.parquet``
through a temporary file and a rename, so a replayed batch (same id) replaces its file:
exactly once. ``read_parquet_output(directory)`` reads them back as one table.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
import pyarrow.parquet as pq

from cti.errors import InvalidSettingsError
from cti.events import EventShape
from cti.forms.json_text import json_lines
from cti.io.outputs import OPEN_KINDS, TableOutputAdapter, batch_file
from cti.time import MAX_TIME, MIN_TIME

TIME = pa.timestamp("us", tz="UTC")
ROW_COLUMNS = ("kind", "start", "end")


def _times(ticks: pa.Array, open_end: pa.Array | None = None) -> pa.Array:
    """Ticks as UTC timestamps; the infinities (and ``open_end`` rows) as null."""
    ticks = pa.array(ticks, pa.int64())
    null = pc.or_(pc.equal(ticks, MAX_TIME), pc.equal(ticks, MIN_TIME))
    if open_end is not None:
        null = pc.or_(null, open_end)
    return pc.if_else(null, pa.scalar(None, pa.int64()), ticks).cast(TIME)


def payload_columns(payloads: pa.Array, schema: pa.Schema | None = None) -> pa.Table:
    """The payload JSON texts (one object per row) as typed columns, parsed for all rows at
    once; ``schema`` fixes the types of the fields it names (a table's earlier batches). A
    field that is null in every row becomes a string column (a table cannot store nulls)."""
    if len(payloads) == 0:
        return pa.table({})
    data = json_lines(payloads)
    options = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer") \
        if schema is not None and len(schema) else None
    try:
        table = pajson.read_json(pa.BufferReader(data), parse_options=options,
                                 read_options=pajson.ReadOptions(block_size=data.size + 1))
    except pa.ArrowInvalid as exc:
        raise InvalidSettingsError(f"payloads do not fit the table's columns: {exc}") from None
    return pa.table({name: col.cast(pa.string()) if pa.types.is_null(col.type) else col
                     for name, col in zip(table.column_names, table.columns, strict=True)})


def output_table(rows: pa.Table, schema: pa.Schema | None = None) -> pa.Table:
    """One batch of output rows (``outputs.ROWS_ARROW``; CTIs left out) as a table: kind,
    start, end, payload fields."""
    events = rows.filter(pc.not_equal(rows.column("kind"), "cti"))
    kind = events.column("kind").combine_chunks()
    open_end = pc.is_in(kind, value_set=pa.array(OPEN_KINDS))
    fields = payload_columns(events.column("payload"), _payload_schema(schema))
    clash = [c for c in fields.column_names if c in ROW_COLUMNS]
    if clash:
        raise InvalidSettingsError(f"payload field {clash[0]!r} has the name of a row column "
                                   f"{ROW_COLUMNS}: rename it with select(...)")
    columns = {"kind": kind, "start": _times(events.column("start").combine_chunks()),
               "end": _times(events.column("end").combine_chunks(), open_end)}
    for name in fields.column_names:
        columns[name] = fields.column(name)
    return pa.table(columns)


def _payload_schema(schema: pa.Schema | None) -> pa.Schema | None:
    if schema is None:
        return None
    return pa.schema([f for f in schema if f.name not in ROW_COLUMNS])


class ParquetOutputAdapter(TableOutputAdapter):
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def write_table(self, rows: pa.Table, batch_id: int, partition: int | None = None
                    ) -> None:
        """One batch (or one partition of it) as one Parquet file, atomically (a replayed
        batch replaces it)."""
        table = output_table(rows)
        if not table.num_rows:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / f"{batch_file(batch_id, partition)}.parquet"
        tmp = self.directory / f".{final.name}.{os.getpid()}.tmp"  # hidden: readers skip it
        pq.write_table(table, tmp)
        os.replace(tmp, final)


class ParquetOutputAdapterFactory:
    """``create(directory, shape)``: one ``directory/batch-NNNNNNNNNN.parquet`` per batch (and
    ``batch-NNNNNNNNNN-PPPPP.parquet`` per partition of a batch written in parallel)."""

    partitioned = True

    def create(self, config: Any, shape: EventShape) -> ParquetOutputAdapter:
        if not isinstance(config, str | os.PathLike):
            raise InvalidSettingsError(f"a Parquet output's config is its directory, got "
                                       f"{config!r}")
        return ParquetOutputAdapter(Path(config))


def read_parquet_output(directory: str | os.PathLike) -> pa.Table:
    """Every batch a ``ParquetOutputAdapter`` wrote to ``directory``, in batch order (columns
    that only some batches have are null elsewhere)."""
    files = sorted(Path(directory).glob("batch-*.parquet"))
    if not files:
        raise FileNotFoundError(f"no batch-*.parquet files in {directory}")
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="permissive")
