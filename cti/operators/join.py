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

from typing import Any

import numpy as np
import pandas as pd

from cti.operators import frame, merge, plan
from cti.operators.frame import Chunk
from cti.rows import payload_from_json, payload_to_json
from cti.time import MAX_TIME, MIN_TIME

SIDE_COLUMNS = ("id", "kind", "start", "end", "known", "payload", "key", "jkey")


def _empty_side() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=object if c in ("kind", "payload", "key", "jkey")
                                      else bool if c == "known" else np.int64)
                         for c in SIDE_COLUMNS}).set_index("id", drop=False)


def new_state() -> dict[str, Any]:
    return {"sides": [_empty_side(), _empty_side()], "ctis": [MIN_TIME, MIN_TIME],
            "merge": merge.new_state(2), "pending": [], "open": [], "next_id": 0}


def _join_key(events: pd.DataFrame, field: str | None) -> list[str]:
    if field is None:
        return [""] * len(events)
    return frame.map_payloads(events, lambda p: frame.key_json([p.get(field)]))


def _take(state: dict[str, Any], side: int, events: pd.DataFrame,
          field: str | None) -> pd.DataFrame:
    """Add a chunk's events to one side; close open edges; return the new rows."""
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
        "jkey": _join_key(new, field)}).set_index("id", drop=False)
    table = state["sides"][side]
    table = rows if not len(table) else pd.concat([table, rows])
    # Then the edge ends close the earliest open start with the same start, payload and key.
    for s, e, p, k in events.loc[ends_mask, ["start", "end", "payload", "key"]].itertuples(
            index=False):
        match = table.index[(table["kind"] == "edge_start") & ~table["known"]
                            & (table["start"] == s) & (table["payload"] == p)
                            & (table["key"] == k)]
        if len(match):
            first = match.min()
            table.loc[first, "end"] = e
            table.loc[first, "known"] = True
    state["sides"][side] = table
    return rows


def _candidates(left: pd.DataFrame, right: pd.DataFrame) -> list[tuple[int, int]]:
    """Pairs with equal keys whose lifetimes may overlap (open ends count as infinite)."""
    if not len(left) or not len(right):
        return []
    m = left[["id", "start", "end", "key", "jkey"]].merge(
        right[["id", "start", "end", "key", "jkey"]], on=["key", "jkey"], suffixes=("_l", "_r"))
    ok = (np.maximum(m["start_l"], m["start_r"]) < np.minimum(m["end_l"], m["end_r"]))
    m = m[ok]
    return list(zip(m["id_l"].tolist(), m["id_r"].tolist(), strict=True))


def _bound(row: pd.Series, cti: int) -> tuple[int, bool]:
    """What is certain of a side's end: (value, known). An open edge lasts at least to its
    side's CTI."""
    return (int(row["end"]), True) if row["known"] else (cti, False)


def join(node: plan.Join, left: Chunk, right: Chunk, state: dict[str, Any]) -> Chunk:
    new_l = _take(state, 0, left.events, node.left_key)
    new_r = _take(state, 1, right.events, node.right_key)
    for side, chunk in ((0, left), (1, right)):
        if chunk.ctis:
            state["ctis"][side] = chunk.ctis[-1]
    L, R = state["sides"]
    old_l = L.loc[~L.index.isin(new_l.index)]
    state["pending"] += _candidates(new_l, R) + _candidates(old_l, new_r)
    out: list[tuple] = []
    still: list[tuple[int, int]] = []
    cl, cr = state["ctis"]
    for lid, rid in state["pending"]:
        lrow, rrow = L.loc[lid], R.loc[rid]
        s = max(int(lrow["start"]), int(rrow["start"]))
        (le, lk), (re, rk) = _bound(lrow, cl), _bound(rrow, cr)
        if (lk and le <= s) or (rk and re <= s):
            continue  # the edge closed before the other event started: no overlap
        if le <= s or re <= s:
            still.append((lid, rid))  # not certain yet
            continue
        lp, rp = payload_from_json(lrow["payload"]), payload_from_json(rrow["payload"])
        if node.predicate is not None and not node.predicate(lp, rp):
            continue
        payload = payload_to_json(node.select(lp, rp) if node.select else {**lp, **rp})
        kinds = (lrow["kind"], rrow["kind"])
        if "point" in kinds:
            out.append(("point", s, s + 1, payload, lrow["key"]))
        elif kinds == ("interval", "interval"):
            out.append(("interval", s, min(le, re), payload, lrow["key"]))
        else:
            out.append(("edge_start", s, MAX_TIME, payload, lrow["key"]))
            state["open"].append((lid, rid, s, payload, lrow["key"]))
    state["pending"] = still
    out += _close_open_pairs(state)
    _purge(state)
    ctis = merge.step(state["merge"], [left.ctis, right.ctis])
    return Chunk(frame.make(*zip(*out, strict=True)) if out else frame.empty(), ctis)


def _close_open_pairs(state: dict[str, Any]) -> list[tuple]:
    L, R = state["sides"]
    cl, cr = state["ctis"]
    out, still = [], []
    for lid, rid, s, payload, key in state["open"]:
        (le, lk), (re, rk) = _bound(L.loc[lid], cl), _bound(R.loc[rid], cr)
        known = [e for e, k in ((le, lk), (re, rk)) if k]
        open_bounds = [e for e, k in ((le, lk), (re, rk)) if not k]
        if known and all(min(known) <= b for b in open_bounds):
            out.append(("edge_end", s, min(known), payload, key))
        else:
            still.append((lid, rid, s, payload, key))
    state["open"] = still
    return out


def _purge(state: dict[str, Any]) -> None:
    """Drop events that no future event of the other side can overlap and nothing refers to."""
    referenced = [{p[0] for p in state["pending"]} | {o[0] for o in state["open"]},
                  {p[1] for p in state["pending"]} | {o[1] for o in state["open"]}]
    for side in (0, 1):
        table = state["sides"][side]
        other_cti = state["ctis"][1 - side]
        dead = table["known"] & (table["end"] <= other_cti) & ~table.index.isin(
            list(referenced[side]))
        if dead.any():
            state["sides"][side] = table[~dead]


def anti_semi_join(node: plan.AntiSemiJoin, left: Chunk, right: Chunk,
                   state: dict[str, Any]) -> Chunk:
    """Left points with no matching right event covering their time. A point is decided once
    the right side's CTI passes it (every right event that could cover it has arrived)."""
    _take(state, 0, left.events, node.left_key)
    _take(state, 1, right.events, node.right_key)
    for side, chunk in ((0, left), (1, right)):
        if chunk.ctis:
            state["ctis"][side] = chunk.ctis[-1]
    L, R = state["sides"]
    cr = state["ctis"][1]
    ready = L[L["start"] < cr]
    out: list[tuple] = []
    if len(ready):
        rtab = R[["start", "end", "known", "payload", "key", "jkey"]].rename(
            columns={"start": "start_r", "end": "end_r", "known": "known_r",
                     "payload": "payload_r"})
        m = ready[["id", "start", "payload", "key", "jkey"]].merge(rtab, on=["key", "jkey"])
        cover = (m["start_r"] <= m["start"]) & (~m["known_r"].astype(bool)
                                                | (m["end_r"] > m["start"]))
        covered: set[int] = set()
        for i in np.flatnonzero(cover.to_numpy()):
            row = m.iloc[i]
            if node.predicate is None or node.predicate(payload_from_json(row["payload"]),
                                                        payload_from_json(row["payload_r"])):
                covered.add(int(row["id"]))
        for lid, s, p, k in ready[["id", "start", "payload", "key"]].itertuples(index=False):
            if lid not in covered:
                out.append(("point", s, s + 1, p, k))
        state["sides"][0] = L[~L.index.isin(ready.index)]
    L = state["sides"][0]
    horizon = min([state["ctis"][0], *L["start"].tolist()])
    state["sides"][1] = R[~(R["known"] & (R["end"] <= horizon))]
    ctis = merge.step(state["merge"], [left.ctis, right.ctis])
    return Chunk(frame.make(*zip(*out, strict=True)) if out else frame.empty(), ctis)
