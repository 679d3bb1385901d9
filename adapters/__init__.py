"""Adapters shipped with cti: in-memory, JSON lines and CSV inputs, and collecting outputs."""

from adapters.memory import CollectingOutputAdapter, MemoryInputAdapterFactory

__all__ = ["CollectingOutputAdapter", "MemoryInputAdapterFactory"]
