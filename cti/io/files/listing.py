"""The files of an input with their data-row counts: a single file, or a directory's files
in the order of their modification time, each counted once per process."""

from __future__ import annotations

import fnmatch
import os
from collections import OrderedDict

import attrs

from cti.errors import InvalidSettingsError
from cti.io.files.arrow_tables import arrow_table
from cti.io.files.cache import _CACHE_LOCK
from cti.io.files.scan import _scan


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
