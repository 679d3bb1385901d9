"""Output CTIs that depend on the events, combined over the shards that hold the keys.

Under ``group_by`` a snapshot window that clips to its windows (TopK and user-defined
operators over one, a time-sensitive operator over a count window) pushes each CTI back to
the start of the earliest window still open over the groups (SPEC 8; a clip by another stream
to the start of the earliest event whose end is not known): a shard's output CTI is a promise
about its own groups only, and the query's is the least over the shards. Every shard receives
every input CTI in the same micro-batch, so a CTI computed from CTIs alone is the same on
every shard; each output CTI carries as its *tag* such a CTI, the one it answers
(``Chunk.tags``; ``sharding`` spreads only a plan whose tags are so).

A shard's *level* at tag ``t`` is its last output CTI tagged at or before ``t`` (its
CTIs only rise, so that is its greatest); the query's CTI at ``t`` is ``G(t) = min_s
level_s(t)``, given where it rises above the last one given. A shard's events were released
by its own CTIs; each leaves by the first ``G`` above its sync time (``release``), and until
then is held. That is the one-shard run's output exactly: one shard's CTI at ``t`` is the
least over its groups, each group's rising with ``t`` (docs/spark-runtime.md, "Output CTIs
that depend on the events"; ``tests/test_hold.py`` checks it on random inputs).

``HoldState`` and ``hold_step`` are the whole rule, on output rows as Arrow tables
(``output.OUTPUT_ARROW``): Spark's hold stage runs them per shard after the shards
(``cti.runtime.spark.hold``), and ``combined`` runs them in process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cti.forms.frame import stable_order
from cti.operators.output import OUTPUT_ARROW, step_table
from cti.time import MIN_TIME

Levels = tuple[Sequence[int], Sequence[int]]  # a shard's new output CTIs and their tags


@attrs.define
class HoldState:
    """What the hold keeps for one shard: every shard's ``levels`` (its latest output CTI),
    the latest combined CTI given (``cti``), and the shard's events released by its own CTIs
    that no combined CTI has passed yet (``held``: output rows)."""

    levels: list[int]
    cti: int = MIN_TIME
    held: pa.Table = attrs.field(factory=OUTPUT_ARROW.empty_table)

    @classmethod
    def new(cls, shards: int) -> HoldState:
        return cls([MIN_TIME] * shards)


def combine(levels: list[int], after: int, rises: Mapping[int, Levels]
            ) -> tuple[list[int], list[int]]:
    """The combined CTIs that the shards' new CTIs (``rises``: by shard, in tag order) give
    above ``after``: at each tag, the least of the shards' levels (a shard without a CTI at
    it keeps its level), where it rises. Returns them and the shards' levels after them."""
    got = {s: (np.asarray(v, np.int64), np.asarray(t, np.int64))
           for s, (v, t) in rises.items() if len(v)}
    if not got:
        return [], list(levels)
    tags = np.unique(np.concatenate([t for _, t in got.values()]))
    at = np.empty((len(levels), len(tags)), np.int64)
    for s, level in enumerate(levels):
        if s in got:
            values, own = got[s]
            i = np.searchsorted(own, tags, side="right") - 1
            at[s] = np.where(i >= 0, values[np.maximum(i, 0)], level)
        else:
            at[s] = level
    least = at.min(axis=0)  # (rising with the tags, as every level does)
    up = least > np.concatenate([[after], least[:-1]])
    return least[up].tolist(), at[:, -1].tolist()


def sync_times(rows: pa.Table) -> np.ndarray:
    """Each output row's sync time: an edge end's end, else its start."""
    kind = rows.column("kind")
    return pc.if_else(pc.equal(kind, "edge_end"), rows.column("end"),
                      rows.column("start")).to_numpy(zero_copy_only=False)


def hold_step(state: HoldState, rises: Mapping[int, Levels], events: pa.Table
              ) -> tuple[pa.Table, list[int]]:
    """One micro-batch of one shard's hold: the shards' new CTIs (``rises``) give the new
    combined CTIs; the shard's new ``events`` (output rows, released by its own CTIs) join the
    held ones, and those whose sync time a new combined CTI passes leave, each with the first
    above it as ``release``. Returns those (output rows, in no particular order: the sink's
    to make, ``output.ordered``) and the combined CTIs; updates ``state``.

    The held rows are kept as the chunks they came in (each micro-batch's rows of a shard, in
    sync-time order: ``tagged_table``), so what leaves a chunk is its head, taken as a slice:
    no row is copied here, their payload texts included (``_where``)."""
    gs, state.levels = combine(state.levels, state.cti, rises)
    rows = events.select(OUTPUT_ARROW.names)
    rows = rows if rows.schema == OUTPUT_ARROW else rows.cast(OUTPUT_ARROW)
    held = pa.concat_tables([state.held, rows]) if state.held.num_rows else rows
    if gs:
        state.cti = gs[-1]
    if not gs or not held.num_rows:
        state.held = held
        return OUTPUT_ARROW.empty_table(), gs
    at = np.searchsorted(np.asarray(gs, np.int64), sync_times(held), side="right")
    ready = at < len(gs)
    state.held = _where(held, ~ready)
    out = _where(held, ready)
    return out.set_column(0, "release", pa.array(np.asarray(gs, np.int64)[at[ready]])), gs


def _where(table: pa.Table, mask: np.ndarray) -> pa.Table:
    """The rows of ``table`` where ``mask`` holds, chunk by chunk: a slice of each chunk whose
    rows that hold are one run (no copy), else the chunk filtered; empty chunks dropped."""
    parts, at = [], 0
    for batch in table.to_batches():
        n = batch.num_rows
        keep = mask[at:at + n]
        at += n
        hits = np.flatnonzero(keep)
        if not len(hits):
            continue
        if hits[-1] - hits[0] + 1 == len(hits):
            parts.append(batch.slice(int(hits[0]), len(hits)))
        else:
            parts.append(batch.filter(pa.array(keep)))
    return pa.Table.from_batches(parts, table.schema)


def tagged_table(events: Any, ctis: Sequence[int], tags: Sequence[int]) -> pa.Table:
    """A shard's step for the hold: its released events, in sync-time order (stable; as the
    snapshot window gives them already, so then not copied), and its new CTIs as output rows
    (``output.step_table``), each CTI row's ``end`` its tag. In sync-time order, the rows that
    a combined CTI lets leave are the head of them (``hold_step``)."""
    table = step_table(events, ctis, encoded=True)  # (a window's texts: packed encoded)
    n = table.num_rows - len(ctis)
    sync = sync_times(table.slice(0, n))
    if n > 1 and (np.diff(sync) < 0).any():
        order = stable_order(sync)
        table = table.take(np.concatenate([order, np.arange(n, table.num_rows)]))
    if not len(ctis):
        return table
    end = table.column("end").to_numpy().copy()
    end[n:] = np.asarray(tags, np.int64)
    return table.set_column(3, "end", pa.array(end))


def split(table: pa.Table) -> tuple[pa.Table, Levels]:
    """A ``tagged_table`` (or several, concatenated) into its events (a slice where its CTI
    rows come last, as ``tagged_table`` puts them) and its CTIs' (values, tags), in tag
    order."""
    cti = pc.equal(table.column("kind"), "cti").to_numpy(zero_copy_only=False)
    values = table.column("start").to_numpy()[cti]
    tags = table.column("end").to_numpy()[cti]
    order = np.argsort(tags, kind="stable")
    return _where(table, ~cti), (values[order].tolist(), tags[order].tolist())


def combined(steps: Sequence[Sequence[pa.Table]]) -> list[pa.Table]:
    """In process, as Spark's hold stage does it: each micro-batch's output rows (the
    combined CTIs and every shard's events they release), from each shard's ``tagged_table``
    per micro-batch (``steps[s][b]``)."""
    shards = len(steps)
    states = [HoldState.new(shards) for _ in range(shards)]
    out = []
    for b in range(len(steps[0])):
        parts = [split(steps[s][b]) for s in range(shards)]
        rises = {s: levels for s, (_, levels) in enumerate(parts)}
        batch = []
        for s, (events, _) in enumerate(parts):
            released, gs = hold_step(states[s], rises, events)
            batch.append(released)
        batch.append(cti_rows(gs))
        out.append(pa.concat_tables(batch))
    return out


def cti_rows(ctis: Sequence[int]) -> pa.Table:
    """Combined CTIs as output rows (kind ``cti``, start = end = release)."""
    c = pa.array(np.asarray(ctis, np.int64))
    return pa.table({"release": c, "kind": pa.array(["cti"] * len(ctis), pa.string()),
                     "start": c, "end": c, "payload": pa.nulls(len(ctis), pa.string())},
                    schema=OUTPUT_ARROW)
