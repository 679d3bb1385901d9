"""A file input's config (``FileInputConfig``): where its events are, which column holds
what, how times are written."""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import tzinfo
from typing import Any

import attrs

from cti.errors import InvalidSettingsError
from cti.time import to_time_zone

TIME_FORMATS = (None, "ticks", "iso")


def _columns(value: Iterable[str] | str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(str(c) for c in value)


def _time_zone(value: Any) -> tzinfo | None:
    return to_time_zone(value, "FileInputConfig time_zone")


def _opt_column(_inst: Any, attr: attrs.Attribute, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise InvalidSettingsError(f"{attr.name} must be a column name or None, got {value!r}")


_ROLES = ("start_column", "end_column", "edge_type_column", "arrival_column", "partition_column",
          "cti_column")


@attrs.frozen
class FileInputConfig:
    """Where a file input finds its events.

    - ``path``: the file (JSON lines, a JSON array, or CSV with a header row).
    - ``start_column``: the start time (a point's time, a CTI's time).
    - ``end_column``: the end time (intervals, and edge ends).
    - ``edge_type_column``: ``"start"`` or ``"end"`` (edges; case and spaces ignored).
    - ``arrival_column``: the arrival time; items are then ``Arriving(item, arrival)``.
    - ``partition_column``: the input partition (needs ``arrival_column``).
    - ``cti_column``: a row whose value here is true (``true``/``1``/``yes``/``cti``) is a CTI
      at its start time; false, empty or missing means an event.
    - ``time_format``: ``"iso"`` (ISO-8601 strings), ``"ticks"`` (ints, or digit strings), or
      None: ints and digit strings are ticks, other strings ISO-8601.
    - ``payload_columns``: the payload fields; None means every column not named above. A
      listed column that a row lacks makes the row bad input. JSON values are kept as they are
      (nested objects too), CSV values stay strings.
    - ``delimiter``: the CSV field delimiter (CSV only).
    - ``time_zone``: where ISO times without an offset were read (an IANA name or a tzinfo);
      None takes the application's; with neither, such a time is a bad row.
    - ``live``: the file may still grow (a tailed log), or the directory get new files: the
      input never ends, so there is no end-of-input flush; each run (or micro-batch of a
      started query) reads what has been added since the last one.
    - ``pattern``: in a directory, only the files whose name matches this glob (``"*.json"``).
    - ``file_arrival``: in a directory, rows arrive at their file's modification time (the
      default, unless ``arrival_column`` is given); False: no arrival time.
    """

    path: str = attrs.field(converter=os.fspath)
    start_column: str = attrs.field()
    end_column: str | None = attrs.field(default=None, validator=_opt_column)
    edge_type_column: str | None = attrs.field(default=None, validator=_opt_column)
    arrival_column: str | None = attrs.field(default=None, validator=_opt_column)
    time_format: str | None = attrs.field(default=None)
    payload_columns: tuple[str, ...] | None = attrs.field(default=None, converter=_columns)
    partition_column: str | None = attrs.field(default=None, validator=_opt_column)
    cti_column: str | None = attrs.field(default=None, validator=_opt_column)
    delimiter: str = ","
    live: bool = attrs.field(default=False, converter=bool)
    time_zone: tzinfo | None = attrs.field(default=None, converter=_time_zone)
    pattern: str | None = attrs.field(default=None, validator=_opt_column)
    file_arrival: bool = attrs.field(default=True, converter=bool)

    @start_column.validator
    def _check_start(self, _attr: Any, value: Any) -> None:
        if not isinstance(value, str) or not value:
            raise InvalidSettingsError(f"start_column must be a column name, got {value!r}")

    @time_format.validator
    def _check_format(self, _attr: Any, value: Any) -> None:
        if value not in TIME_FORMATS:
            raise InvalidSettingsError(
                f"time_format is None, 'ticks' or 'iso', got {value!r}"
            )

    def __attrs_post_init__(self) -> None:
        if not self.path:
            raise InvalidSettingsError("FileInputConfig needs a path")
        if self.partition_column is not None and self.arrival_column is None:
            raise InvalidSettingsError(
                "partition_column needs arrival_column (a partition travels with an arrival time)"
            )
        named = [c for c in self.time_columns if c is not None]
        if len(set(named)) != len(named):
            raise InvalidSettingsError(f"a column is used for two roles: {named}")
        if not isinstance(self.delimiter, str) or len(self.delimiter) != 1:
            raise InvalidSettingsError(f"delimiter must be one character, got {self.delimiter!r}")

    @property
    def time_columns(self) -> tuple[str | None, ...]:
        """The columns with a role other than payload."""
        return tuple(getattr(self, role) for role in _ROLES)

    @property
    def named_columns(self) -> list[tuple[str, str]]:
        """(option, column) for every column the config names, payload columns included."""
        return [*((r, getattr(self, r)) for r in _ROLES if getattr(self, r) is not None),
                *(("payload_columns", c) for c in self.payload_columns or ())]
