"""What a query whose output CTIs depend on the events costs at 1 and at several shards, beside
the hopping window on the same data (docs/spark-runtime.md, "Output CTIs that depend on the
events").

```
python bench/data_ctis.py --events 200000 --keys 100 --shards 1,4 --repeat 3
```

The events of ``bench/run.py`` (its generator, its Parquet input, a CTI every 1,000 events
100 ms behind, DROP) per key: ``hopping``, a count over 10 s windows every 5 s (spread over the
shards by key); ``snapshot``, each event lasting 3 s then a snapshot window's count
(``CLIP_TO_WINDOW_END``: its output CTIs depend on the events, ``OperatorUnit.data_ctis``);
``signal``, each event lasting until the next of its key (``alter_event_duration(MAX_TIME)``
then a clip by the stream itself on ``key``: two inputs, CTIs that depend on the events),
written to ``bench/run.py``'s counting adapter. One JSON line per (query, shards): how many
shards the query was spread over (``spread``), the median of the timed runs' seconds (and
each), Spark's shuffle bytes and the tasks' run time per run (``bench/run.py``'s
``task_metrics``), the output events, and the last stages' spread (``stages``: per stage its
tasks, their run seconds and the longest task's share of them).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run as bench  # noqa: E402  (bench/run.py: the data, the adapter, Spark's metrics)
from pyspark import cloudpickle  # noqa: E402

cloudpickle.register_pickle_by_value(bench)  # (its adapter goes to workers that cannot import it)

QUERIES = ("hopping", "snapshot", "signal")


def build(query: str, data: Path) -> Any:
    """The query over the bench's events, into the counting adapter (its directory: the
    config, a new temporary one)."""
    from cti import (
        AdvanceTimeGenerationSettings,
        AdvanceTimePolicy,
        AdvanceTimeSettings,
        Application,
        CepStream,
        EventShape,
        agg,
    )

    factory, config, _ = bench._cti_source(data, "parquet")
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(
        bench.CTI_EVERY, delay=timedelta(microseconds=bench.DELAY_US),
        advance_to_infinity_on_shutdown=True), policy=AdvanceTimePolicy.DROP)
    stream = CepStream.create("events", factory, config, EventShape.POINT, settings,
                              application=Application())
    if query == "signal":
        from cti import MAX_TIME
        return stream.alter_event_duration(MAX_TIME).clip_event_duration(stream, on="key")
    if query == "hopping":
        body = lambda g: g.hopping_window(bench.WINDOW, bench.HOP).aggregate(  # noqa: E731
            count=agg.count())
    else:
        body = lambda g: g.alter_event_duration(timedelta(seconds=3)).snapshot_window(  # noqa: E731
        ).aggregate(count=agg.count())
    return stream.group_by("key").apply(body)


def spread(query: Any, shards: int) -> int:
    """How many shards the runtime spreads ``query`` over, given ``shards``."""
    from cti.engine.route import routes
    from cti.runtime.base import query_inputs

    groups, refs = query_inputs(query)
    return routes([query], groups, [refs], shards, False)[0].shards


def measure(spark: Any, query: str, data: Path, shards: int, repeat: int = 1
            ) -> dict[str, Any]:
    """``repeat`` timed runs (after a warm-up run of the same query): their median seconds,
    each run's, and Spark's metrics per run."""
    from cti.runtime.spark import SparkRuntime

    def once() -> tuple[float, int]:
        out = Path(tempfile.mkdtemp(prefix="bench-data-ctis-"))
        try:
            q = build(query, data)
            t0 = time.perf_counter()
            q.to(bench.CountingOutputAdapterFactory(), str(out)).run(
                SparkRuntime(spark, shards=shards))
            return time.perf_counter() - t0, bench._counted(out)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    once()
    before, cpu = bench.stage_metrics(spark), bench.tree_cpu_s()
    runs = [once() for _ in range(repeat)]
    after = bench.stage_metrics(spark)
    metrics = bench.per_run(bench.task_metrics(before, after, bench.tree_cpu_s() - cpu),
                            repeat)
    metrics["stages"] = stage_tasks(spark, set(before))[-3:]  # (the last run's, roughly)
    seconds = sorted(r[0] for r in runs)
    return {"query": query, "shards": shards, "spread": spread(build(query, data), shards),
            "run_s": round(seconds[len(seconds) // 2], 3),
            "runs_s": [round(r[0], 3) for r in runs], "output_events": runs[0][1], **metrics}


def stage_tasks(spark: Any, before: set[int]) -> list[list[float]]:
    """The stages that ran since ``before`` (stage ids) and did work: [tasks, their run
    seconds summed, the longest task's share], by stage id: how the work spread over tasks."""
    sc = spark.sparkContext
    jvm = sc._jvm
    store = sc._jsc.sc().statusStore()
    stages = store.stageList(None, False, False, sc._gateway.new_array(jvm.double, 0),
                             jvm.java.util.ArrayList())
    out = []
    it = stages.iterator()
    while it.hasNext():
        st = it.next()
        if st.stageId() in before or st.executorRunTime() <= 0:
            continue
        times = [t.duration().get() if t.duration().isDefined() else 0 for t in
                 _seq(store.taskList(st.stageId(), st.attemptId(), 1000))]
        total = sum(times) or 1
        out.append((st.stageId(), [st.numTasks(), round(st.executorRunTime() / 1e3, 3),
                                   round(max(times or [0]) / total, 2)]))
    return [v for _, v in sorted(out)]


def _seq(seq: Any) -> list[Any]:
    """A Scala sequence's items."""
    it = seq.iterator()
    items = []
    while it.hasNext():
        items.append(it.next())
    return items


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--keys", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shards", default="1,4", help="shard counts, comma-separated")
    p.add_argument("--queries", default=",".join(QUERIES))
    p.add_argument("--repeat", type=int, default=3, help="timed runs (their median)")
    args = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-data-ctis-data-"))
    try:
        data = root / "events"
        bench.generate(args.events, args.keys, args.seed, 1, data)
        spark = bench.start_spark()
        for query in args.queries.split(","):
            for shards in map(int, args.shards.split(",")):
                print(json.dumps({"events": args.events, "keys": args.keys,
                                  **measure(spark, query, data, shards, args.repeat)}),
                      flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
