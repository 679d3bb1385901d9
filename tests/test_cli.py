"""The ``cti`` command: query files, ``cti run`` on both runtimes, its progress and its errors.

``cti run`` is run in process with click's CliRunner and as a real subprocess (the console
script), and its Delta tables are compared with the streams' own output.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cti.cli import cli as main
from cti.cli.query_file import QueryFileError, load_streams

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[1]
TOLL = ROOT / "examples" / "toll_booth.py"

QUERY = '''
from datetime import timedelta

from cti import AdvanceTimeSettings, Application, CepStream, EventShape, PointEvent, agg
from cti.io.memory import MemoryInputAdapterFactory

EVENTS = [PointEvent(t * 1_000_000, {{"k": "ab"[t % 2], "v": t}}) for t in range({n})]


def {define}:
    app = Application()
    s = CepStream.create("readings", MemoryInputAdapterFactory(), EVENTS, EventShape.POINT,
                         AdvanceTimeSettings.increasing_start_time(), application=app)
    return {{
        "evens": s.where(lambda p: p["v"] % 2 == 0),
        "per_key": s.group_by("k").apply(
            lambda g: g.tumbling_window(timedelta(seconds=10)).aggregate(n=agg.count())),
        "raw": s,
    }}
'''


def query_file(tmp_path: Path, n: int = 40, mapping: bool = False) -> Path:
    define = "_build()" if mapping else "streams()"
    path = tmp_path / "job.py"
    path.write_text(QUERY.format(n=n, define=define)
                    + ("STREAMS = _build()\n" if mapping else ""))
    return path


def expected_rows(path: Path) -> dict[str, int]:
    return {name: sum(1 for i in s.collect("local") if hasattr(i, "start"))
            for name, s in load_streams(path).items()}


def delta(path: Path):
    from deltalake import DeltaTable

    return DeltaTable(str(path)).to_pandas()


def test_load_streams_from_a_function_or_a_mapping(tmp_path):
    for mapping in (False, True):
        streams = load_streams(query_file(tmp_path, mapping=mapping))
        assert list(streams) == ["evens", "per_key", "raw"]


@pytest.mark.parametrize("text, message", [
    (None, "does not exist"),
    ("X = 1\n", "defines neither streams() nor STREAMS"),
    ("STREAMS = [1]\n", "STREAMS is a list, not a mapping"),
    ("STREAMS = {}\n", "is empty"),
    ("STREAMS = {'a': 1}\n", "is int, not a stream"),
    ("def streams():\n    return {'a/b': None}\n", "which is not a usable output name"),
])
def test_query_file_mistakes_are_named(tmp_path, text, message):
    path = tmp_path / "bad.py"
    if text is not None:
        path.write_text(text)
    with pytest.raises(QueryFileError, match=re.escape(message)):
        load_streams(path)
    result = CliRunner().invoke(main, ["run", str(path), "--runtime", "local"])
    assert result.exit_code == 1 and message in result.output


def test_run_local_writes_delta_tables_and_logs_progress(tmp_path):
    path = query_file(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(path), "--runtime", "local",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    want = expected_rows(path)
    for name, rows in want.items():
        assert len(delta(out / name)) == rows
        assert f"{name}: {rows} rows -> {out / name}" in result.stdout
    assert "readings: 40 events in, watermark 1970-01-01 00:00:39" in result.stderr
    again = CliRunner().invoke(main, ["run", str(path), "--runtime", "local",
                                      "--output", str(out)])
    assert again.exit_code == 1 and "does not resume" in again.output


def test_run_local_with_the_live_display(tmp_path):
    path = query_file(tmp_path)
    result = CliRunner().invoke(main, ["run", str(path), "--runtime", "local",
                                       "--progress", "live"])
    assert result.exit_code == 0, result.output
    assert "events in" in result.stderr and "micro-batches" in result.stderr
    for name, rows in expected_rows(path).items():  # counted, not kept, without --output
        assert f"{name}: {rows} rows\n" in result.stdout


def test_usage_errors(tmp_path):
    result = CliRunner().invoke(main, ["run", str(query_file(tmp_path)), "--runtime", "local",
                                       "--master", "local[2]"])
    assert result.exit_code == 2 and "--master is for --runtime spark" in result.output


@pytest.mark.spark
def test_run_spark_resumes_from_its_checkpoint(spark, tmp_path):
    """On Spark a second run of the same command resumes: nothing is written twice; a fresh
    checkpoint over existing tables is refused."""
    path = query_file(tmp_path)
    out = tmp_path / "out"
    args = ["run", str(path), "--until-idle", "--output", str(out)]
    runs = [CliRunner().invoke(main, args, env={"CTI_RUN_BATCH_SIZE": "15"}) for _ in range(2)]
    assert [r.exit_code for r in runs] == [0, 0], runs[-1].output
    for name, rows in expected_rows(path).items():
        assert len(delta(out / name)) == rows
        assert f"{name}: {rows} rows" in runs[1].stdout
    first = runs[0].stderr
    assert "per_key micro-batch 2:" in first and "readings: 40 events in" in first
    assert "micro-batch" not in runs[1].stderr  # nothing new to process
    shutil.rmtree(out / "_checkpoints")
    refused = CliRunner().invoke(main, args)
    assert refused.exit_code == 1 and "no checkpoint to resume from" in refused.output


@pytest.mark.spark
def test_the_toll_booth_job_as_a_command(tmp_path):
    """The README's demo, as a user runs it: the console script in a subprocess."""
    cti = Path(sys.executable).with_name("cti")
    out = tmp_path / "toll"
    env = dict(os.environ, CTI_SPARK_MASTER="local[2]")
    proc = subprocess.run([str(cti), "run", str(TOLL), "--until-idle", "--output", str(out)],
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "entries: 23 events in" in proc.stderr
    for name, rows in toll_keys_of_tables(out).items():
        assert rows == TOLL_EXPECTED[name], name
        assert f"{name}: {len(delta(out / name))} rows -> {out / name}" in proc.stdout


def _toll_module():
    sys.path.insert(0, str(TOLL.parent))
    try:
        import toll_booth
    finally:
        sys.path.remove(str(TOLL.parent))
    return toll_booth


def toll_keys_of_tables(out: Path) -> dict:
    """The toll-booth tables' rows as ``toll_booth.expected()``'s keys (a Counter each)."""
    from collections import Counter

    keys = {}
    for name in ("time_at_booth", "expired_registrations", "cars_per_booth"):
        t = delta(out / name)
        start = t["start"].astype("int64").tolist()
        if name == "time_at_booth":
            keys[name] = Counter(zip(start, t["LicensePlate"], t["DurationInMinutes"],
                                     strict=True))
        elif name == "expired_registrations":
            keys[name] = Counter(zip(start, t["LicensePlate"], strict=True))
        else:
            keys[name] = Counter(dict(zip(zip(start, t["TollId"], strict=True), t["Count"],
                                          strict=True)))
            assert len(keys[name]) == len(t)
    return keys


TOLL_EXPECTED = _toll_module().expected()


@pytest.mark.spark
def test_runs_until_interrupted_and_ctrl_c_stops_cleanly(tmp_path):
    """Without --until-idle the job looks for new input again and again; Ctrl-C (SIGINT to the
    whole process group, as a terminal sends it: the command, Spark's JVM and its Python
    workers) stops it after the current micro-batch, with the tables complete and status 0."""
    import signal
    import time

    path = query_file(tmp_path)
    out = tmp_path / "out"
    cti = Path(sys.executable).with_name("cti")
    env = dict(os.environ, CTI_SPARK_MASTER="local[2]")
    proc = subprocess.Popen([str(cti), "run", str(path), "--output", str(out), "--interval",
                             "1", "--progress", "log"], env=env, text=True,
                            start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    want = expected_rows(path)
    deadline = time.monotonic() + 600
    while not all((out / n / "_delta_log").exists() for n in want):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.5)
    time.sleep(3)  # into the next passes, which find nothing new
    assert proc.poll() is None, "the job stopped by itself"
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    assert "stopping after the current micro-batch" in stderr
    for name, rows in want.items():
        assert f"{name}: {rows} rows -> {out / name} (stopped)" in stdout
        assert len(delta(out / name)) == rows
