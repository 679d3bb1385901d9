"""Hopping and tumbling windows with aggregates (SPEC 8).

Window k is ``[a + k*hop, a + k*hop + size)``. An event belongs to every window its lifetime
overlaps. Each event is expanded into its windows on arrival (vectorised), the built-in
aggregates are kept as partial aggregates per (group key, k), user-defined ones as the window's
events; a window is complete, emitted and purged once the input CTI reaches its end. An edge
whose end has not arrived contributes to every window completed while it is open; when its end
arrives it continues as the interval it turned out to be. Edges still open when the input ends
(CTI at MAX_TIME) end at the last finite CTI (or one tick after their start), so a never-closed
edge does not produce windows forever.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cti.events import EventShape
from cti.forms import frame
from cti.forms.edges import close_edge, open_edge, open_values
from cti.forms.frame import Chunk
from cti.forms.json_text import object_texts
from cti.forms.numbers import Numbers
from cti.forms.rows import payload_from_json, payload_to_json
from cti.forms.schema import check_events, field_names
from cti.operators import exact_sum, plan, ranking, time_sensitive, usercode, window_partials
from cti.operators.aggregates import Aggregate
from cti.operators.projection import aggregates_read
from cti.operators.unit import OperatorUnit
from cti.time import MAX_TIME, MIN_TIME

_NONE_DONE = MIN_TIME  # "no window is complete yet"
# Windows' keys (JSON texts): objects, distinct ones with codes, or Arrow texts.
GroupKeys = np.ndarray | pd.Categorical | pa.Array
_I64 = np.iinfo(np.int64)


def new_state() -> dict[str, Any]:
    return {"cti": MIN_TIME, "finite_cti": MIN_TIME, "partials": window_partials.Partials(),
            "events": {},
            "open": {}}  # OpenEdges: (start, payload, key) -> [first window not fed yet]


def _last_complete(node: plan.Window, c: int) -> int:
    """The largest k whose window ends at or before CTI ``c``."""
    if c == MIN_TIME:
        return _NONE_DONE
    return (c - node.alignment - node.size) // node.hop


def _read_fields(node: plan.Window) -> list[Any]:
    """The payload fields (or functions) the window's built-in aggregates read."""
    return [a.field for a in _builtins(node).values() if a.op != "count"]


def _builtins(node: plan.Window) -> dict[str, Aggregate]:
    return {n: a for n, a in node.aggregates.items() if isinstance(a, Aggregate)}


def _expand(node: plan.Window, starts: np.ndarray, ends: np.ndarray, k_from: np.ndarray,
            k_to: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(row index, k) for every window each lifetime [start, end) overlaps, k >= k_from
    (and <= k_to when given)."""
    a, size, hop = node.alignment, node.size, node.hop
    # Clip so that neither subtraction below leaves int64: an open edge ends at MAX_TIME, and
    # with a negative alignment ``ends - 1 - a`` went past it and wrapped around.
    starts = np.clip(starts, _I64.min + max(a + size, 0), _I64.max + min(a + size, 0))
    ends = np.clip(ends, _I64.min + max(a + 1, 0), _I64.max + min(a + 1, 0))
    k_lo = np.maximum((starts - a - size) // hop + 1, k_from)
    k_hi = (ends - 1 - a) // hop
    if k_to is not None:
        k_hi = np.minimum(k_hi, k_to)
    counts = np.maximum(k_hi - k_lo + 1, 0)
    rows = np.repeat(np.arange(len(starts)), counts)
    offsets = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
    return rows, k_lo[rows] + offsets


def _add(node: plan.Window, state: dict[str, Any], ev: pd.DataFrame, rows: np.ndarray,
         ks: np.ndarray, keys: tuple[np.ndarray, np.ndarray] | None = None,
         columns: dict[str, pa.Array] | None = None) -> None:
    """Add each (event row, window k) to the partial aggregates and the windows' event lists.
    ``keys``: each row's code for its key and the key of each code, where known; ``columns``:
    the events' typed payload columns, where known (``Chunk.columns``)."""
    if not len(rows):
        return
    measures: dict[str, np.ndarray] = {}
    for name, agg in _builtins(node).items():
        if agg.op == "count":
            continue
        got = _user_numbers(node, name, ev, agg.field, (columns or {}).get(agg.field)
                            if isinstance(agg.field, str) else None)
        if isinstance(agg.field, str) and node.source.fields is None:
            nulls = ~(got.is_int | got.is_float)  # a field the stream was not known to have
            if nulls.any():  # (null, absent or not a number: checked on those events)
                check_events(ev["payload"].to_numpy(object)[nulls], agg.field,
                             f"aggregate({name}=agg.{agg.op}({agg.field!r}))",
                             node.source.label, node.source.fields)
        is_int, is_float = got.is_int[rows], got.is_float[rows]
        measures[f"ints:{name}"] = is_int.astype(np.int64)  # (how many: the result's type)
        measures[f"floats:{name}"] = is_float.astype(np.int64)
        if agg.op in ("sum", "avg"):  # integers exactly; floats exactly, in any order
            measures.update(exact_sum.integers(got.ints[rows], f"sum:{name}"))
            measures.update(exact_sum.limbs(f"sum:{name}", np.where(
                is_float, got.floats[rows], np.nan)))
        else:  # the least (greatest) integer and float apart (-0.0 as 0.0: in any order)
            measures[f"{agg.op}:{name}"] = np.where(is_int, got.ints[rows], _NONE[agg.op])
            measures[f"{agg.op}f:{name}"] = np.where(is_float, got.floats[rows] + 0.0, np.nan)
    key_codes, keys = keys if keys is not None else pd.factorize(ev["key"].to_numpy(object))
    pairs, key_of, k_of = _pairs(key_codes[rows], ks)
    partials(state).add(window_partials.grouped(key_of, k_of, np.bincount(pairs), measures,
                                                pairs), keys)
    if ranker(node) is not None:  # (TopK: its windows' members kept column-wise)
        member_keys = key_codes[rows]
        state.setdefault("members", []).append(_members(node, ev, rows, ks, keys[
            member_keys], window_partials.key_hashes(keys)[member_keys], columns))
    elif len(node.aggregates) > len(_builtins(node)):
        lists = state["events"]
        for key, k, s, e, p in zip(ev["key"].to_numpy()[rows], ks.tolist(),
                                   ev["start"].to_numpy()[rows], ev["end"].to_numpy()[rows],
                                   ev["payload"].to_numpy()[rows], strict=True):
            lists.setdefault((key, k), []).append((int(s), int(e), p))


def partials(state: dict[str, Any]) -> window_partials.Partials:
    """The window's partials (``window_partials``), made runs where an older state held one
    frame."""
    held = state["partials"]
    if not isinstance(held, window_partials.Partials):
        held = state["partials"] = window_partials.Partials.of(held)
    return held


def ranker(node: Any) -> Any:
    """The aggregate that ranks every complete window's members at once (TopK's
    ``Ranked``, the window's one aggregate: it has ``values`` and ``rank_windows``), or
    None."""
    if len(node.aggregates) != 1:
        return None
    fn = getattr(next(iter(node.aggregates.values())), "fn", None)
    return fn if hasattr(fn, "rank_windows") else None


def _members(node: plan.Window, ev: pd.DataFrame, rows: np.ndarray, ks: np.ndarray,
             keys: np.ndarray, hashes: np.ndarray, columns: dict[str, pa.Array] | None
             ) -> dict[str, np.ndarray]:
    """Each (event row, window k)'s key (as its partials have it) and its hash (the
    partials', ``window_partials.key_hashes``: the ranking finds a member's window by it),
    k, lifetime, payload (text, or null where the typed ``columns`` are given: kept too) and
    the values the ranking reads (``ranker(node).values``, once per event)."""
    values = ranker(node).values(ev, columns)
    got = {"key": np.asarray(keys, object), "hash": hashes, "k": np.asarray(ks, np.int64),
           "start": ev["start"].to_numpy()[rows], "end": ev["end"].to_numpy()[rows],
           "payload": ev["payload"].to_numpy(object)[rows]}
    if columns:
        got["columns"] = pa.table(columns).take(pa.array(rows))
    return got | {name: column[rows] for name, column in values.items()}


def taken_members(state: dict[str, Any], done: int | None) -> Mapping[str, Any]:
    """The kept members (``_members``) of the windows k <= ``done`` (all: None), taken out
    of ``state``: block by block, so a block wholly ready or wholly not is not copied (the
    members of later windows stay where they are, in at most ``_MEMBER_BLOCKS`` blocks)."""
    blocks = state.get("members") or []
    if any("hash" not in b for b in blocks):  # (a state's blocks written before hashes)
        blocks = [{c: v for c, v in b.items() if c != "hash"} for b in blocks]
    ready, masks, rest = [], [], []
    for block in blocks:
        mask = np.ones(len(block["k"]), bool) if done is None else block["k"] <= done
        if mask.all():
            ready.append(block)
            masks.append(None)
        elif not mask.any():
            rest.append(block)
        else:  # (the ready members read where they lie: ``StackedMembers``)
            ready.append(block)
            masks.append(mask)
            rest.append(ranking.taken(block, ~mask))
    state["members"] = rest if len(rest) <= _MEMBER_BLOCKS else [ranking.stacked(rest)]
    if not ready:
        return {"k": np.empty(0, np.int64)}
    return ready[0] if len(ready) == 1 and masks[0] is None else ranking.StackedMembers(
        ready, masks)


_MEMBER_BLOCKS = 8  # (more blocks of later windows' members are stacked into one)


_NONE = {"min": np.iinfo(np.int64).max, "max": np.iinfo(np.int64).min}  # (no integer)
def _user_numbers(node: plan.Window, name: str, ev: pd.DataFrame, field: Any,
                  column: pa.Array | None = None) -> Numbers:
    """An aggregate's field of each event as a number (``frame.field_numbers``, from its typed
    ``column`` where known; a function's exception noted: ``usercode``)."""
    if not callable(field):
        return frame.field_numbers(ev, field, column)
    def value(p: dict[str, Any]) -> Any:
        try:
            return field(p)
        except Exception as exc:
            usercode.note(exc, f"aggregate {name!r}", node.source.label, payload_to_json(p))
            raise

    return frame.field_numbers(ev, value)


def _computed(node: plan.Window, name: str, agg: Any, texts: list[str]) -> Any:
    """A user-defined aggregate of a window's payloads (JSON texts, in time order; its
    exception noted)."""
    try:
        if getattr(agg, "frame", False):
            return agg.fn(frame.payload_frame(np.asarray(texts, object)))
        return agg.compute([payload_from_json(t) for t in texts])
    except Exception as exc:
        usercode.note(exc, f"aggregate {name!r}", node.source.label,
                      "[" + ",".join(texts) + "]", "window's payloads")
        raise


def _pairs(key_codes: np.ndarray, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's code for its (key code, window k) pair, and each pair's key code and k:
    one integer per pair (grouping by an object column and an integer one took most of the
    time)."""
    k_codes, windows = frame.dense_codes(ks)
    pairs, uniques = frame.dense_codes(key_codes.astype(np.int64) * len(windows) + k_codes)
    return pairs, uniques // len(windows), windows[uniques % len(windows)]


def window(node: plan.Window, chunk: Chunk, state: dict[str, Any],
           group_field: str | None = None) -> Chunk:
    """One step. ``group_field``: the window is the whole query of a ``group_by(group_field)``
    (keys are one-value JSON lists), and its payloads carry the group's value."""
    kind = chunk.raw_events["kind"].to_numpy()
    if node.source.shape in (EventShape.POINT, EventShape.INTERVAL):  # (no edges: no pass)
        is_start = is_end = np.zeros(len(kind), bool)
    else:
        is_start, is_end = kind == "edge_start", kind == "edge_end"
    # The payloads' text where an edge (paired by it) or a user's aggregate reads it
    columns_do = len(node.aggregates) == len(_builtins(node)) and node.source.fields \
        is not None and not (is_start.any() or is_end.any())
    ev = chunk.reads(_read_fields(node)) if columns_do else chunk.raw_events if ranker(
        node) is not None and chunk.columns and not (is_start.any() or is_end.any()) else \
        chunk.events  # (TopK's members keep the typed columns: ``ranking.stacked``)
    k_first = _last_complete(node, state["cti"]) + 1 if state["cti"] != MIN_TIME else None
    a, size, hop = node.alignment, node.size, node.hop
    if is_start.any():  # an open edge's value: the first window it has not fed yet
        for s, p, key in ev.loc[is_start, ["start", "payload", "key"]].itertuples(index=False):
            open_edge(state["open"], (int(s), p, key), (int(s) - a - size) // hop + 1)
    # Edge ends close open edges: the rest of their lifetime is now an interval.
    closed: list[tuple[int, int, str, str, int]] = []
    if is_end.any():
        for s, e, p, key in ev.loc[is_end, ["start", "end", "payload", "key"]].itertuples(
                index=False):
            found, k_next = close_edge(state["open"], (int(s), p, key))
            if found:
                closed.append((int(s), int(e), p, key, k_next))
    is_fixed = ~(is_start | is_end)
    fixed = ev if is_fixed.all() else ev[is_fixed]
    # Before the first CTI no window is complete: no bound (windows near MIN_TIME have k near
    # MIN_TIME / hop). k_first past int64 after a CTI at MAX_TIME: clamped.
    rows, ks = _expand(node, fixed["start"].to_numpy(), fixed["end"].to_numpy(),
                       np.full(len(fixed), _I64.min if k_first is None else
                               min(max(k_first, _I64.min), _I64.max), np.int64), None)
    known = chunk.keys if is_fixed.all() else None if chunk.keys is None else (
        chunk.keys[0][is_fixed], chunk.keys[1])
    _add(node, state, fixed, rows, ks, known,
         chunk.columns if is_fixed.all() else chunk.taken(is_fixed))
    if closed:
        cf = frame.make(["interval"] * len(closed), [c[0] for c in closed],
                        [c[1] for c in closed], [c[2] for c in closed], [c[3] for c in closed])
        rows, ks = _expand(node, cf["start"].to_numpy(), cf["end"].to_numpy(),
                           np.asarray([c[4] for c in closed], dtype=np.int64), None)
        _add(node, state, cf, rows, ks)
    if not chunk.ctis:
        return Chunk(frame.empty(), [])
    c = chunk.ctis[-1]
    state["cti"] = c
    finite = [t for t in chunk.ctis if t < MAX_TIME]
    if finite:
        state["finite_cti"] = finite[-1]
    if c < MAX_TIME:
        done = _last_complete(node, c)
        _feed_open_edges(node, state, done)
    else:
        # End of input: open edges end at the last finite CTI; every window completes.
        for (s, p, key), k_next in open_values(state["open"]):
            e = max(state["finite_cti"], s + 1)
            rows, ks = _expand(node, np.asarray([s]), np.asarray([e]), np.asarray([k_next]),
                               None)
            _add(node, state, frame.make(["interval"], [s], [e], [p], [key]), rows, ks)
        state["open"] = {}
        done = None
    out = _emit(node, state, done, group_field)
    if node.output_policy is plan.WindowOutputPolicy.CLIP_TO_WINDOW_END:
        ctis, tags = frame.rising(
            (c if c == MAX_TIME else a + (_last_complete(node, c) + 1) * hop
             for c in chunk.ctis), chunk.cti_tags)
        return Chunk(out, ctis, tags=tags)
    return Chunk(out, list(chunk.ctis), tags=chunk.tags)


def _feed_open_edges(node: plan.Window, state: dict[str, Any], done: int) -> None:
    """Open edges last at least to the CTI: they belong to every window completed now."""
    for (s, p, key), k_nexts in state["open"].items():
        for i, k_next in enumerate(k_nexts):
            if k_next <= done:
                rows, ks = _expand(node, np.asarray([s]), np.asarray([MAX_TIME]),
                                   np.asarray([k_next]), np.asarray([done]))
                _add(node, state, frame.make(["interval"], [s], [MAX_TIME], [p], [key]), rows,
                     ks)
                k_nexts[i] = done + 1


def _emit(node: plan.Window, state: dict[str, Any], done: int | None,
          group_field: str | None) -> pd.DataFrame:
    """Results of the complete windows (k <= done; all when done is None), then purge them."""
    out = partials(state).take(done)
    if out is None:
        return frame.empty()
    if ranker(node) is not None:
        out = _by_key_text(out)
    a, size, hop = node.alignment, node.size, node.hop
    key_texts = window_partials.key_texts(out)  # (Arrow: no Python string per row)
    kk = out["k"].to_numpy()
    starts = a + kk * hop
    ends = starts + size
    columns = {name: _result(out, name, agg) for name, agg in node.aggregates.items()
               if isinstance(agg, Aggregate)}
    extra = group_field is not None and group_field not in node.aggregates
    payloads = _numeric_payloads(node, columns, group_field if extra else None, key_texts)
    # Each window's key: for its output row, and for the payloads written window by window;
    # right under a group_by, whose key then goes (``QueryMachine``), not for the output.
    keys = out["key"].to_numpy(object) if group_field is None or payloads is None else None
    if payloads is None and (rank := ranker(node)) is not None:
        payloads = rank.rank_windows(taken_members(state, done), keys, kk,
                                     out[window_partials.HASH].to_numpy())
    if payloads is None:
        payloads = []
        plain = {name: numbers.values() for name, numbers in columns.items()}
        for i, (key, k) in enumerate(zip(keys, kk.tolist(), strict=True)):
            p = {name: values[i] for name, values in plain.items()}
            if extra:
                p[group_field] = payload_from_json(key)[-1]
            if len(columns) < len(node.aggregates):
                events = sorted(state["events"].pop((key, k), []))
                texts = [e[2] for e in events]
                for name, agg in node.aggregates.items():
                    if getattr(agg, "time_sensitive", False):  # (events and the window)
                        p[name] = time_sensitive.value(node, name, agg, events,
                                                     int(starts[i]), int(ends[i]))
                    elif name not in columns:
                        p[name] = _computed(node, name, agg, texts)
            payloads.append(payload_to_json(p))
    if keys is None:
        keys = frame.repeated(len(out), "")
    if node.output_policy is plan.WindowOutputPolicy.CLIP_TO_WINDOW_END:
        return frame.make(frame.repeated(len(out), "interval"), starts, ends, payloads, keys)
    return frame.make(frame.repeated(len(out), "point"), ends, ends + 1, payloads, keys)


def _by_key_text(out: pd.DataFrame) -> pd.DataFrame:
    """Taken partials (``Partials.take``: by k and key hash) by k and key text: TopK's
    results then come, window k by window k, in the order of their payloads where these
    begin with the group's key (the output's order: ``output._runs_in_order`` finds them so,
    with no sort of their texts)."""
    if not len(out):
        return out
    codes = pc.dictionary_encode(window_partials.key_texts(out))  # (each text sorted once)
    place = pc.rank(codes.dictionary, tiebreaker="first").to_numpy()[codes.indices.to_numpy()]
    k = out["k"].to_numpy()
    if (int(k.max()) - int(k.min()) + 1) * len(codes.dictionary) < 2 ** 62:  # (one number)
        # (each (k, key) once: the packed numbers distinct, so any sort gives one order)
        order = np.argsort((k - k.min()) * len(codes.dictionary) + place)
    else:
        order = np.lexsort((place, k))
    return out.take(order).reset_index(drop=True)


def _result(out: pd.DataFrame, name: str, agg: Aggregate) -> Numbers:
    """A built-in aggregate's result per window of its partials: a count; a sum, minimum or
    maximum that is an integer where every number it took is one, else a float (a sum of
    none: 0); an average, a float (of none: null)."""
    n = len(out)
    if agg.op == "count":
        return Numbers.of_ints(out["n"].to_numpy(), np.ones(n, bool))
    ints, floats = out[f"ints:{name}"].to_numpy(), out[f"floats:{name}"].to_numpy()
    if agg.op in ("sum", "avg"):
        whole, fits, _ = exact_sum.whole(out, f"sum:{name}")
        total = exact_sum.total(out, f"sum:{name}")  # (the integers' and the floats' sum)
        if agg.op == "avg":
            count = ints + floats
            with np.errstate(invalid="ignore", divide="ignore"):
                return Numbers.of_floats(np.where(count > 0, total / count, np.nan))
        exact = (floats == 0) & fits  # (beyond 64 bits: a float, as such an input is)
        return Numbers(whole, total, exact, ~exact)
    least = np.fmin if agg.op == "min" else np.fmax
    as_float = np.where(ints > 0, out[f"{agg.op}:{name}"].to_numpy().astype(np.float64), np.nan)
    return Numbers(out[f"{agg.op}:{name}"].to_numpy(), least(as_float, out[
        f"{agg.op}f:{name}"].to_numpy()), (floats == 0) & (ints > 0), floats > 0)


def _numeric_payloads(node: plan.Window, columns: dict[str, Numbers],
                      group_field: str | None, keys: GroupKeys
                      ) -> pd.arrays.ArrowExtensionArray | None:
    """The payloads' canonical JSON built column-wise (``json_text``: each number as
    ``json.dumps`` writes it), where every aggregate is a built-in, with the group's value
    (the JSON inside each one-value key) under ``group_field``; None otherwise. An Arrow
    column: the output takes it as it is, with no Python string per result
    (``frame.arrow_texts``)."""
    if len(columns) < len(node.aggregates) or not (columns or group_field is not None):
        return None
    texts = _distinct_texts(columns, group_field, keys)
    if texts is None:
        texts = _texts(columns, group_field, keys)
    return pd.arrays.ArrowExtensionArray(texts)


def _texts(columns: dict[str, Numbers], group_field: str | None,
           keys: GroupKeys) -> pa.Array:
    """``_numeric_payloads``' texts, row by row."""
    texts: dict[str, Any] = {name: numbers.texts() for name, numbers in columns.items()}
    if group_field is not None:
        texts[group_field] = _group_values(keys)
    return object_texts(texts, len(keys))


FEW_COMBOS = 16  # rows per combination of values from which every combination has a text


def _distinct_texts(columns: dict[str, Numbers], group_field: str | None,
                    keys: GroupKeys) -> pa.Array | None:
    """``_texts`` made once for each distinct row, each row's its index into them (a
    dictionary-encoded column: no text copied per row; ``QueryMachine`` writes them out where
    another operator reads them, the output where it writes them), where every number
    is an integer, the keys (with ``group_field``) a ``Categorical``, and the rows' values
    together span no more numbers than there are rows (a count per key over a few keys:
    thousands of texts for millions of results); None otherwise."""
    n = len(keys)
    if not n or not all(c.is_int.all() for c in columns.values()):
        return None
    digits: list[tuple[np.ndarray, int, int]] = []  # (values, least, span)
    if group_field is not None:
        if not isinstance(keys, pd.Categorical) or keys.codes.min() < 0:
            return None
        digits.append((keys.codes, 0, len(keys.categories)))  # (made int64 below)
    for c in columns.values():
        least = int(c.ints.min())
        digits.append((c.ints, least, int(c.ints.max()) - least + 1))
    combos = math.prod(span for _, _, span in digits)
    if combos > n:
        return None
    # (each row's values as one number, a digit per column; written in place)
    row = np.subtract(digits[0][0], digits[0][1], dtype=np.int64)
    for values, least, span in digits[1:]:
        row *= span
        row += values
        if least:
            row -= least
    if combos <= n // FEW_COMBOS:
        # (many rows per combination: a text for each, used or not, and no pass over the
        # rows to number the used ones)
        distinct, at = np.arange(combos), row
    else:
        present = np.zeros(combos, bool)
        present[row] = True
        distinct = np.flatnonzero(present)
        at = (np.cumsum(present) - 1)[row]
    parts, rest = [], distinct
    for _, least, span in reversed(digits):
        parts.append(rest % span + least)
        rest = rest // span
    parts.reverse()
    if group_field is not None:
        keys = pd.Categorical.from_codes(parts.pop(0), dtype=keys.dtype)
    ints = {name: Numbers.of_ints(v, np.ones(len(v), bool))
            for name, v in zip(columns, parts, strict=True)}
    return pa.DictionaryArray.from_arrays(pa.array(at.astype(np.int32)),
                                          _texts(ints, group_field, keys))


def _group_values(keys: GroupKeys) -> pa.Array:
    """The JSON value inside each one-value key: of each distinct key once where they come
    as a ``Categorical``, from Arrow texts where they are some (no Arrow string made per row
    from a Python one)."""
    if isinstance(keys, pa.Array):
        return pc.utf8_slice_codeunits(keys, 1, -1).cast(pa.string())
    if isinstance(keys, pd.Categorical):
        values = pa.array(keys.categories.to_numpy(object), pa.string())
        return pc.utf8_slice_codeunits(values, 1, -1).take(pa.array(keys.codes))
    return pc.utf8_slice_codeunits(pa.array(keys, pa.string()), 1, -1)


UNITS = [OperatorUnit(
    plan.Window,
    lambda node, inputs, state, machine: window(node, inputs[0], state,
                                                machine.group_field_of.get(id(node))),
    new_state=lambda node: new_state(),
    output_fields=lambda node: field_names(node.aggregates),
    input_fields=lambda node, wanted, read: (aggregates_read(node.aggregates),),
    output_shape=lambda node: EventShape.INTERVAL if node.output_policy is
    plan.WindowOutputPolicy.CLIP_TO_WINDOW_END else EventShape.POINT, tags=True)]
