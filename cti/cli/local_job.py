"""``cti run --runtime local`` for a job that runs until stopped: each output read on by the
in-process engine from where it stopped, with its own checkpoint.

An output's checkpoint (``<checkpoint>/<name>/local.ckpt``) holds what a micro-batch needs to
go on: the next micro-batch id, how many elements (rows, and the end of input where it came)
of each input were read, and the engine's state (the query shard's state: its inputs' ingress
and its operators', plain data, as Spark keeps it in its state store). A pass reads what each
input has added since, runs it as one micro-batch, writes it, then saves the checkpoint. A
run stopped between the write and the save does that micro-batch again with the same id, and
the Delta tables skip it (their commits record the micro-batch ids): exactly once, as on
Spark. A plain stream runs as the query of its own output (``CepStream.as_query``); its dead
letters are the ``invalid`` rows of its ingress output.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pyarrow as pa

from cti.runtime.spark.state import dump_state, load_state

CHECKPOINT = "local.ckpt"


@attrs.define
class LocalCheckpoint:
    """Where one output's query stands: the next micro-batch, the elements read of each input
    ((group, stream) -> count), and the query shard's state."""

    batch: int
    offsets: dict[tuple[int, int], int]
    state: Any

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{CHECKPOINT}.tmp"
        tmp.write_bytes(dump_state(attrs.asdict(self, recurse=False)))
        os.replace(tmp, folder / CHECKPOINT)

    @classmethod
    def load(cls, folder: Path) -> LocalCheckpoint | None:
        path = folder / CHECKPOINT
        return cls(**load_state(path.read_bytes())) if path.exists() else None


class LocalOutputJob:
    """One output of the job on the in-process engine, resumable: ``step()`` runs what its
    inputs added since the last one as a micro-batch and reports it."""

    def __init__(self, query: Any, write: Callable[[Any, int], None], folder: Path,
                 batch_size: int | None = None) -> None:
        from cti.engine.route import routes
        from cti.engine.shard import Shard
        from cti.runtime.base import query_inputs

        self.query, self.write, self.folder = query, write, folder
        self.batch_size = batch_size  # at most this many elements of an input per micro-batch
        self.groups, refs = query_inputs(query)
        self.route = routes([query], self.groups, [refs], 1, True, keyed=True)[0]
        self.read = sorted({g for g, _ in refs})
        self.shard = Shard(query.node, query.inputs(), refs,
                           {g: self.groups[g].specs() for g in self.read}, self.route, 0,
                           self.read)
        self.checkpoint = LocalCheckpoint.load(folder) or LocalCheckpoint(
            0, {}, self.shard.new_state())
        self.finished = False  # every input complete and read to its end

    def _new_rows(self) -> pa.Table | None:
        """Every input's elements not read yet (routed, with their group), or None."""
        from cti.engine.batch import routed
        from cti.engine.route import stream_reads
        from cti.runtime.local import _concat, _Input

        parts, offsets = [], dict(self.checkpoint.offsets)
        self.finished = True
        for g in self.read:
            tables = []
            for i, s in enumerate(self.groups[g].streams):
                source = _Input(i, s.factory.create(s.config, s.shape),
                                fields=stream_reads([self.route], g, i))
                lo = offsets.get((g, i), 0)
                hi = source.size if self.batch_size is None else \
                    min(source.size, lo + self.batch_size)
                if hi > lo:
                    tables.append(source.table(lo, hi))
                offsets[(g, i)] = max(lo, hi)
                self.finished &= source.complete and offsets[(g, i)] >= source.size
            if tables:
                parts += [part.append_column("group", pa.array(np.full(part.num_rows, g,
                                                                        np.int32)))
                          for _, part in routed(self.route, g, _concat(tables))]
        if not parts:
            return None
        self.pending = offsets
        return pa.concat_tables(parts, promote_options="default")

    def step(self, report: Callable[[int, float, Any], None]) -> bool:
        """One micro-batch of what is new, written and checkpointed; False if nothing was."""
        from cti.engine.batch import routed_frame

        rows = self._new_rows()
        if rows is None:
            return False
        t0 = time.perf_counter()
        done = self.shard.step(self.checkpoint.state, routed_frame(rows))
        self.write(done, self.checkpoint.batch)
        report(self.checkpoint.batch, time.perf_counter() - t0, done)
        self.checkpoint.batch += 1
        self.checkpoint.offsets = self.pending
        self.checkpoint.save(self.folder)
        return True
