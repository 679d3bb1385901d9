"""Failures mid-run: the job's Delta tables are still exact and complete.

- ``cti run`` killed with SIGKILL (with its Spark JVM: the whole process group) in the middle
  of a run, then the same command again (in this process, on the tests' session: a JVM that
  reads the dead one's checkpoint): the tables equal an uninterrupted run's, no row lost or
  written twice (the checkpoint resumes; a replayed micro-batch is skipped by its Delta
  transaction).
- ``spark-submit`` of the command on ``local-cluster[2,1,1024]``, one executor killed with
  SIGKILL mid-run: the tables are exact and complete.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from cti.cli import cli as main

pytestmark = pytest.mark.processes

QUERY = '''
from datetime import timedelta

from cti import AdvanceTimeSettings, Application, CepStream, EventShape, PointEvent, agg
from cti.io.memory import MemoryInputAdapterFactory

EVENTS = [PointEvent(t * 1_000_000, {"k": "abc"[t % 3], "v": t}) for t in range(480)]


def streams():
    app = Application()
    s = CepStream.create("readings", MemoryInputAdapterFactory(), EVENTS, EventShape.POINT,
                         AdvanceTimeSettings.increasing_start_time(), application=app)
    return {
        "per_key": s.group_by("k").apply(
            lambda g: g.tumbling_window(timedelta(seconds=20)).aggregate(
                n=agg.count(), total=agg.sum("v"))),
        "sevens": s.where(lambda p: p["v"] % 7 == 0),
    }
'''


# Six micro-batches an output (480 events): room to kill the job after the second or third
# and still have a run to resume.
BATCH = "80"


def _table(path: Path) -> pd.DataFrame:
    from deltalake import DeltaTable

    df = DeltaTable(str(path)).to_pandas()
    return df.sort_values(list(df.columns)).reset_index(drop=True)


def _commits(table: Path) -> int:
    return len(list((table / "_delta_log").glob("*.json")))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[Path, Path]:
    """The query file, and the tables of an uninterrupted in-process run of it (made once for
    both tests, which only read them)."""
    tmp_path = tmp_path_factory.mktemp("uninterrupted")
    query = tmp_path / "job.py"
    query.write_text(QUERY)
    want = tmp_path / "uninterrupted"
    local = CliRunner().invoke(main, ["run", str(query), "--runtime", "local",
                                      "--output", str(want)])
    assert local.exit_code == 0, local.output
    return query, want


@pytest.mark.spark
@pytest.mark.failures
def test_kill_9_mid_run_then_the_same_command_again(spark, tmp_path, uninterrupted):
    """The killed run is the console script in a process of its own (with its JVM); the same
    command again runs in this process, on the tests' session (a process of its own that ends
    by itself is the sensors example's, in test_examples)."""
    query, want = uninterrupted

    out = tmp_path / "out"
    args = ["run", str(query), "--until-idle", "--output", str(out), "--progress", "log"]
    command = [str(Path(sys.executable).with_name("cti")), *args]
    env = dict(os.environ, CTI_RUN_BATCH_SIZE=BATCH, CTI_SPARK_MASTER="local[2]")
    proc = subprocess.Popen(command, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while not (out / "per_key").exists() or _commits(out / "per_key") < 3:
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
        assert time.monotonic() < deadline, "the job wrote nothing in 10 minutes"
        time.sleep(0.2)
    assert proc.poll() is None, "the job finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # cti run and its Spark JVM
    proc.wait()
    killed_at = len(_table(out / "per_key"))
    assert 0 < killed_at < len(_table(want / "per_key")), "the kill landed mid-run"

    again = CliRunner().invoke(main, args, env={"CTI_RUN_BATCH_SIZE": BATCH})
    assert again.exit_code == 0, again.output[-3000:]
    assert "per_key micro-batch" in again.stderr  # it resumed: micro-batches were left to run
    for name in ("per_key", "sevens"):
        pd.testing.assert_frame_equal(_table(out / name), _table(want / name))


def _executors(session: int) -> list[int]:
    """The pids of the Spark executors started under process session ``session``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if b"CoarseGrainedExecutorBackend" in cmdline and os.getsid(int(entry.name)) \
                    == session:
                pids.append(int(entry.name))
        except (OSError, ProcessLookupError):
            continue
    return pids


@pytest.mark.spark
@pytest.mark.failures
def test_executor_killed_mid_run_on_a_local_cluster(tmp_path, uninterrupted):
    """``spark-submit`` of the command on ``local-cluster[2,1,1024]`` (two executor JVMs), one
    executor killed with SIGKILL mid-run: Spark runs its tasks again elsewhere, and the tables
    are exact and complete. (Its own SparkSession: in a subprocess.)"""
    import cti.cli

    query, want = uninterrupted

    out = tmp_path / "out"
    submit = Path(sys.executable).with_name("spark-submit")
    command = [str(submit), "--master", "local-cluster[2,1,1024]",
               "--conf", "spark.executor.memory=768m", cti.cli.__file__, "run", str(query),
               "--until-idle", "--output", str(out), "--progress", "log"]
    env = dict(os.environ, CTI_RUN_BATCH_SIZE=BATCH, PYSPARK_PYTHON=sys.executable)
    env.pop("CTI_SPARK_MASTER", None)
    log = tmp_path / "job.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(command, env=env, start_new_session=True, stdout=sink,
                                stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 600
            while not (out / "per_key").exists() or _commits(out / "per_key") < 2:
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the job wrote nothing in 10 minutes"
                time.sleep(0.2)
            executors = _executors(proc.pid)
            assert len(executors) == 2, executors
            os.kill(executors[0], signal.SIGKILL)
            killed_at = len(_table(out / "per_key"))
            assert proc.wait(timeout=900) == 0, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert "on local-cluster[2,1,1024]" in text
    assert killed_at < len(_table(want / "per_key")), "the executor died mid-run"
    for name in ("per_key", "sevens"):
        pd.testing.assert_frame_equal(_table(out / name), _table(want / name))
