"""What a run returns: each stream's output, its diagnostics (the side output) and its counts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from cti.events import StreamItem, items_from_rows
from cti.forms.rows import OUTPUT_STATUSES, OutRow, payload_from_json
from cti.ingress.state import METRICS
from cti.time import format_time

DIAGNOSTIC_STATUSES = ("adjusted", "dropped", "invalid", "cti_regression")
_METRIC = {"cti": "ctis", "cti_regression": "cti_regressions"}  # (a status's count's name)
_TIME_FIELDS = frozenset({"original_start", "original_end", "start", "end", "cti"})


@attrs.frozen
class Diagnostic:
    """One side-output row: an event that was adjusted, dropped or rejected, or an ignored CTI.

    ``original_*`` are the times the event arrived with; ``start``/``end`` what it became (None
    when dropped); ``cti`` the stream's CTI when it was processed; ``reason`` why. Times are
    ticks; ``repr`` and ``str`` show them as ISO-8601 (UTC).
    """

    stream: str
    status: str
    reason: str | None
    kind: str
    original_start: int | None
    original_end: int | None
    start: int | None
    end: int | None
    cti: int | None
    payload: dict[str, Any] | str | None
    input_seq: int
    partition: str | None = None
    key: Any = None

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{f.name}={format_time(v) if f.name in _TIME_FIELDS else repr(v)}"
            for f in attrs.fields(Diagnostic) for v in [getattr(self, f.name)])
        return f"Diagnostic({fields})"

    def __str__(self) -> str:
        return (f"{self.stream}: {self.status} {self.kind} #{self.input_seq} "
                f"[{format_time(self.original_start)}, {format_time(self.original_end)}) -> "
                f"[{format_time(self.start)}, {format_time(self.end)}) at CTI "
                f"{format_time(self.cti)}: {self.reason}")


def _payload(row: OutRow) -> dict[str, Any] | str | None:
    if row.payload is None:
        return None
    try:
        return payload_from_json(row.payload)
    except ValueError:
        return row.payload  # the raw text of an unreadable row


def diagnostic_from_row(name: str, r: OutRow, over: str | None = None) -> Diagnostic:
    """A side-output row as a Diagnostic; ``over`` names the substream key field, if any."""
    payload = _payload(r)
    key = payload.get(over) if over and isinstance(payload, dict) else None
    return Diagnostic(name, r.status, r.reason, r.kind, r.orig_start, r.orig_end, r.start, r.end,
                      r.cti, payload, r.in_seq, r.partition, key)


@attrs.frozen
class StreamResult:
    """One stream's output (``items``), side output (``diagnostics``) and counts (``metrics``).

    For a stream with an event-ordering policy, ``ordering`` holds the last snapshot: the
    arrival clock, the CTI and, per timeline (partition, or key with ``over``), its counters,
    watermark, watermark delay and whether it is progressing.
    """

    name: str
    items: list[StreamItem]
    diagnostics: list[Diagnostic]
    metrics: dict[str, int]
    ordering: dict[str, Any] | None = None

    @property
    def not_progressing(self) -> dict[str, dict[str, Any]]:
        """Timelines that delivered nothing for longer than the late-arrival tolerance."""
        timelines = (self.ordering or {}).get("timelines", {})
        return {k: v for k, v in timelines.items() if v["not_progressing"]}

    @property
    def dropped(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.status == "dropped"]

    @property
    def adjusted(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.status == "adjusted"]


# The columns of output rows that ``RunResult.from_frame`` reads as arrays, in its order.
_FROM_FRAME = ("stream", "seq", "kind", "start", "end", "status", "payload")


@attrs.frozen
class RunResult:
    streams: dict[str, StreamResult]

    @classmethod
    def from_rows(cls, names: Sequence[str], rows: Iterable[OutRow],
                  overs: Sequence[str | None] | None = None) -> RunResult:
        """Build the result from output rows; ``overs[i]`` is stream i's substream key field."""
        from cti.forms.layout import out_rows_to_pandas

        return cls.from_frame(names, out_rows_to_pandas(rows), overs)

    @classmethod
    def from_frame(cls, names: Sequence[str], rows: Any,
                   overs: Sequence[str | None] | None = None) -> RunResult:
        """``from_rows`` of output rows given as a pandas frame (``OUT_COLUMNS``), column by
        column: a Python object per item and per diagnostic, none per row."""
        import numpy as np

        from cti.forms.frame import column_arrays
        from cti.forms.layout import out_rows_from_pandas

        overs = list(overs) if overs else [None] * len(names)
        stream, seq, kind, start, end, status, payload = (
            np.asarray(c, dtype=object) if name in ("kind", "status", "payload") else
            np.asarray(c) for name, c in zip(_FROM_FRAME, column_arrays(rows, _FROM_FRAME),
                                             strict=True))
        streams = {}
        for i, name in enumerate(names):
            mine = np.flatnonzero(stream == i)
            mine = mine[np.argsort(seq[mine], kind="stable")]
            if not (seq[mine] == np.arange(len(mine))).all():
                raise RuntimeError(f"stream {name!r}: output sequence has gaps or duplicates")
            states = status[mine]
            metrics = dict.fromkeys(METRICS, 0)
            for s, n in zip(*np.unique(states[states != "metrics"], return_counts=True),
                            strict=True):
                metrics[_METRIC.get(s, s)] += int(n)
            snapshots = payload[mine[states == "metrics"]]
            out = mine[np.isin(states, OUTPUT_STATUSES)]
            items = items_from_rows(kind[out].tolist(), start[out].tolist(), end[out].tolist(),
                                    payload[out].tolist())
            told = mine[np.isin(states, DIAGNOSTIC_STATUSES)]
            diags = [diagnostic_from_row(name, r, overs[i])
                     for r in out_rows_from_pandas(rows.iloc[told])] if len(told) else []
            streams[name] = StreamResult(name, items, diags, metrics, payload_from_json(
                snapshots[-1]) if len(snapshots) else None)
        return cls(streams)

    def __getitem__(self, name: str) -> StreamResult:
        return self.streams[name]

    def items(self, name: str) -> list[StreamItem]:
        return self.streams[name].items


def derived_result(name: str, group_results: Sequence[RunResult],
                   output: Iterable[tuple]) -> RunResult:
    """A query's result: every input stream's result (``group_results``) and the query's own,
    named ``name``, from its output rows (``cti.operators.output.OutputRow``: its items, and
    counts)."""
    from cti.events import Cti
    from cti.operators.output import items_of_rows

    items = items_of_rows(output)
    ctis = sum(1 for i in items if isinstance(i, Cti))
    streams = {n: r for res in group_results for n, r in res.streams.items()}
    streams[name] = StreamResult(name, items, [], {"events": len(items) - ctis, "ctis": ctis})
    return RunResult(streams)
