"""The per-process cache of what is read from a file (its scan, its Arrow table, its lines),
kept under the file's identity so a changed file is read again."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

from cti.io.files.records import _Record

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


def forget(path: str) -> None:
    """Drop what the cache holds of the file at ``path`` (every kind of read of it): a
    bounded file read to its end is not read again, and its table (a million reference rows:
    about 100 MB once read) would stay for the process's life."""
    where = os.path.abspath(path)
    with _CACHE_LOCK:
        for key in [k for k in _CACHE if k[0] == where]:
            del _CACHE[key]
