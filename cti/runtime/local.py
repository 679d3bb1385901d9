"""The in-process runner: the same ingress machine, fed from the adapters in this process.

Deterministic and instant; the oracle the Spark runtime is tested against. ``batch_sizes``
splits each stream's input into batches the way Spark micro-batches would (for tests).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from cti.adapters import InputAdapter
from cti.ingress.machine import IngressMachine
from cti.query import IngressGroup, OutputBinding
from cti.results import RunResult
from cti.rows import InRow, OutRow, adapter_item_to_row, eos_row


def read_rows(index: int, adapter: InputAdapter, start: int, end: int) -> list[InRow]:
    """Rows [start, end) of stream ``index``'s adapter (also used by the Spark source)."""
    return [adapter_item_to_row(index, start + k, item)
            for k, item in enumerate(adapter.read(start, end))]


class LocalRuntime:
    def __init__(self, batch_sizes: Sequence[int] | None = None) -> None:
        self.batch_sizes = list(batch_sizes) if batch_sizes else None

    def _batches(self, group: IngressGroup) -> Iterator[list[OutRow]]:
        """Run the group; yield the output of each batch."""
        machine = IngressMachine(group.specs())
        inputs: list[list[InRow]] = []
        for i, s in enumerate(group.streams):
            adapter = s.factory.create(s.config, s.shape)
            n = adapter.latest_offset()
            rows = read_rows(i, adapter, 0, n)
            if adapter.is_complete():
                rows.append(eos_row(i, n))
            inputs.append(rows)
        if self.batch_sizes is None:
            yield machine.process([r for rows in inputs for r in rows])
            return
        pos = [0] * len(inputs)
        k = 0
        while any(p < len(rows) for p, rows in zip(pos, inputs, strict=True)):
            size = self.batch_sizes[k % len(self.batch_sizes)]
            batch = []
            for i, rows in enumerate(inputs):
                batch += rows[pos[i]:pos[i] + size]
                pos[i] += size
            yield machine.process(batch)
            k += 1

    def run(self, group: IngressGroup) -> RunResult:
        rows = [r for out in self._batches(group) for r in out]
        return RunResult.from_rows(group.names, rows, group.overs)

    def write(self, group: IngressGroup, outputs: Sequence[OutputBinding]) -> None:
        adapters = [o.factory.create(o.config, o.shape) for o in outputs]
        for batch_id, out in enumerate(self._batches(group)):
            for o, adapter in zip(outputs, adapters, strict=True):
                selected = o.select(out)
                if selected:
                    adapter.write(selected, batch_id)
        for adapter in adapters:
            adapter.close()
