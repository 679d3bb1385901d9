"""TopK over a window (SPEC 8; StreamInsight's ``orderby ... Take(k)`` with ``e.Rank``).

The events of each window (snapshot, hopping or tumbling; StreamInsight refuses count
windows) ranked by the given fields and directions with SQL RANK (ties share a rank, the next
rank skips: 1, 1, 3), and every event ranked ``k`` or better returned, so ties at the cut
return more than ``k``. Each output carries its input payload and its rank under
``rank_field``; its lifetime, and the output CTIs, are the window's (its output policy).

The window runs as it does for an aggregate (its state, edges, purge and CTI rule are the
window's own), with one aggregate, ``Ranked``, whose result is the window's ranked events;
each window's result is then spread into one output event per ranked event. A null (or
missing) field sorts after every value in either direction; values of a field that do not
compare (a number and a text) raise ``CtiError`` naming the field.

``Ranked`` is not called per window: the window keeps its members column-wise with their
order-by values and hands every window a step completes to ``Ranked.rank_windows`` at once
(``cti.operators.ranking``: one sort, numpy); only windows with values that sort cannot
order as Python does go through the per-window sort (``Ranked.ranked``). The output payloads
are written column-wise where Arrow's JSON reader reads the members' payloads exactly.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from cti.errors import CtiError
from cti.events import EventShape
from cti.forms import frame
from cti.forms.frame import Chunk
from cti.forms.json_text import (
    column_texts,
    json_lines,
    object_texts,
    payload_texts,
    read_exactly,
)
from cti.forms.rows import payload_from_json, payload_to_json
from cti.forms.schema import field_names
from cti.operators import plan, ranking, snapshot, window
from cti.operators.unit import OperatorUnit

RESULT = "ranked"  # the inner window's one aggregate


@attrs.frozen
class Ranked:
    """The ranked events of one window: ``[{**payload, rank_field: rank}, ...]`` for every
    event whose rank is ``k`` or better, best first."""

    k: int
    order_by: tuple[tuple[str, str], ...]
    rank_field: str

    def __call__(self, payloads: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**payloads[i], self.rank_field: rank} for i, rank in self.ranked(payloads)]

    def ranked(self, payloads: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
        """One window's ranking by a sort of its payloads (in time order, kept for ties):
        (position, rank) of each payload ranked ``k`` or better, best first. The whole step's
        windows are ranked at once (``rank_windows``); this sort takes the windows whose
        values that cannot do as Python compares them."""
        values = [tuple(p.get(f) for f, _ in self.order_by) for p in payloads]
        order = sorted(range(len(payloads)), key=functools.cmp_to_key(
            lambda a, b: self._compare(values[a], values[b])))
        out: list[tuple[int, int]] = []
        rank = 0
        for place, i in enumerate(order, 1):
            if place == 1 or self._compare(values[order[place - 2]], values[i]) != 0:
                rank = place
            if rank > self.k:
                break
            out.append((i, rank))
        return out

    def values(self, ev: pd.DataFrame, columns: dict[str, pa.Array] | None
               ) -> dict[str, np.ndarray]:
        """Each event's order-by values (``ranking.order_values``), kept with its windows."""
        return ranking.order_values(ev, [f for f, _ in self.order_by], columns)

    def rank_windows(self, members: dict[str, np.ndarray], keys: np.ndarray, ks: np.ndarray,
                     hashes: np.ndarray | None = None) -> np.ndarray:
        """The payload of each window (``keys[i]``, ``ks[i]``; ``hashes[i]``: the key's hash,
        where known): all ranked at once (``ranking.rank_windows``), each window's payload is
        the one ``Ranking`` of them all, which ``top_k`` spreads into events (no Python
        object per window)."""
        return frame.filled(len(keys), ranking.rank_windows(
            members, keys, ks, self.order_by, self.k, self.ranked, hashes))

    def _compare(self, a: tuple[Any, ...], b: tuple[Any, ...]) -> int:
        """-1 if ``a`` ranks before ``b``, 1 after, 0 a tie."""
        for (name, direction), x, y in zip(self.order_by, a, b, strict=True):
            if x is None or y is None:
                if x is None and y is None:
                    continue
                return 1 if x is None else -1
            try:
                if x == y:
                    continue
                before = x < y
            except TypeError:
                raise CtiError(f"top_k(order_by={list(self.order_by)!r}): the values "
                               f"{x!r} and {y!r} of field {name!r} do not compare") from None
            return (-1 if before else 1) * (-1 if direction == "desc" else 1)
        return 0


def top_k(node: plan.TopK, chunk: Chunk, state: Any, group_field: str | None = None
          ) -> Chunk:
    """One step: the window's step, then each window's ranked events as events of their own
    (the window's lifetime and key). ``group_field``: TopK is the whole query of a
    ``group_by(group_field)`` (keys are one-value JSON lists), and a payload without the field
    gets the group's value, as ``group_by`` gives every payload (``QueryMachine._ungroup``)."""
    if isinstance(node.window, plan.SnapshotWindow):
        got = snapshot.snapshot(node.window, chunk, state)
    else:
        got = window.window(node.window, chunk, state)
    ev = got.events
    if not len(ev):
        return got
    ranked: ranking.Ranking = ev["payload"].iat[0]  # (every window's: ``rank_windows``)
    at = np.repeat(np.arange(len(ev)), ranked.counts)
    keys = ev["key"].to_numpy(object)[at]
    payloads = _typed_payloads(node, ranked, group_field)
    if payloads is None:
        texts = ranked.payload_texts()
        payloads = _column_payloads(node, texts, ranked.ranks, keys, group_field)
        if payloads is None:
            payloads = _payloads(node, texts, ranked.ranks, keys, group_field)
    out = frame.make(ev["kind"].to_numpy(object)[at], ev["start"].to_numpy()[at],
                     ev["end"].to_numpy()[at], payloads, ev["key"].to_numpy(object)[at])
    return Chunk(out, got.ctis, tags=got.tags)


def _payloads(node: plan.TopK, texts: np.ndarray, ranks: np.ndarray, keys: np.ndarray,
              group_field: str | None) -> list[str]:
    """Each ranked member's payload with its rank under ``rank_field`` (and the group's value,
    from its key, under ``group_field`` where it lacks it), parsed and written one by one."""
    out: list[str] = []
    values: dict[str, Any] = {}
    for text, rank, key in zip(texts.tolist(), ranks.tolist(), keys.tolist(), strict=True):
        p = payload_from_json(text)
        p[node.rank_field] = rank
        if group_field is not None and group_field not in p:
            if key not in values:
                values[key] = payload_from_json(key)[-1]
            p[group_field] = values[key]
        out.append(payload_to_json(p))
    return out


def _typed_payloads(node: plan.TopK, ranked: ranking.Ranking, group_field: str | None
                    ) -> pd.arrays.ArrowExtensionArray | None:
    """``_payloads`` written from the members' typed payload columns (``json_text.
    payload_texts``), where they are the payloads and hold ``group_field`` if any; else
    None."""
    table = ranked.columns
    if table is None or group_field is not None and group_field not in table.column_names:
        return None
    fields = ranking.fields_of(table) | {node.rank_field: pa.array(ranked.ranks, pa.int64())}
    return pd.arrays.ArrowExtensionArray(payload_texts(fields, table.num_rows))


def _column_payloads(node: plan.TopK, texts: np.ndarray, ranks: np.ndarray, keys: np.ndarray,
                     group_field: str | None) -> pd.arrays.ArrowExtensionArray | None:
    """``_payloads`` written column-wise (``json_text.object_texts``), where Arrow's JSON
    reader reads every field of the payloads as ``json.loads`` does and each value's text is
    written back exactly (``json_text.read_exactly``, ``column_texts``); else None."""
    if not len(texts):
        return None
    try:
        table = pa_json.read_json(pa.BufferReader(json_lines(pa.array(texts, pa.string()))))
    except pa.ArrowInvalid:
        return None
    if table.num_rows != len(texts):
        return None
    fields = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        texts = column_texts(column) if read_exactly(column) else None
        if texts is None:
            return None
        fields[name] = texts
    fields[node.rank_field] = pa.array(ranks).cast(pa.string())
    if group_field is not None and group_field not in fields:  # (keys: one-value lists)
        fields[group_field] = pc.utf8_slice_codeunits(pa.array(keys, pa.string()), 1, -1)
    return pd.arrays.ArrowExtensionArray(object_texts(fields, len(texts)))


def _new_state(node: plan.TopK) -> Any:
    if isinstance(node.window, plan.SnapshotWindow):
        return snapshot.SnapshotState()
    return window.new_state()


def _fields(node: plan.TopK) -> tuple[str, ...] | None:
    fields = node.source.fields
    return None if fields is None else field_names([*fields, node.rank_field])


UNITS = [OperatorUnit(
    plan.TopK, lambda node, inputs, state, machine: top_k(
        node, inputs[0], state, machine.group_field_of.get(id(node))),
    new_state=_new_state, output_fields=_fields, data_ctis=snapshot.ctis_from_data,
    output_shape=lambda node: EventShape.INTERVAL if node.window.output_policy is
    plan.WindowOutputPolicy.CLIP_TO_WINDOW_END else EventShape.POINT, tags=True)]
