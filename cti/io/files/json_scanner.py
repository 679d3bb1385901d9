"""Scanning a JSON file row by row into records: one object per line (JSON lines), or one
array of objects. A bad row becomes a record with its error, never an exception."""

from __future__ import annotations

import json
from typing import Any

from cti.io.files.records import _NOT_UTF8, _RAW_LIMIT, _Record, _split_lines, _without_bom


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
