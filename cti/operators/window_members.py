"""Aggregates of windows whose members are known: each (event row, window) pair given, all at
once, when the windows are complete (the snapshot and count windows).

The arithmetic is the hopping window's (``cti.operators.window``): built-in aggregates through
its partial aggregates (exact sums, integer and float results apart, the same payload types),
user-defined ones over the window's payloads in start-time order. So an aggregate means the
same in every kind of window.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cti.forms import frame
from cti.forms.rows import payload_from_json, payload_to_json
from cti.operators import time_sensitive, window
from cti.operators.aggregates import Aggregate

Bounds = tuple[np.ndarray, np.ndarray]  # each window's start and end, by its number ``k``


def aggregated(node: Any, ev: pd.DataFrame, rows: np.ndarray, ks: np.ndarray,
               key_of_k: np.ndarray, group_field: str | None = None,
               bounds: Bounds | None = None) -> tuple[np.ndarray, np.ndarray, Any]:
    """The windows' results: each window's ``k`` and key, and its payload (JSON texts).

    ``node`` has ``aggregates`` and ``source`` (for messages); ``ev`` is a frame of events
    (``start``, ``end``, ``payload``, ``key``); ``rows`` and ``ks`` pair each member (a row of
    ``ev``) with its window's number ``k``, which names one key's window: ``key_of_k[k]``.
    Windows with no member give nothing. ``group_field``: the window is the whole query of a
    ``group_by(group_field)`` (keys are one-value JSON lists), and its payloads carry the
    group's value (``QueryMachine.group_field_of``), as a hopping window's do. ``bounds``:
    each window's start and end by ``k``, for a time-sensitive aggregate (``udo``), which sees
    its window and its events' lifetimes clipped to it."""
    held: dict[str, Any] = window.new_state()
    # (k alone tells the windows apart: one key code for all, the keys put back below)
    window._add(node, held, ev, rows, ks, (np.zeros(len(ev), np.int64), np.asarray([""], object)))
    out = window.partials(held).take(None)
    if out is None or not len(out):
        return np.empty(0, np.int64), np.empty(0, object), np.empty(0, object)
    kk = out["k"].to_numpy()
    key_of = key_of_k[kk]
    if (rank := window.ranker(node)) is not None:  # (TopK: all its windows ranked at once)
        return kk, key_of, rank.rank_windows(window.taken_members(held, None),
                                             out["key"].to_numpy(object), kk)
    columns = {name: window._result(out, name, agg) for name, agg in node.aggregates.items()
               if isinstance(agg, Aggregate)}
    extra = group_field if group_field is not None and group_field not in node.aggregates \
        else None
    payloads = window._numeric_payloads(node, columns, extra, key_of)
    if payloads is None:
        plain = {name: numbers.values() for name, numbers in columns.items()}
        texts_of = held["events"]
        payloads = np.empty(len(out), object)
        for i, (key, k) in enumerate(zip(key_of, kk.tolist(), strict=True)):
            p = {name: values[i] for name, values in plain.items()}
            if extra is not None:
                p[extra] = payload_from_json(key)[-1]
            events = sorted(texts_of.pop((key, k), []))
            texts = [e[2] for e in events]
            for name, agg in node.aggregates.items():
                if getattr(agg, "time_sensitive", False):
                    p[name] = _time_sensitive(node, name, agg, events, bounds, k)
                elif name not in columns:
                    p[name] = window._computed(node, name, agg, texts)
            payloads[i] = payload_to_json(p)
    return kk, key_of, payloads


def _time_sensitive(node: Any, name: str, agg: Any, events: list[tuple[int, int, str]],
                    bounds: Bounds | None, k: int) -> Any:
    """A time-sensitive aggregate over window ``k`` (its events: start, end, payload text)."""
    if bounds is None:
        raise RuntimeError(f"aggregate {name!r}: a time-sensitive aggregate needs its "
                           "window's bounds")
    return time_sensitive.value(node, name, agg, events, int(bounds[0][k]), int(bounds[1][k]))


def expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, k) for every k in ``[lo, hi)`` of each row (none where ``hi <= lo``)."""
    counts = np.maximum(hi - lo, 0)
    rows = np.repeat(np.arange(len(lo)), counts)
    offsets = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
    return rows, lo[rows] + offsets


def by_key(order: np.ndarray, codes: np.ndarray, n_keys: int) -> np.ndarray:
    """``order`` (rows in time order, positions into ``codes``: their keys' codes, each below
    ``n_keys``) stably by key: by key, then time. A radix sort of 16-bit codes where they
    fit."""
    small = codes.astype(np.uint16) if n_keys <= 1 << 16 else codes
    return order.take(np.argsort(small.take(order), kind="stable"))


def pairs_in_time_order(pair_of: np.ndarray, time: np.ndarray) -> np.ndarray:
    """The (key, time) pairs' numbers (``time``: each pair's, the pairs by key, then time) in
    time order, from each row's pair in the rows' time order (``pair_of``): each pair once
    where its rows lie together (all but where another key's row of the same time comes
    between), else sorted afresh. A window operator's results in this order come in the
    output's order: the release takes them as one slice, the output without a sort."""
    first = np.ones(len(pair_of), bool)
    first[1:] = pair_of[1:] != pair_of[:-1]
    got = pair_of[first]
    return got if len(got) == len(time) else frame.stable_order(time)


def reads_payloads(node: Any) -> bool:
    """Whether a snapshot or count window's aggregates read the payloads: all but counts (or
    TopK's ranking)."""
    return not all(isinstance(a, Aggregate) and a.op == "count"
                   for a in node.aggregates.values())


_ADDING = ("count", "sum", "avg")  # aggregates whose partials only add


def aggregated_by_cover(node: Any, ev: pd.DataFrame, first: np.ndarray, past: np.ndarray,
                        ks: np.ndarray, key_of_k: np.ndarray | pd.Categorical,
                        group_field: str | None = None, members: np.ndarray | None = None
                        ) -> tuple[np.ndarray, np.ndarray | pd.Categorical, Any] | None:
    """``aggregated`` where each row of ``ev`` is a member of the consecutive windows
    ``first .. past - 1`` (numbers ``0 .. len(key_of_k) - 1``), for the windows ``ks`` (each
    with a member), without pairing each member with each of its windows: where every
    aggregate only adds (count, sum, avg), each partial (the integers and a float sum's exact
    limbs) added at a row's first window and taken away after its last, then summed along the
    windows. None where that does not hold (another aggregate; an infinite or NaN value,
    which does not take away): the caller pairs them (``expand``). ``key_of_k`` may be a
    ``Categorical`` (each key's value text then made once; the keys given back are one
    too). Counts alone read no column of ``ev``: only how many rows it has. ``members``: each
    window's number of members, where the caller has them (the count's sums)."""
    if not all(isinstance(a, Aggregate) and a.op in _ADDING for a in node.aggregates.values()):
        return None
    each = _row_partials(node, ev)
    if each is None:
        return None
    n = len(key_of_k) + 1
    sums = {}
    for c, v in each.items():
        if c == "n" and members is not None:
            sums[c] = members[ks]
            continue
        if c == "n":  # (one per row: counted, not added)
            step = np.bincount(first, minlength=n) - np.bincount(past, minlength=n)
        else:
            step = np.zeros(n, np.int64)
            np.add.at(step, first, v)
            np.add.at(step, past, -v)
        sums[c] = np.cumsum(step)[ks]
    out = pd.DataFrame(sums, copy=False)
    key_of = key_of_k[ks]
    results = {name: window._result(out, name, agg) for name, agg in node.aggregates.items()}
    extra = group_field if group_field is not None and group_field not in node.aggregates \
        else None
    payloads = window._numeric_payloads(node, results, extra, key_of)
    return ks, key_of, payloads


def _row_partials(node: Any, ev: pd.DataFrame) -> dict[str, np.ndarray] | None:
    """Each row's partials (``n``, the integers' and the float sums' limbs) as the hopping
    window's arithmetic makes them, a row per window; counts alone: just ``n``, one each.
    None where a float sum is not finite (``!``: it does not take away)."""
    if all(a.op == "count" for a in node.aggregates.values()):
        return {"n": np.ones(len(ev), np.int64)}
    rows = np.arange(len(ev))
    held: dict[str, Any] = window.new_state()
    window._add(node, held, ev, rows, rows, (np.zeros(len(ev), np.int64),
                                             np.asarray([""], object)))
    each = window.partials(held).take(None)
    columns = [c for c in each.columns if c == "n" or ":" in c]
    if any(c.endswith("!") for c in columns):
        return None
    order = each["k"].to_numpy()  # (each row's partials: ``k`` is its row)
    got = {}
    for c in columns:
        v = np.zeros(len(ev), np.int64)
        v[order] = each[c].to_numpy()
        got[c] = v
    return got
