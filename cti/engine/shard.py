"""The step of one query shard, and of one ingress group: a batch of input rows in, output
rows out, on plain-data state (picklable: Spark keeps it in its state store).

A shard of a query receives every input row of every ingress group the query reads, with the
payloads of the events it owns (``cti.engine.batch.routed``), or, for a stream whose CTIs it
can compute from the source's generation points, only its own events and those points
(``cti.ingress.timed``). Per group it runs the group's ingress through the one dispatcher
of a shard's step, ``cti.ingress.paths.shard_step``, given what the route says of the group
(``Shard._context``); then the ``QueryMachine`` over the events it owns. (The row
machine, ``tests/ingress_machine.py``, is their definition, the oracle tests check them
against; no runtime runs it.) Every shard computes the same CTIs.
The in-process runtime runs this step with one shard; Spark runs it in its stateful function,
one call per shard and micro-batch.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd
import pyarrow as pa

from cti.adapters import FIELD_COLUMN
from cti.engine.batch import owners
from cti.engine.route import QueryRoute, ShardKey
from cti.events import EVENT_KINDS, INPUT_STATUSES, SHAPE_KINDS, EventShape
from cti.forms import frame
from cti.forms.json_text import frame_payloads
from cti.ingress import paths
from cti.ingress.group import GroupRun
from cti.ingress.progress import PROGRESS
from cti.ingress.spec import StreamSpec
from cti.ingress.state import GroupState
from cti.ingress.vectorized import known_columns
from cti.operators.machine import QueryMachine


def ingress_step(machine: GroupRun, rows: pd.DataFrame, owner: int | None = None,
                 settle: bool = True) -> pd.DataFrame:
    """A group's ingress output rows of a batch of its input rows (``IN_ARROW`` columns, as
    pandas), through the array path that takes the group (``cti.ingress.paths``).
    ``owner``, ``settle``: see ``IngressPath.step``."""
    return paths.step(machine, rows, owner, settle).rows


@attrs.frozen
class ShardOutput:
    """What a shard's step gives: each group's ingress output rows that it reports (with
    ``weight``: how many rows each stands for): the rows of the groups it passes on in full;
    else the rows of its own events of a stream timed by generation points or taken as its
    arrival progress (``cti.ingress.progress``), of its own edges, and, on shard 0, every other
    row (the CTIs and what every shard judged alike). The
    released events (with ``release``) and the new output CTIs, with each one's tag (the
    input CTI it answers: ``Chunk.tags``)."""

    ingress: dict[int, pd.DataFrame]
    events: pd.DataFrame
    ctis: list[int]
    tags: list[int] = attrs.field(factory=list)


@attrs.frozen
class Shard:
    """Shard ``shard`` of a query: its plan (``inputs``: the plan's ``Input`` streams, [] for a
    plan of ``InputRef``s), its inputs' (group, index in group) ``refs``, the stream specs of
    each group it reads, its ``route``; ``passing``: the groups whose ingress rows it gives in
    full (a run that returns the input streams' results)."""

    plan: Any
    inputs: Sequence[Any]
    refs: Sequence[tuple[int, int]]
    specs: Mapping[int, Sequence[StreamSpec]]
    route: QueryRoute
    shard: int = 0
    passing: Collection[int] = ()

    @property
    def groups(self) -> list[int]:
        return sorted({g for g, _ in self.refs})

    def new_state(self) -> dict[str, Any]:
        return {"ingress": {g: None for g in self.groups}, "machine": None}

    def step(self, state: dict[str, Any], rows: pd.DataFrame) -> ShardOutput:
        """One batch of input rows (``ROUTED_ARROW`` columns and ``group``, as pandas); updates
        ``state`` (``new_state()`` at first): ``ingress``, then ``query``."""
        reports, chunks = self.ingress(state, rows)
        return self.query(state, reports, chunks)

    def query(self, state: dict[str, Any], reports: dict[int, pd.DataFrame],
              chunks: list[frame.Chunk]) -> ShardOutput:
        """The query machine's step over the chunks ``ingress`` made (``state["machine"]``
        updated). Apart from ``ingress`` so a caller can let the input go in between (Spark's
        shard step does: a large first micro-batch's input frame is then not alive beside
        the machine's work and the state's write)."""
        machine = QueryMachine(self.plan, self.inputs, state["machine"])
        events, ctis = machine.step(chunks)
        state["machine"] = machine.state
        return ShardOutput(reports, events, list(ctis), list(machine.tags))

    def ingress(self, state: dict[str, Any], rows: pd.DataFrame
                 ) -> tuple[dict[int, pd.DataFrame], list[frame.Chunk]]:
        """Each group's ingress over its rows (``state["ingress"]`` updated): the rows the
        shard reports per group and the plan's input chunks, in ``refs`` order."""
        route, shard, groups = self.route, self.shard, self.groups
        ingress_out, reports, direct, parts = {}, {}, {}, {}
        for g in groups:
            specs = self.specs[g]
            ingress = GroupRun(specs, GroupState.from_data(state["ingress"][g], specs))
            part = parts[g] = rows if len(groups) == 1 else rows[rows["group"].to_numpy() == g]
            got = paths.shard_step(ingress, part, self._context(g))
            ingress.settle()  # (the first bad input in arrival order raises)
            paths.weighted(got.rows)
            state["ingress"][g] = ingress.state.to_data()
            ingress_out[g] = got.rows
            direct |= {(g, i): c for i, c in got.chunks.items()}
            reports[g] = got.report if got.report is not None else _counted(
                got.rows, shard, route, g, part)
        chunks = [direct[(g, i)] if (g, i) in direct else chunk(
            ingress_out[g], i, shard, route.fields.get((g, i)), route.shards, parts[g])
            for g, i in self.refs]
        return reports, chunks

    def _context(self, group: int) -> paths.ShardContext:
        """What ingress needs of this shard's route for a group (``paths.shard_step``)."""
        route, shard = self.route, self.shard
        if group in self.passing:
            return paths.ShardContext(None, None, written, _no_chunk, _no_chunk)
        return paths.ShardContext(
            shard, next((i for h, i in route.timed if h == group), None), written,
            lambda got, i, rows: chunk(got, i, shard, route.fields.get((group, i)),
                                       route.shards, rows),
            lambda got, rows: _reported(got, shard, route, group, rows))


def written(rows: pd.DataFrame) -> pd.DataFrame:
    """Input rows with each payload's text, where it was left out for its typed columns
    (``cti.forms.json_text.frame_payloads``): what the ingress paths that keep rows, pair edges or
    report events take (the two that build a shard's chunk from the arrays read the columns)."""
    return frame.with_payloads(rows, frame_payloads(rows)) if FIELD_COLUMN in rows.columns \
        else rows


def _no_chunk(*_: Any) -> Any:
    """(a shard that passes a group's rows on builds its chunks from them, not in ingress)"""
    raise AssertionError("no chunk or report in ingress for a group passed on in full")


def _counted(got: pd.DataFrame, shard: int, route: QueryRoute, group: int,
             rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows of a group's ingress output ``got`` that this shard reports
    (``_reported``)."""
    kept = _reported(got, shard, route, group, rows)
    return got if kept is None else frame.rows_where(got, kept)


def _reported(got: pd.DataFrame, shard: int, route: QueryRoute, group: int,
              rows: pd.DataFrame | None = None) -> np.ndarray | None:
    """Which rows of a group's ingress output ``got`` this shard reports for the metrics
    (a mask; None: every row):
    an edge event's, or an event's of a substream stream spread by its key or of a stream
    taken as its arrival progress (``QueryRoute.by_owner``), its owner's (only the owner,
    which has its payload, pairs or judges it; ``cti.engine.batch.routed``), and
    so is a dead-lettered event's (reported with its payload); every other row shard 0's
    (every shard judges those alike, from their times). ``rows``: the input rows ``got``
    came from, if known (an event's owner as routed: ``chunk``)."""
    status = got["status"]
    by_owner = (((got["kind"].isin(SHAPE_KINDS[EventShape.EDGE])
                  | got["stream"].isin(route.by_owner(group)))
                 & status.isin(INPUT_STATUSES))
                | ((status == "invalid") & got["kind"].isin(EVENT_KINDS))).to_numpy()
    if not by_owner.any():
        return None if shard == 0 else np.zeros(len(got), bool)
    mine = np.zeros(len(got), bool)
    stream, payload = got["stream"].to_numpy(), got["payload"].to_numpy(object)
    for i in np.unique(stream[by_owner]):
        these = by_owner & (stream == i)
        mine[these] = _owned(payload[these], route.fields.get((group, int(i))), shard,
                             route.shards, _routed(rows, int(i), got["in_seq"].to_numpy()[these]))
    return mine | (~by_owner & (shard == 0))


def _routed(rows: pd.DataFrame | None, stream: int, in_seq: np.ndarray,
            at: np.ndarray | None = None) -> np.ndarray | None:
    """The shard each of stream ``stream``'s input rows numbered ``in_seq`` was routed to
    (their ``own``; -1: not among the input ``rows``, or none); None where not known.
    ``at``: their places among the rows (``_input_rows``), where found already."""
    if rows is None or "own" not in rows:
        return None
    if at is None:
        at = _input_rows(rows, stream, in_seq)
        if at is None:
            return None
    return np.where(at >= 0, rows["own"].to_numpy()[np.maximum(at, 0)], -1) if len(rows) \
        else np.full(len(at), -1)


def _owned(payloads: np.ndarray, field: ShardKey, shard: int, shards: int,
           routed: np.ndarray | None = None) -> np.ndarray:
    """Which of these events (their payloads; None: left out, another shard's) the shard
    owns, by the hash the rows were routed by (``batch.owners``): the owner an event's input
    row was routed with (``routed``, -1 where unknown: from an earlier micro-batch) where
    known, else hashed again from its payload (a million reference rows' keys: 0.5 s and a
    list of their texts)."""
    kept = pd.notna(payloads)
    if field is None or shards == 1:  # (one shard owns them all: ``batch.owners``)
        return kept & (shard == 0)
    mine = np.zeros(len(payloads), bool)
    known = np.zeros(len(payloads), bool)
    if routed is not None:
        known = kept & (routed >= 0)
        mine[known] = routed[known] == shard
    rest = kept & ~known
    if rest.any():
        mine[rest] = owners(pa.array(list(payloads[rest]), pa.string()), field, shards) == shard
    return mine


def chunk(got: pd.DataFrame, stream: int, shard: int, field: ShardKey, shards: int,
          rows: pd.DataFrame | None = None) -> frame.Chunk:
    """Stream ``stream``'s CTIs and the accepted and adjusted events the shard owns, from its
    group's ingress output ``got``. Rows of weight 0 are owned by construction (see
    ``vectorized.process_group``). Other events may come from rows of an earlier micro-batch
    (held back until the group's other streams caught up, or to be reordered), so the owner
    of an event that is not one of the input ``rows`` comes from its payload, by the hash
    the rows were routed by (``batch.owners``); a payload left out is another shard's event.
    Where every event is one of the input ``rows`` and they have its typed payload columns,
    the chunk carries them."""
    status = got["status"].to_numpy()
    event = (status == "accepted") | (status == "adjusted")
    owned = got["weight"].to_numpy() == 0
    check = event & ~owned & (got["stream"].to_numpy() == stream)
    at = _input_rows(rows, stream, got["in_seq"].to_numpy()) if rows is not None else None
    if check.any():
        owned[check] = _owned(got["payload"].to_numpy(object)[check], field, shard, shards,
                              None if at is None else _routed(rows, stream, None, at[check]))
    sel = (got["stream"].to_numpy() == stream) & ((status == "cti") | (event & owned))
    out = frame.chunk_of(*(got[c].to_numpy()[sel] for c in (
        "status", "kind", "start", "end", "payload")))
    if at is not None and len(out.events) and FIELD_COLUMN in rows:
        taken = at[sel & event]
        if (taken >= 0).all():  # (else some came from an earlier micro-batch)
            out.columns = known_columns(rows, taken)
    return out


def _input_rows(rows: pd.DataFrame, stream: int, in_seq: np.ndarray) -> np.ndarray | None:
    """Where each of the sequence numbers ``in_seq`` is among the input ``rows`` of
    ``stream`` (-1: not among them); None where a number repeats there (a replayed row
    beside its first reading: looked up no further)."""
    mine = rows["stream"].to_numpy() == stream
    if "own" in rows and "kind" in rows and (rows["own"].to_numpy() < 0).any():
        mine &= ~rows["kind"].isin(PROGRESS).to_numpy()  # (a piece's progress: no rows)
    ours = None if mine.all() else np.flatnonzero(mine)  # (None: every row)
    seqs = rows["seq"].to_numpy() if ours is None else rows["seq"].to_numpy()[ours]
    at = _positions(seqs, np.asarray(in_seq, np.int64))
    if at is None or ours is None or not len(ours):
        return at if at is None or ours is None else np.full(len(at), -1)
    return np.where(at >= 0, ours[at], -1)


def _positions(seqs: np.ndarray, wanted: np.ndarray) -> np.ndarray | None:
    """Where each of ``wanted`` is among ``seqs`` (-1: not there); None where a number
    repeats there. Increasing numbers (a stream's rows as they come) are searched, not
    hashed: a hash table of a million reference rows' numbers was 50 MB at the step's peak."""
    if len(seqs) < 2 or (seqs[1:] > seqs[:-1]).all():
        at = np.searchsorted(seqs, wanted)
        found = at < len(seqs)
        found[found] = seqs[at[found]] == wanted[found]
        return np.where(found, at, -1)
    index = pd.Index(seqs)
    return index.get_indexer(wanted) if index.is_unique else None
