"""Where a small micro-batch's time goes: cti-spark against plain Spark, in one session.

    python bench/batch_cost.py [--events 2000] [--keys 10] [--batches 20] [--rounds 3]
                               [--query window | reference [--reference R]]
                               [--output partitioned | gathered] [--warmup small | same]

Runs the window bench's query (``bench/run.py``: a hopping-window count per key; or with
``--query reference`` the events joined on key with ``--reference`` rows) on both
systems over the same Parquet files, cut into ``--batches`` micro-batches, alternating the
systems for ``--rounds`` rounds after a warm-up of each. For every micro-batch after the first
it keeps Spark's progress report (``durationMs``: latestOffset, queryPlanning, addBatch,
walCommit, commitOffsets, ...) and, from the session's status store, the jobs and stages that
ran (each stage's wall time and its tasks' run time). Prints, per system, the medians over
the micro-batches of every round, and one JSON line per system on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import run as bench  # noqa: E402
from bench.measure import _descendants  # noqa: E402


def stages(spark: Any) -> dict[int, dict[str, Any]]:
    """Every stage the status store holds: id -> name (its place in its job: "stage 2 of 3";
    a streaming query's stages are all named after the call that started the query), wall
    ms, tasks, task run ms, result bytes."""
    sc = spark.sparkContext
    jvm = sc._jvm
    store = sc._jsc.sc().statusStore()
    place: dict[int, str] = {}
    it = store.jobsList(jvm.java.util.ArrayList()).iterator()
    while it.hasNext():
        ids = sorted(int(i) for i in _scala_ints(it.next().stageIds()))
        for n, i in enumerate(ids):
            place[i] = f"stage {n + 1} of {len(ids)}"
    found = store.stageList(
        None, False, False, sc._gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList())
    out: dict[int, dict[str, Any]] = {}
    it = found.iterator()
    while it.hasNext():
        s = it.next()
        sub, done = s.submissionTime(), s.completionTime()
        wall = (done.get().getTime() - sub.get().getTime()
                if sub.isDefined() and done.isDefined() else 0)
        out[s.stageId()] = {"name": place.get(s.stageId(), s.name().split(" at ")[0]),
                            "wall_ms": wall, "tasks": s.numTasks(),
                            "run_ms": s.executorRunTime(), "cpu_ms": s.executorCpuTime() / 1e6,
                            "deser_ms": s.executorDeserializeTime(),
                            "result_bytes": s.resultSize()}
    return out


def _scala_ints(seq: Any) -> list[int]:
    it, out = seq.iterator(), []
    while it.hasNext():
        out.append(it.next())
    return out


def jobs(spark: Any) -> set[int]:
    sc = spark.sparkContext
    found = sc._jsc.sc().statusStore().jobsList(sc._jvm.java.util.ArrayList())
    it, out = found.iterator(), set()
    while it.hasNext():
        out.add(it.next().jobId())
    return out


def tree_cpu() -> dict[str, float]:
    """CPU seconds so far of this process tree by kind: the JVM, the Python workers (Spark's
    daemon and its forks), the Python source's driver-side process and this driver."""
    import os

    ticks = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = defaultdict(float)
    for pid in ["self", *_descendants()]:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        program = cmd.split(b"\0")[0]
        kind = ("driver" if pid == "self" else "jvm" if program.endswith(b"java")
                else "workers" if b"pyspark.daemon" in cmd
                else "source" if b"streaming_source_runner" in cmd else "other")
        out[kind] += sum(int(v) for v in fields[11:15]) / ticks
    return out


class Recorder:
    """Keeps the progress reports of the streaming queries a runtime drives."""

    def __init__(self) -> None:
        self.progress: list[dict[str, Any]] = []

    def patch(self) -> None:
        from cti.runtime.spark import runtime

        original = runtime.batch_seconds

        def keep(progress: Any) -> list[float]:
            self.progress = [json.loads(p.json) if hasattr(p, "json") else dict(p)
                             for p in progress]
            return original(progress)

        runtime.batch_seconds = keep


def native(spark: Any, data: Path, query: str) -> list[dict[str, Any]]:
    _, progress = bench._native_run(spark, data, query=query)
    return [json.loads(p.json) if hasattr(p, "json") else dict(p) for p in progress]


def cti(spark: Any, data: Path, batch: int, recorder: Recorder, query: str,
        output: str = "partitioned") -> list[dict[str, Any]]:
    from cti.runtime.spark import SparkRuntime

    factory, config, _ = bench._cti_source(data, "parquet")
    reference = bench.reference_file(data) if query == "reference" else None
    bench._cti_run(factory, config, SparkRuntime(spark, batch_sizes={"events": [batch]}),
                   reference=reference, query=query, output=output)
    return recorder.progress


def summary(progress: list[dict[str, Any]], ran: dict[int, dict[str, Any]], job_count: int
            ) -> dict[str, Any]:
    """Medians over the data micro-batches after the first."""
    rest = [p for p in progress if p.get("numInputRows", 0) > 0][1:]
    durations: dict[str, list[int]] = defaultdict(list)
    for p in rest:
        for k, v in p["durationMs"].items():
            durations[k].append(v)
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in ran.values():
        by_name[s["name"]].append(s)
    batches = len(progress)
    return {
        "micro_batches": batches, "data_batches": len(rest) + 1,
        "durationMs": {k: statistics.median(v) for k, v in sorted(durations.items())},
        "jobs_per_batch": round(job_count / max(1, batches), 2),
        "stages": {name: {"per_batch": round(len(v) / max(1, batches), 2),
                          "wall_ms": statistics.median(s["wall_ms"] for s in v),
                          "tasks": statistics.median(s["tasks"] for s in v),
                          "run_ms": statistics.median(s["run_ms"] for s in v),
                          "cpu_ms": round(statistics.median(s["cpu_ms"] for s in v), 1),
                          "deser_ms": statistics.median(s["deser_ms"] for s in v),
                          "result_bytes": statistics.median(s["result_bytes"] for s in v)}
                   for name, v in sorted(by_name.items())},
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--events", type=int, default=2000)
    p.add_argument("--keys", type=int, default=10)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--systems", default="cti-spark,spark-native")
    p.add_argument("--query", choices=("window", "reference"), default="window")
    p.add_argument("--reference", type=int, default=None, metavar="R",
                   help="--query reference: how many reference rows (default: --keys)")
    p.add_argument("--output", choices=tuple(bench.OUTPUTS), default="partitioned",
                   help="cti-spark's counting output adapter (bench/run.py --output)")
    p.add_argument("--warmup", choices=("small", "same"), default="small",
                   help="the warm-up of each system: the bench's small query (small) or a "
                        "whole run on the measured data (same: the JIT's warm-up out of "
                        "the rounds)")
    opts = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cti-batch-cost-"))
    bench.generate(opts.events, opts.keys, 0, opts.batches, tmp / "events")
    bench.generate(bench.WARMUP_EVENTS, min(opts.keys, 10), 1, 1, tmp / "warmup")
    if opts.query == "reference":
        bench.generate_reference(max(opts.reference or opts.keys, opts.keys), tmp / "events")
        bench.generate_reference(min(opts.keys, 10), tmp / "warmup")
    spark = bench.start_spark()
    recorder = Recorder()
    recorder.patch()
    size = -(-opts.events // opts.batches)
    systems = [s for s in opts.systems.split(",") if s]
    run = {"cti-spark": lambda d: cti(spark, d, size, recorder, opts.query, opts.output),
           "spark-native": lambda d: native(spark, d, opts.query)}
    for system in systems:
        run[system](tmp / ("events" if opts.warmup == "same" else "warmup"))
    results: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in range(opts.rounds):
        for system in systems:
            before, jobs_before, cpu = stages(spark), jobs(spark), tree_cpu()
            t0 = time.perf_counter()
            progress = run[system](tmp / "events")
            elapsed = time.perf_counter() - t0
            cpu_after = tree_cpu()
            after, jobs_after = stages(spark), jobs(spark)
            ran = {k: v for k, v in after.items() if k not in before}
            s = summary(progress, ran, len(jobs_after - jobs_before))
            s["run_s"] = round(elapsed, 3)
            s["load_avg_1m"] = round(__import__("os").getloadavg()[0], 2)
            s["cpu_s"] = {k: round(cpu_after[k] - cpu.get(k, 0.0), 2) for k in cpu_after}
            s["median_batch_s"] = statistics.median(
                p["durationMs"].get("triggerExecution", 0) for p in progress[1:]) / 1000
            results[system].append(s)
            print(f"[batch-cost] round {r} {system}: {json.dumps(s)}", file=sys.stderr,
                  flush=True)
    for system, rounds in results.items():
        keys = rounds[0]["durationMs"].keys()
        line = {"system": system, "rounds": len(rounds),
                "run_s": [r["run_s"] for r in rounds],
                "cpu_s": {k: statistics.median(r["cpu_s"].get(k, 0) for r in rounds)
                          for k in rounds[-1]["cpu_s"]},
                "median_batch_s": [r["median_batch_s"] for r in rounds],
                "load_avg_1m": [r["load_avg_1m"] for r in rounds],
                "durationMs": {k: statistics.median(r["durationMs"].get(k, 0) for r in rounds)
                               for k in keys},
                "jobs_per_batch": rounds[-1]["jobs_per_batch"],
                "stages": rounds[-1]["stages"]}
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
