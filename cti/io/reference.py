"""Reference data without timestamps: every row an edge that starts at a load time, never ends.

StreamInsight applications joined fast event streams with slowly changing reference data (a
registration list, a price table) held as edge events: a row starts an edge when it is loaded
and is valid until it is replaced. Reference data usually has no time column, so
``reference_data(rows, load_time)`` turns rows into exactly that: a start edge at ``load_time``
(open-ended) per row, arriving at ``load_time``. ``ReferenceDataInputAdapterFactory`` does the
same for a JSON (lines or array) or CSV file, read once per process and replayable by row
offset, so that a large table does not travel in the plan as a list.

Bind it with shape ``EventShape.EDGE`` and settings that import the CTIs of the fast stream it
is joined with, so the join advances with that stream (SPEC 5)::

    registrations = CepStream.create(
        "registrations", ReferenceDataInputAdapterFactory(),
        ReferenceDataConfig("Registration.json", load_time), EventShape.EDGE,
        AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("entries"),
                            policy=AdvanceTimePolicy.ADJUST), application=app)

``load_time`` should not be after the first event the data is joined with: a fast event only
matches edges that have started by its time (a load time after an imported CTI is moved up to
it by the ``ADJUST`` policy).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs
import numpy as np
import pyarrow as pa

from cti.adapters import FIELD_COLUMN, AdapterItem, Arriving, InvalidInput, field_marker
from cti.errors import InvalidSettingsError
from cti.events import EdgeEvent, EventShape
from cti.forms.json_text import typed_payloads
from cti.forms.rows import INVALID, payload_to_json
from cti.io.files.arrow_tables import arrow_table, csv_range, csv_rows
from cti.io.files.cache import forget
from cti.io.files.frame_columns import column_payloads
from cti.io.files.scan import _scan
from cti.time import MAX_TIME, MIN_TIME, TimeLike, to_ticks

NULL = MIN_TIME  # a missing time in cti's row form

FORMATS = ("json", "csv")


_LOAD_HINT = ("give it a tzinfo (timezone.utc, ZoneInfo('Europe/Paris')); a load time is read "
              "before the data is bound, so no application's time zone applies")


def _load_time(value: TimeLike, where: str = "ReferenceDataConfig: load_time") -> int:
    try:
        ticks = to_ticks(value, where=where, hint=_LOAD_HINT)
    except (TypeError, ValueError) as exc:
        raise InvalidSettingsError(str(exc)) from None
    if ticks in (MIN_TIME, MAX_TIME):
        raise InvalidSettingsError(f"{where}: a reference data load time must be a finite time")
    return ticks


def reference_data(rows: Iterable[Mapping[str, Any]], load_time: TimeLike) -> list[Arriving]:
    """Rows as start edges at ``load_time`` that never end, arriving at ``load_time`` (a
    ``MemoryInputAdapterFactory`` config for an ``EventShape.EDGE`` stream)."""
    t = _load_time(load_time, "reference_data: load_time")
    return [Arriving(EdgeEvent.start_edge(t, dict(row)), t) for row in rows]


@attrs.frozen
class ReferenceDataConfig:
    """A file of reference rows (``format``: ``"json"`` for JSON lines or one JSON array,
    ``"csv"`` with a header row), valid from ``load_time``; ``payload_columns`` keeps only
    those fields (all by default)."""

    path: str = attrs.field(converter=os.fspath)
    load_time: int = attrs.field(converter=_load_time)
    format: str = "json"
    payload_columns: tuple[str, ...] | None = attrs.field(
        default=None, converter=lambda v: None if v is None else tuple(v))
    delimiter: str = ","

    def __attrs_post_init__(self) -> None:
        if self.format not in FORMATS:
            raise InvalidSettingsError(f"ReferenceDataConfig.format is one of {FORMATS}, got "
                                       f"{self.format!r}")


class ReferenceDataInputAdapter:
    # Every row arrives at the load time (``InputAdapter.arrivals_in_order``).
    arrivals_in_order = True

    def __init__(self, config: ReferenceDataConfig) -> None:
        self.config = config

    def _records(self) -> list:
        return _scan(self.config.path, self.config.format, self.config.delimiter)

    def _table(self) -> pa.Table | None:
        """The file's rows as Arrow columns where Arrow's reader gives ``_records``' rows
        exactly (``arrow_table``: a plain CSV file, a JSON-lines file of flat rows), with the
        payload columns, all present; else None."""
        cfg = self.config
        return self._selected(arrow_table(cfg.path, cfg.format, cfg.delimiter))

    def _part(self, start: int, end: int) -> pa.Table | None:
        """Rows [start, end) of ``_table``; of a CSV file, parsed alone (``csv_range``: a
        read task of a range never holds the whole file's table)."""
        cfg = self.config
        if cfg.format == "csv":
            return self._selected(csv_range(cfg.path, start, max(start, end), cfg.delimiter))
        table = self._table()
        return None if table is None else table.slice(start, max(0, end - start))

    def _selected(self, table: pa.Table | None) -> pa.Table | None:
        """A table of the file's rows with the payload columns, all present; else None."""
        cfg = self.config
        if table is None or cfg.payload_columns is None:
            return table
        wanted = set(cfg.payload_columns)
        if not wanted or len(wanted) < len(cfg.payload_columns) or \
                not wanted <= set(table.column_names):
            return None  # (a missing column: every row's message comes from the records)
        return table.select(list(cfg.payload_columns))

    def release(self) -> None:
        """Forget the file's cached reads (``cache.forget``): the source calls this once the
        file has been read to its end (``cti.runtime.spark.source``)."""
        forget(self.config.path)

    def latest_offset(self) -> int:
        """How many rows the file has: a CSV file that Arrow reads is counted without its
        table (``csv_rows``; the count is the same: Arrow reads such a file exactly as its
        records); any other from its table or its records."""
        cfg = self.config
        rows = csv_rows(cfg.path, cfg.delimiter) if cfg.format == "csv" else None
        if rows is not None:
            return rows
        table = self._table()
        return len(self._records()) if table is None else table.num_rows

    def _entries(self, start: int, end: int
                 ) -> Iterator[tuple[dict[str, Any], None, None] | tuple[None, str, str]]:
        """Records [start, end): (their payload fields, None, None), or for a bad one (None,
        the rule it breaks, its raw text)."""
        cfg = self.config
        for record in self._records()[start:end]:
            where = f"{cfg.path}, line {record.line}"
            if record.error is not None:
                yield None, f"{where}: {record.error}", record.raw
                continue
            fields = record.fields
            if cfg.payload_columns is not None:
                missing = [c for c in cfg.payload_columns if c not in fields]
                if missing:
                    yield None, (f"{where}: no column {missing[0]!r} (rule: payload columns "
                                 "are present)"), record.raw
                    continue
                fields = {c: fields[c] for c in cfg.payload_columns}
            yield fields, None, None

    def read(self, start: int, end: int) -> Iterator[AdapterItem]:
        t = self.config.load_time
        for fields, error, raw in self._entries(start, end):
            yield InvalidInput(error, raw) if fields is None else Arriving(
                EdgeEvent.start_edge(t, fields), t)

    def read_frame(self, start: int, end: int) -> pa.Table:
        """``read``'s rows in cti's row form, as an Arrow table (``InputAdapter.read_frame``):
        no Python event per row. Where Arrow read the file, each payload is its fields' typed
        columns (``cti.adapters.FIELD_COLUMN``; its text written where the engine needs it),
        or its text where a column has no such type."""
        t = self.config.load_time
        part = self._part(start, end)
        if part is not None:
            typed = typed_payloads(part, part.column_names)
            if typed:
                return _frame(t, pa.nulls(part.num_rows, pa.string()), None, typed)
            return _frame(t, column_payloads(part), None)
        entries = list(self._entries(start, end))
        return _frame(t, _payloads(entries), [e for _, e, _ in entries])

    def is_complete(self) -> bool:
        return True


def _frame(load_time: int, payloads: list[str] | pa.Array, errors: list[str | None] | None,
           typed: dict[str, pa.Array] | None = None) -> pa.Table:
    """Rows in cti's row form: start edges at ``load_time`` with ``payloads`` (or, with
    ``typed``, those typed payload columns, their text null), or where ``errors`` has a
    reason, bad rows whose payload is their raw text."""
    n = len(payloads)
    t = load_time
    if errors is None:
        kind, start = pa.repeat(pa.scalar("edge_start"), n), np.full(n, t, np.int64)
    else:
        good = np.fromiter((e is None for e in errors), bool, n)
        kind = pa.array(np.where(good, "edge_start", INVALID).astype(object), pa.string())
        start = np.where(good, t, NULL)
    return pa.table({
        "kind": kind, "start": start, "end": np.full(n, NULL, np.int64),
        "payload": payloads if isinstance(payloads, pa.Array) else pa.array(payloads,
                                                                           pa.string()),
        "arrival": start, "partition": pa.nulls(n, pa.string()),
        "error": pa.nulls(n, pa.string()) if errors is None else pa.array(errors, pa.string()),
        **({FIELD_COLUMN: pa.repeat(pa.scalar(field_marker(typed)), n),
            **{FIELD_COLUMN + name: column for name, column in typed.items()}}
           if typed else {})})


class ReferenceDataInputAdapterFactory:
    """``create(ReferenceDataConfig(path, load_time), EventShape.EDGE)``: the file's rows as
    open-ended start edges at the load time."""

    def create(self, config: Any, shape: EventShape) -> ReferenceDataInputAdapter:
        if not isinstance(config, ReferenceDataConfig):
            raise InvalidSettingsError(f"a reference data input's config is a "
                                       f"ReferenceDataConfig, got {config!r}")
        if EventShape(shape) is not EventShape.EDGE:
            raise InvalidSettingsError(f"{config.path}: reference data is bound as "
                                       f"EventShape.EDGE (edges from the load time), not {shape}")
        return ReferenceDataInputAdapter(config)


def _payloads(entries: list[tuple]) -> list[str]:
    """Each entry's payload text (``payload_to_json`` of its fields), or a bad entry's raw
    text: by Arrow column by column where the rows share their fields and Arrow writes the
    values exactly (``json_text``: a CSV file's plain text), else row by row."""
    rows = [f for f, _, _ in entries if f is not None]
    table = None
    if rows and all(r.keys() == rows[0].keys() for r in rows):
        try:
            table = pa.table({name: [r[name] for r in rows] for name in rows[0]})
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            table = None
    texts = iter(column_payloads(table)) if table is not None else (
        payload_to_json(r) for r in rows)
    return [next(texts) if f is not None else raw for f, _, raw in entries]
