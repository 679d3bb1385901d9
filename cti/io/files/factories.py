"""The file input factories (``JsonLinesInputAdapterFactory``, ``CsvInputAdapterFactory``)
and what binding reads of a file: that it can be read, its columns, its payload fields."""

from __future__ import annotations

import json
import os
from typing import Any

from cti.errors import InvalidSettingsError
from cti.events import EventShape
from cti.forms.schema import check_field
from cti.io.checks import check_columns, check_readable_directory, check_readable_file
from cti.io.files.adapter import FileInputAdapter
from cti.io.files.config import FileInputConfig
from cti.io.files.csv_scanner import csv_header
from cti.io.files.listing import _listing
from cti.settings import AdapterAdvanceTimeSettings


class _FileInputAdapterFactory:
    format = ""

    def __init__(self, advance_time_settings: AdapterAdvanceTimeSettings | None = None) -> None:
        if advance_time_settings is not None and not isinstance(
            advance_time_settings, AdapterAdvanceTimeSettings
        ):
            raise InvalidSettingsError(
                f"advance_time_settings must be AdapterAdvanceTimeSettings, "
                f"got {advance_time_settings!r}"
            )
        self.advance_time_settings = advance_time_settings

    def create(self, config: FileInputConfig, shape: EventShape) -> FileInputAdapter:
        return FileInputAdapter(config, shape, self.format)

    def check_config(self, config: FileInputConfig, shape: EventShape) -> None:
        """At binding: the config suits the shape, the file (or directory) exists and can be
        read, and a CSV header names every column the config names (a live file with no
        header yet, or a directory with no file yet, is not checked for columns; a directory's
        first file stands for its files)."""
        self.create(config, shape)
        path = config.path
        if os.path.isdir(path):
            check_readable_directory(path)
            files = _listing(path, config.pattern)
            if not files:
                return
            path = os.path.join(path, files[0][1])
        else:
            check_readable_file(path)
        if self.format != "csv":
            return
        header = csv_header(path, config.delimiter)
        if header is None:
            return
        check_columns(path, header, config.named_columns, "header")

    def declare_advance_time_properties(
        self, config: Any, shape: EventShape
    ) -> AdapterAdvanceTimeSettings | None:
        return self.advance_time_settings

    def fields(self, config: FileInputConfig) -> list[str] | None:
        """The payload fields: ``payload_columns``, else a CSV's header or the fields of a JSON
        file's first rows (``file_fields``), less the time columns. Raises
        ``UnknownFieldError`` for a time column the header or rows do not have."""
        return file_fields(config, self.format)


_SAMPLE_ROWS = 1000  # JSON rows whose fields stand for a file's


def file_fields(config: FileInputConfig, fmt: str) -> list[str] | None:
    """``fields(config)`` of a file factory: read from the first rows only (a CSV header; the
    first 1,000 JSON lines), so binding never reads a whole file. None where the file cannot
    be read (yet) or is a JSON array."""
    if not isinstance(config, FileInputConfig):
        return None
    try:
        if fmt == "csv":  # the header as the rows are read: one physical line, parsed alone
            header = csv_header(config.path, config.delimiter)
            columns = None if header is None else set(header)
        else:
            with open(config.path, encoding="utf-8-sig", errors="replace", newline="") as f:
                columns = _json_fields(f)
    except OSError:
        return None
    if columns is None:
        return None if config.payload_columns is None else list(config.payload_columns)
    for role in ("start_column", "end_column", "edge_type_column", "arrival_column",
                 "partition_column"):
        check_field(getattr(config, role), f"FileInputConfig({role}=...)",
                    repr(config.path), tuple(sorted(columns)), noun="file")
    if config.payload_columns is not None:
        return list(config.payload_columns)
    return sorted(columns - {c for c in config.time_columns if c is not None})


def _json_fields(f: Any) -> set[str] | None:
    """The fields of the first JSON lines' objects; None for a JSON array or no objects."""
    found: set[str] | None = None
    rows = 0
    for line in f:
        text = line.strip()
        if not text:
            continue
        if text.startswith("[") and found is None and rows == 0:
            return None
        rows += 1
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            found = (found or set()) | set(value)
        if rows >= _SAMPLE_ROWS:
            break
    return found


class JsonLinesInputAdapterFactory(_FileInputAdapterFactory):
    """``create(FileInputConfig, shape)``: one JSON object per line, or a file that is one JSON
    array of objects (its first non-space character is ``[``).

    ``advance_time_settings``, when given, is what the factory declares for its streams;
    binding settings still replace it.
    """

    format = "json"


class CsvInputAdapterFactory(_FileInputAdapterFactory):
    """``create(FileInputConfig, shape)``: CSV with a header row naming the columns.

    ``advance_time_settings``, when given, is what the factory declares for its streams;
    binding settings still replace it.
    """

    format = "csv"
