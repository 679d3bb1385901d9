"""A query with operators on Spark still reports its input streams' ingress metrics in Spark's
query progress (``observedMetrics["cti"]``), from summary rows of shard 0, and they add up to
the in-process counts."""

from __future__ import annotations

import pytest

from cti import (
    AdvanceTimeSettings,
    Application,
    Arriving,
    CepStream,
    EventOrderingPolicy,
    EventShape,
    PointEvent,
    agg,
    ticks,
)
from cti.io.memory import MemoryInputAdapterFactory

TIMES = [5, 3, 9, 1, 14, 12, 30, 22, 25, 41, 33, 50]


def streams():
    app = Application()
    si = CepStream.create("si", MemoryInputAdapterFactory(), [
        PointEvent(t, {"k": "ab"[n % 2], "n": n}) for n, t in enumerate(TIMES)],
        EventShape.POINT, AdvanceTimeSettings.unordered_start_time(ticks(3)), application=app)
    ordered = CepStream.create("ordered", MemoryInputAdapterFactory(), [
        Arriving(PointEvent(t, {"k": "ab"[n % 2], "n": n}), max(TIMES[:n + 1]))
        for n, t in enumerate(TIMES)], EventShape.POINT, application=app,
        event_ordering_policy=EventOrderingPolicy(late_arrival_tolerance=ticks(8),
                                                  out_of_order_tolerance=ticks(2),
                                                  early_arrival_window=None))
    return si, ordered


@pytest.mark.spark
@pytest.mark.parametrize("with_inputs", [False, True], ids=["summaries", "rows"])
def test_query_progress_reports_ingress_metrics(spark, with_inputs):
    from cti.runtime.spark import SparkRuntime

    si, ordered = streams()
    queries = [s.group_by("k").apply(
                   lambda g: g.tumbling_window(ticks(10)).aggregate(n=agg.count()))
               .named(f"q_{s.name}") for s in (si, ordered)]
    runtime = SparkRuntime(spark, batch_sizes=[4])
    runtime.run_queries(queries, with_inputs=with_inputs)
    assert len(runtime.progress) >= 3
    for s in (si, ordered):
        want = s.run("local")[s.name]
        total = {m: sum(b.get(f"{s.name}.{m}") or 0 for b in runtime.progress)
                 for m in ("accepted", "adjusted", "dropped", "cti", "late", "out_of_order")}
        assert total["accepted"] == want.metrics["accepted"]
        assert total["adjusted"] == want.metrics["adjusted"]
        assert total["dropped"] == want.metrics["dropped"]
        assert total["cti"] == want.metrics["ctis"]
        late = sum(d.reason == "late" for d in want.diagnostics)
        assert total["late"] == late
        watermarks = [b[f"{s.name}.watermark"] for b in runtime.progress
                      if b.get(f"{s.name}.watermark") is not None]
        finite = [c.time for c in want.items if type(c).__name__ == "Cti"][:-1]
        assert watermarks and max(watermarks) == max(finite)
