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
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cti.events import EventShape, StreamItem, item_from_kind, kind_of
from cti.forms.json_text import json_lines
from cti.forms.rows import payload_to_json
from cti.operators.output import ROWS_ARROW, in_output_order
from cti.results import Diagnostic

OPEN_KINDS = ("point", "edge_start")  # kinds whose end is not a time of the event


def frame_rows(frame: pd.DataFrame) -> pa.Table:
    """Output rows as ``write_frame`` receives them (a pandas frame) as ``write_table`` does
    (``ROWS_ARROW``)."""
    return pa.Table.from_pandas(frame[list(ROWS_ARROW.names)], schema=ROWS_ARROW,
                                preserve_index=False)


def items_frame(items: Sequence[StreamItem]) -> pd.DataFrame:
    """Stream items as the frame ``write_frame`` receives (for adapters written to by a plain
    stream's ``write``); anything but events and CTIs (diagnostics) is refused by name."""
    events = [i for i in items if kind_of(i) != "cti"]
    return pd.DataFrame({
        "kind": [kind_of(i) for i in events],
        "start": pd.array([i.start for i in events], dtype="int64"),
        "end": pd.array([i.end for i in events], dtype="int64"),
        "payload": [payload_to_json(i.payload) for i in events],
    })


class TableOutputAdapter:
    """Base of an output adapter that writes each batch from the Arrow table of its rows
    (``write_table(rows, batch_id, partition)``, ``ROWS_ARROW``): a batch given as items
    (``write``: a plain stream's; its events) or as a frame (``write_frame``) comes to
    ``write_table`` as that table."""

    def write_table(self, rows: pa.Table, batch_id: int, partition: int | None = None
                    ) -> None:
        raise NotImplementedError

    def write(self, items: Sequence[StreamItem], batch_id: int,
              partition: int | None = None) -> None:
        self.write_table(frame_rows(items_frame(items)), batch_id, partition)

    def write_frame(self, frame: pd.DataFrame, batch_id: int, partition: int | None = None
                    ) -> None:
        self.write_table(frame_rows(frame), batch_id, partition)

    def close(self) -> None:
        pass


def item_to_json(item: StreamItem | Diagnostic) -> str:
    if isinstance(item, Diagnostic):
        return json.dumps(attrs.asdict(item), sort_keys=True, default=str)
    kind = kind_of(item)
    if kind == "cti":
        return f'{{"kind":"cti","time":{item.time}}}'
    end = None if kind in OPEN_KINDS else item.end
    return (f'{{"kind":"{kind}","start":{item.start},"end":{json.dumps(end)},'
            f'"payload":{payload_to_json(item.payload)}}}')


def item_from_json(line: str) -> StreamItem | Diagnostic:
    d = json.loads(line)
    if "status" in d:
        return Diagnostic(**d)
    if d["kind"] == "cti":
        return item_from_kind("cti", d["time"], None, {})
    return item_from_kind(d["kind"], d["start"], d["end"], d["payload"])


class JsonLinesOutputAdapter(TableOutputAdapter):
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def write(self, items: Sequence[StreamItem | Diagnostic], batch_id: int,
              partition: int | None = None) -> None:
        """Items as lines, CTIs and diagnostics (``diagnostics_to``) included."""
        self._save("".join(item_to_json(item) + "\n" for item in items).encode(), batch_id,
                   partition)

    def write_table(self, rows: pa.Table, batch_id: int, partition: int | None = None
                    ) -> None:
        """A query's output batch as an Arrow table (``OutputAdapter``): the same lines as
        ``write``, written by Arrow, with no Python object per event."""
        if not rows.num_rows:
            self._save(b"", batch_id, partition)
            return
        rows = rows.combine_chunks()
        kind = rows.column("kind")
        start = pc.cast(rows.column("start"), pa.string())
        end = pc.if_else(pc.is_in(kind, value_set=pa.array(OPEN_KINDS)), "null",
                         pc.cast(rows.column("end"), pa.string()))
        lines = pc.if_else(
            pc.equal(kind, "cti"),
            pc.binary_join_element_wise('{"kind":"cti","time":', start, "}", ""),
            pc.binary_join_element_wise('{"kind":"', kind, '","start":', start, ',"end":', end,
                                        ',"payload":', rows.column("payload"), "}", ""))
        self._save(json_lines(lines).to_pybytes(), batch_id, partition)

    def _save(self, data: bytes, batch_id: int, partition: int | None) -> None:
        """A batch's lines (each ending in a newline) as its file, atomically."""
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / f"{batch_file(batch_id, partition)}.jsonl"
        tmp = final.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, final)  # atomic: a replayed batch replaces the earlier attempt


class JsonLinesOutputAdapterFactory:
    """``create(directory, shape)``: writes ``directory/batch-NNNNNNNNNN.jsonl`` per batch (and
    ``batch-NNNNNNNNNN-PPPPP.jsonl`` per partition of a batch written in parallel)."""

    partitioned = True

    def create(self, config: Any, shape: EventShape) -> JsonLinesOutputAdapter:
        return JsonLinesOutputAdapter(Path(config))


def read_json_lines_output(directory: str | os.PathLike) -> list[StreamItem | Diagnostic]:
    """Everything a ``JsonLinesOutputAdapter`` wrote to ``directory``, in order: batch by
    batch, the partitions of a batch written in parallel merged into the batch's order
    (``output.in_output_order``)."""
    items: list[StreamItem | Diagnostic] = []
    batches: dict[str, list[Path]] = {}
    for path in sorted(Path(directory).glob("batch-*.jsonl")):
        batches.setdefault(path.name[:len("batch-0000000000")], []).append(path)
    for paths in batches.values():
        got = [item_from_json(line) for path in paths
               for line in path.read_text().splitlines() if line]
        items += in_output_order(got) if len(paths) > 1 else got
    return items


def batch_file(batch_id: int, partition: int | None) -> str:
    """The name (without suffix) of a batch's file, or of one partition's of it: in batch
    order, then partition order, when sorted."""
    return f"batch-{batch_id:010d}" + ("" if partition is None else f"-{partition:05d}")
