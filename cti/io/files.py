"""File inputs: JSON lines (or one JSON array) and CSV, one event (or CTI) per data row.

``CepStream.create("entries", JsonLinesInputAdapterFactory(), FileInputConfig(
"Entry.json", start_column="EntryTime"), EventShape.POINT, settings)``.

Offsets are data-row indices: 0 is the first data row (a CSV header is not a row, blank lines
are skipped and never count). ``latest_offset()`` is the number of data rows in the file now,
``read(start, end)`` gives rows [start, end), so a replay reads the same rows again; files are
bounded (``is_complete()`` is True). Line numbers in messages are physical lines, from 1.
A CSV row is one physical line, parsed on its own: a quote that is not closed on its line makes
that line one bad row and never swallows the lines after it (so quoted fields cannot span lines).

Binding (``check_config``) checks that the file exists and can be read, and that a CSV header
names every column the config names.

A directory (``path`` names one) is its files in the order of their modification time (then
name), as one input: offsets run over the first file's data rows, then the second's, and so
on. Each file's rows arrive at its modification time (``Arriving``) unless ``arrival_column``
names a column or ``file_arrival=False``. With ``live=True`` new files are picked up as they
appear; each file is scanned once per process (its row count is kept by its identity), and a
read touches only the files of its offset range. Files are immutable once in the directory
(write elsewhere, or under a name starting with ``.`` or ``_``, which are ignored, and rename):
a file that appears with a modification time before one already listed would shift offsets
that were read already, so it is refused.

A row that cannot become an event (bad JSON, a missing, null or unparseable time, end <= start,
an unknown edge type, a missing payload column) is not an exception: ``read`` yields
``InvalidInput`` whose reason names the file, the line and the rule, and ingress then raises
``BadInputError`` naming the stream, or dead-letters the row (``on_bad_input="dead_letter"``).

Times: ISO-8601 strings (an offset such as ``-07:00`` or ``Z`` is converted to UTC) or int ticks
(microseconds since the Unix epoch, UTC). A time without an offset is read in the config's
``time_zone`` (by default the application's, ``Application(time_zone=...)``); with no zone it is
a bad row, since nothing says where it was read.
"""

from __future__ import annotations

import csv
import fnmatch
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, tzinfo
from typing import Any

import attrs

from cti.adapters import FIELD_COLUMN, AdapterItem, Arriving, InvalidInput, field_marker
from cti.errors import InvalidEventError, InvalidSettingsError
from cti.events import Cti, EdgeEvent, EdgeType, EventShape, IntervalEvent, PointEvent, StreamItem
from cti.io.checks import check_columns, check_readable_directory, check_readable_file
from cti.rows import adapter_item_to_row, payload_to_json
from cti.schema import check_field
from cti.settings import AdapterAdvanceTimeSettings
from cti.time import MAX_TIME, MIN_TIME, to_ticks, to_time_zone

TIME_FORMATS = (None, "ticks", "iso")
_NAIVE_HINT = ("write it with an offset (such as +02:00 or Z), or declare "
               "Application(time_zone=...) or the config's time_zone to read such times in")
_RAW_LIMIT = 2000  # characters of a bad row's text kept in its InvalidInput
_INT = re.compile(r"[+-]?\d+")
_TRUE = frozenset({"1", "true", "yes", "y", "cti"})
_FALSE = frozenset({"", "0", "false", "no", "n"})


def _columns(value: Iterable[str] | str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(str(c) for c in value)


def _time_zone(value: Any) -> tzinfo | None:
    return to_time_zone(value, "FileInputConfig time_zone")


def _opt_column(_inst: Any, attr: attrs.Attribute, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise InvalidSettingsError(f"{attr.name} must be a column name or None, got {value!r}")


_ROLES = ("start_column", "end_column", "edge_type_column", "arrival_column", "partition_column",
          "cti_column")


@attrs.frozen
class FileInputConfig:
    """Where a file input finds its events.

    - ``path``: the file (JSON lines, a JSON array, or CSV with a header row).
    - ``start_column``: the start time (a point's time, a CTI's time).
    - ``end_column``: the end time (intervals, and edge ends).
    - ``edge_type_column``: ``"start"`` or ``"end"`` (edges; case and spaces ignored).
    - ``arrival_column``: the arrival time; items are then ``Arriving(item, arrival)``.
    - ``partition_column``: the input partition (needs ``arrival_column``).
    - ``cti_column``: a row whose value here is true (``true``/``1``/``yes``/``cti``) is a CTI
      at its start time; false, empty or missing means an event.
    - ``time_format``: ``"iso"`` (ISO-8601 strings), ``"ticks"`` (ints, or digit strings), or
      None: ints and digit strings are ticks, other strings ISO-8601.
    - ``payload_columns``: the payload fields; None means every column not named above. A
      listed column that a row lacks makes the row bad input. JSON values are kept as they are
      (nested objects too), CSV values stay strings.
    - ``delimiter``: the CSV field delimiter (CSV only).
    - ``time_zone``: where ISO times without an offset were read (an IANA name or a tzinfo);
      None takes the application's; with neither, such a time is a bad row.
    - ``live``: the file may still grow (a tailed log), or the directory get new files: the
      input never ends, so there is no end-of-input flush; each run (or micro-batch of a
      started query) reads what has been added since the last one.
    - ``pattern``: in a directory, only the files whose name matches this glob (``"*.json"``).
    - ``file_arrival``: in a directory, rows arrive at their file's modification time (the
      default, unless ``arrival_column`` is given); False: no arrival time.
    """

    path: str = attrs.field(converter=os.fspath)
    start_column: str = attrs.field()
    end_column: str | None = attrs.field(default=None, validator=_opt_column)
    edge_type_column: str | None = attrs.field(default=None, validator=_opt_column)
    arrival_column: str | None = attrs.field(default=None, validator=_opt_column)
    time_format: str | None = attrs.field(default=None)
    payload_columns: tuple[str, ...] | None = attrs.field(default=None, converter=_columns)
    partition_column: str | None = attrs.field(default=None, validator=_opt_column)
    cti_column: str | None = attrs.field(default=None, validator=_opt_column)
    delimiter: str = ","
    live: bool = attrs.field(default=False, converter=bool)
    time_zone: tzinfo | None = attrs.field(default=None, converter=_time_zone)
    pattern: str | None = attrs.field(default=None, validator=_opt_column)
    file_arrival: bool = attrs.field(default=True, converter=bool)

    @start_column.validator
    def _check_start(self, _attr: Any, value: Any) -> None:
        if not isinstance(value, str) or not value:
            raise InvalidSettingsError(f"start_column must be a column name, got {value!r}")

    @time_format.validator
    def _check_format(self, _attr: Any, value: Any) -> None:
        if value not in TIME_FORMATS:
            raise InvalidSettingsError(
                f"time_format is None, 'ticks' or 'iso', got {value!r}"
            )

    def __attrs_post_init__(self) -> None:
        if not self.path:
            raise InvalidSettingsError("FileInputConfig needs a path")
        if self.partition_column is not None and self.arrival_column is None:
            raise InvalidSettingsError(
                "partition_column needs arrival_column (a partition travels with an arrival time)"
            )
        named = [c for c in self.time_columns if c is not None]
        if len(set(named)) != len(named):
            raise InvalidSettingsError(f"a column is used for two roles: {named}")
        if not isinstance(self.delimiter, str) or len(self.delimiter) != 1:
            raise InvalidSettingsError(f"delimiter must be one character, got {self.delimiter!r}")

    @property
    def time_columns(self) -> tuple[str | None, ...]:
        """The columns with a role other than payload."""
        return tuple(getattr(self, role) for role in _ROLES)

    @property
    def named_columns(self) -> list[tuple[str, str]]:
        """(option, column) for every column the config names, payload columns included."""
        return [*((r, getattr(self, r)) for r in _ROLES if getattr(self, r) is not None),
                *(("payload_columns", c) for c in self.payload_columns or ())]


# ---- scanning a file into records ----------------------------------------------------------


@attrs.frozen
class _Record:
    """One data row: its first physical line, its text, and its fields or why it has none."""

    line: int
    raw: str
    fields: dict[str, Any] | None = None
    error: str | None = None


_BOM = b"\xef\xbb\xbf"  # UTF-8's byte order mark


def _without_bom(data: bytes) -> bytes:
    """A file's bytes without the byte order mark it may start with."""
    return data[len(_BOM):] if data.startswith(_BOM) else data


def _split_lines(data: bytes) -> Iterator[tuple[int, str, bool]]:
    """(line number, text with its line ending, decoded cleanly) for each physical line."""
    for number, chunk in enumerate(_without_bom(data).splitlines(keepends=True), start=1):
        try:
            yield number, chunk.decode("utf-8"), True
        except UnicodeDecodeError:
            yield number, chunk.decode("utf-8", errors="replace"), False


_NOT_UTF8 = "the line is not valid UTF-8 (rule: files are UTF-8)"


def _first_char(data: bytes) -> str:
    stripped = _without_bom(data).lstrip()
    return chr(stripped[0]) if stripped else ""


def _json_object(value: Any) -> tuple[dict[str, Any] | None, str | None]:
    if isinstance(value, dict):
        return value, None
    return None, (f"a row must be a JSON object, got {type(value).__name__} "
                  "(rule: one JSON object per row)")


def _scan_json_lines(data: bytes) -> list[_Record]:
    records = []
    for number, text, clean in _split_lines(data):
        line = text.rstrip("\r\n")
        if not line.strip():
            continue
        if not clean:
            records.append(_Record(number, line, error=_NOT_UTF8))
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            records.append(_Record(number, line, error=f"not valid JSON: {exc} "
                                                       "(rule: one JSON object per line)"))
            continue
        fields, error = _json_object(value)
        records.append(_Record(number, line, fields, error))
    return records


def _scan_json_array(data: bytes) -> list[_Record]:
    """The elements of a file that is one JSON array; a syntax error ends the file with a bad
    record (the elements before it are kept)."""
    data = _without_bom(data)
    try:
        text, clean = data.decode("utf-8"), True
    except UnicodeDecodeError:
        text, clean = data.decode("utf-8", errors="replace"), False
    decoder = json.JSONDecoder()
    records: list[_Record] = []
    line, counted = 1, 0

    def line_at(pos: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, pos)
        counted = pos
        return line

    def skip(pos: int) -> int:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        return pos

    def fail(pos: int, what: str) -> list[_Record]:
        snippet = text[pos:pos + 200]
        records.append(_Record(line_at(pos), snippet,
                               error=f"not valid JSON: {what} (rule: a JSON array of objects)"))
        return records

    pos = skip(0) + 1  # past the "["
    first = True
    while True:
        pos = skip(pos)
        if pos >= len(text):
            return fail(pos, "the array is not closed with ']'")
        if text[pos] == "]":
            end = skip(pos + 1)
            if end < len(text):
                return fail(end, "text after the closing ']'")
            return records
        if not first:
            if text[pos] != ",":
                return fail(pos, "expected ',' or ']' between elements")
            pos = skip(pos + 1)
        try:
            value, end = decoder.raw_decode(text, pos)
        except ValueError as exc:
            return fail(pos, str(exc))
        raw = text[pos:end]
        number = line_at(pos)
        if not clean and "\ufffd" in raw:
            records.append(_Record(number, raw[:_RAW_LIMIT], error=_NOT_UTF8))
        else:
            fields, error = _json_object(value)
            records.append(_Record(number, raw[:_RAW_LIMIT], fields, error))
        pos, first = end, False


_UNCLOSED = ("a quoted field is not closed on its line (rule: a CSV row is one line; "
             "quotes close on the line they open)")


def _csv_lines(lines: Iterable[tuple[int, str, bool]], delimiter: str
               ) -> Iterator[tuple[int, str, list[str] | None, str | None]]:
    """(line number, text, fields or None, error or None) for each non-blank physical line.

    Each line is parsed on its own, so a quote left open on one line never takes the lines
    after it: the line is one bad row and the next line is read as usual.
    """
    for number, text, clean in lines:
        raw = text.rstrip("\r\n")
        if not raw.strip():
            continue  # a blank line
        if not clean:
            yield number, raw, None, _NOT_UTF8
            continue
        try:
            fields = next(csv.reader((raw,), delimiter=delimiter, strict=True))
        except csv.Error as exc:
            error = _UNCLOSED if "unexpected end of data" in str(exc) else (
                f"not valid CSV: {exc} (rule: CSV quoting)")
            yield number, raw, None, error
            continue
        yield number, raw, fields, None


def _header_error(header: list[str]) -> str | None:
    dupes = sorted({h for h in header if header.count(h) > 1})
    return f"the header names {dupes} more than once (rule: CSV header)" if dupes else None


def _scan_csv(data: bytes, delimiter: str) -> list[_Record]:
    records: list[_Record] = []
    header: list[str] | None = None
    header_error: str | None = None
    for number, raw, fields, error in _csv_lines(_split_lines(data), delimiter):
        if header is None and fields is not None:
            header = [h.strip() for h in fields]
            header_error = _header_error(header)
            continue
        if error is None and header_error is not None:
            error = header_error
        if error is None and header is not None and len(fields) != len(header):
            error = (f"{len(fields)} fields, but the header has {len(header)} "
                     "(rule: CSV rows match the header)")
        if error is not None:
            records.append(_Record(number, raw[:_RAW_LIMIT], error=error))
            continue
        records.append(_Record(number, raw[:_RAW_LIMIT], dict(zip(header, fields, strict=True))))
    return records


def csv_header(path: str, delimiter: str = ",") -> list[str] | None:
    """The header of a CSV file (its first non-blank line that parses), read without reading
    the rest of the file; None if the file has none yet. Raises ``InvalidSettingsError`` for
    a header that names a column twice."""
    with open(path, "rb") as f:
        first = True
        for chunk in f:
            lines = _split_lines(chunk) if first else _split_lines(b"\n" + chunk)
            first = False
            for _, _, fields, _ in _csv_lines(lines, delimiter):
                if fields is not None:
                    header = [h.strip() for h in fields]
                    error = _header_error(header)
                    if error:
                        raise InvalidSettingsError(f"{path}: {error}")
                    return header
    return None


# Scans are cached per process by (path, format, file identity), so the executors of one batch
# (which each create an adapter) and later batches do not parse the file again.
_CACHE: OrderedDict[tuple, list[_Record]] = OrderedDict()
_CACHE_SIZE = 16
_CACHE_LOCK = threading.Lock()


def _cached(key: tuple, make: Any) -> Any:
    """``make()``, kept in the per-process scan cache under ``key``."""
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    value = make()
    with _CACHE_LOCK:
        _CACHE[key] = value
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return value


def _identity(path: str) -> tuple:
    st = os.stat(path)
    return os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _scan(path: str, fmt: str, delimiter: str) -> list[_Record]:
    def make() -> list[_Record]:
        with open(path, "rb") as f:
            data = f.read()
        if fmt == "csv":
            return _scan_csv(data, delimiter)
        if _first_char(data) == "[":
            return _scan_json_array(data)
        return _scan_json_lines(data)

    return _cached((*_identity(path), fmt, delimiter), make)


def csv_table(path: str, delimiter: str = ",") -> Any:
    """A CSV file's data rows as an Arrow table of string columns named by its header, read by
    Arrow's CSV reader: exactly the rows and fields ``_scan_csv`` gives, or None where that is
    not certain (the caller scans the file row by row, which also finds its bad rows).

    Certain means: no quote or lone carriage return in the file and no byte order mark
    after its start, a first line that is a header of two or more distinct names, a delimiter
    that is not whitespace (a line of whitespace is blank, never a row), and every line valid
    UTF-8 with as many fields as the header (Arrow's reader refuses the file otherwise).
    """
    return _cached((*_identity(path), "csv-table", delimiter), lambda: _csv_table(path, delimiter))


def _csv_table(path: str, delimiter: str) -> Any:
    with open(path, "rb") as f:
        data = _without_bom(f.read())
    if delimiter.isspace() or b'"' in data or \
            data.count(b"\r") != data.count(b"\r\n"):
        return None
    first, _, body = data.partition(b"\n")
    if _BOM in body:
        return None  # Arrow's reader would skip it at the start, as the file's byte order mark
    try:
        header = [h.strip() for h in first.decode("utf-8").rstrip("\r").split(delimiter)]
    except UnicodeDecodeError:
        return None
    if len(header) < 2 or not all(header) or _header_error(header):
        return None
    import pyarrow as pa
    from pyarrow import csv as pa_csv

    try:
        return pa_csv.read_csv(
            pa.py_buffer(body),
            read_options=pa_csv.ReadOptions(column_names=header, use_threads=False),
            parse_options=pa_csv.ParseOptions(delimiter=delimiter, quote_char=False,
                                              ignore_empty_lines=True),
            convert_options=pa_csv.ConvertOptions(
                column_types={h: pa.string() for h in header}, strings_can_be_null=False,
                quoted_strings_can_be_null=False, check_utf8=True))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def json_table(path: str) -> Any:
    """A JSON-lines file's rows as an Arrow table read by Arrow's JSON reader: exactly the rows
    and field values ``_scan_json_lines`` gives, or None where that is not certain (the caller
    scans the file row by row, which also finds its bad rows).

    Certain means: not a JSON array, no lone carriage return, Arrow reads the file (valid
    UTF-8, every line one object or JSON whitespace, no key twice in an object), one row per
    line that is not blank, every field of a type whose values Arrow reads as ``json.loads``
    does, none null or missing from a row (``cti.json_text.read_exactly``: not nested values,
    not integers among floats, and Arrow cannot tell a missing field from a null one).
    """
    return _cached((*_identity(path), "json-table"), lambda: _json_table(path))


_PROBE_BYTES = 1 << 20  # the first rows of a JSON-lines file whose types Arrow infers first
_BLANK_LINE = re.compile(rb"^[ \t\r]*(?:\n|\Z)", re.MULTILINE)  # (JSON whitespace alone)


def _json_table(path: str) -> Any:
    import pyarrow as pa
    from pyarrow import json as pa_json

    from cti.json_text import read_exactly

    with open(path, "rb") as f:
        data = _without_bom(f.read())
    if _first_char(data) in ("[", "") or data.count(b"\r") != data.count(b"\r\n"):
        return None
    read = pa_json.ReadOptions(use_threads=False)
    try:
        # Arrow's reader takes text that looks like a time for a timestamp: the fields it takes
        # so in the first rows are read as the strings they are.
        head = data[:data.rfind(b"\n", 0, _PROBE_BYTES) + 1] or data
        probe = pa_json.read_json(pa.py_buffer(head), read_options=read).schema
        texts = [pa.field(f.name, pa.string()) for f in probe if pa.types.is_temporal(f.type)]
        table = pa_json.read_json(pa.py_buffer(data), read_options=read, parse_options=(
            pa_json.ParseOptions(explicit_schema=pa.schema(texts)) if texts else None))
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    lines = data.count(b"\n") + 1 - len(_BLANK_LINE.findall(data))  # (rows, if one per line)
    if table.num_rows != lines or not all(map(read_exactly, table.columns)):
        return None
    return table


def column_payloads(table: Any) -> list[str]:
    """Each row's payload text (``payload_to_json`` of its fields: the table's columns) built
    by Arrow column by column, where it writes every value exactly (``json_text``); else row
    by row."""
    from cti.json_text import column_texts, objects

    fields = {n: column_texts(table.column(n)) for n in table.column_names}
    if all(t is not None for t in fields.values()):
        return objects(fields, table.num_rows)
    return [payload_to_json(r) for r in table.to_pylist()]


def _data_lines(path: str) -> Any:
    """For a file ``csv_table`` reads: a function of a data row's index giving its line number
    and text (as its record has them, ``_scan_csv``), found from the positions of the line
    breaks: in such a file a data row is a non-empty line after the header (no quote, no lone
    carriage return; a line of whitespace would be a row of too few fields)."""
    import numpy as np

    def make() -> Any:
        with open(path, "rb") as f:
            data = _without_bom(f.read())
        breaks = np.flatnonzero(np.frombuffer(data, np.uint8) == ord("\n"))
        starts = np.concatenate([[0], breaks + 1])
        ends = np.concatenate([breaks, [len(data)]])
        ends = ends - (ends > starts) * (np.frombuffer(data, np.uint8)[
            np.maximum(ends - 1, 0)] == ord("\r")) if len(data) else ends
        rows = np.flatnonzero(ends > starts)[1:]  # (the first non-empty line: the header)

        def line(i: int) -> tuple[int, str]:
            at = int(rows[i])
            return at + 1, data[starts[at]:ends[at]].decode("utf-8")[:_RAW_LIMIT]
        return line

    return _cached((*_identity(path), "csv-lines"), make)


def _joined(frames: list[Any]) -> Any:
    """Files' ``read_frame`` tables one under the other; their typed payload columns only
    where the files' types agree (a field of integers in one file and of strings in another:
    none, and the engine reads the payloads' text, written here)."""
    import pyarrow as pa

    from cti.json_text import filled_payloads

    try:
        return pa.concat_tables(frames, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.concat_tables([filled_payloads(f).drop_columns([
            c for c in f.column_names if c.startswith(FIELD_COLUMN)]) for f in frames])


_FRAME_KINDS = {EventShape.POINT: "point", EventShape.INTERVAL: "interval",
                EventShape.EDGE: "edge_end"}  # (an edge's kind: its type column's)
NULL_TIME = MIN_TIME  # a missing time in cti's row form


def _plain_ticks(column: Any) -> tuple[Any, Any]:
    """A string column's values as int ticks where each is plain: ASCII digits (maybe signed,
    maybe between spaces or tabs), at most 18 of them (so strictly between the sentinels);
    and which rows are. The others read 0: ``parse_time`` gives their time or their error."""
    import numpy as np
    import pyarrow.compute as pc

    plain = pc.match_substring_regex(column, r"^[ \t]*[+-]?[0-9]{1,18}[ \t]*$")
    digits = pc.replace_substring_regex(pc.utf8_trim(column, " \t"), r"^\+", "")
    ticks = pc.cast(pc.if_else(plain, digits, "0"), "int64").to_numpy()
    mask = plain.to_numpy(zero_copy_only=False)
    return np.where(mask, ticks, 0), mask


@attrs.frozen
class _File:
    path: str
    mtime_ns: int | None  # None: a single file (no arrival from it)
    rows: int


_COUNTS: OrderedDict[tuple, int] = OrderedDict()  # a file's identity -> its data rows
_COUNTS_SIZE = 1_000_000
_LISTED: dict[tuple, tuple[tuple[int, str], set[str]]] = {}  # directory -> (last key, names)


def _listing(path: str, pattern: str | None) -> list[tuple[int, str, os.stat_result]]:
    """A directory's input files (not ``.``/``_``-prefixed, matching ``pattern``) as
    (modification time, name, stat), in the order they are read."""
    entries = []
    with os.scandir(path) as it:
        for e in it:
            if e.name[0] in "._" or not e.is_file() or (
                    pattern is not None and not fnmatch.fnmatchcase(e.name, pattern)):
                continue
            st = e.stat()
            entries.append((st.st_mtime_ns, e.name, st))
    entries.sort(key=lambda x: (x[0], x[1]))
    return entries


def _directory(path: str, pattern: str | None, fmt: str, delimiter: str) -> list[_File]:
    """A directory's files (not ``.``/``_``-prefixed, matching ``pattern``) by modification
    time then name, with their data-row counts (each file scanned once per process). Raises
    when a file appears that sorts before one listed earlier in this process: offsets already
    read would shift."""
    entries = _listing(path, pattern)
    where = (os.path.abspath(path), pattern)
    with _CACHE_LOCK:
        last, names = _LISTED.get(where, ((-1, ""), set()))
        for mtime, name, _ in entries:
            if name not in names and (mtime, name) < last:
                raise InvalidSettingsError(
                    f"{os.path.join(path, name)} appeared in a live directory with a "
                    "modification time before files already read: files are read in the order "
                    "of their modification time, so offsets already read would shift (rule: "
                    "new files in a directory input are newer than the files before them)")
        if entries:
            _LISTED[where] = ((entries[-1][0], entries[-1][1]), names | {n for _, n, _ in entries})
    files = []
    for mtime, name, st in entries:
        full = os.path.join(path, name)
        key = (os.path.abspath(full), fmt, delimiter, st.st_dev, st.st_ino, st.st_size, mtime)
        with _CACHE_LOCK:
            rows = _COUNTS.get(key)
        if rows is None:
            rows = _row_count(full, fmt, delimiter)
            with _CACHE_LOCK:
                _COUNTS[key] = rows
                while len(_COUNTS) > _COUNTS_SIZE:
                    _COUNTS.popitem(last=False)
        files.append(_File(full, mtime, rows))
    return files


def _row_count(path: str, fmt: str, delimiter: str) -> int:
    """A file's data rows: as Arrow reads them (``csv_table``, ``json_table``), else as
    scanned."""
    table = arrow_table(path, fmt, delimiter)
    return len(_scan(path, fmt, delimiter)) if table is None else table.num_rows


def arrow_table(path: str, fmt: str, delimiter: str = ",") -> Any:
    """A file's rows as Arrow reads them exactly (``csv_table``, ``json_table``), or None."""
    return csv_table(path, delimiter) if fmt == "csv" else json_table(path)


# ---- records into events ------------------------------------------------------------------


class _RowError(Exception):
    """Why a record is not an event (becomes an InvalidInput reason)."""


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def parse_time(value: Any, time_format: str | None, column: str,
               zone: tzinfo | None = None) -> int:
    """A time cell as ticks; raises ``_RowError`` naming the column and the rule."""
    if _missing(value):
        raise _RowError(f"{column} is missing or null (rule: no null timestamps)")
    if isinstance(value, bool):
        raise _RowError(f"{column} {value!r} is not a time (rule: timestamps must parse)")
    if isinstance(value, int):
        if time_format == "iso":
            raise _RowError(f"{column} {value!r} is not an ISO-8601 string "
                            "(rule: time_format 'iso')")
        return _ticks(value, column)
    if isinstance(value, str):
        text = value.strip()
        if time_format != "iso" and _INT.fullmatch(text):
            return _ticks(int(text), column)
        if time_format == "ticks":
            raise _RowError(f"{column} {value!r} is not int ticks (rule: time_format 'ticks')")
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError as exc:
            raise _RowError(f"{column} {value!r} is not an ISO-8601 time ({exc}) "
                            "(rule: timestamps must parse)") from None
        try:
            return to_ticks(parsed, zone, column, _NAIVE_HINT)
        except ValueError as exc:
            raise _RowError(f"{exc} (rule: times with a time zone)") from None
    raise _RowError(f"{column} {value!r} ({type(value).__name__}) is not a time; give an "
                    "ISO-8601 string or int ticks (rule: timestamps must parse)")


def _ticks(value: int, column: str) -> int:
    try:
        return to_ticks(value)
    except ValueError as exc:
        raise _RowError(f"{column} {value}: {exc} (rule: times within range)") from None


def _flag(value: Any, column: str) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        if value in (0, 1):
            return bool(value)
    elif isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise _RowError(f"{column} {value!r} is neither true nor false (rule: CTI marker)")


def _type_of(column: Any) -> str:
    """``"string"``, ``"int"`` or ``"bool"``: the type of a table's column as the readers below
    take it (``json_table`` gives JSON's; a CSV's are strings); ``""`` for any other."""
    import pyarrow as pa

    t = column.type
    return "string" if pa.types.is_string(t) else "int" if pa.types.is_int64(t) else \
        "bool" if pa.types.is_boolean(t) else ""


def _none(n: int) -> tuple[Any, Any]:
    import numpy as np

    return np.zeros(n, bool), np.zeros(n, bool)


def _word(column: Any) -> Any:
    """A string column's values in ASCII lower case, without the spaces and tabs around them
    (the plain forms of the words ``_flag`` and ``_edge`` read)."""
    import pyarrow.compute as pc

    return pc.ascii_lower(pc.utf8_trim(column, " \t"))


def _plain_flags(column: Any) -> tuple[Any, Any]:
    """A CTI marker column's values as booleans where each is plain: a boolean, 0 or 1, or a
    word of ``_TRUE`` or ``_FALSE`` in any ASCII case, maybe between spaces or tabs; and which
    rows are. The others read False: ``_flag`` gives their value or their error."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = _type_of(column)
    if kind == "bool":
        return column.to_numpy(zero_copy_only=False), np.ones(len(column), bool)
    if kind == "int":
        values = column.to_numpy(zero_copy_only=False)
        return values == 1, (values == 0) | (values == 1)
    if kind != "string":
        return _none(len(column))
    word = _word(column)
    plain = pc.is_in(word, value_set=pa.array(sorted(_TRUE | _FALSE)))
    true = pc.is_in(word, value_set=pa.array(sorted(_TRUE)))
    return true.to_numpy(zero_copy_only=False), plain.to_numpy(zero_copy_only=False)


def _plain_edge_types(column: Any) -> tuple[Any, Any]:
    """Which rows of an edge type column are ``start`` and which ``end``, in any ASCII case,
    maybe between spaces or tabs (``_edge`` reads any other value, or finds its error)."""
    import pyarrow.compute as pc

    if _type_of(column) != "string":
        return _none(len(column))
    word = _word(column)
    return (pc.equal(word, "start").to_numpy(zero_copy_only=False),
            pc.equal(word, "end").to_numpy(zero_copy_only=False))


def _blank(column: Any) -> Any:
    """Which cells are empty or spaces and tabs alone (so ``_missing``)."""
    import pyarrow.compute as pc

    if _type_of(column) != "string":
        return _none(len(column))[0]
    return pc.match_substring_regex(column, r"^[ \t]*$").to_numpy(zero_copy_only=False)


def _plain_partitions(column: Any) -> tuple[Any, Any]:
    """A partition column's values where each is plain (printable ASCII, spaces and tabs; an
    integer, as its digits), None where it is blank (``_missing``); and which rows are plain.
    The others: ``to_item``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = _type_of(column)
    if kind == "int":
        column = pc.cast(column, pa.string())
    elif kind != "string":
        return np.full(len(column), None, object), _none(len(column))[1]
    plain = pc.match_substring_regex(column, r"^[\x20-\x7e\t]*$")
    values = column.to_numpy(zero_copy_only=False).astype(object)
    return np.where(_blank(column), None, values), plain.to_numpy(zero_copy_only=False)


class FileInputAdapter:
    """The data rows of one file, as events, CTIs or ``InvalidInput`` (see the module doc)."""

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
        from cti.json_text import typed_payloads

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
