"""Sums of floats that do not depend on the order of the values: a window's ``sum`` and
``avg`` over a float field give the same bits however the input is cut into micro-batches,
restarts included.

Float addition is not associative: a window's partial sum carried from one micro-batch to the
next gave 74.40800000000002 where one batch gave 74.408. So a float sum is kept exactly, as
integers: every finite float is ``m * 2**e`` (``m`` an integer below ``2**53``), so in units of
``2**-1074`` it is an integer of at most 2098 bits, split here into 32-bit limbs (at most three
per value). A partial sum is one int64 column per limb in use (``sum:<name>@<limb>``; values of
a few binades use a few), which add exactly, in any order, for up to ``2**31`` values; the
sum is rounded once, correctly, when the window is emitted. Infinities and NaNs (never null
fields: those are skipped, as before) add in a float column of their own (``sum:<name>!``),
whose result (an infinity or NaN) does not depend on the order either.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

_LIMB = 32
_MASK = (1 << _LIMB) - 1
_UNIT = 1074  # 2**-1074: the least subnormal float


def limbs(name: str, values: np.ndarray) -> dict[str, np.ndarray]:
    """The measure columns of float ``values`` (NaN: none) for sum ``name`` (``sum:<name>``):
    each limb in use, and the non-finite values, as columns that add exactly."""
    finite = np.isfinite(values)
    out: dict[str, np.ndarray] = {}
    odd = ~finite & ~np.isnan(values)
    if odd.any():
        out[f"{name}!"] = np.where(odd, values, 0.0)
    v = np.where(finite, values, 0.0)
    mant, exp = np.frexp(v)  # v = mant * 2**exp, 0.5 <= |mant| < 1 (or 0)
    m = np.abs(np.ldexp(mant, 53)).astype(np.int64)  # exact: 53 bits
    unit_exp = np.where(m > 0, exp - 53 + _UNIT, 0)  # v = m * 2**(unit_exp - 1074)
    j0, shift = np.divmod(unit_exp, _LIMB)
    sign = np.where(v < 0, -1, 1).astype(np.int64)
    low = (m & _MASK) << shift  # < 2**63
    high = ((m >> _LIMB) << shift) + (low >> _LIMB)  # < 2**53
    parts = (low & _MASK, high & _MASK, high >> _LIMB)
    used = np.unique(np.concatenate([j0 + k for k in range(3)])) if len(v) else []
    for j in used:
        col = np.zeros(len(v), np.int64)
        for k, part in enumerate(parts):
            at = j0 + k == j
            col[at] += part[at]
        if col.any():
            out[f"{name}@{int(j)}"] = col * sign
    if not any(is_limb(c) for c in out):  # no finite value but 0: the limbs' sum is 0
        out[f"{name}@0"] = np.zeros(len(v), np.int64)
    return out


def is_limb(column: str) -> bool:
    """A column of ``limbs`` (the limbs add as integers: missing is 0)."""
    return "@" in column


def integers(ints: np.ndarray, name: str) -> dict[str, np.ndarray]:
    """The measure columns of int64 values for sum ``name`` (``sum:<name>``): their low 32
    bits (``name``) and the rest (``name^``), each of which adds exactly for up to ``2**31``
    values, so that a sum beyond 64 bits is not lost."""
    return {name: ints & _MASK, f"{name}^": ints >> _LIMB}


def whole(frame: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray, Any]:
    """The integer sums ``name`` of a frame of partials (``integers``): as int64 where they
    fit in 64 bits (0 elsewhere), which do, and a function of a row giving its sum exactly (a
    Python int)."""
    lo = frame[name].to_numpy(np.int64)
    hi = frame[f"{name}^"].to_numpy(np.int64) + (lo >> _LIMB)
    lo = lo & _MASK
    fits = (hi >= -(1 << 31)) & (hi < (1 << 31))
    values = (np.where(fits, hi, 0) << _LIMB) + np.where(fits, lo, 0)
    return values, fits, lambda i: (int(hi[i]) << _LIMB) + int(lo[i])


def total(frame: pd.DataFrame, name: str) -> np.ndarray:
    """The sums ``name`` (``sum:<name>``) of a frame of partials, each rounded once: the
    floats' limbs and, where the partials have them, the integers' (``integers``)."""
    cols = [c for c in frame.columns if c.startswith(f"{name}@")]
    order = np.argsort([int(c.rsplit("@", 1)[1]) for c in cols])
    cols = [cols[i] for i in order]
    limb_of = np.asarray([int(c.rsplit("@", 1)[1]) for c in cols], np.int64)
    values = frame[cols].to_numpy(np.int64)
    out, slow = _rounded(values, limb_of)
    # An integer sum beside the limbs: alone and of 64 bits, converted (a float of an int64
    # is correctly rounded); else added exactly.
    ints, fits, exact_int = whole(frame, name) if name in frame.columns else (
        None, None, lambda i: 0)
    if ints is not None:
        alone = ~values.any(axis=1) & fits
        out = np.where(alone, ints.astype(np.float64), out)
        slow = (slow & ~alone) | ((ints != 0) & ~alone) | ~fits
    for i in np.flatnonzero(slow):
        exact = sum(x << (_LIMB * int(j)) for x, j in zip(values[i].tolist(), limb_of,
                                                          strict=True))
        exact += exact_int(i) << _UNIT
        try:
            out[i] = exact / (1 << _UNIT)  # correctly rounded (Python's int division)
        except OverflowError:  # beyond the largest float, as float addition gives
            out[i] = math.inf if exact > 0 else -math.inf
    odd = f"{name}!"
    if odd in frame.columns:  # an infinity or NaN among the values decides
        extra = frame[odd].to_numpy(np.float64)
        out = np.where(extra != 0.0, extra + out, out)
    return out


def _rounded(values: np.ndarray, limb_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's limbs as one integer relative to the lowest limb (Python's integers, in a
    numpy object column: a few machine words for values of a few binades), converted to a
    float (correctly rounded) and scaled by a power of two (exact for a normal result). And
    which rows need the exact path instead (a subnormal or too large a result)."""
    low = int(limb_of[0])
    acc = values[:, 0].astype(object)
    for c in range(1, values.shape[1]):
        acc = acc + (values[:, c].astype(object) << (_LIMB * (int(limb_of[c]) - low)))
    try:
        with np.errstate(over="ignore", under="ignore"):  # such rows take the exact path
            out = np.ldexp(acc.astype(np.float64), _LIMB * low - _UNIT)
    except OverflowError:
        return np.zeros(len(values)), np.ones(len(values), bool)
    fine = (out == 0) | ((np.abs(out) >= np.finfo(np.float64).tiny) & np.isfinite(out))
    return out, ~fine


def with_columns(frame: pd.DataFrame, columns: set[str]) -> pd.DataFrame:
    """``frame`` with every limb, non-finite or integer sum column of ``columns`` (0 where it
    lacks one), so that partials of other micro-batches line up: a sum's values may be
    integers in one and floats in another (a null among integers reads as NaN)."""
    missing = [c for c in columns if c not in frame.columns]
    if not missing:
        return frame
    return frame.assign(**{c: absent(c, len(frame)) for c in missing})


def absent(column: str, n: int) -> np.ndarray:
    """``n`` partials' values of a limb, non-finite or integer sum column they lack: 0."""
    return np.zeros(n, np.float64 if column.endswith("!") else np.int64)
