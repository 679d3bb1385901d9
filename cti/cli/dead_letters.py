"""Dead letters as an output of ``cti run``: each input bound with ``on_bad_input="dead_letter"``
gets a table of the rows it could not read, ``OUTPUT/_dead_letters/<input>`` (Delta).

A dead letter is an ``invalid`` ``Diagnostic`` of the input's side output
(``stream.diagnostics_to``): its columns are ``stream``, ``rule`` (why the row is invalid),
``file`` and ``line`` (where the file adapters say so: their reasons read ``<file>, line <n>:
<rule>``; else null), ``raw`` (the row's text as read), ``input_seq`` (its place in the
input) and ``batch`` (the micro-batch id). Each batch is one commit recording the
transaction ``(app_id, batch)``, so a replayed micro-batch is skipped, as for the outputs.
Without ``--output`` the dead letters are counted, not kept.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa

from cti.events import EventShape

DEAD_LETTERS = "_dead_letters"  # the folder of the dead-letter tables under --output

_WHERE = re.compile(r"(?P<file>.+?), line (?P<line>\d+): (?P<rule>.*)", re.DOTALL)

SCHEMA = pa.schema([("stream", pa.string()), ("rule", pa.string()), ("file", pa.string()),
                    ("line", pa.int64()), ("raw", pa.string()), ("input_seq", pa.int64()),
                    ("batch", pa.int64())])


@attrs.frozen
class DeadLetter:
    """One row an input could not read, as its dead-letter table holds it."""

    stream: str
    rule: str
    file: str | None
    line: int | None
    raw: str | None
    input_seq: int

    @classmethod
    def from_diagnostic(cls, d: Any) -> DeadLetter:
        reason = d.reason or ""
        where = _WHERE.fullmatch(reason)
        raw = d.payload if isinstance(d.payload, str) or d.payload is None else \
            repr(d.payload)
        if where is None:
            return cls(d.stream, reason, None, None, raw, d.input_seq)
        return cls(d.stream, where["rule"], where["file"], int(where["line"]), raw,
                   d.input_seq)


def dead_letters_table(letters: Sequence[DeadLetter], batch_id: int) -> pa.Table:
    columns = {f.name: [getattr(x, f.name) for x in letters] for f in attrs.fields(DeadLetter)}
    return pa.table({**columns, "batch": [batch_id] * len(letters)}, schema=SCHEMA)


@attrs.frozen
class DeadLetterConfig:
    """Where an input's dead letters go: the Delta table at ``path`` (commits under
    ``app_id``), or with ``counted`` files ``path/batch-N.count`` (a run without --output)."""

    path: str = attrs.field(converter=os.fspath)
    app_id: str = "cti"
    counted: bool = False


class DeadLetterOutputAdapter:
    """Writes the ``invalid`` diagnostics of a batch; the others (adjusted, dropped events,
    ignored CTIs) are the progress's counts, not dead letters."""

    def __init__(self, config: DeadLetterConfig) -> None:
        self.config = config

    def write(self, items: Sequence[Any], batch_id: int, partition: int | None = None) -> None:
        letters = [DeadLetter.from_diagnostic(d) for d in items
                   if getattr(d, "status", None) == "invalid"]
        if self.config.counted:
            _save_count(Path(self.config.path), len(letters), batch_id)
        elif letters:
            _commit(self.config, dead_letters_table(letters, batch_id), batch_id)

    def close(self) -> None:
        pass


class DeadLetterOutputAdapterFactory:
    def create(self, config: DeadLetterConfig, shape: EventShape) -> DeadLetterOutputAdapter:
        return DeadLetterOutputAdapter(config)


def _save_count(directory: Path, count: int, batch_id: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"batch-{batch_id:010d}.count"
    tmp = directory / f".{final.name}.tmp"
    tmp.write_text(str(count))
    os.replace(tmp, final)


def _commit(config: DeadLetterConfig, table: pa.Table, batch_id: int) -> None:
    """One commit of a batch's dead letters, unless the table records the batch already."""
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
    from deltalake.exceptions import TableNotFoundError

    try:
        existing: Any = DeltaTable(config.path)
    except TableNotFoundError:
        existing = None
    done = None if existing is None else existing.transaction_version(config.app_id)
    if done is not None and batch_id <= done:
        return
    write_deltalake(existing if existing is not None else config.path, table, mode="append",
                    commit_properties=CommitProperties(
                        app_transactions=[Transaction(config.app_id, batch_id)]))


def read_dead_letters(path: str | os.PathLike[str]) -> pa.Table:
    """An input's dead-letter table (empty if the input had none), in input order."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(os.fspath(path)).to_pyarrow_table()
    except TableNotFoundError:
        return SCHEMA.empty_table()
    return table.sort_by("input_seq")
