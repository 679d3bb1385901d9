"""A scanned data row (``_Record``) and the bytes-to-lines helpers the scanners share:
the byte order mark, physical lines decoded as UTF-8."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

_RAW_LIMIT = 2000  # characters of a bad row's text kept in its InvalidInput


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
