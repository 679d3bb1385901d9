"""A file's records, scanned row by row once per process (``_scan``: the format's scanner,
cached)."""

from __future__ import annotations

from cti.io.files.cache import _cached, _identity
from cti.io.files.csv_scanner import _scan_csv
from cti.io.files.json_scanner import _scan_json_array, _scan_json_lines
from cti.io.files.records import _first_char, _Record


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
