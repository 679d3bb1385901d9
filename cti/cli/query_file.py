"""Loading a query file: a Python file that builds streams with the public API and exposes the
ones to run, as a function ``streams()`` returning a mapping name -> stream, or a module-level
mapping ``STREAMS``. The ``cti`` commands take such a file::

    # query.py
    def streams():
        entries = CepStream.create("entries", ...)
        return {"per_booth": entries.group_by("TollId").apply(...)}

The file runs as its own module (its folder first on ``sys.path``, so it can import modules
beside it, also from ``streams()``); its classes travel to Spark's executors by value, like a
script's.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cti.errors import CtiError

HOW = ("expose the streams to run as a function streams() returning {name: stream}, or a "
       "module-level dict STREAMS = {name: stream}")


_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # a stream's name names its output folder
# The folders ``cti run`` keeps beside the outputs' (``--output``) and the checkpoints'.
RESERVED = ("_checkpoints", "_dead_letters", "_outputs", "_counts")


class QueryFileError(CtiError):
    """A query file that cannot be loaded or exposes no streams the way the commands expect."""


def _module(path: Path) -> Any:
    name = "cti_query_" + "".join(c if c.isalnum() else "_" for c in path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise QueryFileError(f"query file {path} cannot be loaded as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(path.resolve().parent)
    if folder not in sys.path:  # kept: streams() may import modules beside the file
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    try:  # the file's classes (adapters, factories) travel to Spark's executors by value
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(module)
    except (ImportError, ValueError):
        pass
    return module


def load_streams(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Run the query file at ``path`` and return the streams it exposes, by name. Raises
    ``QueryFileError`` naming the file for a missing file, a file that defines neither
    ``streams()`` nor ``STREAMS`` (or both), or a mapping that is not names to streams.
    Exceptions raised by the file's own code propagate as they are."""
    from cti.query.methods import QueryOperators

    path = Path(path)
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise QueryFileError(f"query file {path} {what}")
    module = _module(path)
    function, mapping = getattr(module, "streams", None), getattr(module, "STREAMS", None)
    if function is not None and mapping is not None:
        raise QueryFileError(f"query file {path} defines both streams() and STREAMS: keep one")
    if function is None and mapping is None:
        raise QueryFileError(f"query file {path} defines neither streams() nor STREAMS: {HOW}")
    if function is not None:
        if not callable(function):
            raise QueryFileError(f"query file {path}: streams is not a function: {HOW}")
        mapping, where = function(), "streams()"
    else:
        where = "STREAMS"
    if not isinstance(mapping, Mapping):
        raise QueryFileError(f"query file {path}: {where} is a {type(mapping).__name__}, not a "
                             f"mapping of names to streams: {HOW}")
    if not mapping:
        raise QueryFileError(f"query file {path}: {where} is empty: {HOW}")
    for name, stream in mapping.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise QueryFileError(f"query file {path}: {where} has a key {name!r}, which is not a "
                                 "usable output name (letters, digits, '_', '.', '-'; it names "
                                 "a folder)")
        if name in RESERVED:
            raise QueryFileError(f"query file {path}: {where} has a key {name!r}, a folder "
                                 f"cti run keeps for itself ({', '.join(RESERVED)}): name the "
                                 "output otherwise")
        if not isinstance(stream, QueryOperators):
            raise QueryFileError(f"query file {path}: {where}[{name!r}] is "
                                 f"{type(stream).__name__}, not a stream (CepStream.create(...) "
                                 "or a query built from one)")
    return dict(mapping)
