"""The in-process runner: the engine's step (``cti.engine.shard``) with one shard, fed from the
adapters in this process.

Deterministic and instant, and the same step a Spark shard runs: each stream's input is read
as Arrow batches (``cti.engine.batch.piece``: an adapter's ``read_frame`` where it has one),
cut into micro-batches by ``batch_sizes`` the way Spark micro-batches would (for tests and
benchmarks; by default one batch; a mapping caps only the streams it names, by name, and the
others deliver all they have at once, as a reference table does), and each micro-batch
runs through the group's ingress (plain streams) or
the query shard's step (a micro-batch of a query over one stream in steps of at most
``PIECE_ROWS`` rows: the same output, a smaller working set). A stream bound with
``arrival_clock="wall"`` that has delivered everything it has (its input not complete) gets a
clock tick (``cti.forms.rows.clock_row``) in each later batch, and one when the run stops, from
``clock`` (default: the wall clock); the ticks are kept in ``ticks``. A query written to an
output adapter keeps each micro-batch's seconds (read, step and write) in ``batch_seconds``
(the benchmarks'). The process's heap keeps up to ``keep_freed_mb`` MiB of freed memory for
the next step (``cti.engine.heap``: a step's arrays are not mapped and zeroed afresh each
time).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from cti.engine.batch import (
    IN_ARROW,
    piece,
    read_rows,
    routed,
    routed_frame,
    rows_table,
    text_rows,
)
from cti.engine.heap import checked_mib, keep_freed_memory
from cti.engine.route import routes, stream_reads
from cti.engine.shard import Shard, ingress_step
from cti.events import one_kind
from cti.forms import frame
from cti.forms.layout import OUT_COLUMNS, out_rows_from_pandas, out_rows_to_pandas
from cti.forms.rows import EOS, InRow, OutRow, clock_row, eos_row
from cti.ingress.group import GroupRun
from cti.operators.output import deliver, step_table, steps_in_order, table_rows
from cti.results import RunResult, derived_result
from cti.runtime.base import BatchSizes, query_inputs, stream_caps

if TYPE_CHECKING:
    from cti.query import IngressGroup, OutputBinding

KEEP_FREED_MB = 128  # freed memory the heap keeps for the next step (``cti.engine.heap``)


def read_inputs(group: IngressGroup) -> list[list[InRow]]:
    """Each stream's input rows, ending with an end-of-input row where the input is complete."""
    inputs = []
    for i, s in enumerate(group.streams):
        adapter = s.factory.create(s.config, s.shape)
        n = adapter.latest_offset()
        rows = read_rows(i, adapter, 0, n)
        if adapter.is_complete():
            rows.append(eos_row(i, n))
        inputs.append(rows)
    return inputs


def wall_clock() -> int:
    """Now, in ticks (microseconds since the epoch, UTC)."""
    return time.time_ns() // 1000


class _Input:
    """One stream's input as a sequence of elements: its rows, then its end of input where it
    is complete (from its adapter, or rows read already); ``fields``: the payload fields the
    run needs (None: all)."""

    def __init__(self, index: int, adapter: Any = None, rows: list[InRow] | None = None,
                 fields: frozenset[str] | None = None) -> None:
        self.index, self.adapter, self.rows, self.fields = index, adapter, rows, fields
        if rows is not None:
            self.complete = bool(rows) and rows[-1].kind == EOS
            self.rows_n = len(rows) - self.complete
        else:
            self.rows_n = adapter.latest_offset()
            self.complete = adapter.is_complete()
        self.size = self.rows_n + self.complete

    def table(self, lo: int, hi: int, tick: int | None = None) -> pa.Table:
        """Elements [lo, hi) as a batch (``IN_ARROW`` and maybe ``field:`` columns), with a
        clock tick row."""
        if self.rows is not None:
            extra = [] if tick is None else [clock_row(self.index, self.rows_n, tick)]
            return rows_table(self.rows[lo:hi] + extra)
        n = self.rows_n
        return piece(self.adapter if lo < min(hi, n) else None, self.index, min(lo, n),
                     min(hi, n), self.complete and lo <= n < hi, tick, self.fields)


class LocalRuntime:
    def __init__(self, batch_sizes: BatchSizes | None = None,
                 clock: Callable[[], int] | None = None,
                 keep_freed_mb: int | None = KEEP_FREED_MB) -> None:
        self.keep_freed_mb = checked_mib(keep_freed_mb, "LocalRuntime")
        self.batch_sizes = (dict(batch_sizes) if isinstance(batch_sizes, Mapping)
                            else list(batch_sizes)) if batch_sizes else None
        self.clock = clock or wall_clock
        self.ticks: list[InRow] = []  # the clock ticks given, in order
        self.batch_seconds: list[float] = []  # each micro-batch's time (``write_query``)

    def input_batches(self, group: IngressGroup, inputs: list[list[InRow]] | None = None,
                      reads: Callable[[int], frozenset[str] | None] | None = None
                      ) -> Iterator[pa.Table]:
        """The group's input rows, one batch per micro-batch. ``inputs``: the streams' input
        rows if already read (``read_inputs``); ``reads(stream)``: the payload fields the run
        needs of a stream (None: all)."""
        for pieces in self._input_pieces(group, inputs, reads=reads):
            yield _concat(pieces)

    def _input_pieces(self, group: IngressGroup, inputs: list[list[InRow]] | None = None,
                      piece: int | None = None,
                      reads: Callable[[int], frozenset[str] | None] | None = None
                      ) -> Iterator[list[pa.Table]]:
        """``input_batches``, each micro-batch as a list of batches; with ``piece`` (a group of
        one stream), cut into batches of at most that many rows, else one."""
        specs = group.specs()
        streams = [_Input(i, rows=rows) for i, rows in enumerate(inputs)] if inputs is not None \
            else [_Input(i, s.factory.create(s.config, s.shape), fields=reads and reads(i))
                  for i, s in enumerate(group.streams)]
        live = [s.index for s in streams if specs[s.index].arrival_clock == "wall"
                and not s.complete]
        caps = stream_caps(self.batch_sizes, group.names)
        if piece is not None:
            (one,) = streams
            sizes, lo = (caps and caps[0]) or [max(1, one.size)], 0
            for k in itertools.count():
                if lo >= one.size and (k or caps):
                    break
                hi = lo + sizes[k % len(sizes)]
                yield [one.table(a, min(a + piece, hi))
                       for a in range(lo, max(lo + 1, min(hi, one.size)), piece)]
                lo = hi
        elif caps is None:
            yield [s.table(0, s.size) for s in streams]
        else:
            pos = [0] * len(streams)
            for k in itertools.count():
                if all(at >= s.size for at, s in zip(pos, streams, strict=True)):
                    break
                batch = []
                for s, cap in zip(streams, caps, strict=True):
                    lo = pos[s.index]
                    pos[s.index] = s.size if cap is None else lo + cap[k % len(cap)]
                    if lo < s.size:
                        batch.append(s.table(lo, pos[s.index]))
                    elif s.index in live:
                        batch.append(s.table(lo, lo, self._tick(s)))
                yield batch
        if live:  # the run stops with nothing more come: a last tick for each live input
            yield [streams[i].table(streams[i].size, streams[i].size, self._tick(streams[i]))
                   for i in live]

    def _tick(self, stream: _Input) -> int:
        """A clock tick of a silent live stream, recorded in ``ticks``."""
        now = self.clock()
        self.ticks.append(clock_row(stream.index, stream.rows_n, now))
        return now

    def batches(self, group: IngressGroup,
                inputs: list[list[InRow]] | None = None) -> Iterator[list[OutRow]]:
        """Run the group; yield the output rows of each batch. ``inputs``: see
        ``input_batches``."""
        for out in self._frames(group, inputs):
            yield out_rows_from_pandas(out)

    def _frames(self, group: IngressGroup, inputs: list[list[InRow]] | None = None
                ) -> Iterator[pd.DataFrame]:
        """``batches``' output rows of each batch, as the frame the ingress step gives."""
        machine = GroupRun(group.specs())
        keep_freed_memory(self.keep_freed_mb)
        for table in self.input_batches(group, inputs):
            yield ingress_step(machine, frame.arrow_to_pandas(text_rows(table)))

    def run(self, group: IngressGroup) -> RunResult:
        return RunResult.from_frame(group.names, _stacked(list(self._frames(group))),
                                    group.overs)

    def run_query(self, query: Any, with_inputs: bool = True) -> RunResult:
        groups, refs = query_inputs(query)
        ingress: list[list[pd.DataFrame]] = [[] for _ in groups]
        output: list[pa.Table] = []
        for done in itertools.chain.from_iterable(self.query_steps(query, with_inputs)):
            if with_inputs:
                for g, got in done.ingress.items():
                    ingress[g].append(got)
            output.append(step_table(done.events, done.ctis))
        results = [RunResult.from_frame(g.names, _stacked(frames), g.overs)
                   for g, frames in zip(groups, ingress, strict=True)] if with_inputs else []
        return derived_result(query.name, results, table_rows(pa.concat_tables(output))
                              if output else [])

    def query_steps(self, query: Any, with_inputs: bool = False) -> Iterator[Iterator[Any]]:
        """Run a query as one shard; yield each micro-batch's steps'
        ``cti.engine.shard.ShardOutput`` (with ``with_inputs``, each input group's ingress rows
        in full): one step, or one per piece of a batch of one stream, each run as the caller
        takes it (read each batch's before the next: a step's output can be let go before
        the next step runs)."""
        groups, refs = query_inputs(query)
        keep_freed_memory(self.keep_freed_mb)
        route = routes([query], groups, [refs], 1, with_inputs, keyed=True)[0]
        read = sorted({g for g, _ in refs})
        shard = Shard(query.node, query.inputs(), refs, {g: groups[g].specs() for g in read},
                      route, 0, read if with_inputs else ())
        state = shard.new_state()
        if len(read) == 1 and _pieceable(groups[read[0]]):
            # One stream: each micro-batch in pieces, one step each (the same output; a
            # smaller working set).
            for pieces in self._input_pieces(groups[read[0]], piece=PIECE_ROWS,
                                             reads=partial(stream_reads, [route], read[0])):
                yield (shard.step(state, routed_frame(part, read[0]))
                       for t in pieces for _, part in routed(route, read[0], t))
            return
        runners = [self.input_batches(groups[g], reads=partial(stream_reads, [route], g))
                   for g in read]
        while True:
            tables = [next(r, None) for r in runners]
            if all(t is None for t in tables):
                return
            rows = [part.append_column("group", pa.array(np.full(part.num_rows, g, np.int32)))
                    for g, t in zip(read, tables, strict=True)
                    if t is not None for _, part in routed(route, g, t)]
            yield iter([shard.step(state, routed_frame(pa.concat_tables(
                rows, promote_options="default")))])

    def write_query(self, bound: Any) -> None:
        adapter = bound.factory.create(bound.config, bound.stream.shape)
        self.batch_seconds, began = [], time.perf_counter()
        kind = one_kind(bound.stream.shape)  # (the query's shape checked by the tests' runs)
        for batch_id, steps in enumerate(self.query_steps(bound.stream)):
            # (each step's rows put in order as it comes: a step's working set, not the batch's)
            deliver(adapter, steps_in_order((step_table(done.events, done.ctis, kind)
                                             for done in steps), edges=kind is None),
                    batch_id, in_order=True)
            now = time.perf_counter()
            self.batch_seconds.append(now - began)
            began = now
        adapter.close()

    def write(self, group: IngressGroup, outputs: Sequence[OutputBinding]) -> None:
        write_outputs(outputs, self.batches(group))


def _stacked(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Ingress output frames one under the other (their ``OUT_COLUMNS``; none: no rows)."""
    names = [name for name, _ in OUT_COLUMNS]
    return frame.stack(frames, names) if frames else out_rows_to_pandas([])


def write_outputs(outputs: Sequence[OutputBinding], batches: Iterable[list[OutRow]]) -> None:
    """A group's ingress output, batch by batch, to each output adapter (its rows only, by
    ``OutputBinding.select``; a batch with none is not written)."""
    adapters = [o.factory.create(o.config, o.shape) for o in outputs]
    for batch_id, out in enumerate(batches):
        for o, adapter in zip(outputs, adapters, strict=True):
            selected = o.select(out)
            if selected:
                adapter.write(selected, batch_id)
    for adapter in adapters:
        adapter.close()


PIECE_ROWS = 1 << 18  # rows of one step within a micro-batch of one stream (``query_steps``)


def _pieceable(group: IngressGroup) -> bool:
    """Whether a group's micro-batch may run as several steps with the same result: one stream,
    without an event-ordering policy (a snapshot per step) or wall clock (ticks)."""
    (spec, *more) = group.specs()
    return not more and spec.ordering is None and spec.arrival_clock == "data"


def _concat(tables: list[pa.Table]) -> pa.Table:
    """Batches of several streams as one (their ``field:`` columns null where missing)."""
    tables = [t for t in tables if t.num_rows] or tables[:1] or [IN_ARROW.empty_table()]
    return tables[0] if len(tables) == 1 else pa.concat_tables(
        tables, promote_options="default")
