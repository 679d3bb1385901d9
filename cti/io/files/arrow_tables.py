"""Files read by Arrow's readers (``csv_table``, ``json_table``, ``arrow_table``), taken only
where they give exactly the scanners' rows, and the lines of such a CSV file's data rows."""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from cti.io.files.cache import _cached, _identity
from cti.io.files.csv_scanner import _header_error
from cti.io.files.records import _BOM, _RAW_LIMIT, _first_char, _without_bom


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
    import pyarrow as pa
    from pyarrow import csv as pa_csv

    return _read_body(path, delimiter, lambda f, options: pa_csv.read_csv(
        pa.py_buffer(f.read()), **options))


def csv_rows(path: str, delimiter: str = ",") -> int | None:
    """How many rows ``csv_table`` has, or None where it is None: counted by Arrow's streaming
    reader, batch by batch, so the table is never whole in memory (the source's driver
    process counts a reference file's rows to plan its reads: a million rows' table was
    about 130 MB of it)."""
    return _cached((*_identity(path), "csv-rows", delimiter), lambda: _csv_rows(path, delimiter))


def _csv_rows(path: str, delimiter: str) -> int | None:
    counted = _read_body(path, delimiter, partial(_counted_rows, block=_COUNT_BLOCK))
    # (a row longer than a small block, which Arrow refuses there: counted in the table's
    # blocks, so the count is the table's)
    return counted if counted is not None else _read_body(path, delimiter, _counted_rows)


_COUNT_BLOCK = 1 << 16  # bytes of the body parsed at a time to count its rows


def _counted_rows(f: Any, options: dict[str, Any], block: int | None = None) -> int:
    """The rows of the body at ``f``'s position, parsed ``block`` bytes at a time (None: as
    ``options`` say): in blocks of 64 KB about 14 MB of the process at its peak for a million
    reference rows, 57 MB in Arrow's blocks of 1 MB. The reader is closed before the file is
    (its read-ahead may still be reading it where it failed)."""
    from pyarrow import csv as pa_csv

    if block is not None:
        given = options["read_options"]
        options = {**options, "read_options": pa_csv.ReadOptions(
            column_names=given.column_names, use_threads=given.use_threads, block_size=block)}
    reader = pa_csv.open_csv(f, **options)
    try:
        return sum(batch.num_rows for batch in reader)
    finally:
        reader.close()


def csv_range(path: str, start: int, end: int, delimiter: str = ",") -> Any:
    """Rows [start, end) of ``csv_table`` (an Arrow table), parsed alone: the bytes of those
    rows found from the file's line breaks (``_row_start``), so a read task of a range
    never holds the whole file's table (a million reference rows' table was 100 MB, kept by
    the worker that read the first half). None where ``csv_table`` is None (the whole file
    counted by ``csv_rows`` first, which says whether Arrow reads it exactly) or the range
    is not within the file."""
    import pyarrow as pa
    from pyarrow import csv as pa_csv

    rows = csv_rows(path, delimiter)
    layout = _layout(path, delimiter) if rows is not None else None
    if layout is None or not 0 <= start <= end <= rows:
        return None
    header, body_at = layout
    if start == end:
        return pa.table({h: pa.array([], pa.string()) for h in header})
    first, last = _row_start(path, body_at, start), _row_start(path, body_at, end)
    with open(path, "rb") as f:
        f.seek(first)
        data = f.read(last - first)
    try:
        table = pa_csv.read_csv(pa.py_buffer(data), **_csv_options(header, delimiter))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return table if table.num_rows == end - start else None


_INDEX_EVERY = 1 << 12  # the rows between two entries of a file's row index


def _row_start(path: str, body_at: int, row: int) -> int:
    """Where data row ``row`` begins (bytes; the file's size for a row past its last) in a
    file ``csv_table`` reads, its body at ``body_at``: from the nearest entry of the file's
    row index (``_row_index``), the rest of the way line by line."""
    index = _cached((*_identity(path), "csv-row-index", body_at),
                    lambda: _row_index(path, body_at))
    k = min(row // _INDEX_EVERY, len(index) - 1)
    return _rows_begun(path, int(index[k]), row - k * _INDEX_EVERY, every=0)[0]


def _row_index(path: str, body_at: int) -> Any:
    """Where every ``_INDEX_EVERY``-th data row begins (row 0 first, at least that entry)."""
    import numpy as np

    return np.asarray(_rows_begun(path, body_at, 0, every=_INDEX_EVERY), np.int64)


def _rows_begun(path: str, at: int, wanted: int, every: int) -> list[int]:
    """From a place where a line begins (``at``, in a file ``csv_table`` reads): with
    ``every``, where the data rows numbered 0, ``every``, 2 ``every``... from there begin;
    without, where row ``wanted`` begins (the file's size for a row past its last). A data
    row is a non-empty line; with no lone carriage return a line is empty where it is no
    byte, or a carriage return alone, before its line feed (``_data_lines``). Read a chunk
    at a time."""
    import numpy as np

    out: list[int] = []
    rows, line_at, last = 0, at, ord("\n")  # (last: the byte before ``at``)
    with open(path, "rb") as f:
        f.seek(at)
        while (not out or every) and (chunk := f.read(_CHUNK)):
            data = np.frombuffer(chunk, np.uint8)
            ends = at + np.flatnonzero(data == ord("\n"))
            starts = np.concatenate([[line_at], ends[:-1] + 1])
            size = ends - starts
            before = np.where(ends > at, data[np.maximum(ends - at - 1, 0)], last)
            begun = starts[(size >= 2) | ((size == 1) & (before != ord("\r")))]
            if every:
                out += begun[(-rows) % every::every].tolist()
            elif rows + len(begun) > wanted:
                out.append(int(begun[wanted - rows]))
            rows += len(begun)
            line_at = int(ends[-1]) + 1 if len(ends) else line_at
            at, last = at + len(chunk), int(data[-1])
    if at > line_at and (every and rows % every == 0 or not every and not out and
                         rows == wanted):  # (a last line without a line feed: a row)
        out.append(line_at)
    return out or [at]


def _read_body(path: str, delimiter: str, read: Any) -> Any:
    """``read(file, options)`` of a CSV file that passes ``_csv_layout``, the file at its data
    rows, with Arrow's options for them (``_csv_options``); None where the file does not
    pass or Arrow refuses it."""
    layout = _layout(path, delimiter)
    if layout is None:
        return None
    header, body_at = layout
    import pyarrow as pa

    with open(path, "rb") as f:
        f.seek(body_at)
        try:
            return read(f, _csv_options(header, delimiter))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return None


def _layout(path: str, delimiter: str) -> tuple[list[str], int] | None:
    """``_csv_layout``, once per process and file (a pass over the file: its count, its
    table and its ranges' row index all start from it)."""
    return _cached((*_identity(path), "csv-layout", delimiter),
                   lambda: _csv_layout(path, delimiter))


_CHUNK = 1 << 20  # bytes of a file checked at a time (``_csv_layout``)


def _csv_layout(path: str, delimiter: str) -> tuple[list[str], int] | None:
    """A CSV file's header and where its data rows start (bytes), where the file passes
    ``csv_table``'s checks that need no parse (no quote, no lone carriage return, no byte
    order mark after its start, a header of two or more distinct names, a delimiter that is
    not whitespace); else None. Read a chunk at a time."""
    if delimiter.isspace():
        return None
    with open(path, "rb") as f:
        if f.read(len(_BOM)) != _BOM:
            f.seek(0)
        first = f.readline()
        body_at, counts, tail = f.tell(), _Breaks(), b""
        if not counts.clean(first):
            return None
        while chunk := f.read(_CHUNK):
            # (a mark may straddle two chunks: the end of the last one and this one's start)
            if not counts.clean(chunk) or _BOM in chunk or _BOM in tail + chunk[:len(_BOM)]:
                return None
            tail = (tail + chunk[-(len(_BOM) - 1):])[-(len(_BOM) - 1):]
    if counts.cr != counts.crlf:
        return None
    try:
        header = [h.strip() for h in first.removesuffix(b"\n").decode("utf-8").rstrip("\r")
                  .split(delimiter)]
    except UnicodeDecodeError:
        return None
    if len(header) < 2 or not all(header) or _header_error(header):
        return None
    return header, body_at


class _Breaks:
    """A file's carriage returns and CR-LF pairs counted chunk by chunk (a pair may straddle
    two chunks)."""

    def __init__(self) -> None:
        self.cr = self.crlf = 0
        self.last = b""

    def clean(self, chunk: bytes) -> bool:
        """Count the chunk's; whether it has no quote."""
        self.cr += chunk.count(b"\r")
        self.crlf += chunk.count(b"\r\n") + (self.last == b"\r" and chunk[:1] == b"\n")
        self.last = chunk[-1:] or self.last
        return b'"' not in chunk


def _csv_options(header: list[str], delimiter: str) -> dict[str, Any]:
    """Arrow's CSV reader's options for a data body under ``header``: every field a string,
    exactly as ``_scan_csv`` reads it (``csv_table``)."""
    import pyarrow as pa
    from pyarrow import csv as pa_csv

    return {"read_options": pa_csv.ReadOptions(column_names=header, use_threads=False),
            "parse_options": pa_csv.ParseOptions(delimiter=delimiter, quote_char=False,
                                                 ignore_empty_lines=True),
            "convert_options": pa_csv.ConvertOptions(
                column_types={h: pa.string() for h in header}, strings_can_be_null=False,
                quoted_strings_can_be_null=False, check_utf8=True)}


def json_table(path: str) -> Any:
    """A JSON-lines file's rows as an Arrow table read by Arrow's JSON reader: exactly the rows
    and field values ``_scan_json_lines`` gives, or None where that is not certain (the caller
    scans the file row by row, which also finds its bad rows).

    Certain means: not a JSON array, no lone carriage return, Arrow reads the file (valid
    UTF-8, every line one object or JSON whitespace, no key twice in an object), one row per
    line that is not blank, every field of a type whose values Arrow reads as ``json.loads``
    does, none null or missing from a row (``cti.forms.json_text.read_exactly``: not nested values,
    not integers among floats, and Arrow cannot tell a missing field from a null one).
    """
    return _cached((*_identity(path), "json-table"), lambda: _json_table(path))


_PROBE_BYTES = 1 << 20  # the first rows of a JSON-lines file whose types Arrow infers first
_BLANK_LINE = re.compile(rb"^[ \t\r]*(?:\n|\Z)", re.MULTILINE)  # (JSON whitespace alone)


def _json_table(path: str) -> Any:
    import pyarrow as pa
    from pyarrow import json as pa_json

    from cti.forms.json_text import read_exactly

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


def arrow_table(path: str, fmt: str, delimiter: str = ",") -> Any:
    """A file's rows as Arrow reads them exactly (``csv_table``, ``json_table``), or None."""
    return csv_table(path, delimiter) if fmt == "csv" else json_table(path)
