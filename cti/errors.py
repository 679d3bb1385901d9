"""Errors users see. Each names the stream, the event and the rule where it can."""

from __future__ import annotations


class CtiError(Exception):
    """Base class of every error this library raises on purpose."""


class InvalidEventError(CtiError, ValueError):
    """An event that breaks a rule of the object model (end <= start, bad time, bad shape)."""


class InvalidSettingsError(CtiError, ValueError):
    """Advance-time or binding settings that cannot work; raised at construction or binding."""


class BindingError(CtiError):
    """A query cannot be bound: unknown imported stream, import cycle, duplicate stream name."""


class CtiViolationError(CtiError):
    """An event violates a CTI that its own adapter enqueued, on a stream with no policy."""


class BadInputError(CtiError):
    """Input that cannot be processed: malformed rows, edge ends with no open start, ..."""


class UnknownFieldError(BindingError):
    """A query names a payload field its stream does not have (a typo): raised when the query
    is built where the stream's fields are known, else by the first event that lacks it."""


class NullKeyError(BadInputError):
    """An event whose ``group_by`` key is null, where the query did not say what nulls do."""
