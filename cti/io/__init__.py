"""Adapters shipped with cti: in-memory, JSON lines and CSV inputs, reference data, and
collecting, JSON-lines, Delta Lake and Parquet outputs.

The names load on first use (``cti.lazy``): a process that unpickles one adapter factory (the
source's planning workers and runner) imports that adapter's module alone, not pandas with
the Delta Lake and table outputs'."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cti.lazy import lazy_names

if TYPE_CHECKING:
    from cti.io.delta import DeltaOutputAdapterFactory, DeltaOutputConfig
    from cti.io.files import (
        CsvInputAdapterFactory,
        FileInputConfig,
        JsonLinesInputAdapterFactory,
    )
    from cti.io.memory import (
        CollectingOutputAdapter,
        CollectingOutputAdapterFactory,
        MemoryInputAdapterFactory,
    )
    from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
    from cti.io.reference import (
        ReferenceDataConfig,
        ReferenceDataInputAdapterFactory,
        reference_data,
    )
    from cti.io.tables import ParquetOutputAdapterFactory, read_parquet_output

_LAZY = {
    "DeltaOutputAdapterFactory": "cti.io.delta", "DeltaOutputConfig": "cti.io.delta",
    "CsvInputAdapterFactory": "cti.io.files", "FileInputConfig": "cti.io.files",
    "JsonLinesInputAdapterFactory": "cti.io.files",
    "CollectingOutputAdapter": "cti.io.memory", "CollectingOutputAdapterFactory": "cti.io.memory",
    "MemoryInputAdapterFactory": "cti.io.memory",
    "JsonLinesOutputAdapterFactory": "cti.io.outputs", "read_json_lines_output": "cti.io.outputs",
    "ReferenceDataConfig": "cti.io.reference",
    "ReferenceDataInputAdapterFactory": "cti.io.reference", "reference_data": "cti.io.reference",
    "ParquetOutputAdapterFactory": "cti.io.tables", "read_parquet_output": "cti.io.tables",
}
__getattr__, __dir__ = lazy_names(globals(), _LAZY)

__all__ = [
    "CollectingOutputAdapter",
    "CollectingOutputAdapterFactory",
    "CsvInputAdapterFactory",
    "DeltaOutputAdapterFactory",
    "DeltaOutputConfig",
    "FileInputConfig",
    "JsonLinesInputAdapterFactory",
    "JsonLinesOutputAdapterFactory",
    "MemoryInputAdapterFactory",
    "ParquetOutputAdapterFactory",
    "ReferenceDataConfig",
    "ReferenceDataInputAdapterFactory",
    "read_json_lines_output",
    "read_parquet_output",
    "reference_data",
]
