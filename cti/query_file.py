"""Query files: a Python file that builds streams and queries and names the ones to write.

A query file exposes its outputs in one of two ways: a function ``streams()`` returning a
mapping of name to stream, or a module-level mapping ``STREAMS``. A stream is a bound input
stream (``CepStream``) or a query (a derived stream); the name is what the output is called
(``cti run --output DIR`` writes ``DIR/<name>``)::

    def streams():
        app = Application("tolls")
        entries = CepStream.create("entries", ...)
        return {"cars_per_booth": entries.group_by("TollId").apply(...)}
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class QueryFileError(Exception):
    """A query file that cannot be loaded, or does not say which streams to write."""


def load_streams(path: str | Path) -> dict[str, Any]:
    """Import the query file at ``path`` and return its streams by name, in its order.

    The file's folder is put first on ``sys.path`` (so it can import modules beside it), and
    the module is shipped to Spark's workers by value (they cannot import it by name).
    """
    path = Path(path)
    if not path.is_file():
        raise QueryFileError(f"query file {path} does not exist" if not path.exists()
                             else f"query file {path} is not a file")
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise QueryFileError(f"query file {path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    _ship_by_value(module)
    if callable(getattr(module, "streams", None)):
        found, where = module.streams(), "streams()"
    elif hasattr(module, "STREAMS"):
        found, where = module.STREAMS, "STREAMS"
    else:
        raise QueryFileError(f"query file {path} defines neither a function streams() nor a "
                             "mapping STREAMS of name -> stream: say which streams to write")
    return _checked(found, f"{path}: {where}")


def _checked(found: Any, where: str) -> dict[str, Any]:
    if not isinstance(found, Mapping):
        raise QueryFileError(f"{where} must be a mapping of name -> stream, got "
                             f"{type(found).__name__}")
    if not found:
        raise QueryFileError(f"{where} is empty: name at least one stream to write")
    for name, stream in found.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise QueryFileError(f"{where}: {name!r} is not a usable output name (letters, "
                                 "digits, '_', '.', '-'; it names a folder)")
        if not callable(getattr(stream, "to", None)):
            raise QueryFileError(f"{where}: {name!r} is not a stream (a bound CepStream or a "
                                 f"query), got {type(stream).__name__}")
    return dict(found)


def _ship_by_value(module: Any) -> None:
    """Classes and functions the query file defines travel to Spark's workers by value."""
    try:
        from pyspark import cloudpickle
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return
    cloudpickle.register_pickle_by_value(module)
