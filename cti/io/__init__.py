"""Adapters shipped with cti: in-memory, JSON lines and CSV inputs, reference data, and
collecting, JSON-lines, Delta Lake and Parquet outputs."""

from cti.io.delta import DeltaOutputAdapterFactory, DeltaOutputConfig
from cti.io.files import CsvInputAdapterFactory, FileInputConfig, JsonLinesInputAdapterFactory
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
