"""The test oracle: the row machine, one row at a time, as a runtime (``OracleRuntime``).

Adapter items become input rows (``InRow``: Python events, payloads as JSON), the
``IngressMachine`` processes them one by one, and a query's ``QueryMachine`` takes chunks built
from the ingress output rows. The engine (``cti.engine.shard``, which ``LocalRuntime`` runs)
must give the same results on any input and any batch split: tests/test_engine_oracle.py.
``batch_sizes`` and ``clock`` as ``LocalRuntime``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
from ingress_machine import IngressMachine

from cti.forms import frame
from cti.forms.rows import EOS, InRow, OutRow, clock_row
from cti.operators.machine import QueryMachine
from cti.operators.output import COLUMNS, OutputRow, deliver, rows_of_step
from cti.results import RunResult, derived_result
from cti.runtime.base import query_inputs
from cti.runtime.local import read_inputs, wall_clock, write_outputs

if TYPE_CHECKING:
    from cti.query import IngressGroup, OutputBinding


class OracleRuntime:
    def __init__(self, batch_sizes: Sequence[int] | None = None,
                 clock: Callable[[], int] | None = None) -> None:
        self.batch_sizes = list(batch_sizes) if batch_sizes else None
        self.clock = clock or wall_clock
        self.ticks: list[InRow] = []  # the clock ticks given, in order

    def batches(self, group: IngressGroup,
                inputs: list[list[InRow]] | None = None) -> Iterator[list[OutRow]]:
        """Run the group; yield the output of each batch. ``inputs``: the streams' input rows
        if already read (``read_inputs``)."""
        machine = IngressMachine(group.specs())
        if inputs is None:
            inputs = read_inputs(group)
        live = [i for i, rows in enumerate(inputs) if machine.specs[i].arrival_clock == "wall"
                and not (rows and rows[-1].kind == EOS)]
        if self.batch_sizes is None:
            yield machine.process([r for rows in inputs for r in rows])
        else:
            pos = [0] * len(inputs)
            k = 0
            while any(p < len(rows) for p, rows in zip(pos, inputs, strict=True)):
                size = self.batch_sizes[k % len(self.batch_sizes)]
                batch = []
                for i, rows in enumerate(inputs):
                    part = rows[pos[i]:pos[i] + size]
                    pos[i] += size
                    batch += part or ([self._tick(i, len(rows))] if i in live else [])
                yield machine.process(batch)
                k += 1
        if live:  # the run stops with nothing more come: a last tick for each live input
            yield machine.process([self._tick(i, len(inputs[i])) for i in live])

    def _tick(self, stream: int, seq: int) -> InRow:
        """A clock tick of a silent live stream, recorded in ``ticks``."""
        tick = clock_row(stream, seq, self.clock())
        self.ticks.append(tick)
        return tick

    def run(self, group: IngressGroup) -> RunResult:
        rows = [r for out in self.batches(group) for r in out]
        return RunResult.from_rows(group.names, rows, group.overs)

    def run_query(self, query: Any, with_inputs: bool = True) -> RunResult:
        return run_query(self, query, with_inputs)

    def write_query(self, query: Any) -> None:
        write_query(self, query)

    def write(self, group: IngressGroup, outputs: Sequence[OutputBinding]) -> None:
        write_outputs(outputs, self.batches(group))


def ingress_steps(runtime: OracleRuntime, groups: Sequence[IngressGroup]
                  ) -> Iterator[list[list[OutRow]]]:
    """Step k: the output of batch k of every group (a group with fewer batches gives [])."""
    runners = [runtime.batches(g) for g in groups]
    while True:
        step = [next(r, None) for r in runners]
        if all(s is None for s in step):
            return
        yield [s or [] for s in step]


def _query_steps(runtime: OracleRuntime, query: Any, groups: list[IngressGroup],
                 refs: list[tuple[int, int]]
                 ) -> Iterator[tuple[list[list[OutRow]], list[OutputRow]]]:
    machine = QueryMachine(query.node, query.inputs())
    for step in ingress_steps(runtime, groups):
        chunks = [frame.from_out_rows(sorted((r for r in step[g] if r.stream == i),
                                             key=lambda r: r.seq)) for g, i in refs]
        yield step, rows_of_step(*machine.step(chunks))


def run_query(runtime: OracleRuntime, query: Any, with_inputs: bool = True) -> RunResult:
    groups, refs = query_inputs(query)
    ingress: list[list[OutRow]] = [[] for _ in groups]
    output: list[OutputRow] = []
    for step, rows in _query_steps(runtime, query, groups, refs):
        if with_inputs:
            for g, out in enumerate(step):
                ingress[g] += out
        output += rows
    results = [RunResult.from_rows(g.names, rows, g.overs)
               for g, rows in zip(groups, ingress, strict=True)] if with_inputs else []
    return derived_result(query.name, results, output)


def write_query(runtime: OracleRuntime, bound: Any) -> None:
    adapter = bound.factory.create(bound.config, bound.stream.shape)
    steps = _query_steps(runtime, bound.stream, *query_inputs(bound.stream))
    for batch_id, (_, rows) in enumerate(steps):
        deliver(adapter, pd.DataFrame(rows, columns=list(COLUMNS)), batch_id)
    adapter.close()
