"""Names a package loads on first use (module ``__getattr__``), so that importing it does not
import what they need (pandas, pyarrow): Spark's planning workers and its Python streaming
source runner import ``cti`` to unpickle the source, and only plan or read."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(namespace: dict[str, Any], where: Mapping[str, str]
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for the names in ``where`` (name -> the module
    it is imported from); ``namespace``: the package's ``globals()``, where a name is kept once
    loaded."""

    def getattr_(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = namespace[name] = getattr(importlib.import_module(where[name]), name)
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *where})

    return getattr_, dir_
