"""Output adapters bound with ``stream.to(factory, config)``, on both runtimes.

A JSON-lines output gets exactly the stream's output (events and CTIs, in order), however the
input is cut into batches, and a replayed batch replaces itself.
"""

from __future__ import annotations

import pytest

from cti import (
    AdvanceTimeSettings,
    Application,
    CepStream,
    EdgeEvent,
    EventShape,
    PointEvent,
    ticks,
)
from cti.io.memory import CollectingOutputAdapterFactory, MemoryInputAdapterFactory
from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
from cti.runtime.local import LocalRuntime

EVENTS = [PointEvent(t, {"n": k}) for k, t in enumerate([5, 9, 7, 12, 3, 20, 18, 30])]


def bind(app=None):
    return CepStream.create("s", MemoryInputAdapterFactory(), EVENTS, EventShape.POINT,
                            AdvanceTimeSettings.unordered_start_time(ticks(2)),
                            application=app or Application())


def test_collecting_output_local():
    stream = bind()
    factory = CollectingOutputAdapterFactory()
    stream.to(factory, "out").run(LocalRuntime(batch_sizes=[3]))
    adapter = factory.adapters["out"]
    assert adapter.items == stream.collect("local")
    assert adapter.closed
    assert len(adapter.batches) == 3  # 9 rows (8 events + end of input) in batches of 3


def test_json_lines_output_replayed_batch_replaces_itself(tmp_path):
    factory = JsonLinesOutputAdapterFactory()
    adapter = factory.create(str(tmp_path), EventShape.EDGE)
    adapter.write([EdgeEvent.start_edge(1, {"a": 1})], 0)
    adapter.write([EdgeEvent.start_edge(2, {"a": 2})], 0)  # the same batch, replayed
    adapter.write([EdgeEvent.end_edge(2, 5, {"a": 2})], 1)
    assert read_json_lines_output(tmp_path) == [
        EdgeEvent.start_edge(2, {"a": 2}), EdgeEvent.end_edge(2, 5, {"a": 2})]


@pytest.mark.parametrize("batch_sizes", [None, [2, 3]], ids=["whole", "split"])
def test_json_lines_output_spark(spark, tmp_path, batch_sizes):
    from cti.runtime.spark import SparkRuntime

    stream = bind()
    stream.to(JsonLinesOutputAdapterFactory(), str(tmp_path)).run(
        SparkRuntime(spark, batch_sizes=batch_sizes))
    assert read_json_lines_output(tmp_path) == stream.collect("local")
