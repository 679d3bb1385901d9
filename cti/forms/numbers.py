"""A payload field's numbers, as a window's ``sum``, ``avg``, ``min`` and ``max`` take them.

Each value is read on its own, so that what a window gives does not depend on which other
events share its micro-batch: an integer (a JSON integer of 64 bits, a boolean as 0 or 1, a
string that is an integer literal) stays an integer; a float (a JSON float, an integer beyond
64 bits, a string that is another decimal literal) is a float; anything else (null, a missing
field, NaN, text, a list) is no number and is skipped. A window's result is an integer when
every number it took is one, else a float (``cti.operators.window``).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cti.forms.json_text import float_texts, scattered

_INT_LITERAL = r"^\s*[+-]?[0-9]+\s*$"
_DECIMAL = r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$"
_I64 = (-(2**63), 2**63)


@attrs.frozen
class Numbers:
    """One number or none per row: an integer (``ints`` where ``is_int``, 0 elsewhere), a
    float (``floats`` where ``is_float``), or none (null)."""

    ints: np.ndarray
    floats: np.ndarray
    is_int: np.ndarray
    is_float: np.ndarray

    @classmethod
    def of_floats(cls, floats: np.ndarray) -> Numbers:
        """Floats, NaN: none."""
        n = len(floats)
        return cls(np.zeros(n, np.int64), floats.astype(np.float64), np.zeros(n, bool),
                   ~np.isnan(floats))

    @classmethod
    def of_ints(cls, ints: np.ndarray, is_int: np.ndarray) -> Numbers:
        n = len(ints)
        return cls(np.where(is_int, ints, 0).astype(np.int64), np.full(n, np.nan), is_int,
                   np.zeros(n, bool))

    def texts(self) -> pa.Array:
        """Each row's JSON text, as ``json.dumps`` writes the number (``null``: none)."""
        ints = pc.cast(pa.array(self.ints), pa.string())
        if self.is_int.all():
            return ints
        floats = scattered(float_texts(pa.array(self.floats[self.is_float])), self.is_float)
        return pc.if_else(pa.array(self.is_int), ints, pc.fill_null(floats, "null"))

    def replaced(self, rows: np.ndarray, other: Numbers) -> Numbers:
        """These numbers with those of ``rows`` (positions or a mask) taken from ``other``
        (one per row given)."""
        parts = [a.copy() for a in (self.ints, self.floats, self.is_int, self.is_float)]
        for part, new in zip(parts, (other.ints, other.floats, other.is_int, other.is_float),
                             strict=True):
            part[rows] = new
        return Numbers(*parts)

    def values(self) -> list[Any]:
        """Each row's number as a Python ``int`` or ``float``, or None."""
        out = np.full(len(self.ints), None, object)
        out[self.is_float] = self.floats[self.is_float].tolist()
        out[self.is_int] = self.ints[self.is_int].tolist()
        return out.tolist()


def column_numbers(column: pa.Array) -> Numbers | None:
    """The numbers of a column of one type (a typed payload column, or one Arrow's JSON
    reader gave): integers, floats, booleans, strings, nulls; None for another type."""
    t = column.type
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    if pa.types.is_null(t):
        return Numbers.of_floats(np.full(len(column), np.nan))
    if pa.types.is_integer(t):
        return Numbers.of_ints(column.fill_null(0).cast(pa.int64()).to_numpy(
            zero_copy_only=False), valid)
    if pa.types.is_boolean(t):
        return Numbers.of_ints(column.fill_null(False).cast(pa.int64()).to_numpy(
            zero_copy_only=False), valid)
    if pa.types.is_floating(t):
        return Numbers.of_floats(column.cast(pa.float64()).fill_null(np.nan).to_numpy(
            zero_copy_only=False))
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _text_numbers(column.cast(pa.string()))
    return None


def value_numbers(values: list[Any]) -> Numbers:
    """The numbers of Python values (a payload field's parsed values, or a function's)."""
    n = len(values)
    ints, floats = np.zeros(n, np.int64), np.full(n, np.nan)
    is_int, is_float = np.zeros(n, bool), np.zeros(n, bool)
    texts: dict[int, str] = {}
    for i, v in enumerate(values):
        kind = type(v)
        if kind is int or kind is bool or isinstance(v, np.integer):
            if _I64[0] <= v < _I64[1]:
                ints[i], is_int[i] = v, True
            else:
                floats[i], is_float[i] = float(v), True
        elif kind is float or isinstance(v, np.floating):
            floats[i], is_float[i] = v, v == v
        elif kind is str:
            texts[i] = v
    got = Numbers(ints, floats, is_int, is_float)
    if texts:
        got = got.replaced(np.fromiter(texts, np.int64, len(texts)), _text_numbers(
            pa.array(list(texts.values()), pa.string())))
    return got


def _text_numbers(texts: pa.Array) -> Numbers:
    """Strings' numbers: an integer literal of 64 bits is an integer, another decimal literal
    (a point, an exponent, more digits; spaces around) a float, anything else none."""
    literal = pc.fill_null(pc.match_substring_regex(texts, _INT_LITERAL), False).to_numpy(
        zero_copy_only=False)
    ints = np.zeros(len(texts), np.int64)
    is_int = np.zeros(len(texts), bool)
    if literal.any():
        digits = pc.utf8_trim_whitespace(texts.filter(pa.array(literal)))
        try:
            ints[literal] = pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False)
            is_int = literal
        except pa.ArrowInvalid:  # (beyond 64 bits: one by one)
            for i in np.flatnonzero(literal).tolist():
                v = int(texts[i].as_py())
                if _I64[0] <= v < _I64[1]:
                    ints[i], is_int[i] = v, True
    decimal = ~is_int & pc.fill_null(pc.match_substring_regex(texts, _DECIMAL), False).to_numpy(
        zero_copy_only=False)
    floats = np.full(len(texts), np.nan)
    if decimal.any():  # (Arrow's parse is correctly rounded, as Python's ``float``)
        floats[decimal] = pc.cast(pc.utf8_trim_whitespace(texts.filter(pa.array(decimal))),
                                  pa.float64()).to_numpy(zero_copy_only=False)
    return Numbers(ints, floats, is_int, ~is_int & ~np.isnan(floats))
