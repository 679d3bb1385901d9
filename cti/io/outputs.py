"""JSON-lines output: one file per batch in a directory, so a replayed batch replaces itself.

Writes stream items, or ``Diagnostic`` rows when bound with ``stream.diagnostics_to(...)``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from cti.events import EventShape, StreamItem, item_from_kind, kind_of
from cti.results import Diagnostic
from cti.rows import payload_to_json

_OPEN = ("point", "edge_start")  # kinds whose JSON line has no end


def item_to_json(item: StreamItem | Diagnostic) -> str:
    if isinstance(item, Diagnostic):
        return json.dumps(attrs.asdict(item), sort_keys=True, default=str)
    kind = kind_of(item)
    if kind == "cti":
        return f'{{"kind":"cti","time":{item.time}}}'
    end = None if kind in _OPEN else item.end
    return (f'{{"kind":"{kind}","start":{item.start},"end":{json.dumps(end)},'
            f'"payload":{payload_to_json(item.payload)}}}')


def item_from_json(line: str) -> StreamItem | Diagnostic:
    d = json.loads(line)
    if "status" in d:
        return Diagnostic(**d)
    if d["kind"] == "cti":
        return item_from_kind("cti", d["time"], None, {})
    return item_from_kind(d["kind"], d["start"], d["end"], d["payload"])


class JsonLinesOutputAdapter:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def write(self, items: Sequence[StreamItem | Diagnostic], batch_id: int) -> None:
        self._save([item_to_json(item) for item in items], batch_id)

    def write_frame(self, frame: Any, batch_id: int) -> None:
        """A query's output batch as a frame (``OutputAdapter``): the same lines as ``write``,
        without an item per event."""
        self._save([
            f'{{"kind":"cti","time":{s}}}' if k == "cti" else
            f'{{"kind":"{k}","start":{s},"end":{"null" if k in _OPEN else e},"payload":{p}}}'
            for k, s, e, p in zip(frame["kind"], frame["start"], frame["end"], frame["payload"],
                                  strict=True)], batch_id)

    def _save(self, lines: list[str], batch_id: int) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / f"batch-{batch_id:010d}.jsonl"
        tmp = final.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
        os.replace(tmp, final)  # atomic: a replayed batch replaces the earlier attempt

    def close(self) -> None:
        pass


class JsonLinesOutputAdapterFactory:
    """``create(directory, shape)``: writes ``directory/batch-NNNNNNNNNN.jsonl`` per batch."""

    def create(self, config: Any, shape: EventShape) -> JsonLinesOutputAdapter:
        return JsonLinesOutputAdapter(Path(config))


def read_json_lines_output(directory: str | os.PathLike) -> list[StreamItem | Diagnostic]:
    """Everything a ``JsonLinesOutputAdapter`` wrote to ``directory``, in order."""
    items = []
    for path in sorted(Path(directory).glob("batch-*.jsonl")):
        items += [item_from_json(line) for line in path.read_text().splitlines() if line]
    return items
