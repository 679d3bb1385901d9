"""``QueryMachine``: runs a plan over the ingress output of its input streams, step by step.

Each step takes one chunk per input stream (events and CTIs in that stream's order), runs every
operator once (a node used twice in the plan runs once), and returns the released output: the
events whose sync time lies below an output CTI, each tagged with the CTI that releases it,
and the new output CTIs. Output order is the sink's to make (``output.ordered``): Spark shards'
rows meet there, so ordering each shard's rows first would be work done twice. The whole state
is plain data (pandas frames, lists, dicts), so Spark can keep it in its state store; the same
machine runs in-process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from cti.errors import NullKeyError
from cti.events import one_kind
from cti.forms import frame
from cti.forms.frame import Chunk
from cti.forms.rows import payload_from_json, payload_to_json
from cti.forms.schema import check_events, shown
from cti.operators import plan, usercode
from cti.operators.registry import unit_of
from cti.time import MIN_TIME


def _new_node_state(node: plan.Node) -> Any:
    """A node's state at the start: its operator's (``registry``); inputs have none."""
    if isinstance(node, plan.Input | plan.GroupInput):
        return None
    unit = unit_of(node)
    return unit.new_state(node) if unit.new_state is not None else None


def _resumed(node: plan.Node, state: Any) -> Any:
    """A node's state as given (a checkpoint's, perhaps of an earlier release) as its
    operator keeps it now (``OperatorUnit.resume``)."""
    if state is None or isinstance(node, plan.Input | plan.GroupInput):
        return state
    unit = unit_of(node)
    return unit.resume(node, state) if unit.resume is not None else state


class QueryMachine:
    """Runs ``root`` over the streams ``inputs`` (the plan's ``Input`` streams, by position)."""

    def __init__(self, root: plan.Node, inputs: Sequence[Any],
                 state: dict[str, Any] | None = None) -> None:
        self.root = root
        self.nodes = plan.walk(root)
        self.slot = {id(n): i for i, n in enumerate(self.nodes)}
        self.input_index = {}
        for n in self.nodes:
            if isinstance(n, plan.Input):
                self.input_index[id(n)] = n.stream.index if isinstance(
                    n.stream, plan.InputRef) else next(
                    i for i, s in enumerate(inputs) if s is n.stream)
        # A window right under a group_by (not itself inside another group's query, whose keys
        # have several values) puts the group's field into its payloads itself.
        nested = {id(inner) for n in self.nodes if isinstance(n, plan.GroupApply)
                  for inner in plan.walk(n.body) if isinstance(inner, plan.GroupApply)}
        self.group_field_of = {id(n.body): n.key_name for n in self.nodes
                               if isinstance(n, plan.GroupApply) and id(n) not in nested
                               and isinstance(n.body, plan.Window | plan.SnapshotWindow
                                              | plan.CountWindow | plan.TopK)}
        self.tags: list[int] = []  # the last step's output CTIs' tags (``Chunk.tags``)
        self.state = state if state is not None else {
            "nodes": [_new_node_state(n) for n in self.nodes],
            "buffer": frame.empty(), "cti": MIN_TIME}
        if state is not None:
            self.state["nodes"] = [_resumed(n, s) for n, s in zip(self.nodes, state["nodes"],
                                                                  strict=True)]

    def step(self, chunks: Sequence[Chunk]) -> tuple[pd.DataFrame, list[int]]:
        """One step. Returns (released events with a ``release`` column, in no particular
        order: ``output.ordered`` puts them in output order where they meet; new CTIs). Each
        new CTI's tag, the input CTI it answers, is then in ``tags`` (``Chunk.tags``)."""
        memo: dict[int, Chunk] = {}
        self._step = (chunks, memo)  # the step's inputs, for a group_by's body (group_apply)
        out = self._eval(self.root, chunks, memo)
        return self._release(out)

    # ---- evaluation -----------------------------------------------------------------------------

    def _eval(self, node: plan.Node, chunks: Sequence[Chunk], memo: dict[int, Chunk]) -> Chunk:
        if id(node) in memo:
            return memo[id(node)]
        state = self.state["nodes"][self.slot[id(node)]]
        if isinstance(node, plan.Input):
            result = chunks[self.input_index[id(node)]]
        elif isinstance(node, plan.GroupInput):
            raise RuntimeError("a group's stream is used outside its group_by(...).apply(...)")
        else:
            unit = unit_of(node)
            inputs = [_texts_written(self._eval(c, chunks, memo)) for c in node.children]
            result = unit.step(node, inputs, state, self)
        memo[id(node)] = result
        return result

    def group_apply(self, node: plan.GroupApply, chunk: Chunk) -> Chunk:
        """Each event's key gains the value of ``field``; the body runs keyed; the key's last
        part goes back into the output payloads (``cti.operators.group``)."""
        chunks, memo = self._step
        ev, keys, columns = chunk.reads([node.field]), None, chunk.columns
        if len(ev):
            named = isinstance(node.field, str)
            codes, values = frame.field_codes(ev, node.field if named else _noted_key(node),
                                              chunk.columns.get(node.field) if named else None)
            kept = _null_keys(node, chunk, codes, values)
            if kept is not None:
                ev, codes, columns = ev[kept].reset_index(drop=True), codes[kept], chunk.taken(
                    kept)
            keys = frame.key_codes_with(ev, codes, values)
            ev = frame.make(*(ev[c].to_numpy() for c in ("kind", "start", "end", "payload")),
                            keys[1][keys[0]])
        group_inputs = [n for n in plan.walk(node.body) if isinstance(n, plan.GroupInput)]
        for g in group_inputs:
            memo[id(g)] = Chunk(ev, chunk.ctis, columns, keys, chunk.tags)
        out = self._eval(node.body, chunks, memo)
        return Chunk(self._ungroup(node, out.events), out.ctis, tags=out.tags)

    def _ungroup(self, node: plan.GroupApply, res: pd.DataFrame) -> pd.DataFrame:
        """The group's value goes into each output payload (a payload that has the field keeps
        its own value), and the key loses its last part. A window right under the group_by
        writes the value into its payloads itself (column-wise), so only the key changes."""
        if not len(res):
            return res
        if id(node.body) in self.group_field_of:  # (a frame made anew: pandas copies a
            # column set into one, and the empty keys stay a view of ``frame.repeated``)
            names = list(res.columns)
            columns = dict(zip(names, frame.column_arrays(res, names), strict=True))
            columns["key"] = frame.repeated(len(res), "")
            out = frame.framed(columns)
            out.index = res.index
            return out
        pays, keys = [], []
        res = frame.plain_texts(res).copy(deep=False)  # (whole columns replaced below)
        for k, p in zip(res["key"], res["payload"], strict=True):
            parts = _key_list(k)
            pays.append(payload_to_json({node.key_name: parts[-1], **payload_from_json(p)}))
            keys.append(frame.key_json(parts[:-1]) if len(parts) > 1 else "")
        res["payload"] = pd.Series(pays, dtype=object, index=res.index)
        res["key"] = pd.Series(keys, dtype=object, index=res.index)
        return res

    def run_inner(self, node: plan.Node, inputs: list[Chunk], holder: dict[str, Any]) -> Chunk:
        """Run the operator of ``node``, a node inside another operator (a window operator's
        window: ``cti.operators.udo``), its state kept in ``holder["state"]``."""
        if "state" not in holder:
            holder["state"] = _new_node_state(node)
        return _texts_written(unit_of(node).step(node, inputs, holder["state"], self))

    # ---- release --------------------------------------------------------------------------------

    def _release(self, out: Chunk) -> tuple[pd.DataFrame, list[int]]:
        held = self.state["buffer"]  # (none held: the step's events as they are, not copied)
        buffer = frame.concat([held, out.events]) if len(held) else out.events
        ctis, self.tags = frame.rising(out.ctis, out.cti_tags, self.state["cti"])
        if not ctis or not len(buffer):
            self.state["buffer"] = buffer.copy() if buffer is out.events else buffer
            if ctis:
                self.state["cti"] = ctis[-1]
            return _with_release(frame.empty(), np.empty(0, np.int64)), ctis
        self.state["cti"] = ctis[-1]
        # (a stream of points or intervals has no edge end: each row's sync time its start)
        sync = buffer["start"].to_numpy() if one_kind(self.root.shape) else frame.sync(buffer)
        at = _releasing(np.asarray(ctis, dtype=np.int64), sync)
        ready = at < len(ctis)
        # (the rows held are copied, as an operator's output may be a frame it goes on using;
        # the rows released go on now)
        released, self.state["buffer"] = _rows(buffer, ready), _rows(buffer, ~ready).copy()
        release = np.asarray(ctis, dtype=np.int64)[at[ready]]
        return _with_release(released, release), ctis


def _texts_written(chunk: Chunk) -> Chunk:
    """A chunk whose payloads came dictionary-encoded (a window's repeated texts), written
    out for the operator that reads it: only the query's output keeps them so."""
    events = frame.plain_texts(chunk.raw_events)
    return chunk if events is chunk.raw_events else Chunk(
        events, chunk.ctis, chunk.columns, chunk.keys, chunk.tags)


def _null_keys(node: plan.GroupApply, chunk: Chunk, codes: np.ndarray, values: list[Any]
               ) -> np.ndarray | None:
    """Which events ``group_by`` groups (None: all): an event whose key is null (or lacks
    it, where its stream's fields were known) raises ``NullKeyError``, is left out or kept as
    a group of its own, as ``node.nulls`` says; one that lacks a field its stream was not
    known to have raises ``UnknownFieldError``."""
    is_null = np.fromiter((v is None for v in values), bool, len(values))
    nulls = is_null[codes] if len(values) else np.zeros(len(codes), bool)
    if not nulls.any():
        return None
    payloads = chunk.payload_texts(np.flatnonzero(nulls))
    if isinstance(node.field, str):
        check_events(payloads, node.field, f"group_by({node.field!r})", node.source.label,
                     node.source.fields)
    if node.nulls == "group":
        return None
    if node.nulls == "raise":
        what = repr(node.field) if isinstance(node.field, str) else "key=..."
        whose = f"{node.field!r} is" if isinstance(node.field, str) else "key function gives"
        raise NullKeyError(
            f"group_by({what}) on stream {node.source.label}: an event whose "
            f"{whose} null: {shown(payloads[0])}. Null keys are not equal to each "
            f"other; pass group_by({what}, nulls='group') to group them together, or "
            "nulls='drop' to leave such events out")
    return ~nulls


def _noted_key(node: plan.GroupApply) -> Any:
    """A ``group_by(key=fn)``'s function, its exception noted (``usercode``)."""
    def key(payload: dict[str, Any]) -> Any:
        try:
            return node.field(payload)
        except Exception as exc:
            usercode.note(exc, "group_by(key=...)", node.source.label, payload_to_json(payload))
            raise

    return key


def _key_list(key: str) -> list[Any]:
    return payload_from_json(key) if key else []


def _releasing(ctis: np.ndarray, sync: np.ndarray) -> np.ndarray:
    """Each row's CTI that releases it: the index of the first of the rising ``ctis`` above
    its ``sync`` time (``len(ctis)``: none yet). Where the rows come in a few runs of rising
    sync time (a window's results in the order they were made, after the rows held from the
    step before), one search per CTI in each run and the stretches between them; else one
    search per row."""
    falls = np.flatnonzero(sync[1:] < sync[:-1]) + 1
    if len(falls) > _RELEASE_RUNS or len(sync) < (len(falls) + 1) * len(ctis):
        return np.searchsorted(ctis, sync, side="right")
    numbers = np.arange(len(ctis) + 1)
    return np.concatenate([np.repeat(numbers, np.diff(np.searchsorted(run, ctis, side="left"),
                                                      prepend=0, append=len(run)))
                           for run in np.split(sync, falls)])


_RELEASE_RUNS = 8  # (the most runs of rising sync times ``_releasing`` searches run by run)


def _rows(events: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    """``events[mask]`` numbered from 0 (``frame.rows_where``: no copy of a run of rows)."""
    out = frame.rows_where(events, mask)
    out.index = pd.RangeIndex(len(out))
    return out


def _with_release(events: pd.DataFrame, release: np.ndarray) -> pd.DataFrame:
    events = events.copy(deep=False)  # (a column added: the others shared)
    events["release"] = release.astype(np.int64, copy=False)
    return events
