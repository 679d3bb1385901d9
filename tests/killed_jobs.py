"""The job that test_failures (kill -9 of ``cti run``) and test_cluster (an executor killed on a
local cluster) kill mid-run, its uninterrupted in-process run to compare with, and what both
read of a run: the Delta tables, their commits, the Spark executors' processes."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from cti.cli import cli as main

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
OUTPUTS = ("per_key", "sevens")


def uninterrupted_run(tmp_path: Path) -> tuple[Path, Path]:
    """The query file under ``tmp_path``, and the tables of an uninterrupted in-process run
    of it (``--runtime local``)."""
    query = tmp_path / "job.py"
    query.write_text(QUERY)
    want = tmp_path / "uninterrupted"
    local = CliRunner().invoke(main, ["run", str(query), "--runtime", "local",
                                      "--output", str(want)])
    assert local.exit_code == 0, local.output
    return query, want


def table(path: Path) -> pd.DataFrame:
    from deltalake import DeltaTable

    df = DeltaTable(str(path)).to_pandas()
    return df.sort_values(list(df.columns)).reset_index(drop=True)


def commits(table_path: Path) -> int:
    return len(list((table_path / "_delta_log").glob("*.json")))


def assert_tables_equal(out: Path, want: Path) -> None:
    for name in OUTPUTS:
        pd.testing.assert_frame_equal(table(out / name), table(want / name))


def executors(session: int) -> list[int]:
    """The pids of the Spark executors started under process session ``session`` (not a
    child an executor is forking: until it execs, it shows the executor's command line)."""
    pids: dict[int, int] = {}  # pid: its parent's
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if b"CoarseGrainedExecutorBackend" in cmdline and os.getsid(int(entry.name)) \
                    == session:
                stat = (entry / "stat").read_text()
                pids[int(entry.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ProcessLookupError, ValueError):
            continue
    return [pid for pid, parent in pids.items() if parent not in pids]
