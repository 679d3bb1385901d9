"""How the commands show an error: the user's mistake as its message and the user's own frame
(the last frame in the query file or a module beside it), no framework traceback; ``--debug``
shows the whole traceback instead."""

from __future__ import annotations

import traceback
from pathlib import Path

import click

from cti.cli.query_file import QueryFileError, load_streams


def user_frame(exc: BaseException, query: Path) -> traceback.FrameSummary | None:
    """The innermost frame of ``exc``'s traceback in a file of the query file's folder."""
    folder = query.resolve().parent
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        try:
            path = Path(frame.filename).resolve()
        except (OSError, ValueError):
            continue
        if path.parent == folder or path == query.resolve():
            found = frame
    return found


def error_text(exc: BaseException, query: Path) -> str:
    """``Class: message``, the exception's notes, and the user's frame where it is not in
    the notes already."""
    lines = [f"{type(exc).__name__}: {exc}", *getattr(exc, "__notes__", ())]
    frame = user_frame(exc, query)
    if frame is not None and not any(f'"{frame.filename}", line {frame.lineno}' in n
                                     for n in lines):
        lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line}")
    return "\n".join(lines)


def user_error(exc: Exception, query: Path, debug: bool) -> click.ClickException:
    """The ``ClickException`` that prints ``exc`` as a user's mistake (exit status 1); with
    ``debug``, the exception itself goes on (click prints its traceback)."""
    if debug:
        raise exc
    return click.ClickException(error_text(exc, query) + "\n(--debug shows the traceback)")


def streams_of(query: Path, debug: bool) -> dict:
    """The streams the query file names; a mistake in the file (``QueryFileError``) or in its
    own code, as a ``ClickException`` that prints it (``user_error``)."""
    try:
        return load_streams(query)
    except QueryFileError as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:  # the query file's own code
        raise user_error(exc, query, debug) from None
