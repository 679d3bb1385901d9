"""Live progress of a running job: per input and per output, refreshed per micro-batch.

``RunProgress`` accumulates each micro-batch's ingress metrics (``cti.runtime.spark.metrics``:
``<stream>.<metric>`` as Spark's query progress reports them, or the same computed in process)
per input stream, the rows each output holds, and the latest micro-batch's time. It shows them
as a table refreshed in place on a terminal (``rich``), or one log line per micro-batch
otherwise, with that micro-batch's own counts.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Mapping, Sequence
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

    @property
    def invalid(self) -> int:
        return self.counts["invalid"]

    def add(self, metric: str, value: int) -> None:
        """One micro-batch's value of ``metric`` (a count, ``watermark`` or its delay)."""
        if metric in self.counts:
            self.counts[metric] += value
        elif metric == "watermark" and value < MAX_TIME:
            self.watermark = max(value, self.watermark or value)
        elif metric == "watermark_delay":
            self.delay = value


@attrs.define
class RunProgress:
    """What a job has done so far. ``inputs[(output, stream)]``: a stream as read by the
    query that writes the output (on Spark one query for all outputs, in process one each);
    ``rows[output]``: rows written."""

    inputs: dict[tuple[str, str], InputProgress] = attrs.Factory(dict)
    rows: dict[str, int] = attrs.Factory(dict)
    batches: dict[str, int] = attrs.Factory(dict)
    last: tuple[str, int, float] | None = None  # (output, batch id, seconds) of the latest
    batch_inputs: dict[str, InputProgress] = attrs.Factory(dict)  # the latest one's inputs
    batch_rows: int | None = None  # the rows the latest micro-batch wrote, once known
    seen: int = 0  # micro-batches added
    lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    def add_batch(self, output: str, batch_id: int, seconds: float,
                  metrics: Mapping[str, Any]) -> None:
        """One micro-batch of ``output``'s query: its ``<stream>.<metric>`` values."""
        with self.lock:
            self.batch_inputs = {}
            for key, value in metrics.items():
                stream, _, metric = key.rpartition(".")
                if not stream or value is None:
                    continue
                for entry in (self.inputs.setdefault((output, stream), InputProgress()),
                              self.batch_inputs.setdefault(stream, InputProgress())):
                    entry.add(metric, int(value))
            self.batches[output] = self.batches.get(output, 0) + 1
            self.last = (output, batch_id, seconds)
            self.batch_rows = None
            self.seen += 1

    def set_rows(self, output: str, rows: int) -> None:
        """The rows ``output``'s table holds now; right after its micro-batch, the difference
        is that micro-batch's."""
        with self.lock:
            if self.last and self.last[0] == output and self.batch_rows is None:
                self.batch_rows = rows - self.rows.get(output, 0)
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

    def line(self) -> str:
        """The latest micro-batch as one log line: its output's rows written by it (and in
        all), and each input's counts in it (``add_batch``'s metrics are a micro-batch's)."""
        with self.lock:
            last, batch = self.last, self.batch_inputs
            rows = self.rows.get(last[0], 0) if last else 0
            new = self.batch_rows
        if last is None:
            return "waiting for the first micro-batch"
        output, batch_id, seconds = last
        parts = [f"{output} micro-batch {batch_id}: {seconds:.2f} s, "
                 f"{'?' if new is None else new} rows out ({rows} in all)"]
        for name, p in batch.items():
            c = p.counts
            parts.append(f"{name}: {p.events} in, invalid {c['invalid']}, watermark "
                         f"{_time(p.watermark)}"
                         f"{'' if p.delay is None else f' (delay {p.delay / 1e6:g} s)'}, "
                         f"late {c['late']}, early {c['early']}, out of order "
                         f"{c['out_of_order']}, dropped {c['dropped']}")
        return "; ".join(parts)

    def table(self) -> Any:
        """The progress as rich renderables: inputs, outputs, the latest micro-batch."""
        from rich.console import Group
        from rich.table import Table

        inputs = Table(title="inputs", title_justify="left")
        for col in ("stream", "events in", "invalid", "watermark (CTI)", "delay", "late",
                    "early", "out of order", "dropped"):
            inputs.add_column(col, justify="left" if col in ("stream", "watermark (CTI)")
                              else "right")
        for name, p in self.per_input().items():
            c = p.counts
            inputs.add_row(name, str(p.events), str(c["invalid"]), _time(p.watermark),
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
        self._logged = 0  # micro-batches logged

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
        """Redraw the table; in log mode, a line for a micro-batch not logged yet."""
        if self._rich is not None:
            self._rich.update(self.progress.table())
        elif self.progress.seen > self._logged:
            self._logged = self.progress.seen
            print(f"[{time.strftime('%H:%M:%S')}] {self.progress.line()}", file=self.stream,
                  flush=True)


def frame_metrics(names: Sequence[str], frame: Any) -> dict[str, Any]:
    """A micro-batch's ingress metrics from its ingress output rows (a pandas frame of
    ``OUT_COLUMNS``; ``weight``: rows each stands for, if there), as ``<stream>.<metric>``:
    what ``cti.runtime.spark.metrics`` observes on Spark, computed in process."""
    import numpy as np

    out: dict[str, Any] = {}
    weight = frame["weight"].to_numpy() if "weight" in frame else np.ones(len(frame), np.int64)
    stream, status = frame["stream"].to_numpy(), frame["status"].to_numpy(object)
    reason, start = frame["reason"].to_numpy(object), frame["start"].to_numpy()
    payload = frame["payload"].to_numpy(object)
    for i, name in enumerate(names):
        mine = stream == i
        for key in INPUT_STATUSES:
            out[f"{name}.{key}"] = int(weight[mine & (status == key)].sum())
        judged = mine & np.isin(status, ("adjusted", "dropped"))
        for r in ORDERING_REASONS:
            out[f"{name}.{r}"] = int(weight[judged & (reason == r)].sum())
        ctis = start[mine & (status == "cti")].astype(np.int64)
        ctis = ctis[ctis < MAX_TIME]
        out[f"{name}.watermark"] = int(ctis.max()) if len(ctis) else None
        snaps = payload[mine & (status == "metrics")]
        snap = json.loads(snaps[-1]) if len(snaps) else {}
        if snap.get("arrival_clock") is not None and snap.get("cti") is not None:
            out[f"{name}.watermark_delay"] = snap["arrival_clock"] - snap["cti"]
    return out
