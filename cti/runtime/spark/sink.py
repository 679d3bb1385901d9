"""A query's output written to its output adapter from inside an executor's task (the
shards' stage, the hold stage or the task that reads their packed rows), with the task's
micro-batch id, so a replayed micro-batch replaces its earlier attempt."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark import TaskContext

from cti.operators.output import deliver

BATCH_ID = "streaming.sql.batchId"  # the local property Spark gives a micro-batch's tasks
Sink = tuple[Any, Any, Any]  # an output adapter's factory, config and shape


def batch_id() -> int:
    """The micro-batch a task runs (Spark's local property; 0 outside a streaming task)."""
    task = TaskContext.get()
    value = task.getLocalProperty(BATCH_ID) if task is not None else None
    return int(value) if value is not None else 0


def write_output(sink: Sink, rows: Any, partition: int | None) -> None:
    """Output rows (``output.deliver``) of the task's micro-batch to a new adapter of ``sink``
    (factory, config, shape), with the micro-batch's id (a replayed batch has the same id)."""
    factory, config, shape = sink
    adapter = factory.create(config, shape)
    deliver(adapter, rows, batch_id(), partition)
    adapter.close()


def write_partition(sink: Sink, rows: pa.Table) -> None:
    """Output rows written as the task's partition of the micro-batch (the same on a replay:
    a shard's slot hashes to the same partition), where there are any."""
    if rows.num_rows:
        write_output(sink, rows, TaskContext.get().partitionId())
