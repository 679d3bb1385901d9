"""Parquet input: a columnar file read a batch of rows at a time, without a Python loop per row.

``CepStream.create("readings", ParquetInputAdapterFactory(), ParquetInputConfig(
"readings.parquet", start_column="t"), EventShape.POINT, settings)``.

Offsets are row indices. Besides ``read(start, end)`` (items, for the in-process runner), the
adapter has ``read_frame(start, end)``: the rows as one Arrow table in cti's row form, which the
Spark source hands to Spark as it is, so millions of events travel without Python objects per
event. Time columns are int ticks (microseconds since the epoch, UTC) or timestamps; a timestamp
column without a time zone is read in the config's ``time_zone`` (by default the application's,
``Application(time_zone=...)``), and with no zone its rows are bad input.
Payloads are the other columns (or ``payload_columns``), as canonical JSON (sorted keys). A row
with a null or out-of-range start, or an interval whose end is not after its start, is bad input
(``InvalidInput`` naming the file, row and rule).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from datetime import tzinfo
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cti.adapters import FIELD_COLUMN, AdapterItem, Arriving, InvalidInput, field_marker
from cti.errors import InvalidSettingsError
from cti.events import EventShape, item_from_kind
from cti.forms.json_text import filled_payloads, typed_payloads, value_texts
from cti.forms.schema import check_field
from cti.io.checks import check_columns, check_readable_file
from cti.time import MAX_TIME, MIN_TIME, to_time_zone

if TYPE_CHECKING:
    import pandas as pd

# pyarrow.compute is imported where rows are read: the process Spark starts for the Python
# streaming source on every query start unpickles this module only to count the rows.

NULL = MIN_TIME  # a missing time in cti's row form
_KINDS = {EventShape.POINT: "point", EventShape.INTERVAL: "interval"}


def _columns(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _time_zone(value: Any) -> tzinfo | None:
    return to_time_zone(value, "ParquetInputConfig time_zone")


@attrs.frozen
class ParquetInputConfig:
    """Where a Parquet input finds its events: the time columns; the rest is payload.
    ``time_zone`` is where timestamp columns without one were written (None: the
    application's)."""

    path: str = attrs.field(converter=os.fspath)
    start_column: str
    end_column: str | None = None
    arrival_column: str | None = None
    partition_column: str | None = None
    payload_columns: tuple[str, ...] | None = attrs.field(default=None, converter=_columns)
    time_zone: tzinfo | None = attrs.field(default=None, converter=_time_zone)

    def __attrs_post_init__(self) -> None:
        if not self.path or not isinstance(self.start_column, str) or not self.start_column:
            raise InvalidSettingsError("ParquetInputConfig needs a path and a start_column")
        if self.partition_column is not None and self.arrival_column is None:
            raise InvalidSettingsError("partition_column needs arrival_column")

    @property
    def named_columns(self) -> list[tuple[str, str]]:
        """(option, column) for every column the config names, payload columns included."""
        roles = ("start_column", "end_column", "arrival_column", "partition_column")
        return [*((r, getattr(self, r)) for r in roles if getattr(self, r) is not None),
                *(("payload_columns", c) for c in self.payload_columns or ())]


_CACHE: dict[tuple[str, float], pa.Table] = {}
_LOCK = threading.Lock()


def _table(path: str) -> pa.Table:
    """The file as an Arrow table, read once per process (per modification time)."""
    key = (path, os.path.getmtime(path))
    with _LOCK:
        if key not in _CACHE:
            _CACHE.clear()
            _CACHE[key] = pq.read_table(path, memory_map=True)
        return _CACHE[key]


def _payloads(table: pa.Table, cols: list[str]) -> pa.Array:
    """Each row's payload columns as canonical JSON (sorted keys, no spaces), joined by
    Arrow's string kernels; a column whose Arrow text is not exact is written by pandas.
    A string column's distinct values carry the separators around them (``{"k":`` before,
    ``,"next":`` or ``}`` after), so the rows' join has fewer parts."""
    import pyarrow.compute as pc

    if not cols or not table.num_rows:
        return pa.array(["{}"] * table.num_rows, pa.string())
    parts: list[Any] = []
    joined_sep = False  # this column's separator went with the previous column's values
    for i, name in enumerate(cols):
        sep = "" if joined_sep else ("{" if i == 0 else ",") + json.dumps(name) + ":"
        got = value_texts(table.column(name))
        joined_sep = False
        if got is None:
            key = json.dumps(name)
            lines = table.select([name]).to_pandas().to_json(
                orient="records", lines=True, double_precision=15, date_format="iso",
                date_unit="us").split("\n")[:table.num_rows]
            parts += [sep, pa.array([line[len(key) + 2:-1] for line in lines], pa.string())]
            continue
        texts, indices = got
        if indices is None:
            parts += [sep, texts]
            continue
        after = "," + json.dumps(cols[i + 1]) + ":" if i + 1 < len(cols) else "}"
        parts.append(pc.binary_join_element_wise(sep, texts, after, "").take(indices))
        joined_sep = True
    if not joined_sep:
        parts.append("}")
    parts = [p for p in parts if not isinstance(p, str) or p]
    joined = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _ticks(column: pd.Series, zone: tzinfo | None) -> tuple[np.ndarray, np.ndarray, str]:
    """Ticks, with NULL for a missing value; and which rows' times have no time zone to be
    read in (a naive timestamp column and no ``zone``, or a wall time ``zone`` skips or
    repeats), with the rule they break."""
    import pandas as pd  # here: Spark's offset process imports this module, not pandas

    unzoned, rule = np.zeros(len(column), bool), ""
    if pd.api.types.is_datetime64_any_dtype(column):
        if column.dt.tz is None:
            if zone is None:
                unzoned = column.notna().to_numpy()
                rule = (f"{column.name} is a timestamp without a time zone; give the config a "
                        "time_zone or declare Application(time_zone=...) (rule: times with a "
                        "time zone)")
                return np.full(len(column), NULL, np.int64), unzoned, rule
            local = column.dt.tz_localize(zone, ambiguous="NaT", nonexistent="NaT")
            unzoned = (local.isna() & column.notna()).to_numpy()
            rule = (f"{column.name} is ambiguous or does not exist in {zone} (a daylight-saving "
                    "change) (rule: times with a time zone)")
            column = local
        values = column.dt.tz_convert(None) if column.dt.tz is not None else column  # UTC
        ticks = values.astype("datetime64[us]").astype(np.int64)
        return np.where(column.isna(), NULL, ticks), unzoned, rule
    numeric = pd.to_numeric(column, errors="coerce")
    return np.where(numeric.isna(), NULL, numeric.fillna(0).astype(np.int64)), unzoned, rule


class ParquetInputAdapter:
    def __init__(self, config: ParquetInputConfig, shape: EventShape) -> None:
        if shape not in _KINDS:
            raise InvalidSettingsError(f"Parquet input reads point or interval events, not "
                                       f"{shape.value}")
        if shape is EventShape.INTERVAL and config.end_column is None:
            raise InvalidSettingsError("an interval stream needs end_column")
        self.config, self.shape = config, shape
        self.events_only = config.arrival_column is None  # (``InputAdapter.events_only``)

    projects_fields = True  # ``read_frame(..., fields=)`` (``InputAdapter.read_frame``)

    def latest_offset(self) -> int:
        return pq.ParquetFile(self.config.path).metadata.num_rows

    def is_complete(self) -> bool:
        return True

    def read_frame(self, start: int, end: int, fields: frozenset[str] | None = None
                   ) -> pa.Table:
        """Rows [start, end) in cti's row form, as an Arrow table: kind, start, end, payload,
        arrival, partition, error (the rule a bad row breaks, else null); and the payload
        columns as typed columns (``cti.adapters.FIELD_COLUMN``), where each has a type that
        JSON gives back (integers, floats, booleans, strings: ``json_typed``): then the
        payload is null, the columns are the payloads (the engine reads fields from them and
        writes a payload's text only where it needs it). ``fields``: only these payload
        columns (the ones a run needs), else all."""
        import pyarrow.compute as pc

        c = self.config
        table = _table(c.path).slice(start, max(0, end - start))
        check_columns(c.path, table.column_names, c.named_columns)
        named = {c.start_column, c.end_column, c.arrival_column, c.partition_column} - {None}
        cols = sorted(c.payload_columns or [n for n in table.column_names if n not in named])
        if fields is not None:
            cols = [n for n in cols if n in fields]
        n = table.num_rows
        df = table.select(sorted(named)).to_pandas()
        times = {col: _ticks(df[col], c.time_zone) for col in
                 (c.start_column, c.end_column, c.arrival_column) if col is not None}
        t0 = times[c.start_column][0]
        t1 = times[c.end_column][0] if c.end_column else np.full(n, NULL, np.int64)
        error = np.full(n, None, object)
        bad_end = ((t1 == NULL) | (t1 <= t0) if self.shape is EventShape.INTERVAL
                   else np.zeros(n, bool))
        bad_start = (t0 == NULL) | (t0 == MAX_TIME)
        for i in np.flatnonzero(bad_end | bad_start):
            rule = ("null or out-of-range start time (rule: no null timestamps)" if bad_start[i]
                    else "end missing or not after start (rule: a lifetime is non-empty)")
            error[i] = f"{c.path}, row {start + i}: {rule}"
        bad_zone = np.zeros(n, bool)
        for _ticks_of, unzoned, rule in reversed(times.values()):  # the start's rule wins
            for i in np.flatnonzero(unzoned):
                error[i] = f"{c.path}, row {start + i}: {rule}"
            bad_zone |= unzoned
        bad = bad_end | bad_start | bad_zone
        kind = pc.if_else(pa.array(bad), "invalid", _KINDS[self.shape])
        arrival = times[c.arrival_column][0] if c.arrival_column else np.full(n, NULL)
        part = (pa.array(df[c.partition_column].astype(str).to_numpy(object), pa.string())
                if c.partition_column else pa.nulls(n, pa.string()))
        typed = typed_payloads(table, cols)
        payload = pa.nulls(n, pa.string()) if typed else _payloads(table, cols)
        return pa.table({"kind": kind, "start": t0, "end": t1, "payload": payload,
                         "arrival": arrival.astype(np.int64),
                         "partition": part,
                         "error": pa.array(error, pa.string()) if bad.any()
                         else pa.nulls(n, pa.string()),
                         **({FIELD_COLUMN: pa.repeat(field_marker(typed), n)} if typed
                            else {}),
                         **{FIELD_COLUMN + name: column for name, column in typed.items()}})

    def read(self, start: int, end: int) -> Iterable[AdapterItem]:
        rows = filled_payloads(self.read_frame(start, end)).select(
            ["kind", "start", "end", "payload", "arrival", "partition", "error"]).to_pandas()
        for kind, t0, t1, payload, arr, part, err in rows.itertuples(index=False):
            if err is not None:
                yield InvalidInput(err, payload)
                continue
            item = item_from_kind(kind, int(t0), None if t1 == NULL else int(t1),
                                  json.loads(payload))
            yield item if arr == NULL else Arriving(item, int(arr), part)


class ParquetInputAdapterFactory:
    """``create(ParquetInputConfig, shape)``: point or interval events from a Parquet file."""

    def create(self, config: ParquetInputConfig, shape: EventShape) -> ParquetInputAdapter:
        if not isinstance(config, ParquetInputConfig):
            raise InvalidSettingsError(f"expected a ParquetInputConfig, got {config!r}")
        return ParquetInputAdapter(config, shape)

    def fields(self, config: ParquetInputConfig) -> list[str] | None:
        """The payload columns, from the file's schema (its footer only); raises
        ``UnknownFieldError`` for a time or payload column the file does not have. None when
        the file cannot be read (yet)."""
        if not isinstance(config, ParquetInputConfig):
            return None
        try:
            columns = tuple(sorted(pq.read_schema(config.path).names))
        except (OSError, pa.ArrowInvalid):
            return None
        for role in ("start_column", "end_column", "arrival_column", "partition_column"):
            check_field(getattr(config, role), f"ParquetInputConfig({role}=...)",
                        repr(config.path), columns, noun="file")
        for name in config.payload_columns or ():
            check_field(name, "ParquetInputConfig(payload_columns=...)", repr(config.path),
                        columns, noun="file")
        named = {config.start_column, config.end_column, config.arrival_column,
                 config.partition_column}
        return list(config.payload_columns or [c for c in columns if c not in named])

    def check_config(self, config: ParquetInputConfig, shape: EventShape) -> None:
        """At binding: the config suits the shape, the file can be read as Parquet, and it
        has every column the config names."""
        self.create(config, shape)
        check_readable_file(config.path, "Parquet file")
        try:
            names = pq.read_schema(config.path).names
        except (OSError, pa.ArrowException) as exc:
            raise InvalidSettingsError(f"{config.path} is not a Parquet file: {exc}") from None
        check_columns(config.path, names, config.named_columns)


__all__: list[Any] = ["ParquetInputAdapter", "ParquetInputAdapterFactory", "ParquetInputConfig"]
