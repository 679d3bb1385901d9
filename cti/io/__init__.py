"""Adapters shipped with cti: in-memory, JSON lines and CSV inputs, and collecting outputs."""

from cti.io.files import CsvInputAdapterFactory, FileInputConfig, JsonLinesInputAdapterFactory
from cti.io.memory import (
    CollectingOutputAdapter,
    CollectingOutputAdapterFactory,
    MemoryInputAdapterFactory,
)
from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output

__all__ = [
    "CollectingOutputAdapter",
    "CollectingOutputAdapterFactory",
    "CsvInputAdapterFactory",
    "FileInputConfig",
    "JsonLinesInputAdapterFactory",
    "JsonLinesOutputAdapterFactory",
    "MemoryInputAdapterFactory",
    "read_json_lines_output",
]
