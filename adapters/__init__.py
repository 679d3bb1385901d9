"""Adapters shipped with cti: in-memory, JSON lines and CSV inputs, and collecting outputs."""

from adapters.memory import (
    CollectingOutputAdapter,
    CollectingOutputAdapterFactory,
    MemoryInputAdapterFactory,
)
from adapters.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output

__all__ = [
    "CollectingOutputAdapter",
    "CollectingOutputAdapterFactory",
    "JsonLinesOutputAdapterFactory",
    "MemoryInputAdapterFactory",
    "read_json_lines_output",
]
