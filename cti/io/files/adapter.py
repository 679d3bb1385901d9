"""``FileInputAdapter``: a file input's data rows as events, CTIs or ``InvalidInput``, row
by row (``read``) or column by column (``read_frame``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

from cti.adapters import FIELD_COLUMN, AdapterItem, Arriving, InvalidInput, field_marker
from cti.errors import InvalidEventError, InvalidSettingsError
from cti.events import Cti, EdgeEvent, EdgeType, EventShape, IntervalEvent, PointEvent, StreamItem
from cti.forms.rows import adapter_item_to_row
from cti.io.files.arrow_tables import _data_lines, arrow_table
from cti.io.files.cells import _flag, _missing, _RowError, parse_time
from cti.io.files.config import FileInputConfig
from cti.io.files.frame_columns import (
    _FRAME_KINDS,
    NULL_TIME,
    _blank,
    _joined,
    _none,
    _plain_edge_types,
    _plain_flags,
    _plain_partitions,
    _plain_ticks,
    _type_of,
    column_payloads,
)
from cti.io.files.listing import _directory, _File, _row_count
from cti.io.files.records import _Record
from cti.io.files.scan import _scan
from cti.time import MAX_TIME, MIN_TIME


class FileInputAdapter:
    """The data rows of one file, as events, CTIs or ``InvalidInput`` (see ``cti.io.files``)."""

    def __init__(self, config: FileInputConfig, shape: EventShape, fmt: str) -> None:
        if not isinstance(config, FileInputConfig):
            raise InvalidSettingsError(
                f"a file input's config must be FileInputConfig, got {config!r}"
            )
        shape = EventShape(shape)
        if shape is EventShape.INTERVAL and config.end_column is None:
            raise InvalidSettingsError(f"{config.path}: an interval input needs end_column")
        if shape is EventShape.EDGE and (config.end_column is None
                                         or config.edge_type_column is None):
            raise InvalidSettingsError(
                f"{config.path}: an edge input needs edge_type_column and end_column"
            )
        self.config = config
        self.shape = shape
        self.format = fmt
        # Every row an event or bad input (``InputAdapter.events_only``).
        self.events_only = config.cti_column is None and config.arrival_column is None and \
            not (config.file_arrival and os.path.isdir(config.path))
        self._reserved = frozenset(c for c in config.time_columns if c is not None)

    def _files(self) -> list[_File]:
        """The files of the input with their data-row counts, in offset order."""
        if not os.path.isdir(self.config.path):
            return [_File(self.config.path, None,
                          _row_count(self.config.path, self.format, self.config.delimiter))]
        return _directory(self.config.path, self.config.pattern, self.format,
                          self.config.delimiter)

    def latest_offset(self) -> int:
        return sum(f.rows for f in self._files())

    def read(self, start: int, end: int) -> Iterator[AdapterItem]:
        arrive = self.config.arrival_column is None and self.config.file_arrival
        first = 0
        for f in self._files():
            if first >= end:
                return
            if first + f.rows > start:
                arrival = f.mtime_ns // 1000 if arrive and f.mtime_ns is not None else None
                records = _scan(f.path, self.format, self.config.delimiter)
                for record in records[max(0, start - first):end - first]:
                    yield self.to_item(record, f.path, arrival)
            first += f.rows

    def is_complete(self) -> bool:
        return not self.config.live

    def read_frame(self, start: int, end: int) -> Any:
        """``read``'s rows [start, end) in cti's row form, as an Arrow table
        (``InputAdapter.read_frame``), for CSV and JSON-lines files that Arrow reads
        (``csv_table``, ``json_table``): times (int ticks, ISO-8601 in the common form), edge
        types, arrival times, partitions, CTI markers and payloads are built column by column,
        and in a directory each file's rows arrive at its modification time as ``read`` has
        them; a row with a cell in another form, or whose lifetime is empty, is built by
        ``to_item`` from its record, so it reads (or is bad input) exactly as ``read`` has it.
        None (``read`` gives the rows) where a file of the range is not one Arrow reads or most
        of its rows' times are in another form."""
        if not os.path.isdir(self.config.path):
            return self._file_frame(self.config.path, start, end, None)

        arrive = self.config.arrival_column is None and self.config.file_arrival
        frames, first = [], 0
        for f in self._files():
            if first >= end:
                break
            if f.rows and first + f.rows > start:
                frame = self._file_frame(f.path, max(0, start - first), end - first,
                                         f.mtime_ns // 1000 if arrive and f.mtime_ns is not None
                                         else None)
                if frame is None:
                    return None
                frames.append(frame)
            first += f.rows
        return _joined(frames) if len(frames) > 1 else frames[0] if frames else None

    def _file_frame(self, path: str, start: int, end: int, arrives: int | None) -> Any:
        """``read_frame`` of one file's rows [start, end), which arrive at ``arrives`` (its
        modification time in a directory; None: no such arrival time); with the payloads as
        typed columns (``cti.adapters.FIELD_COLUMN``) where every payload column has a type
        JSON gives back, the marker (the fields' list) on the rows whose payloads they are
        (not a row built from its record, not a CTI), whose payload text is left out (null)."""
        cfg = self.config
        table = arrow_table(path, self.format, cfg.delimiter)
        times = [cfg.start_column] + ([cfg.end_column] if self.shape is not EventShape.POINT
                                      else [])
        payload = [c for c in table.column_names if c not in self._reserved] \
            if table is not None and cfg.payload_columns is None else cfg.payload_columns
        named = [c for c in (cfg.edge_type_column, cfg.arrival_column, cfg.partition_column,
                             cfg.cti_column) if c]
        if table is None or not set(times) | set(payload) | set(named) <= set(table.column_names):
            return None
        import numpy as np
        import pyarrow as pa

        table = table.slice(start, max(0, end - start))
        n = table.num_rows
        t0, plain = self._column_ticks(table.column(times[0]))
        if n and plain.sum() * 2 < n:
            return None  # (times mostly in another form: row by row)
        is_cti, plain_flag = _plain_flags(table.column(cfg.cti_column)) if cfg.cti_column \
            else (np.zeros(n, bool), np.ones(n, bool))
        plain &= plain_flag
        kind = np.where(is_cti, "cti", _FRAME_KINDS[self.shape]).astype(object)
        t1 = np.full(n, NULL_TIME, np.int64)
        if len(times) > 1:
            t1, plain_end = self._column_ticks(table.column(times[1]))
            closed = plain_end & (t1 > t0)
            if self.shape is EventShape.EDGE:  # a start has no end, an end closes after it
                opens, closes = _plain_edge_types(table.column(cfg.edge_type_column))
                blank = _blank(table.column(times[1]))
                closed = (opens & blank) | (closes & closed)
                kind[opens & ~is_cti] = "edge_start"
                t1[opens] = NULL_TIME
            plain &= is_cti | closed
            t1[is_cti] = NULL_TIME
        arrival = np.full(n, NULL_TIME if arrives is None else arrives, np.int64)
        if cfg.arrival_column:
            arrival, plain_arrival = self._column_ticks(table.column(cfg.arrival_column))
            plain &= plain_arrival
        partition = np.full(n, None, object)
        if cfg.partition_column:
            partition, plain_partition = _plain_partitions(table.column(cfg.partition_column))
            plain &= plain_partition
        from cti.forms.json_text import typed_payloads

        typed = typed_payloads(table, payload)  # (a plain row's payload: its typed columns)
        payloads = np.full(n, None, object) if typed else np.asarray(
            column_payloads(table.select(payload)), object)
        payloads[is_cti] = None
        error = np.full(n, None, object)
        if not plain.all():  # built as ``read`` builds them, from their records
            record_of = self._records_of(path, table)
            for i in np.flatnonzero(~plain).tolist():
                record = record_of(start + i, i)
                row = adapter_item_to_row(0, 0, self.to_item(record, path, arrives))
                kind[i], payloads[i], error[i] = row.kind, row.payload, row.error
                partition[i] = row.partition
                t0[i], t1[i], arrival[i] = (NULL_TIME if t is None else t
                                            for t in (row.start, row.end, row.arrival))
        marker = {FIELD_COLUMN: pa.array(np.where(plain & ~is_cti, field_marker(typed), None),
                                         pa.string())} if typed else {}
        return pa.table({
            "kind": pa.array(kind, pa.string()), "start": t0, "end": t1,
            "payload": pa.array(payloads, pa.string()), "arrival": arrival,
            "partition": pa.array(partition, pa.string()), "error": pa.array(error, pa.string()),
            **marker, **{FIELD_COLUMN + name: column for name, column in typed.items()}})

    def _records_of(self, path: str, rows: Any) -> Callable[[int, int], _Record]:
        """A function of a row's index in the file and in ``rows`` (its slice of the file's
        table) giving its record, as ``read`` builds it: a CSV row's from its line and fields,
        a JSON line's from the file's scan (only a file with rows to build is scanned)."""
        if self.format != "csv":
            records = _scan(path, self.format, self.config.delimiter)
            return lambda at, _i: records[at]
        lines = _data_lines(path)
        return lambda at, i: _Record(*lines(at), rows.slice(i, 1).to_pylist()[0])

    def _column_ticks(self, column: Any) -> tuple[Any, Any]:
        """A time column's cells as ticks where they are plain int ticks or ISO-8601 times in
        the common form (``iso_ticks``), as the time format allows; and which cells are. The
        others read 0: ``parse_time`` gives their time or their error."""
        import numpy as np

        from cti.io.iso_times import iso_ticks

        fmt = self.config.time_format
        kind = _type_of(column)
        if kind == "int":  # (JSON's integers: ticks, strictly between the sentinels)
            values = column.to_numpy(zero_copy_only=False)
            plain = (values > MIN_TIME) & (values < MAX_TIME) & (fmt != "iso")
            return np.where(plain, values, 0), plain
        if kind != "string":
            return _none(len(column))
        if fmt == "iso":
            ticks, plain = np.zeros(len(column), np.int64), np.zeros(len(column), bool)
        else:
            ticks, plain = _plain_ticks(column)
        if fmt != "ticks" and not plain.all():
            iso, is_iso = iso_ticks(column, self.config.time_zone)
            ticks, plain = np.where(plain, ticks, iso), plain | is_iso
        return ticks, plain

    def to_item(self, record: _Record, path: str | None = None,
                arrival: int | None = None) -> AdapterItem:
        where = f"{path or self.config.path}, line {record.line}"
        if record.error is not None:
            return InvalidInput(f"{where}: {record.error}", record.raw)
        try:
            item = self._build(record.fields)
        except (_RowError, InvalidEventError, TypeError, ValueError) as exc:
            return InvalidInput(f"{where}: {exc}", record.raw)
        return item if arrival is None else Arriving(item, arrival)

    def _build(self, fields: dict[str, Any]) -> AdapterItem:
        cfg = self.config
        start = self._time(fields, cfg.start_column)
        item: StreamItem
        if cfg.cti_column is not None and _flag(fields.get(cfg.cti_column), cfg.cti_column):
            item = Cti(start)
        else:
            payload = self._payload(fields)
            if self.shape is EventShape.POINT:
                item = PointEvent(start, payload)
            elif self.shape is EventShape.INTERVAL:
                end = self._time(fields, cfg.end_column)
                item = IntervalEvent(start, end, payload)
            else:
                item = self._edge(fields, start, payload)
        if cfg.arrival_column is None:
            return item
        arrival = self._time(fields, cfg.arrival_column)
        partition = fields.get(cfg.partition_column) if cfg.partition_column else None
        if _missing(partition):
            partition = None
        return Arriving(item, arrival, partition)

    def _time(self, fields: dict[str, Any], column: str) -> int:
        cfg = self.config
        return parse_time(fields.get(column), cfg.time_format, column, cfg.time_zone)

    def _edge(self, fields: dict[str, Any], start: int, payload: dict[str, Any]) -> EdgeEvent:
        cfg = self.config
        col = cfg.edge_type_column
        value = fields.get(col)
        kind = value.strip().lower() if isinstance(value, str) else None
        if kind == "start":
            if not _missing(fields.get(cfg.end_column)):
                raise _RowError(f"an edge start has an end ({cfg.end_column} "
                                f"{fields.get(cfg.end_column)!r}); it is open until its end "
                                "edge (rule: edge start has no end)")
            return EdgeEvent(EdgeType.START, start, payload=payload)
        if kind == "end":
            end = self._time(fields, cfg.end_column)
            return EdgeEvent.end_edge(start, end, payload)
        raise _RowError(f"{col} {value!r} is not 'start' or 'end' (rule: edge type)")

    def _payload(self, fields: dict[str, Any]) -> dict[str, Any]:
        columns = self.config.payload_columns
        if columns is None:
            return {k: v for k, v in fields.items() if k not in self._reserved}
        lacking = [c for c in columns if c not in fields]
        if lacking:
            raise _RowError(f"payload column(s) {lacking} missing "
                            "(rule: payloads match the declared columns)")
        return {c: fields[c] for c in columns}
