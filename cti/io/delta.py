"""Delta Lake output through the ``deltalake`` package (no JVM), exactly once per batch.

``stream.to(DeltaOutputAdapterFactory(), DeltaOutputConfig("/data/cars"))``: each batch is
one commit appending its events (columns of ``cti.io.tables.output_table``: kind, start, end as
UTC timestamps, one typed column per payload field). The commit records the batch as a Delta
*application transaction* (``txn``: the config's ``app_id`` and the batch id as its version),
in the same commit as the rows. A batch delivered again (Spark replays a micro-batch after a
failure, with the same id) finds its id at or below the table's transaction version for the
app id and is skipped, so every batch lands once. On Spark the shards of a query write their
parts of a batch in parallel, each its own commit under the app id ``<app_id>/<partition>``
(retried when it loses a race with another partition's commit), so every (batch, partition)
lands once; rows of one table have no order, and ``read_delta_output`` gives them in the
order of the log.

Batch ids are the writing query's: a run that restarts from its checkpoint continues them.
A *new* query (a fresh checkpoint) starts again at 0, so it must not write into a table under an
app id an earlier query used (its batches would be skipped as already written): give it another
``app_id``, or a new table. ``cti run`` refuses to start a fresh run over an existing table.

Columns come from the first batch's payloads; later batches are parsed to the table's types,
and a field that first appears later is added (schema merge).
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

import attrs
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cti.errors import InvalidSettingsError
from cti.events import EventShape
from cti.io.outputs import TableOutputAdapter
from cti.io.tables import output_table


@attrs.frozen
class DeltaOutputConfig:
    """Where a Delta output writes: the table's ``path`` (created by the first batch) and the
    ``app_id`` its commits record batches under."""

    path: str = attrs.field(converter=os.fspath)
    app_id: str = "cti"

    def __attrs_post_init__(self) -> None:
        if not self.path:
            raise InvalidSettingsError("DeltaOutputConfig needs a table path")
        if not isinstance(self.app_id, str) or not self.app_id:
            raise InvalidSettingsError(f"DeltaOutputConfig.app_id must be a non-empty string, "
                                       f"got {self.app_id!r}")


def _table(path: str) -> Any:
    """The Delta table at ``path``, or None if there is none yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(path)
    except TableNotFoundError:
        return None


def committed_batch(path: str, app_id: str = "cti") -> int | None:
    """The last batch id committed to the Delta table at ``path`` under ``app_id``, by any
    partition of a batch written in parallel (None if none, or no table): from the commits'
    metadata (``cti.app``, ``cti.batch``), and the app id's transaction version."""
    table = _table(path)
    if table is None:
        return None
    found = [int(h["cti.batch"]) for h in table.history()
             if h.get("cti.app") == app_id and "cti.batch" in h]
    direct = table.transaction_version(app_id)
    return max([*found, *([] if direct is None else [direct])], default=None)


def table_rows(path: str) -> int:
    """How many rows the Delta table at ``path`` holds (0 if there is none), from its log's
    file statistics where they are there (no scan)."""
    table = _table(path)
    if table is None:
        return 0
    counts = pa.table(table.get_add_actions(flatten=True)).column("num_records")
    if counts.null_count:
        return table.to_pyarrow_table(columns=["kind"]).num_rows
    return int(pc.sum(counts).as_py() or 0)


class DeltaOutputAdapter(TableOutputAdapter):
    def __init__(self, config: DeltaOutputConfig) -> None:
        self.config = config

    def write_table(self, rows: pa.Table, batch_id: int,
                    partition: int | None = None) -> None:
        """Commit the batch's events (or a partition's of them) with the transaction (app id,
        batch id), the app id ``<app_id>/<partition>`` for a partition, unless a commit
        already recorded it. Partitions commit concurrently: a commit that lost a race (the
        table created, or its schema merged, by another partition meanwhile) is tried again
        on the table as it is then, after a short random wait."""
        from deltalake import CommitProperties, Transaction, write_deltalake
        from deltalake.exceptions import CommitFailedError, SchemaMismatchError

        app = self.config.app_id if partition is None else f"{self.config.app_id}/{partition}"
        for attempt in range(_ATTEMPTS):
            table = _table(self.config.path)
            done = None if table is None else table.transaction_version(app)
            if done is not None and batch_id <= done:
                return  # a replayed batch: it is in the table already
            schema = None if table is None else pa.schema(table.schema().to_arrow())
            events = output_table(rows, schema)
            try:
                write_deltalake(
                    table if table is not None else self.config.path, events, mode="append",
                    schema_mode="merge",  # (also where another partition created it meanwhile)
                    commit_properties=CommitProperties(
                        max_commit_retries=0,  # (a lost race is retried here, not by deltalake)
                        app_transactions=[Transaction(app, batch_id)],
                        custom_metadata={"cti.app": self.config.app_id,
                                         "cti.batch": str(batch_id)}))
                return
            except (CommitFailedError, SchemaMismatchError):
                if attempt == _ATTEMPTS - 1:
                    raise
                time.sleep(random.uniform(0.02, 0.2) * (attempt + 1))


_ATTEMPTS = 30  # commits of a batch's partitions racing each other (see ``write_table``)


class DeltaOutputAdapterFactory:
    """``create(DeltaOutputConfig(path, app_id="cti"), shape)`` (a plain path is accepted).
    Partitioned: on Spark each shard partition commits its part of a batch, in parallel."""

    partitioned = True

    def create(self, config: Any, shape: EventShape) -> DeltaOutputAdapter:
        if isinstance(config, str | os.PathLike):
            config = DeltaOutputConfig(config)
        if not isinstance(config, DeltaOutputConfig):
            raise InvalidSettingsError(f"a Delta output's config is a DeltaOutputConfig or a "
                                       f"table path, got {config!r}")
        return DeltaOutputAdapter(config)


def read_delta_output(path: str | os.PathLike) -> pd.DataFrame:
    """The Delta table at ``path`` as a pandas frame (``deltalake.DeltaTable(path)
    .to_pandas()``), for tests and quick looks."""
    table = _table(os.fspath(path))
    if table is None:
        raise FileNotFoundError(f"no Delta table at {os.fspath(path)}")
    return table.to_pandas()
