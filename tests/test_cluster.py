"""Queries spread over shards on a real multi-process cluster: ``spark-submit`` on
``local-cluster[2,1,1024]`` (two executor JVMs, each with its Python workers) runs a
``group_by`` hopping-window query, a keyed join and a window per substream key of an
event-ordering stream with ``SparkRuntime(shards=4)``, the three in one streaming query; each
equals the in-process runtime's results, and both executors ran tasks. Then the window query
over a live file, stopped on 4 tasks and restarted on 2 (``parallelism=2``: the checkpoint's
state re-spread) after more input came, equals the in-process run over the whole file.
Last, in the same job (one cluster's start for both tests), the job of ``tests/killed_jobs.py``
as ``cti run`` runs it, one executor killed with SIGKILL mid-run: Spark runs its tasks again
elsewhere, and the tables are exact and complete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest
from budget import TEST_JAVA_OPTIONS
from killed_jobs import BATCH, assert_tables_equal, commits, executors, table, uninterrupted_run

from cti.runtime.local import LocalRuntime

pytestmark = pytest.mark.processes

JOB = '''
import json
import sys
from datetime import timedelta

from pathlib import Path

from cti import (AdvanceTimeSettings, Application, Arriving, CepStream, EventOrderingPolicy,
                 EventShape, PointEvent, agg)
from cti.io.memory import MemoryInputAdapterFactory


def queries():
    app = Application()
    settings = AdvanceTimeSettings.unordered_start_time(timedelta(microseconds=30))
    reads = [PointEvent(t * 7 % 1000 + t, {"k": f"k{t % 13}", "v": t}) for t in range(900)]
    s = CepStream.create("reads", MemoryInputAdapterFactory(), reads, EventShape.POINT,
                         settings, application=app)
    ref = [PointEvent(t * 11, {"k": f"k{t % 13}", "w": t}) for t in range(160)]
    r = CepStream.create("ref", MemoryInputAdapterFactory(), ref, EventShape.POINT, settings,
                         application=app)
    windows = s.group_by("k").apply(
        lambda g: g.hopping_window(timedelta(microseconds=100), timedelta(microseconds=50))
        .aggregate(n=agg.count(), total=agg.sum("v")))
    joined = s.alter_event_duration(timedelta(microseconds=40)).join(
        r.alter_event_duration(timedelta(microseconds=25)), on="k",
        select=lambda a, b: {"k": a["k"], "v": a["v"], "w": b["w"]})
    arrivals = [Arriving(PointEvent(max(0, 3 * t - t * 7 % 40), {"k": f"k{t % 13}", "v": t}),
                         3 * t) for t in range(900)]
    late = EventOrderingPolicy(late_arrival_tolerance=timedelta(microseconds=25),
                               out_of_order_tolerance=timedelta(microseconds=10), over="k")
    o = CepStream.create("ordered", MemoryInputAdapterFactory(), arrivals, EventShape.POINT,
                         event_ordering_policy=late, application=app)
    substreams = o.group_by("k").apply(
        lambda g: g.tumbling_window(timedelta(microseconds=100)).aggregate(n=agg.count()))
    return windows, joined, substreams


def live_windows(path):
    from cti.io.files import FileInputConfig, JsonLinesInputAdapterFactory

    config = FileInputConfig(path, start_column="t", time_format="ticks", live=True)
    s = CepStream.create("live", JsonLinesInputAdapterFactory(), config, EventShape.POINT,
                         AdvanceTimeSettings.unordered_start_time(timedelta(microseconds=30)),
                         application=Application())
    return s.group_by("k").apply(
        lambda g: g.hopping_window(timedelta(microseconds=100), timedelta(microseconds=50))
        .aggregate(n=agg.count(), total=agg.sum("v")))


def write_rows(path, rows, mode):
    with open(path, mode) as f:
        f.writelines(json.dumps({"t": t * 7 % 1000 + t, "k": f"k{t % 13}", "v": t}) + "\\n"
                     for t in rows)


def canonical(items):
    return [[type(i).__name__, getattr(i, "start", getattr(i, "time", None)),
             getattr(i, "end", None), json.dumps(getattr(i, "payload", None), sort_keys=True)]
            for i in items]


if __name__ == "__main__":
    from cti.runtime.spark import SparkRuntime
    from cti.runtime.spark.session import get_spark

    spark = get_spark()
    names = ("windows", "joined", "substreams")
    named = [q.named(name) for name, q in zip(names, queries(), strict=True)]
    runtime = SparkRuntime(spark, shards=4, batch_sizes=[300])
    results = runtime.run_queries(named, with_inputs=False)  # one streaming query for all
    out = {name: canonical(r.items(name)) for name, r in zip(names, results, strict=True)}
    sc = spark.sparkContext
    executors = sc._jsc.sc().statusStore().executorList(True)
    tasks = {}
    it = executors.iterator()
    while it.hasNext():
        e = it.next()
        if e.id() != "driver":
            tasks[e.id()] = e.totalTasks()
    out["tasks"] = tasks
    out["master"] = sc.master

    from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
    from cti.runtime.spark.runtime import recorded_partitions

    data, written, checkpoint = (str(Path(sys.argv[2]) / n) for n in ("in.jsonl", "out", "ck"))
    write_rows(data, range(450), "w")
    query = live_windows(data).to(JsonLinesOutputAdapterFactory(), written)
    query.run(SparkRuntime(spark, shards=4, parallelism=4, batch_sizes=[150],
                           checkpoint_location=checkpoint))
    write_rows(data, range(450, 900), "a")  # more input while the job is down
    query.run(SparkRuntime(spark, parallelism=2, batch_sizes=[150],
                           checkpoint_location=checkpoint))
    out["restarted"] = canonical(read_json_lines_output(written))
    out["restart_tasks"] = recorded_partitions(checkpoint)
    Path(sys.argv[1]).write_text(json.dumps(out))

    # Last, the killed job as ``cti run`` runs it (the console script's main, which exits with
    # the run's status) on this cluster, while the test kills an executor.
    from cti.cli import main

    killed_query, killed_out = sys.argv[3:5]
    sys.argv = ["cti", "run", killed_query, "--until-idle", "--output", killed_out,
                "--progress", "log"]
    main()
'''


MASTER = "local-cluster[2,1,1024]"


@attrs.frozen
class ClusterRun:
    """What the one ``spark-submit`` left: its directory, the queries' results (``None`` if
    it failed before writing them), its exit status and log, the uninterrupted run's tables
    and how many ``per_key`` rows the killed job had written when its executor was killed."""

    tmp: Path
    got: dict | None
    returncode: int
    log: str
    want: Path
    killed_at: int


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory) -> ClusterRun:
    """``JOB`` by ``spark-submit`` on ``MASTER``, once for both tests; one of its executors
    killed with SIGKILL once the killed job has committed two ``per_key`` micro-batches."""
    tmp_path = tmp_path_factory.mktemp("cluster")
    query, want = uninterrupted_run(tmp_path)
    job, result, out = tmp_path / "cluster_job.py", tmp_path / "result.json", tmp_path / "out"
    job.write_text(JOB)
    submit = Path(sys.executable).with_name("spark-submit")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, CTI_RUN_BATCH_SIZE=BATCH)
    env.pop("CTI_SPARK_MASTER", None)
    command = [str(submit), "--master", MASTER, "--conf", "spark.executor.memory=768m",
               "--conf", f"spark.executor.extraJavaOptions={TEST_JAVA_OPTIONS}",
               str(job), str(result), str(tmp_path), str(query), str(out)]
    log = tmp_path / "job.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(command, env=env, start_new_session=True, stdout=sink,
                                stderr=subprocess.STDOUT)
        try:
            killed_at = _kill_an_executor_mid_run(proc, out / "per_key", log)
            returncode = proc.wait(timeout=900)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    got = json.loads(result.read_text()) if result.exists() else None
    return ClusterRun(tmp_path, got, returncode, log.read_text(), want, killed_at)


def _kill_an_executor_mid_run(proc: subprocess.Popen, per_key: Path, log: Path) -> int:
    """Once ``per_key`` has two commits, SIGKILL one of the job's two executors; the rows
    ``per_key`` had then."""
    deadline = time.monotonic() + 900
    while not per_key.exists() or commits(per_key) < 2:
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "the killed job wrote nothing in 15 minutes"
        time.sleep(0.2)
    pids = executors(proc.pid)
    assert len(pids) == 2, pids
    os.kill(pids[0], signal.SIGKILL)
    return len(table(per_key))


@pytest.mark.spark
def test_group_by_window_and_keyed_join_on_two_executors_equal_in_process(cluster_run):
    got, tmp_path = cluster_run.got, cluster_run.tmp
    assert got is not None, cluster_run.log[-3000:]
    assert got["master"] == MASTER
    assert len(got["tasks"]) == 2 and all(n > 0 for n in got["tasks"].values()), got["tasks"]

    sys.path.insert(0, str(tmp_path))
    try:
        import cluster_job as local_job  # the same queries, in this process
    finally:
        sys.path.remove(str(tmp_path))
    windows, joined, substreams = local_job.queries()
    want_windows = local_job.canonical(windows.collect(LocalRuntime()))
    want_joined = local_job.canonical(joined.collect(LocalRuntime()))
    want_substreams = local_job.canonical(substreams.collect(LocalRuntime()))
    assert want_windows and want_joined and want_substreams
    assert got["windows"] == want_windows
    assert got["joined"] == want_joined
    assert got["substreams"] == want_substreams
    assert got["restart_tasks"] == 2
    assert got["restarted"] == local_job.canonical(
        local_job.live_windows(str(tmp_path / "in.jsonl")).collect(LocalRuntime()))


@pytest.mark.spark
@pytest.mark.failures
def test_executor_killed_mid_run_on_a_local_cluster(cluster_run):
    """``cti run`` on ``MASTER`` (two executor JVMs), one executor killed with SIGKILL mid-run:
    Spark runs its tasks again elsewhere, and the tables are exact and complete."""
    assert cluster_run.returncode == 0, cluster_run.log[-3000:]
    assert f"on {MASTER}" in cluster_run.log
    assert cluster_run.killed_at < len(table(cluster_run.want / "per_key")), \
        "the executor died mid-run"
    assert_tables_equal(cluster_run.tmp / "out", cluster_run.want)
