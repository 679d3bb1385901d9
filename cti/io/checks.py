"""Binding-time checks of an input's path and columns, shared by the shipped file adapters.

Factories call these from ``check_config(config, shape)``; ``CepStream.create`` turns what they
raise into a ``BindingError`` naming the stream, so a wrong path or column fails before
anything runs instead of deep inside a run (on Spark, in the source's ``latestOffset``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from cti.errors import UnknownFieldError
from cti.forms.schema import closest


def _missing_path(path: str, what: str) -> FileNotFoundError:
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return FileNotFoundError(f"{what} {path} does not exist (no directory {parent})")
    return FileNotFoundError(f"{what} {path} does not exist")


def check_readable_file(path: str, what: str = "input file") -> None:
    """Raise an ``OSError`` naming ``path`` unless it is a file this process can read."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{what} {path} is a directory, not a file")
    if not os.path.exists(path):
        raise _missing_path(path, what)
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as exc:
        raise type(exc)(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def check_readable_directory(path: str, what: str = "input directory") -> None:
    """Raise an ``OSError`` naming ``path`` unless it is a directory this process can list."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(f"{what} {path} is a file, not a directory")
    if not os.path.exists(path):
        raise _missing_path(path, what)
    try:
        os.listdir(path)
    except OSError as exc:
        raise type(exc)(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def check_columns(path: str, columns: Sequence[str],
                  named: Iterable[tuple[str, str | None]], what: str = "columns") -> None:
    """Raise ``UnknownFieldError`` if a column the config names (``(role, column)`` pairs;
    None columns are skipped) is not among the data's ``columns``, naming each missing column,
    its role, the closest known name, and the known columns."""
    missing = [(role, col) for role, col in named if col is not None and col not in columns]
    if not missing:
        return
    parts = []
    for role, col in missing:
        close = closest(col, list(columns))
        hint = f"; did you mean {close!r}?" if close else ""
        parts.append(f"{col!r} ({role}{hint})")
    noun = "column" if len(parts) == 1 else "columns"
    raise UnknownFieldError(
        f"{path} has no {noun} {', '.join(parts)}; its {what}: {list(columns)}")
