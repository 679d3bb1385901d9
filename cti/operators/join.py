"""Temporal join and left anti-semi-join (SPEC 8).

Both sides' events wait in state until no future event of the other side can overlap them
(their end is at or below the other side's CTI). A pair is emitted once it is certain that the
lifetimes overlap: an edge whose end has not arrived lasts at least to its side's CTI. Output
shape follows the input shapes only (so it does not depend on timing): a point joined with
anything is a point; interval with interval an interval; otherwise an edge pair, whose end is
emitted once it is determined (both ends known, or the smaller known end at or below the CTI of
the side whose end is still open).
"""

from __future__ import annotations

import io
from typing import Any

import attrs
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import json as pa_json

from cti.events import EventShape
from cti.forms import frame
from cti.forms.edges import pair_ends
from cti.forms.frame import Chunk
from cti.forms.json_text import column_texts, objects, read_exactly, value_texts
from cti.forms.rows import payload_from_json, payload_to_json
from cti.forms.schema import check_events
from cti.operators import join_side, merge, plan, usercode
from cti.operators.join_side import Side
from cti.operators.projection import union
from cti.operators.unit import OperatorUnit, Wanted, both_fields
from cti.time import MAX_TIME, MIN_TIME

SIDE_COLUMNS = ("id", "kind", "start", "end", "known", "payload", "key", "jkey")


def _empty_side() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=object if c in ("kind", "payload", "key", "jkey")
                                      else bool if c == "known" else np.int64)
                         for c in SIDE_COLUMNS}).set_index("id", drop=False)


def new_state() -> dict[str, Any]:
    """An anti-semi-join's state: each side's table, CTIs, the output CTIs' merge."""
    return {"sides": [_empty_side(), _empty_side()], "ctis": [MIN_TIME, MIN_TIME],
            "merge": merge.new_state(2), "pending": [], "open": [], "next_id": 0}


@attrs.define(eq=False)
class JoinState:
    """A join's state: each side's events (``join_side.Side``: indexed by key), each side's
    latest CTI, the output CTIs' merge, the pairs whose overlap is not yet certain
    (``pending``: (left id, right id) rows), the edge pairs whose end is not yet determined
    (``open``: (left id, right id, start, payload, key)), and the next event id."""

    sides: list[Side] = attrs.Factory(lambda: [Side(), Side()])
    ctis: list[int] = attrs.Factory(lambda: [MIN_TIME, MIN_TIME])
    merge: dict[str, Any] = attrs.Factory(lambda: merge.new_state(2))
    pending: np.ndarray = attrs.Factory(lambda: np.empty((0, 2), np.int64))
    open: list[tuple] = attrs.Factory(list)
    next_id: int = 0


def resumed(state: JoinState | dict[str, Any]) -> JoinState:
    """A join's state as this release keeps it, from a checkpoint of an earlier one too (a
    dict holding each side as one table): the same events, pairs and CTIs."""
    if isinstance(state, JoinState):
        for side in state.sides:
            join_side.reindexed(side)
        return state
    state.pop("edges", None)  # older checkpoints' edge books: the table has what they held
    pending = np.asarray(state["pending"], np.int64).reshape(-1, 2)
    return JoinState([join_side.of_frame(t) for t in state["sides"]], list(state["ctis"]),
                     state["merge"], pending, list(state["open"]), int(state["next_id"]))


def _join_key(events: pd.DataFrame, field: str | None, source: plan.Node, what: str,
              column: pa.Array | None = None) -> np.ndarray | list[str]:
    """Each event's join key text: "" without ``on``, None where the key is null (it matches
    nothing, SQL's rule); an event that lacks a field its stream was not known to have raises
    ``UnknownFieldError``. ``column``: the field's typed column, where known."""
    if field is None:
        return [""] * len(events)
    if column is None and len(events) >= 256 and not events["payload"].isna().any():
        column = frame.exact_field(frame.arrow_texts(events["payload"]), field)  # (Arrow's
        # JSON reader, once: a step of reference rows)
    keys = _typed_keys(column)
    if keys is None:
        codes, values = frame.field_codes(events, field, column)  # (each distinct value's
        # text made once)
        texts = np.asarray([None if v is None else "[" + frame.value_json(v) + "]"
                            for v in values], object)  # (``frame.key_json([v])``)
        keys = texts[codes] if len(codes) else np.empty(0, object)
    nulls = pd.isna(keys)
    if nulls.any():
        check_events(events["payload"].to_numpy(object)[nulls], field, f"{what}(on=...)",
                     source.label, source.fields)
    return keys


def _typed_keys(column: pa.Array | pa.ChunkedArray | None) -> np.ndarray | None:
    """``_join_key``'s texts from a typed column of strings, integers or booleans, by Arrow
    (``json_text.value_texts``: the same text ``frame.value_json`` writes), null as None;
    None where there is no such column."""
    if column is None or column.type not in (pa.string(), pa.int64(), pa.bool_()):
        return None
    got = value_texts(column)
    if got is None:
        return None
    texts, indices = got
    keys = pc.binary_join_element_wise("[", texts, "]", "").to_numpy(zero_copy_only=False)
    keys = np.asarray(keys if indices is None else keys[indices.to_numpy()], object)
    if column.null_count:
        keys[column.is_null().to_numpy(zero_copy_only=False)] = None
    return keys


def _take(state: dict[str, Any], side: int, chunk: Chunk, field: str | None,
          node: plan.Join | plan.AntiSemiJoin) -> pd.DataFrame:
    """Add a chunk's events to one side; close open edges; return the new rows."""
    state.pop("edges", None)  # older checkpoints' edge books: the table has what they held
    events = chunk.events
    kinds = events["kind"].to_numpy()
    ends_mask = kinds == "edge_end"
    new = events[~ends_mask]
    n = len(new)
    ids = np.arange(state["next_id"], state["next_id"] + n, dtype=np.int64)
    state["next_id"] += n
    rows = pd.DataFrame({
        "id": ids, "kind": new["kind"].to_numpy(), "start": new["start"].to_numpy(),
        "end": new["end"].to_numpy(), "known": new["kind"].to_numpy() != "edge_start",
        "payload": new["payload"].to_numpy(), "key": new["key"].to_numpy(),
        "jkey": _join_key(new, field, node.children[side], "join" if isinstance(
            node, plan.Join) else "left_anti_semi_join", chunk.columns[field].filter(
            pa.array(~ends_mask)) if field in chunk.columns else None)}).set_index(
        "id", drop=False)
    table = state["sides"][side]
    table = rows if not len(table) else pd.concat([table, rows])
    # Edge ends close the table's open starts (``known`` False), which ends are known from then.
    if ends_mask.any():
        opened = table[~table["known"].to_numpy(bool)]
        ends = events[ends_mask]
        at, which = pair_ends(opened, ends, ["start", "payload", "key"])
        if len(at):
            ids = opened.index.to_numpy()[at]
            table.loc[ids, "end"] = ends["end"].to_numpy(np.int64)[which]
            table.loc[ids, "known"] = True
    state["sides"][side] = table
    return rows


def join(node: plan.Join, left: Chunk, right: Chunk, state: JoinState) -> Chunk:
    """One step: each side's new events join its side (edge ends close their starts); each
    new event meets the other side's events with its keys (found through the side's index,
    not by a pass over it); the pairs whose overlap is certain are emitted, and the events no
    future event can meet leave."""
    new_l = _add(state, 0, left, node.left_key, node)
    new_r = _add(state, 1, right, node.right_key, node)
    for side, chunk in ((0, left), (1, right)):
        if chunk.ctis:
            state.ctis[side] = chunk.ctis[-1]
    # New left events meet every right one; new right events the left ones that were there.
    below = int(new_l["id"][0]) if len(new_l["id"]) else state.next_id
    found = [_candidates(new_l, state.sides[1], False), _candidates(new_r, state.sides[0], True,
                                                                    below)]
    state.pending = np.concatenate([state.pending, *found])
    decided, state.pending = _decide(node, state)
    closed = _close_open_pairs(state)
    _purge(state)
    ctis = merge.step(state.merge, [left.ctis, right.ctis])
    return Chunk(frame.concat([decided, frame.make(*zip(*closed, strict=True)) if closed
                               else frame.empty()]), ctis)


def _add(state: JoinState, side: int, chunk: Chunk, field: str | None, node: plan.Join
         ) -> dict[str, np.ndarray]:
    """A chunk's events join one side (a new segment); its edge ends close the side's open
    starts. Returns the new rows' columns (``join_side.ROW_COLUMNS``)."""
    events = chunk.events
    kind = events["kind"].to_numpy(object)
    ends_mask = kind == "edge_end"
    column = chunk.columns.get(field) if field is not None else None
    jkeys = np.asarray(_join_key(events, field, node.children[side], "join", column), object)
    keep = ~ends_mask if ends_mask.any() else slice(None)  # (no copy where there are no ends)
    kind = kind[keep]
    n = len(kind)
    cols = {"id": np.arange(state.next_id, state.next_id + n, dtype=np.int64), "kind": kind,
            "start": events["start"].to_numpy(np.int64)[keep],
            "end": events["end"].to_numpy(np.int64)[keep].copy(),  # (closed in place)
            "known": kind != "edge_start", "payload": events["payload"].to_numpy(object)[keep],
            "key": events["key"].to_numpy(object)[keep], "jkey": jkeys[keep]}
    state.next_id += n
    seg = join_side.make_segment(cols)
    join_side.add(state.sides[side], seg)
    if ends_mask.any():
        join_side.close_edges(state.sides[side], events[ends_mask], jkeys[ends_mask])
    return cols


def _candidates(rows: dict[str, np.ndarray], other: Side, right: bool,
                below: int | None = None) -> np.ndarray:
    """(left id, right id) of the pairs of new ``rows`` (of the right side if ``right``) and
    the ``other`` side's events (with ids below ``below``, where given) whose keys are equal
    and whose lifetimes may overlap (an open end counts as infinite); a null key matches
    nothing."""
    ok = np.flatnonzero(pd.notna(rows["jkey"]))
    if not len(ok) or not len(other):
        return np.empty((0, 2), np.int64)
    q, ids, start, end, known = join_side.matches(other, rows["key"][ok], rows["jkey"][ok])
    q = ok[q]
    end = np.where(known, end, MAX_TIME)
    mine_end = np.where(rows["known"][q], rows["end"][q], MAX_TIME)
    keep = np.maximum(rows["start"][q], start) < np.minimum(mine_end, end)
    if below is not None:
        keep &= ids < below
    mine, theirs = rows["id"][q[keep]], ids[keep]
    pairs = np.column_stack([theirs, mine] if right else [mine, theirs]).astype(np.int64)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


_READ = ("kind", "start", "end", "known", "payload", "key")


def _columns(side: Side, ids: np.ndarray, cti: int) -> dict[str, np.ndarray]:
    """Columns of the rows ``ids`` of one side, with each end's bound: the end if known, else
    the side's CTI (an open edge lasts at least that long)."""
    cols = join_side.gather(side, ids, _READ)
    cols["known"] = cols["known"].astype(bool)
    cols["bound"] = np.where(cols["known"], cols["end"], cti)
    return cols


def _decide(node: plan.Join, state: JoinState) -> tuple[pd.DataFrame, np.ndarray]:
    """Emit the pending pairs whose overlap is now certain (a frame), drop those that cannot
    overlap, keep the rest pending. Vectorised over the pairs; the user's functions run per
    pair (or over frames of them)."""
    pending = state.pending
    if not len(pending):
        return frame.empty(), pending
    L, R = state.sides
    cl, cr = state.ctis
    ids = pending
    lc, rc = _columns(L, ids[:, 0], cl), _columns(R, ids[:, 1], cr)
    s = np.maximum(lc["start"], rc["start"])
    # An edge that closed before the other event started: no overlap.
    gone = (lc["known"] & (lc["end"] <= s)) | (rc["known"] & (rc["end"] <= s))
    certain = ~gone & (lc["bound"] > s) & (rc["bound"] > s)
    still = pending[~gone & ~certain]
    pairs = np.flatnonzero(certain)
    joined = np.asarray((_joined_frames if node.frame else _joined)(
        node, lc["payload"][pairs], rc["payload"][pairs]), object)
    kept = np.flatnonzero(joined != None)  # noqa: E711 (None: the predicate said no)
    pairs, payload = pairs[kept], joined[kept]
    lk, rk, t, key = lc["kind"][pairs], rc["kind"][pairs], s[pairs], lc["key"][pairs]
    point = (lk == "point") | (rk == "point")
    interval = (lk == "interval") & (rk == "interval")
    edge = np.flatnonzero(~point & ~interval)
    state.open += [(int(pending[pairs[i], 0]), int(pending[pairs[i], 1]), int(t[i]),
                    payload[i], key[i]) for i in edge.tolist()]
    kind = np.where(point, "point", np.where(interval, "interval", "edge_start")).astype(object)
    end = np.where(point, t + 1, np.where(interval, np.minimum(lc["end"][pairs],
                                                               rc["end"][pairs]), MAX_TIME))
    return frame.make(kind, t, end, payload, key), still


def _joined(node: plan.Join, left: np.ndarray, right: np.ndarray) -> list[str | None]:
    """Each pair's payload (JSON text), None where the predicate rejects the pair: the user's
    functions per pair, each distinct payload parsed once."""
    parsed: dict[str, dict[str, Any]] = {}

    def parse(text: str) -> dict[str, Any]:
        if text not in parsed:
            parsed[text] = payload_from_json(text)
        return parsed[text]

    if node.predicate is None and node.select is None:  # both payloads merged
        merged = _merged(left, right)
        if merged is not None:
            return merged
        return [payload_to_json({**parse(lt), **parse(rt)})
                for lt, rt in zip(left.tolist(), right.tolist(), strict=True)]
    out: list[str | None] = []
    for lt, rt in zip(left, right, strict=True):
        lp, rp = parse(lt), parse(rt)
        try:
            if node.predicate is not None and not node.predicate(lp, rp):
                out.append(None)
                continue
            joined = node.select(lp, rp) if node.select else {**lp, **rp}
        except Exception as exc:
            usercode.note(exc, "join predicate or select", node.label,
                          f"{lt} and {rt}", "payloads")
            raise
        out.append(payload_to_json(joined))
    return out


def _merged(left: np.ndarray, right: np.ndarray) -> list[str] | None:
    """``payload_to_json({**l, **r})`` of each pair of payload texts, built column by column
    by Arrow, where every payload of a side has the same fields and Arrow writes their values'
    JSON exactly (``json_text``): each side's distinct payloads read once by Arrow's JSON
    reader, each merged field's texts taken for the pairs. None otherwise."""
    if not len(left):
        return None
    lc, lu = pd.factorize(left)
    rc, ru = pd.factorize(right)
    lf, rf = _field_texts(lu), _field_texts(ru)
    if lf is None or rf is None:
        return None
    # The right's value wins a shared field, as in a dict.
    return objects({**{name: texts.take(lc) for name, texts in lf.items()},
                    **{name: texts.take(rc) for name, texts in rf.items()}}, len(left))


def _field_texts(texts: np.ndarray) -> dict[str, pa.Array] | None:
    """Each field's JSON text per payload of ``texts``, where all have the same fields and
    Arrow writes every value exactly; else None."""
    try:
        table = pa_json.read_json(io.BytesIO("\n".join(texts).encode()))
    except (pa.ArrowInvalid, TypeError):  # unreadable, or a payload that is not text
        return None
    if table.num_rows != len(texts):
        return None
    out = {}
    for name in table.column_names:
        column = table.column(name)
        # (a field some payloads lack reads as null: not written exactly)
        out[name] = column_texts(column) if read_exactly(column) else None
        if out[name] is None:
            return None
    return out


def _joined_frames(node: plan.Join, left: np.ndarray, right: np.ndarray
                   ) -> list[str | None]:
    """``_joined`` with the user's functions over frames of the pairs' payloads, once."""
    if not len(left):
        return []
    lf, rf = frame.payload_frame(left), frame.payload_frame(right)
    what = f"join(..., frame=True) {node.label}"

    def call(fn: Any, *frames: pd.DataFrame) -> Any:
        try:
            return fn(*frames)
        except Exception as exc:
            usercode.note(exc, "join predicate or select", node.label,
                          f"{left[0]} and {right[0]}", f"frames of {len(left)} pairs; the first")
            raise

    keep = np.ones(len(left), bool) if node.predicate is None else frame.mask_of(
        call(node.predicate, lf, rf), len(left), f"{what}: the predicate", "pair")
    if node.select is None:  # both payloads merged, pair by pair (a frame has no "absent")
        texts = iter(_joined(attrs.evolve(node, predicate=None), left[keep], right[keep]))
    else:
        result = call(node.select, lf[keep].reset_index(drop=True),
                      rf[keep].reset_index(drop=True))
        texts = iter(frame.payloads_of_frame(result, int(keep.sum()), f"{what}: select"))
    return [next(texts) if k else None for k in keep]


def _close_open_pairs(state: JoinState) -> list[tuple]:
    """Edge pairs whose end is now determined: the smaller known end, once every side whose
    end is still open has a CTI at or beyond it (so its end cannot come earlier)."""
    if not state.open:
        return []
    L, R = state.sides
    cl, cr = state.ctis
    ids = np.asarray([o[:2] for o in state.open], dtype=np.int64)
    lc, rc = _columns(L, ids[:, 0], cl), _columns(R, ids[:, 1], cr)
    end = np.minimum(np.where(lc["known"], lc["end"], MAX_TIME),
                     np.where(rc["known"], rc["end"], MAX_TIME))
    # A known side's bound is its end, never below the smaller end: only open sides can fail.
    done = (lc["known"] | rc["known"]) & (end <= lc["bound"]) & (end <= rc["bound"])
    out = [("edge_end", s, int(end[i]), payload, key)
           for i, (_, _, s, payload, key) in enumerate(state.open) if done[i]]
    state.open = [o for i, o in enumerate(state.open) if not done[i]]
    return out


def _purge(state: JoinState) -> None:
    """Drop events that no future event of the other side can overlap and nothing refers to."""
    for side in (0, 1):
        referenced = np.concatenate([state.pending[:, side], np.asarray(
            [o[side] for o in state.open], np.int64)])
        join_side.purge(state.sides[side], state.ctis[1 - side], referenced)


def anti_semi_join(node: plan.AntiSemiJoin, left: Chunk, right: Chunk,
                   state: dict[str, Any]) -> Chunk:
    """The parts of each left lifetime that no matching right event covers.

    Each left event keeps a frontier: below it, its uncovered parts are decided. The frontier
    moves to the right side's CTI (every right event starting earlier has arrived, and one whose
    end is open covers at least to that CTI), but not past the left event's end, nor, while that
    end is open, past the left side's CTI. A left point gives a point where it is uncovered; an
    interval or edge gives an edge pair per uncovered part (its start once decided, its end once
    reached), so the output does not depend on when the right events arrive.
    """
    new_l = _take(state, 0, left, node.left_key, node)
    _take(state, 1, right, node.right_key, node)
    for side, chunk in ((0, left), (1, right)):
        if chunk.ctis:
            state["ctis"][side] = chunk.ctis[-1]
    sweep = state.setdefault("sweep", {})  # left id -> (frontier, open part's start or None)
    for lid, s in zip(new_l["id"].tolist(), new_l["start"].tolist(), strict=True):
        sweep[lid] = (s, None)
    L, R = state["sides"]
    cl, cr = state["ctis"]
    out: list[tuple] = []
    done: list[int] = []
    by_key = {k: g for k, g in R.groupby(["key", "jkey"], sort=False)} if len(R) else {}
    for lid, (f, open_at) in list(sweep.items()):
        row = L.loc[lid]
        end = int(row["end"]) if row["known"] else None
        horizon = max(f, min(cr, end if end is not None else cl))
        if horizon == f and (end is None or f < end):
            continue  # nothing new to decide (an end at the frontier still closes below)
        covers = _covers(node, row, None if row["jkey"] is None else
                         by_key.get((row["key"], row["jkey"])), f, horizon)
        point = row["kind"] == "point"
        t = f
        while t < horizon:
            reach = max((e for rs, e in covers if rs <= t < e), default=None)
            if reach is not None:  # covered from t on
                if open_at is not None and not point:
                    out.append(("edge_end", open_at, t, row["payload"], row["key"]))
                open_at, t = None, min(reach, horizon)
                continue
            if open_at is None:
                open_at = t
                if not point:
                    out.append(("edge_start", t, MAX_TIME, row["payload"], row["key"]))
            t = min([rs for rs, _ in covers if rs > t] + [horizon])
        if end is not None and horizon >= end:
            if open_at is not None:
                out.append(("point", open_at, open_at + 1, row["payload"], row["key"]) if point
                           else ("edge_end", open_at, end, row["payload"], row["key"]))
            done.append(lid)
        else:
            sweep[lid] = (horizon, open_at)
    for lid in done:
        del sweep[lid]
    state["sides"][0] = L[L.index.isin(list(sweep))]
    frontier = min([cl, *(f for f, _ in sweep.values())])
    state["sides"][1] = R[~(R["known"] & (R["end"] <= frontier))]
    ctis = merge.step(state["merge"], [left.ctis, right.ctis])
    return Chunk(frame.make(*zip(*out, strict=True)) if out else frame.empty(), ctis)


def _holds(node: plan.AntiSemiJoin, lp: dict[str, Any], left: str, right: str) -> bool:
    """The anti-semi-join's predicate of a left payload (parsed ``lp``) and a right one."""
    try:
        return bool(node.predicate(lp, payload_from_json(right)))
    except Exception as exc:
        usercode.note(exc, "left_anti_semi_join predicate", node.label,
                      f"{left} and {right}", "payloads")
        raise


def _covers(node: plan.AntiSemiJoin, row: pd.Series, right: pd.DataFrame | None, lo: int,
            hi: int) -> list[tuple[int, int]]:
    """The matching right lifetimes that reach into [lo, hi): (start, end), an open end as
    MAX_TIME."""
    if right is None:
        return []
    near = right[(right["start"] < hi) & (~right["known"] | (right["end"] > lo))]
    found = []
    lp = payload_from_json(row["payload"]) if node.predicate is not None else None
    for rs, re, known, rp in near[["start", "end", "known", "payload"]].itertuples(index=False):
        if lp is None or _holds(node, lp, row["payload"], rp):
            found.append((int(rs), int(re) if known else MAX_TIME))
    return found


def _keyed_sides(node: plan.Join | plan.AntiSemiJoin
                 ) -> tuple[tuple[plan.Node, str | None], ...]:
    """A join keeps its state per key: each side spread by its key (None: no key, one shard)."""
    return ((node.left, node.left_key), (node.right, node.right_key))


def _join_shape(node: plan.Join) -> EventShape | None:
    """A point meets anything in a point; intervals meet in an interval; else an edge pair
    (unknown if either side is mixed)."""
    shapes = {node.left.shape, node.right.shape}
    return (EventShape.POINT if EventShape.POINT in shapes else
            EventShape.INTERVAL if shapes == {EventShape.INTERVAL} else
            EventShape.EDGE if None not in shapes else None)


def _anti_shape(node: plan.AntiSemiJoin) -> EventShape | None:
    """Left points stay points; an interval or edge leaves an edge pair per uncovered part."""
    shape = node.left.shape
    return shape if shape in (EventShape.POINT, None) else EventShape.EDGE


def _anti_read(node: plan.AntiSemiJoin, wanted: Wanted, read: Any) -> tuple[Wanted, Wanted]:
    """The left events' payloads are the output's, and their key; of the right events only
    their key counts (all of both with a predicate)."""
    if node.predicate is not None:
        return None, None
    keys = [frozenset() if k is None else frozenset({k}) for k in (node.left_key,
                                                                   node.right_key)]
    return union(wanted, keys[0]), keys[1]


UNITS = [
    OperatorUnit(plan.Join, lambda node, inputs, state, machine: join(node, *inputs, state),
                 new_state=lambda node: JoinState(), resume=lambda node, state: resumed(state),
                 spreads=_keyed_sides,
                 output_fields=lambda node: None if node.select is not None
                 else both_fields(node.left, node.right), output_shape=_join_shape),
    OperatorUnit(plan.AntiSemiJoin,
                 lambda node, inputs, state, machine: anti_semi_join(node, *inputs, state),
                 new_state=lambda node: new_state(), spreads=_keyed_sides,
                 output_fields=lambda node: node.left.fields, output_shape=_anti_shape,
                 input_fields=_anti_read),
]
