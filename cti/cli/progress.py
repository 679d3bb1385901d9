"""Live progress of a running job: per input and per output, refreshed per micro-batch.

``RunProgress`` accumulates each micro-batch's ingress metrics (``cti.runtime.spark.metrics``:
``<stream>.<metric>`` as Spark's query progress reports them, or the same computed in process)
per input stream, the rows each output holds, and the latest micro-batch's time. It shows them
as a table refreshed in place on a terminal (``rich``), or one log line per micro-batch
otherwise.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, TextIO

import attrs

from cti.events import INPUT_STATUSES, ORDERING_REASONS
from cti.time import MAX_TIME, to_datetime

COUNTS = (*INPUT_STATUSES, *ORDERING_REASONS)


@attrs.define
class InputProgress:
    """One input stream's totals over the micro-batches seen, and its latest watermark (its
    last finite CTI) and watermark delay (arrival clock minus it; event-ordering streams)."""

    counts: dict[str, int] = attrs.Factory(lambda: dict.fromkeys(COUNTS, 0))
    watermark: int | None = None
    delay: int | None = None

    @property
    def events(self) -> int:
        return sum(self.counts[k] for k in INPUT_STATUSES)


@attrs.define
class RunProgress:
    """What a job has done so far. ``inputs[(output, stream)]``: a stream as read by the
    output's query (each query reads its inputs itself); ``rows[output]``: rows written."""

    inputs: dict[tuple[str, str], InputProgress] = attrs.Factory(dict)
    rows: dict[str, int] = attrs.Factory(dict)
    batches: dict[str, int] = attrs.Factory(dict)
    last: tuple[str, int, float] | None = None  # (output, batch id, seconds) of the latest
    lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    def add_batch(self, output: str, batch_id: int, seconds: float,
                  metrics: Mapping[str, Any]) -> None:
        """One micro-batch of ``output``'s query: its ``<stream>.<metric>`` values."""
        with self.lock:
            for key, value in metrics.items():
                stream, _, metric = key.rpartition(".")
                if not stream or value is None:
                    continue
                entry = self.inputs.setdefault((output, stream), InputProgress())
                if metric in entry.counts:
                    entry.counts[metric] += int(value)
                elif metric == "watermark" and int(value) < MAX_TIME:
                    entry.watermark = max(int(value), entry.watermark or int(value))
                elif metric == "watermark_delay":
                    entry.delay = int(value)
            self.batches[output] = self.batches.get(output, 0) + 1
            self.last = (output, batch_id, seconds)

    def set_rows(self, output: str, rows: int) -> None:
        with self.lock:
            self.rows[output] = rows

    def per_input(self) -> dict[str, InputProgress]:
        """Each input as the query that has read furthest into it sees it."""
        with self.lock:
            best: dict[str, InputProgress] = {}
            for (_, stream), p in self.inputs.items():
                if stream not in best or p.events > best[stream].events:
                    best[stream] = p
            return best

    # ---- display ------------------------------------------------------------------------------

    def lines(self) -> list[str]:
        """The latest micro-batch and the output rows, then a line per input (the log)."""
        head = []
        if self.last:
            output, batch, seconds = self.last
            head.append(f"{output} micro-batch {batch}: {seconds:.2f} s")
        with self.lock:
            head.append("rows: " + ", ".join(f"{name} {rows}"
                                              for name, rows in self.rows.items()))
        lines = ["; ".join(head)]
        for name, p in self.per_input().items():
            c = p.counts
            lines.append(f"  {name}: {p.events} events in, watermark {_time(p.watermark)}"
                         f"{'' if p.delay is None else f' (delay {p.delay / 1e6:g} s)'}, "
                         f"late {c['late']}, early {c['early']}, out of order "
                         f"{c['out_of_order']}, dropped {c['dropped']}")
        return lines

    def table(self) -> Any:
        """The progress as rich renderables: inputs, outputs, the latest micro-batch."""
        from rich.console import Group
        from rich.table import Table

        inputs = Table(title="inputs", title_justify="left")
        for col in ("stream", "events in", "watermark (CTI)", "delay", "late", "early",
                    "out of order", "dropped"):
            inputs.add_column(col, justify="left" if col in ("stream", "watermark (CTI)")
                              else "right")
        for name, p in self.per_input().items():
            c = p.counts
            inputs.add_row(name, str(p.events), _time(p.watermark),
                           "-" if p.delay is None else f"{p.delay / 1e6:g} s", str(c["late"]),
                           str(c["early"]), str(c["out_of_order"]), str(c["dropped"]))
        outputs = Table(title="outputs", title_justify="left")
        for col in ("output", "rows", "micro-batches"):
            outputs.add_column(col, justify="left" if col == "output" else "right")
        with self.lock:
            for name in dict.fromkeys([*self.batches, *self.rows]):
                outputs.add_row(name, str(self.rows.get(name, 0)), str(self.batches.get(name, 0)))
            last = self.last
        footer = ("latest micro-batch: " + f"{last[0]} #{last[1]} in {last[2]:.2f} s"
                  if last else "waiting for the first micro-batch")
        return Group(inputs, outputs, footer)


def _time(ticks: int | None) -> str:
    return "-" if ticks is None else to_datetime(ticks).strftime("%Y-%m-%d %H:%M:%S")


class Display:
    """Shows a ``RunProgress``: a table refreshed in place on a terminal (``live``), else a log
    line per micro-batch on ``stream``."""

    def __init__(self, progress: RunProgress, live: bool | None = None,
                 stream: TextIO | None = None) -> None:
        self.progress = progress
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self._rich: Any = None

    def __enter__(self) -> Display:
        if self.live:
            from rich.console import Console
            from rich.live import Live

            self._rich = Live(self.progress.table(), console=Console(file=self.stream),
                              refresh_per_second=4)
            self._rich.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._rich is not None:
            self._rich.update(self.progress.table())
            self._rich.__exit__(*exc)

    def refresh(self) -> None:
        if self._rich is not None:
            self._rich.update(self.progress.table())
        else:
            first, *rest = self.progress.lines()
            print("\n".join([f"[{time.strftime('%H:%M:%S')}] {first}", *rest]),
                  file=self.stream, flush=True)
