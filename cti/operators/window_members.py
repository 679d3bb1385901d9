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

from cti.operators import window
from cti.operators.aggregates import Aggregate
from cti.rows import payload_to_json


def aggregated(node: Any, ev: pd.DataFrame, rows: np.ndarray, ks: np.ndarray,
               keys: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray, Any]:
    """The windows' results: each window's ``k`` and key, and its payload (JSON texts).

    ``node`` has ``aggregates`` and ``source`` (for messages); ``ev`` is a frame of events
    (``start``, ``end``, ``payload``, ``key``); ``rows`` and ``ks`` pair each member (a row of
    ``ev``) with its window's number ``k``; ``keys``: each row's key code and each code's key.
    Windows with no member give nothing."""
    held: dict[str, Any] = {"partials": None, "events": {}}
    window._add(node, held, ev, rows, ks, keys)
    out = held["partials"]
    if out is None or not len(out):
        return np.empty(0, np.int64), np.empty(0, object), np.empty(0, object)
    kk = out["k"].to_numpy()
    key_of = out["key"].to_numpy()
    columns = {name: window._result(out, name, agg) for name, agg in node.aggregates.items()
               if isinstance(agg, Aggregate)}
    payloads = window._numeric_payloads(node, columns, None, key_of)
    if payloads is None:
        plain = {name: numbers.values() for name, numbers in columns.items()}
        texts_of = held["events"]
        payloads = np.empty(len(out), object)
        for i, (key, k) in enumerate(zip(key_of, kk.tolist(), strict=True)):
            p = {name: values[i] for name, values in plain.items()}
            texts = [e[2] for e in sorted(texts_of.pop((key, k), []))]
            for name, agg in node.aggregates.items():
                if name not in columns:
                    p[name] = window._computed(node, name, agg, texts)
            payloads[i] = payload_to_json(p)
    return kk, key_of, payloads


def expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, k) for every k in ``[lo, hi)`` of each row (none where ``hi <= lo``)."""
    counts = np.maximum(hi - lo, 0)
    rows = np.repeat(np.arange(len(lo)), counts)
    offsets = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
    return rows, lo[rows] + offsets
