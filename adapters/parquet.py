"""Parquet input: a columnar file read a batch of rows at a time, without a Python loop per row.

``CepStream.create("readings", ParquetInputAdapterFactory(), ParquetInputConfig(
"readings.parquet", start_column="t"), EventShape.POINT, settings)``.

Offsets are row indices. Besides ``read(start, end)`` (items, for the in-process runner), the
adapter has ``read_frame(start, end)``: the rows as one pandas frame in cti's row form, which the
Spark source hands to Spark as an Arrow batch, so millions of events travel without Python
objects per event. Time columns are int ticks (microseconds since the epoch, UTC) or timestamps.
Payloads are the other columns (or ``payload_columns``), as canonical JSON (sorted keys). A row
with a null or out-of-range start, or an interval whose end is not after its start, is bad input
(``InvalidInput`` naming the file, row and rule).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from typing import Any

import attrs
import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from cti.adapters import AdapterItem, Arriving, InvalidInput
from cti.errors import InvalidSettingsError
from cti.events import EventShape, item_from_kind
from cti.time import MAX_TIME, MIN_TIME

NULL = MIN_TIME  # a missing time in cti's row form
_KINDS = {EventShape.POINT: "point", EventShape.INTERVAL: "interval"}


def _columns(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class ParquetInputConfig:
    """Where a Parquet input finds its events: the time columns; the rest is payload."""

    path: str = attrs.field(converter=os.fspath)
    start_column: str
    end_column: str | None = None
    arrival_column: str | None = None
    partition_column: str | None = None
    payload_columns: tuple[str, ...] | None = attrs.field(default=None, converter=_columns)

    def __attrs_post_init__(self) -> None:
        if not self.path or not isinstance(self.start_column, str) or not self.start_column:
            raise InvalidSettingsError("ParquetInputConfig needs a path and a start_column")
        if self.partition_column is not None and self.arrival_column is None:
            raise InvalidSettingsError("partition_column needs arrival_column")


_CACHE: dict[tuple[str, float], pd.DataFrame] = {}
_LOCK = threading.Lock()


def _table(path: str) -> pd.DataFrame:
    """The file as a frame, read once per process (per modification time)."""
    key = (path, os.path.getmtime(path))
    with _LOCK:
        if key not in _CACHE:
            _CACHE.clear()
            _CACHE[key] = pq.read_table(path, memory_map=True).to_pandas()
        return _CACHE[key]


def _ticks(column: pd.Series) -> np.ndarray:
    """Ticks, with NULL for a missing value."""
    if pd.api.types.is_datetime64_any_dtype(column):
        values = column.dt.tz_localize(None) if column.dt.tz is not None else column
        ticks = values.astype("datetime64[us]").astype(np.int64)
        return np.where(column.isna(), NULL, ticks)
    numeric = pd.to_numeric(column, errors="coerce")
    return np.where(numeric.isna(), NULL, numeric.fillna(0).astype(np.int64))


class ParquetInputAdapter:
    def __init__(self, config: ParquetInputConfig, shape: EventShape) -> None:
        if shape not in _KINDS:
            raise InvalidSettingsError(f"Parquet input reads point or interval events, not "
                                       f"{shape.value}")
        if shape is EventShape.INTERVAL and config.end_column is None:
            raise InvalidSettingsError("an interval stream needs end_column")
        self.config, self.shape = config, shape

    def latest_offset(self) -> int:
        return len(_table(self.config.path))

    def is_complete(self) -> bool:
        return True

    def read_frame(self, start: int, end: int) -> pd.DataFrame:
        """Rows [start, end) in cti's row form: kind, start, end, payload, arrival, partition,
        error (the rule a bad row breaks, else None)."""
        c = self.config
        df = _table(c.path).iloc[start:end]
        named = {c.start_column, c.end_column, c.arrival_column, c.partition_column} - {None}
        missing = [n for n in named | set(c.payload_columns or ()) if n not in df.columns]
        if missing:
            raise InvalidSettingsError(f"{c.path}: no column(s) {missing}")
        cols = sorted(c.payload_columns or [n for n in df.columns if n not in named])
        if cols and len(df):
            text = df[cols].to_json(orient="records", lines=True, double_precision=15,
                                    date_format="iso", date_unit="us")
            payload = text.split("\n")[:len(df)]
        else:
            payload = ["{}"] * len(df)
        t0 = _ticks(df[c.start_column])
        t1 = _ticks(df[c.end_column]) if c.end_column else np.full(len(df), NULL, np.int64)
        error = np.full(len(df), None, object)
        bad_end = ((t1 == NULL) | (t1 <= t0) if self.shape is EventShape.INTERVAL
                   else np.zeros(len(df), bool))
        bad_start = (t0 == NULL) | (t0 == MAX_TIME)
        for i in np.flatnonzero(bad_end | bad_start):
            rule = ("null or out-of-range start time (rule: no null timestamps)" if bad_start[i]
                    else "end missing or not after start (rule: a lifetime is non-empty)")
            error[i] = f"{c.path}, row {start + i}: {rule}"
        kind = np.where(pd.isna(error), _KINDS[self.shape], "invalid")
        arrival = _ticks(df[c.arrival_column]) if c.arrival_column else np.full(len(df), NULL)
        part = (df[c.partition_column].astype(str).to_numpy(object) if c.partition_column
                else np.full(len(df), None, object))
        return pd.DataFrame({"kind": kind, "start": t0, "end": t1, "payload": payload,
                             "arrival": arrival.astype(np.int64), "partition": part,
                             "error": error})

    def read(self, start: int, end: int) -> Iterable[AdapterItem]:
        rows = self.read_frame(start, end)
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


__all__: list[Any] = ["ParquetInputAdapter", "ParquetInputAdapterFactory", "ParquetInputConfig"]
