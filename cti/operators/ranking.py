"""TopK's ranking of every window a step completes at once (``cti.operators.top_k``).

The window keeps its members column-wise (``members``: one row per (event, window), with the
event's order-by values read once per event, from its typed payload columns where known, else
by Arrow's JSON reader, else payload by payload). When windows complete, all their members are
sorted together by (window, each order-by field, start, end, payload text): the order in which
the per-window sort (``Ranked.ranked``) sees them and keeps ties, since that sort is stable
over the window's events in (start, end, payload) order. Each field is compared through a
dense code per value: numbers (integers, floats, booleans: ``1 == 1.0 == True`` as in Python)
before texts, a null after every value in either direction. A rank is one plus the place of
the first member of its tie (SQL RANK), members ranked ``k`` or better kept.

Values the codes cannot order as Python does leave their window to the per-window sort: NaN,
integers beyond 2**53 (not exact as floats), lists and objects, and a number and a text tied
on the fields before (that sort raises ``CtiError`` naming the field, as before).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd
import pyarrow as pa

from cti.forms import frame
from cti.forms.json_text import payload_objects, payload_texts
from cti.forms.rows import payload_from_json

NUMBER, TEXT, NULL, OTHER = 0, 1, 2, 3  # each value's class
_EXACT = 2.0 ** 53  # integers up to this are exact as floats
Slow = Callable[[Sequence[dict[str, Any]]], list[tuple[int, int]]]


def order_values(ev: pd.DataFrame, fields: Sequence[str],
                 columns: dict[str, pa.Array] | None) -> dict[str, np.ndarray]:
    """Each event's value of each order-by field as ``cls<i>`` (its class), ``num<i>`` (a
    number's value) and ``text<i>`` (a text's value), once per event."""
    out: dict[str, np.ndarray] = {}
    for i, field in enumerate(fields):
        got = _column_classes((columns or {}).get(field))
        if got is None:
            got = _column_classes(frame._field_column(ev, field))
        if got is None:
            got = _value_classes(frame._row_values(ev, field))
        out[f"cls{i}"], out[f"num{i}"], out[f"text{i}"] = got
    return out


def _column_classes(column: pa.Array | None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``order_values`` of an Arrow column of integers, floats, booleans, texts or nulls;
    None for other types and for whole floats beyond 2**53 (Arrow reads a column's integers as
    floats once a float is among them: such an integer's float is not exact)."""
    if column is None:
        return None
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    n, t = len(column), column.type
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    cls = np.where(valid, NUMBER, NULL).astype(np.int8)
    num = np.zeros(n, np.float64)
    text = np.empty(n, object)
    if pa.types.is_null(t):
        return np.full(n, NULL, np.int8), num, text
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        text[:] = column.to_numpy(zero_copy_only=False)
        return np.where(valid, TEXT, NULL).astype(np.int8), num, text
    if not (pa.types.is_int64(t) or pa.types.is_float64(t) or pa.types.is_boolean(t)):
        return None
    values = column.fill_null(False if pa.types.is_boolean(t) else 0).to_numpy(
        zero_copy_only=False)
    num = values.astype(np.float64) + 0.0  # (-0.0 as 0.0: equal in Python)
    if pa.types.is_int64(t):
        cls[valid & (np.abs(values) > _EXACT)] = OTHER
    elif pa.types.is_float64(t):
        if (valid & (np.abs(num) >= _EXACT) & (np.floor(num) == num)).any():
            return None
        cls[valid & np.isnan(num)] = OTHER
    return cls, num, text


def _value_classes(values: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``order_values`` of parsed values, one by one."""
    n = len(values)
    cls, num, text = np.full(n, OTHER, np.int8), np.zeros(n, np.float64), np.empty(n, object)
    for i, v in enumerate(values):
        if v is None:
            cls[i] = NULL
        elif isinstance(v, str):
            cls[i], text[i] = TEXT, v
        elif isinstance(v, bool | int) and abs(v) <= _EXACT or isinstance(v, float) and v == v:
            cls[i], num[i] = NUMBER, float(v) + 0.0
    return cls, num, text


def stacked(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """Blocks of members one under the other: with their typed payload columns (``columns``,
    a table) where every block has the same ones, else with each payload's text."""
    if len(blocks) == 1:
        return blocks[0]
    tables = [b.get("columns") for b in blocks]
    same = all(t is not None and t.schema.equals(tables[0].schema) for t in tables)
    if not same:
        blocks = [with_texts(b) for b in blocks]
    out: dict[str, Any] = {c: np.concatenate([b[c] for b in blocks]) for c in blocks[0]
                           if c != "columns"}
    if same:
        out["columns"] = pa.concat_tables(tables)
    return out


class StackedMembers(Mapping[str, Any]):
    """Blocks of members one under the other (of each, the members where its mask holds, or
    all where it is None), each column stacked when first read: the ranking reads the
    columns it orders by for every member, the rest (keys, lifetimes, payloads) only for
    those that can rank (``taken``), so the members of the windows a step completes are not
    copied whole."""

    def __init__(self, blocks: list[dict[str, Any]], masks: list[np.ndarray | None]) -> None:
        tables = [b.get("columns") for b in blocks]
        if not all(t is not None and t.schema.equals(tables[0].schema) for t in tables):
            blocks = [with_texts(b) for b in blocks]  # (as ``stacked``: texts for all)
        self.blocks, self.masks = blocks, masks
        self.sizes = [len(b["k"]) if m is None else int(np.count_nonzero(m))
                      for b, m in zip(blocks, masks, strict=True)]
        self._stacked: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._stacked:
            self._stacked[name] = self._part(name, self.masks)
        return self._stacked[name]

    def __contains__(self, name: object) -> bool:
        return name in self.blocks[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self.blocks[0])

    def __len__(self) -> int:
        return len(self.blocks[0])

    def taken(self, rows: np.ndarray) -> dict[str, Any]:
        """The members at ``rows`` (positions or a mask), each column taken from its
        blocks."""
        at = np.flatnonzero(rows) if rows.dtype == bool else np.asarray(rows, np.int64)
        local, back = frame.positions_in_parts(self.sizes, at)
        local = [r if m is None else np.flatnonzero(m)[r]
                 for r, m in zip(local, self.masks, strict=True)]
        got = {name: self._part(name, local) for name in self}
        if back is None:
            return got
        return {name: v.take(pa.array(back)) if name == "columns" else v[back]
                for name, v in got.items()}

    def _part(self, name: str, rows: Sequence[np.ndarray | None]) -> Any:
        """Column ``name`` of the blocks' members at ``rows`` (each block's: a mask,
        positions, or None for all), stacked."""
        if name == "columns":
            return pa.concat_tables([
                t if r is None else t.filter(pa.array(r)) if r.dtype == bool else
                t.take(pa.array(r)) for t, r in zip((b["columns"] for b in self.blocks), rows,
                                                    strict=True)])
        parts = [b[name] if r is None else b[name][r]
                 for b, r in zip(self.blocks, rows, strict=True)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


def taken(members: dict[str, Any] | StackedMembers, rows: np.ndarray) -> dict[str, Any]:
    """The members at ``rows`` (positions or a mask)."""
    if isinstance(members, StackedMembers):
        return members.taken(rows)
    out = {c: v[rows] for c, v in members.items() if c != "columns"}
    if "columns" in members:
        columns = members["columns"]  # (a mask: Arrow's filter, faster than a take)
        out["columns"] = columns.filter(pa.array(rows)) if rows.dtype == bool else \
            columns.take(pa.array(rows))
    return out


def with_texts(members: dict[str, Any]) -> dict[str, Any]:
    """The members with each payload's text, written from their typed columns where they
    have them (their text left out: ``Chunk``), and no columns."""
    table = members.get("columns")
    if table is None:
        return members
    out = {c: v for c, v in members.items() if c != "columns"}
    out["payload"] = payload_objects(payload_texts(fields_of(table), table.num_rows))
    return out


def fields_of(table: pa.Table) -> dict[str, pa.Array]:
    """A table's columns by name, each one array."""
    table = table.combine_chunks()
    return {name: table.column(name).combine_chunks() for name in table.column_names}


def _field_key(cls: np.ndarray, num: np.ndarray, text: np.ndarray, desc: bool
               ) -> tuple[np.ndarray, int]:
    """One integer per member, from 0, that sorts as the field's values do in its direction
    (equal values equal, numbers before texts, nulls last), and how many there are."""
    is_num = cls == NUMBER
    numbers_only = bool(is_num.all())  # (no member to place apart)
    if numbers_only:
        key, n = _number_key(num)
    else:
        key, is_text = np.zeros(len(cls), np.int64), cls == TEXT
        key[is_num], n = _number_key(num[is_num])
        if is_text.any():
            _, codes = np.unique(text[is_text], return_inverse=True)
            key[is_text] = n + codes
            n += int(codes.max()) + 1
    if desc:
        key = n - 1 - key
    if not numbers_only:
        key = np.where(cls == NULL, n, np.where(cls == OTHER, 0, key))
    return key, n + 1


def _number_key(num: np.ndarray) -> tuple[np.ndarray, int]:
    """One integer per number, from 0, that sorts as the numbers do (equal ones equal), and
    the bound of them: each whole number's offset from the least where all are whole and span
    no more than their count (no sort), else each one's place among the distinct ones."""
    if not len(num):
        return np.zeros(0, np.int64), 0
    low, high = num.min(), num.max()
    if np.isfinite(low) and np.isfinite(high) and high - low <= max(len(num), 1024) and (
            np.floor(num) == num).all():
        return (num - low).astype(np.int64), int(high - low) + 1
    _, key = np.unique(num, return_inverse=True)
    return key, int(key.max()) + 1


def _packed(win: np.ndarray, n: int, fields: list[tuple[np.ndarray, int]]) -> list[np.ndarray]:
    """The sort keys window, field, field, ... (the first most significant) packed into one
    integer where their ranges multiply below 2**62, else as they are."""
    size, packed = n, win.astype(np.int64)
    for key, span in fields:
        size *= span
        if size >= 2 ** 62:
            return [win, *(key for key, _ in fields)]
        packed = packed * span + key
    return [packed]


@attrs.frozen
class Ranking:
    """The ranked members of windows, best first window by window: ``counts[i]`` of window
    ``i``'s, then the next window's; each one's payload text and rank."""

    counts: np.ndarray
    texts: np.ndarray | None  # (None: ``columns`` are the payloads)
    ranks: np.ndarray
    columns: pa.Table | None = None

    def payload_texts(self) -> np.ndarray:
        """Each ranked member's payload text (written from ``columns`` where they are it)."""
        if self.texts is not None:
            return self.texts
        return payload_objects(payload_texts(fields_of(self.columns), self.columns.num_rows))


def rank_windows(members: dict[str, np.ndarray], keys: np.ndarray, ks: np.ndarray,
                 order_by: Sequence[tuple[str, str]], k: int, slow: Slow,
                 hashes: np.ndarray | None = None) -> Ranking:
    """The ranked members of windows (``keys[i]``, ``ks[i]``; ``hashes[i]``, the key's hash,
    where known) of ``members`` (``key``, ``k``, ``start``, ``end``, ``payload``,
    ``order_values``' columns and, where known, ``hash``: each key's); a window with values
    the codes cannot order by the per-window sort ``slow``."""
    if not len(members["k"]):
        return Ranking(np.zeros(len(keys), np.int64), np.empty(0, object),
                       np.empty(0, np.int64))
    win = None if hashes is None or "hash" not in members else _windows_by_hash(
        hashes, ks, members["hash"], members["k"])
    if win is None:
        win = _windows_of(keys, ks, members["key"], members["k"])
    fields = [_field_key(members[f"cls{i}"], members[f"num{i}"], members[f"text{i}"],
                         d == "desc") for i, (_, d) in enumerate(order_by)]
    primary = _packed(win, len(keys), fields)
    best = _best_only(primary, win, [members[f"cls{i}"] for i in range(len(fields))],
                      len(keys), k)
    if best is not None:  # (the rest are worse than all of them: not sorted)
        members, win = taken(members, best), win[best]
        fields = [(key[best], span) for key, span in fields]
        primary = [primary[0][best]]
    order = _sorted(primary, members)
    win_s, keys_s = win[order], [f[order] for f, _ in fields]
    bad = _unordered(win_s, keys_s, [members[f"cls{i}"][order] for i in range(len(fields))],
                     len(keys))
    rank = _ranks(win_s, keys_s)
    keep = (rank <= k) & ~bad[win_s]
    at = order[keep]
    counts = np.bincount(win_s[keep], minlength=len(keys))
    if "columns" in members and not bad.any():
        return Ranking(counts, None, rank[keep], members["columns"].take(pa.array(at)))
    members = with_texts(members)
    got = Ranking(counts, members["payload"][at], rank[keep])
    return _with_slow(got, members, order, win_s, bad, slow) if bad.any() else got


def _best_only(primary: list[np.ndarray], win: np.ndarray, classes: list[np.ndarray], n: int,
               k: int) -> np.ndarray | None:
    """The positions of the members ranked ``k`` or better in their window, where one packed
    key orders them (``_packed``) and the codes order every window as Python does (no value
    of another class, no field with both numbers and texts: ``_unordered`` finds nothing):
    every other member has a greater key than all of them in its window, so only these need
    the full sort, and their ranks among themselves are their ranks among all. A member's
    rank is ``k`` or better exactly where its key is no greater than its window's ``k``-th
    least (ties at the cut included). None where that does not hold or cuts off little."""
    if len(primary) != 1 or not len(win):
        return None
    for cls in classes:
        if (cls == OTHER).any() or ((cls == NUMBER).any() and (cls == TEXT).any()):
            return None
    counts = np.bincount(win, minlength=n)
    if int(counts.max()) <= k:
        return None
    packed = primary[0]
    # Only the members at or below a bound of their window's k-th least can rank: sort those
    # (all of them where the bound's k parts per window would outnumber the members).
    near = np.flatnonzero(packed <= _kth_bound(packed, win, n, k)[win]) \
        if n * k <= len(packed) else np.arange(len(packed))
    near_win, near_key = win[near], packed[near]
    ranked = np.sort(near_key)  # (by window first: the window is the key's leading part)
    counts = np.bincount(near_win, minlength=n)
    begin = np.cumsum(counts) - counts
    kth = ranked[np.where(counts > 0, begin + np.minimum(counts, k) - 1, 0)]
    best = near[near_key <= kth[near_win]]
    return best if 2 * len(best) <= len(win) else None


def _kth_bound(packed: np.ndarray, win: np.ndarray, n: int, k: int) -> np.ndarray:
    """Per window, a key no less than its ``k``-th least member's: the members dealt into
    ``k`` parts by position, the largest of the parts' least keys (``k`` distinct members';
    the largest key there is where a part is empty). With the parts' least keys low in their
    windows, few members lie at or below it."""
    part = np.tile(np.arange(k, dtype=np.int64), len(packed) // k + 1)[:len(packed)]
    least = np.full(n * k, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(least, win.astype(np.int64) * k + part, packed)
    return least.reshape(n, k).max(axis=1)


def _with_slow(got: Ranking, members: dict[str, np.ndarray], order: np.ndarray,
               win_s: np.ndarray, bad: np.ndarray, slow: Slow) -> Ranking:
    """``got`` with each window marked ``bad`` ranked by the per-window sort ``slow``."""
    begin = np.cumsum(got.counts) - got.counts
    texts, ranks = list(got.texts), got.ranks.tolist()
    counts = got.counts.copy()
    slowly = {w: _slowly(members, order[win_s == w], slow)  # (in window order: the
              for w in np.flatnonzero(bad).tolist()}  # first error is the one raised)
    for w, pairs in reversed(slowly.items()):  # (from the last: the places hold)
        at = int(begin[w])
        texts[at:at] = [t for t, _ in pairs]
        ranks[at:at] = [r for _, r in pairs]
        counts[w] = len(pairs)
    out = np.empty(len(texts), object)
    out[:] = texts
    return Ranking(counts, out, np.asarray(ranks, np.int64))


_MIX = np.uint64(0x9E3779B97F4A7C15)  # (k spread over 64 bits before it meets the hash)


def _windows_by_hash(hashes: np.ndarray, ks: np.ndarray, m_hashes: np.ndarray,
                     m_ks: np.ndarray) -> np.ndarray | None:
    """``_windows_of`` by each key's 64-bit hash (no Python string hashed): each (hash, k)
    as one word, looked up among the windows' by a hash table, where the windows' words are
    all distinct (then a member's is its own window's: every member's window is among them);
    None where two windows share one (two keys of one hash: their texts tell them apart), or
    a member's (hash, k) is not a window's (a state's hashes made otherwise)."""
    with np.errstate(over="ignore"):
        words = hashes ^ (ks.astype(np.uint64) * _MIX)
        m_words = m_hashes ^ (m_ks.astype(np.uint64) * _MIX)
    index = pd.Index(words)
    if not index.is_unique:
        return None
    at = index.get_indexer(m_words)
    if (at < 0).any() or (hashes[at] != m_hashes).any() or (ks[at] != m_ks).any():
        return None
    return at


def _windows_of(keys: np.ndarray, ks: np.ndarray, m_keys: np.ndarray, m_ks: np.ndarray
                ) -> np.ndarray:
    """The position in (``keys``, ``ks``) of each member's window (``m_keys``, ``m_ks``):
    each pair as one integer, the keys and the k told apart by codes."""
    n = len(keys)
    key_codes, _ = pd.factorize(np.concatenate([keys, m_keys]))
    k_codes, k_values = frame.dense_codes(np.concatenate([ks, m_ks]))
    pairs = key_codes.astype(np.int64) * len(k_values) + k_codes
    at = _positions(pairs[:n], pairs[n:])
    if (at < 0).any():  # (the window keeps each member's window)
        raise RuntimeError("top_k: a member of a window that is not complete was ranked")
    return at


def _positions(distinct: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The position in ``distinct`` (non-negative integers, each once) of each ``wanted``
    one, -1 where it is not there: by a table indexed by value where their range is no wider
    than a few times their number (no sort, no binary search), else by a sorted search."""
    if not len(wanted):
        return np.empty(0, np.int64)
    top = max(int(wanted.max()), int(distinct.max()) if len(distinct) else 0) + 1
    if top <= 4 * (len(distinct) + len(wanted)):
        table = np.full(top, -1, np.int64)
        table[distinct] = np.arange(len(distinct))
        return table[wanted]
    if not len(distinct):
        return np.full(len(wanted), -1, np.int64)
    order = np.argsort(distinct, kind="stable")
    at = np.minimum(np.searchsorted(distinct[order], wanted), len(distinct) - 1)
    return np.where(distinct[order][at] == wanted, order[at], -1)


def _sorted(primary: list[np.ndarray], members: dict[str, np.ndarray]) -> np.ndarray:
    """The members' order: by the ``primary`` keys (window and fields: ``_packed``), start,
    end and payload text (the texts compared only where all else ties)."""
    keys = [members["end"], members["start"], *reversed(primary)]
    sparse = len(primary) == 1 and len(keys[0]) and int(primary[0].max()) >= 4 * len(keys[0])
    order = _by_packed(primary[0], keys[:2]) if sparse else np.lexsort(keys)
    same = np.ones(max(len(order) - 1, 0), bool)
    for key in keys:
        s = key[order]
        same &= s[1:] == s[:-1]
    if not same.any():
        return order
    _, texts = np.unique(with_texts(members)["payload"], return_inverse=True)
    return np.lexsort([texts, *keys])


def _by_packed(packed: np.ndarray, minor: list[np.ndarray]) -> np.ndarray:
    """``np.lexsort([*minor, packed])`` by one sort of ``packed`` (window and fields:
    ``_packed``), then each run of members tied on it by the ``minor`` keys (start, end):
    a third of the lexsort's time where ties are few (the packed keys span four times the
    members or more: many windows, few members each), twice it where most members tie.
    The sort need not be stable (numpy's quicksort: two thirds of the stable one's time):
    members tied on ``packed`` are put in order by the minor keys, and where some tie on
    those too the caller sorts them all again (``_sorted``)."""
    order = np.argsort(packed)
    ranked = packed[order]
    tied = ranked[1:] == ranked[:-1]
    if not tied.any():
        return order
    at, run = frame.tie_runs(tied)
    order[at] = order[at][np.lexsort([*(key[order[at]] for key in minor), run])]
    return order


def _unordered(win: np.ndarray, keys: list[np.ndarray], classes: list[np.ndarray],
               n: int) -> np.ndarray:
    """Per window, whether the codes cannot order its members (sorted) as Python does: a
    value of another class, or a number next to a text tied on the fields before."""
    bad = np.zeros(n, bool)
    tied = win[1:] == win[:-1]
    for key, cls in zip(keys, classes, strict=True):
        bad[win[cls == OTHER]] = True
        mixed = tied & (cls[1:] != cls[:-1]) & (cls[1:] <= TEXT) & (cls[:-1] <= TEXT)
        bad[win[1:][mixed]] = True
        tied = tied & (key[1:] == key[:-1])
    return bad


def _ranks(win: np.ndarray, keys: list[np.ndarray]) -> np.ndarray:
    """Each sorted member's SQL RANK in its window: one plus the place of its tie's first."""
    at = np.arange(len(win))
    first = np.ones(len(win), bool)
    first[1:] = win[1:] != win[:-1]
    new = first.copy()
    for key in keys:
        new[1:] |= key[1:] != key[:-1]
    window_start = np.maximum.accumulate(np.where(first, at, 0))
    return np.maximum.accumulate(np.where(new, at, 0)) - window_start + 1


def _slowly(members: dict[str, np.ndarray], rows: np.ndarray, slow: Slow) -> list[tuple[str, int]]:
    """One window's members ranked by the per-window sort, in (start, end, payload) order."""
    events = sorted(zip(members["start"][rows].tolist(), members["end"][rows].tolist(),
                        members["payload"][rows].tolist(), strict=True))
    texts = [e[2] for e in events]
    return [(texts[i], rank) for i, rank in slow([payload_from_json(t) for t in texts])]
