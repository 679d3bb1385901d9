"""The hold stage's ``StatefulProcessor`` (``cti.runtime.spark.hold``), in a module that imports
neither pandas, numpy nor pyarrow: on every query start Spark unpickles it in a Python process
of the driver's of its own (``transformWithStateInPandas``'s pre-init runner, which calls
``init`` only), and importing the hold stage's modules there cost about 0.6 CPU s, in the
query's planning. Its work (``hold.hold_rows``) is imported on first use, in the executors; the
output adapter it may write to travels pickled, so that process imports no adapter's module."""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark import cloudpickle
from pyspark.sql import DataFrame
from pyspark.sql.streaming.stateful_processor import StatefulProcessor
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

if TYPE_CHECKING:
    from cti.engine.route import QueryRoute
    from cti.runtime.spark.sink import Sink

STATE = StructType([StructField("levels", BinaryType(), False),
                    StructField("cti", LongType(), False),
                    StructField("held", BinaryType(), True)])


class Hold(StatefulProcessor):
    """The hold stage's processor: per (query, slot) key, ``hold.hold_step`` for the slot's
    shard; ``shards``: each query's shard count (0: not held, its rows pass through);
    ``sinks``: per query, the partitioned output adapter (factory, config, shape) it writes
    the query's released rows to (one slot of the query per task), or None (they leave as
    ``OP`` rows)."""

    def __init__(self, shards: Sequence[int], output_columns: Sequence[str],
                 sinks: Sequence[Any] | None = None) -> None:
        self.shards = list(shards)
        self.columns = list(output_columns)
        self._sinks = None if sinks is None else cloudpickle.dumps(list(sinks))
        self._unpickled: list[Any] | None = None

    def sink(self, query: int) -> Any:
        """The output adapter to write ``query``'s rows to (factory, config, shape), or None:
        unpickled once, where the rows are (an executor's first call), never in the process
        that only plans the stage (``init`` runs there too)."""
        if self._sinks is None:
            return None
        if self._unpickled is None:
            self._unpickled = pickle.loads(self._sinks)
        return self._unpickled[query]

    def init(self, handle: Any) -> None:
        self.state = handle.getValueState("hold", STATE)

    def handleInputRows(self, key: tuple, rows: Iterator[Any], timerValues: Any
                        ) -> Iterator[Any]:
        from cti.runtime.spark.hold import hold_rows

        return hold_rows(self, key, rows)

    def close(self) -> None:
        pass


def hold_stage(frame: DataFrame, routes: Sequence[QueryRoute],
               sinks: Sequence[Sink | None] | None = None) -> DataFrame:
    """The shards' output rows (``operators.SLOTTED_SCHEMA``) through the hold stage, keyed by
    (query, slot): a ``hold`` row's slot is the one it is sent to, any other row's its shard's
    (it passes through in its shard's partition); out, the rows of ``OUTPUT_SCHEMA``
    (with ``sinks``, those of the held queries' output written to their query's sink
    instead, where it has one)."""
    schema = StructType([f for f in frame.schema.fields if f.name != "slot"])
    shards = [r.shards if r.held else 0 for r in routes]
    return frame.groupBy("query", "slot").transformWithStateInPandas(
        Hold(shards, schema.fieldNames(), sinks), schema, "Append", "None")
