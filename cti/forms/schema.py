"""The payload fields a stream is known to have, and the check of every field a query names.

A bound stream's fields come from its factory (``fields(config)``: the names, or None when it
cannot tell without reading the input); an operator's from its input's and its own settings
(``output_fields``). A field a query names (``group_by``, join ``on``, an aggregate) is checked
against them when the query is built; where they are unknown, the first event that lacks the
field raises the same ``UnknownFieldError`` at run time (``check_events``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from cti.errors import BindingError, UnknownFieldError

Fields = tuple[str, ...] | None

_PAYLOAD_SHOWN = 300  # characters of a failing payload shown in a message


def field_names(value: Iterable[str] | None) -> Fields:
    """Field names as a sorted tuple without repeats (None stays None: unknown)."""
    if value is None:
        return None
    if isinstance(value, str) or not all(isinstance(f, str) for f in value):
        raise BindingError(f"fields are a list of field names, got {value!r}")
    return tuple(sorted(set(value)))


def stream_fields(name: str, factory: Any, config: Any) -> Fields:
    """The payload fields a factory declares for ``config`` (``fields(config)``), or None."""
    declare = getattr(factory, "fields", None)
    if not callable(declare):
        return None
    try:
        return field_names(declare(config))
    except BindingError as exc:
        raise type(exc)(f"stream {name!r}: {exc}") from None


def shown(payload: str) -> str:
    """A payload's text as a message shows it (cut when long)."""
    return payload if len(payload) <= _PAYLOAD_SHOWN else payload[:_PAYLOAD_SHOWN] + "..."


def closest(name: str, known: Sequence[str]) -> str | None:
    """The known name closest to ``name`` (ignoring case if nothing is close as written), or
    None: what a message about a misspelt name suggests."""
    close = difflib.get_close_matches(name, known, n=1) or \
        difflib.get_close_matches(name.lower(), [k.lower() for k in known], n=1)
    return None if not close else next(k for k in known if k.lower() == close[0].lower())


def unknown_field(field: str, operator: str, stream: str, known: Fields,
                  payload: str | None = None, noun: str = "stream") -> UnknownFieldError:
    """The error for ``field`` missing from ``stream`` (its ``known`` fields, or the
    ``payload`` of the event that lacks it), with the closest known name."""
    message = f"{operator}: {noun} {stream} has no field {field!r}"
    if known is not None:
        match = closest(field, known)
        if match is not None:
            message += f"; did you mean {match!r}?"
        else:
            message += "."
        message += f" Its fields: {list(known)}"
    if payload is not None:
        message += f" (an event without it: {shown(payload)})"
    return UnknownFieldError(message)


def check_field(field: Any, operator: str, stream: str, known: Fields,
                noun: str = "stream") -> None:
    """Raise ``UnknownFieldError`` when ``field`` (a name; functions are not checked) is not
    among the ``known`` fields (None: unknown, checked on the events)."""
    if isinstance(field, str) and known is not None and field not in known:
        raise unknown_field(field, operator, stream, known, noun=noun)


def check_events(payloads: Iterable[str], field: str, operator: str, stream: str,
                 known: Fields) -> None:
    """Where a stream's fields are unknown (``known`` None), raise ``UnknownFieldError`` for
    the first of ``payloads`` (canonical JSON: the events whose value of ``field`` is null)
    that lacks ``field``; a field present with the value null is a null."""
    if known is not None:
        return
    from cti.forms.rows import payload_from_json

    for text in dict.fromkeys(payloads):
        if field not in payload_from_json(text):
            raise unknown_field(field, operator, stream, None, text)
