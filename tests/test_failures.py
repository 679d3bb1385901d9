"""Failures mid-run: the job's Delta tables are still exact and complete.

``cti run`` killed with SIGKILL (with its Spark JVM: the whole process group) in the middle of
a run, then the same command again (in this process, on the tests' session: a JVM that reads
the dead one's checkpoint): the tables equal an uninterrupted run's, no row lost or written
twice (the checkpoint resumes; a replayed micro-batch is skipped by its Delta transaction).
(The same job with an executor killed on a local cluster is test_cluster's.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from killed_jobs import BATCH, assert_tables_equal, commits, table, uninterrupted_run

from cti.cli import cli as main

pytestmark = pytest.mark.processes


@pytest.mark.spark
@pytest.mark.failures
def test_kill_9_mid_run_then_the_same_command_again(spark, tmp_path):
    """The killed run is the console script in a process of its own (with its JVM); the same
    command again runs in this process, on the tests' session (a process of its own that ends
    by itself is the sensors example's, in test_examples)."""
    query, want = uninterrupted_run(tmp_path)

    out = tmp_path / "out"
    args = ["run", str(query), "--until-idle", "--output", str(out), "--progress", "log"]
    command = [str(Path(sys.executable).with_name("cti")), *args]
    env = dict(os.environ, CTI_RUN_BATCH_SIZE=BATCH, CTI_SPARK_MASTER="local[2]")
    proc = subprocess.Popen(command, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while not (out / "per_key").exists() or commits(out / "per_key") < 3:
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
        assert time.monotonic() < deadline, "the job wrote nothing in 10 minutes"
        time.sleep(0.2)
    assert proc.poll() is None, "the job finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # cti run and its Spark JVM
    proc.wait()
    killed_at = len(table(out / "per_key"))
    assert 0 < killed_at < len(table(want / "per_key")), "the kill landed mid-run"

    again = CliRunner().invoke(main, args, env={"CTI_RUN_BATCH_SIZE": BATCH})
    assert again.exit_code == 0, again.output[-3000:]
    assert "per_key micro-batch" in again.stderr  # it resumed: micro-batches were left to run
    assert_tables_equal(out, want)
