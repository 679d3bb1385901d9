"""Scanning a CSV file row by row into records (each physical line parsed on its own), and
reading its header alone (``csv_header``). A bad row becomes a record with its error."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator

from cti.errors import InvalidSettingsError
from cti.io.files.records import _NOT_UTF8, _RAW_LIMIT, _Record, _split_lines

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
