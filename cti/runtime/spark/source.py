"""Input adapters as Spark streaming sources (PySpark Python Data Source API).

Each bound stream becomes one source. Its options carry the pickled factory, config and shape;
the driver asks the adapter how far its input goes (``latestOffset``), the executors create
the adapter again and read the rows of their offset range (``read``). When a bounded adapter
is exhausted, the last batch ends with an end-of-input row, so ingress can flush at shutdown.
"""

from __future__ import annotations

import base64
import pickle
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from cti.rows import eos_row
from cti.runtime.local import read_rows
from cti.runtime.spark.schema import IN_SCHEMA, in_row_to_tuple

FORMAT = "cti_adapter"


def encode_source(index: int, factory: Any, config: Any, shape: Any,
                  batch_sizes: Sequence[int] | None) -> str:
    blob = pickle.dumps((index, factory, config, shape, list(batch_sizes or [])))
    return base64.b64encode(blob).decode("ascii")


def _decode(text: str) -> tuple:
    return pickle.loads(base64.b64decode(text))


class _Range(InputPartition):
    def __init__(self, start: int, end: int, eos: bool) -> None:
        super().__init__((start, end, eos))
        self.start, self.end, self.eos = start, end, eos


class CtiAdapterStreamReader(DataSourceStreamReader):
    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.index, self.factory, self.config, self.shape, self.batch_sizes = _decode(spec)

    def initialOffset(self) -> dict:
        return {"pos": 0, "eos": False, "batch": 0}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        start = start or self.initialOffset()
        if start["eos"]:
            return start
        adapter = self.factory.create(self.config, self.shape)
        available = adapter.latest_offset()
        end = available
        if self.batch_sizes:
            size = self.batch_sizes[start["batch"] % len(self.batch_sizes)]
            end = min(available, start["pos"] + size)
        eos = end == available and adapter.is_complete()
        if end == start["pos"] and not eos:
            return start
        return {"pos": end, "eos": eos, "batch": start["batch"] + 1}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        if start["pos"] == end["pos"] and start["eos"] == end["eos"]:
            return []
        return [_Range(start["pos"], end["pos"], end["eos"] and not start["eos"])]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        index, factory, config, shape, _ = _decode(self.spec)
        start, end, eos = partition.value
        if end > start:
            adapter = factory.create(config, shape)
            for row in read_rows(index, adapter, start, end):
                yield in_row_to_tuple(row)
        if eos:
            yield in_row_to_tuple(eos_row(index, end))

    def commit(self, end: dict) -> None:
        pass


class CtiAdapterSource(DataSource):
    """``spark.readStream.format("cti_adapter").option("spec", encode_source(...)).load()``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> Any:
        return IN_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return CtiAdapterStreamReader(self.options["spec"])
