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
    ("def streams():\n    return {'_outputs': None}\n", "a folder cti run keeps for itself"),
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
    assert "readings: 40 in, invalid 0, watermark 1970-01-01 00:00:39" in result.stderr
    again = CliRunner().invoke(main, ["run", str(path), "--runtime", "local",
                                      "--output", str(out)])  # resumes: nothing new
    assert again.exit_code == 0 and "micro-batch" not in again.stderr, again.output
    for name, rows in want.items():
        assert len(delta(out / name)) == rows
    other = CliRunner().invoke(main, ["run", str(path), "--output", str(out)])  # on Spark
    assert other.exit_code == 1 and "checkpoint of a --runtime local run" in other.output
    shutil.rmtree(out / "_checkpoints")
    refused = CliRunner().invoke(main, ["run", str(path), "--runtime", "local",
                                        "--output", str(out)])
    assert refused.exit_code == 1 and "no checkpoint to resume from" in refused.output


def test_run_local_with_the_live_display(tmp_path):
    path = query_file(tmp_path)
    result = CliRunner().invoke(main, ["run", str(path), "--runtime", "local",
                                       "--progress", "live"])
    assert result.exit_code == 0, result.output
    assert "inputs" in result.stderr and "invalid" in result.stderr
    assert "micro-batches" in result.stderr and "latest micro-batch: raw #0" in result.stderr
    for name, rows in expected_rows(path).items():  # counted, not kept, without --output
        assert f"{name}: {rows} rows\n" in result.stdout


def test_two_inputs_of_one_name_are_refused(tmp_path):
    """Bound twice (two applications): the job's progress, metrics and dead letters name an
    input by its name, so the job refuses to start."""
    path = tmp_path / "job.py"
    path.write_text(QUERY.format(n=4, define="streams()").replace(
        '"raw": s,', '"raw": CepStream.create("readings", MemoryInputAdapterFactory(), EVENTS, '
        'EventShape.POINT, AdvanceTimeSettings.increasing_start_time(), '
        'application=Application()),'))
    result = CliRunner().invoke(main, ["run", str(path), "--runtime", "local"])
    assert result.exit_code == 1
    assert "two input streams are named 'readings'" in result.output


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
    assert "per_key micro-batch 2:" in first
    for name in expected_rows(path):  # a line per micro-batch, with that batch's counts
        assert sum(logged_inputs(first, name, "readings")) == 40, first
    assert "micro-batch" not in runs[1].stderr  # nothing new to process
    # The outputs' one query resumes only with the outputs it was started with.
    path.write_text(path.read_text().replace('"raw": s,', ""))
    other = CliRunner().invoke(main, args)
    assert other.exit_code == 1
    assert "the job's outputs are ['evens', 'per_key'], but its checkpoint" in other.output
    assert "holds the query of ['evens', 'per_key', 'raw']" in other.output
    shutil.rmtree(out / "_checkpoints")
    refused = CliRunner().invoke(main, args)
    assert refused.exit_code == 1 and "no checkpoint to resume from" in refused.output
    # A checkpoint of a release that ran each output as a query of its own.
    (out / "_checkpoints" / "evens" / "commits").mkdir(parents=True)
    (out / "_checkpoints" / "evens" / "commits" / "0").write_text("v1")
    earlier = CliRunner().invoke(main, args)
    assert earlier.exit_code == 1 and "an earlier release of cti" in earlier.output


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


def toll_tables_complete(out: Path) -> bool:
    """Whether the toll-booth job has written all of ``toll_booth.expected()``."""
    return all(any((out / name / "_delta_log").glob("*.json")) for name in TOLL_EXPECTED) \
        and toll_keys_of_tables(out) == TOLL_EXPECTED


@pytest.mark.spark
def test_the_toll_booth_job_runs_until_ctrl_c_stops_it_cleanly(tmp_path):
    """The README's demo as a user runs it (the console script in a subprocess), but without
    --until-idle: the job looks for new input again and again; Ctrl-C (SIGINT to the whole
    process group, as a terminal sends it: the command, Spark's JVM and its Python workers)
    stops it after the current micro-batch, with the tables complete and status 0. (One JVM
    for both: ``cti run --until-idle`` in a subprocess, ending by itself, is the sensors
    example's.)"""
    import signal
    import time

    cti = Path(sys.executable).with_name("cti")
    out, log = tmp_path / "toll", tmp_path / "stderr.log"
    env = dict(os.environ, CTI_SPARK_MASTER="local[2]")
    with log.open("w") as sink:
        proc = subprocess.Popen([str(cti), "run", str(TOLL), "--output", str(out),
                                 "--interval", "1", "--progress", "log"], env=env, text=True,
                                start_new_session=True, stdout=subprocess.PIPE, stderr=sink)
        try:
            deadline = time.monotonic() + 600
            while not toll_tables_complete(out):
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the tables were not complete in 10 minutes"
                time.sleep(0.5)
            time.sleep(3)  # into the next passes, which find nothing new
            assert proc.poll() is None, "the job stopped by itself"
            os.killpg(proc.pid, signal.SIGINT)
            stdout, _ = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    stderr = log.read_text()
    assert proc.returncode == 0, stderr[-3000:]
    assert "stopping after the current micro-batch" in stderr
    assert sum(logged_inputs(stderr, "time_at_booth", "entries")) == 23
    assert toll_keys_of_tables(out) == TOLL_EXPECTED
    for name in TOLL_EXPECTED:
        assert f"{name}: {len(delta(out / name))} rows -> {out / name} (stopped)" in stdout


# ---- progress: one line per micro-batch -------------------------------------------------------

LOG_LINE = re.compile(r"^\[\d\d:\d\d:\d\d\] (?P<output>\S+) micro-batch (?P<batch>\d+): "
                      r"[\d.]+ s, (?P<rows>\d+) rows out \((?P<total>\d+) in all\)(?P<inputs>.*)$")


def log_lines(text: str, output: str) -> list[re.Match]:
    found = [LOG_LINE.match(line) for line in text.splitlines()]
    return [m for m in found if m and m["output"] == output]


def logged_inputs(text: str, output: str, stream: str) -> list[int]:
    """The events in of ``stream`` on each log line of ``output``'s micro-batches."""
    counts = []
    for m in log_lines(text, output):
        counts += [int(c) for c in re.findall(rf"; {re.escape(stream)}: (\d+) in,", m["inputs"])]
    return counts


def test_progress_logs_each_micro_batch_once_with_its_own_counts():
    """A refresh with no new micro-batch (the job's after each pass) logs nothing; a line's
    counts are its micro-batch's, its rows the table's growth."""
    import io

    from cti.cli.progress import Display, RunProgress

    stream = io.StringIO()
    progress = RunProgress()
    display = Display(progress, live=False, stream=stream)
    with display:
        display.refresh()  # nothing yet
        for batch, (accepted, invalid, rows) in enumerate([(5, 1, 3), (2, 0, 7)]):
            progress.add_batch("out", batch, 0.5, {"s.accepted": accepted, "s.invalid": invalid,
                                                   "s.watermark": 10**15 * (batch + 1)})
            progress.set_rows("out", rows)
            display.refresh()
            display.refresh()
            progress.set_rows("out", rows)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2, lines
    first, second = (LOG_LINE.match(line) for line in lines)
    assert (first["batch"], first["rows"], first["total"]) == ("0", "3", "3")
    assert (second["batch"], second["rows"], second["total"]) == ("1", "4", "7")
    assert "s: 6 in, invalid 1" in first["inputs"] and "s: 2 in, invalid 0" in second["inputs"]
    assert progress.per_input()["s"].events == 8 and progress.per_input()["s"].invalid == 1


def test_run_local_logs_one_line_per_micro_batch(tmp_path):
    path = query_file(tmp_path)
    result = CliRunner().invoke(main, ["run", str(path), "--runtime", "local", "--progress",
                                       "log"], env={"CTI_RUN_BATCH_SIZE": "15"})
    assert result.exit_code == 0, result.output
    logged = [line for line in result.stderr.splitlines() if line.startswith("[")]
    for name, rows in expected_rows(path).items():
        lines = log_lines(result.stderr, name)
        assert [m["batch"] for m in lines] == ["0", "1", "2"]
        assert sum(int(m["rows"]) for m in lines) == rows == int(lines[-1]["total"])
        assert logged_inputs(result.stderr, name, "readings") == [15, 15, 10]
    assert len(logged) == 9, logged


# ---- dead letters -----------------------------------------------------------------------------

CSV_QUERY = '''
from cti import AdvanceTimeSettings, Application, CepStream, EventShape
from cti.io.files import CsvInputAdapterFactory, FileInputConfig


def streams():
    s = CepStream.create("readings", CsvInputAdapterFactory(),
                         FileInputConfig({csv!r}, start_column="t"), EventShape.POINT,
                         AdvanceTimeSettings.increasing_start_time(), application=Application(),
                         on_bad_input="dead_letter")
    return {{"hot": s.where(lambda p: int(p["v"]) > 1)}}
'''


def csv_job(tmp_path: Path, lines: list[str]) -> Path:
    csv = tmp_path / "readings.csv"
    csv.write_text("t,v\n" + "".join(f"{line}\n" for line in lines))
    path = tmp_path / "csv_job.py"
    path.write_text(CSV_QUERY.format(csv=str(csv)))
    return path


def test_dead_letters_are_a_table_per_input_and_counted(tmp_path):
    from cti.cli.dead_letters import read_dead_letters

    good = [f"2026-01-01T00:00:0{k}Z,{k}" for k in range(5)]
    bad = {3: '2026-01-01T00:00:05Z,"7', 5: "2026-01-01T00:00:06,8"}  # line number: text
    lines = list(good)
    for number in sorted(bad):
        lines.insert(number - 2, bad[number])
    path = csv_job(tmp_path, lines)
    out = tmp_path / "out"
    args = ["run", str(path), "--runtime", "local", "--output", str(out), "--progress", "log"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    letters = read_dead_letters(out / "_dead_letters" / "readings").to_pylist()
    assert [(d["line"], d["raw"], d["file"]) for d in letters] == [
        (n, text, str(tmp_path / "readings.csv")) for n, text in sorted(bad.items())]
    assert "naive datetime" in letters[1]["rule"] and letters[0]["stream"] == "readings"
    assert (f"input readings: {len(lines)} rows, {len(bad)} invalid, {len(bad)} dead letters "
            f"-> {out / '_dead_letters' / 'readings'}") in result.stdout
    assert f"hot: {sum(1 for k in range(5) if k > 1)} rows" in result.stdout
    assert "Warning" not in result.stderr
    strict = CliRunner().invoke(main, ["run", str(path), "--runtime", "local", "--strict"])
    assert strict.exit_code == 1 and f"--strict: {len(bad)} input rows" in strict.output
    assert f"{len(bad)} dead letters\n" in strict.stdout  # counted, not kept, without --output


def test_an_input_whose_rows_are_all_invalid_ends_with_a_warning(tmp_path):
    path = csv_job(tmp_path, [f"2026-01-01T00:00:0{k},{k}" for k in range(4)])  # all naive
    result = CliRunner().invoke(main, ["run", str(path), "--runtime", "local"])
    assert result.exit_code == 0, result.output
    assert "input readings: 4 rows, 4 invalid, 4 dead letters" in result.stdout
    assert "Warning: every row of input 'readings' was invalid (4 rows)" in result.stderr
    fine = CliRunner().invoke(main, ["run", str(csv_job(tmp_path, ["2026-01-01T00:00:00Z,1"])),
                                     "--runtime", "local"])
    assert fine.exit_code == 0 and "Warning" not in fine.stderr


# ---- users' mistakes: the message and the user's own frame, no traceback -----------------------

MISTAKES = '''
from datetime import datetime, timedelta

from cti import (AdvanceTimeSettings, Application, CepStream, EventShape, InvalidInput,
                 PointEvent, agg)
from cti.io.files import CsvInputAdapterFactory, FileInputConfig
from cti.io.memory import MemoryInputAdapterFactory

EVENTS = [PointEvent(t * 1_000_000, {{"k": None if t == 3 else "a", "v": t}}) for t in range(5)]


def streams():
    s = CepStream.create("s", MemoryInputAdapterFactory(), EVENTS, EventShape.POINT,
                         AdvanceTimeSettings.increasing_start_time(), application=Application())
    return {{"out": {query}}}
'''


@pytest.mark.parametrize("query, error, message", [  # (a null key, bad input: no user frame)
    ('s.group_by("kk")', "UnknownFieldError", "stream 's' has no field 'kk'"),
    ("s.where(lambda p: p['w'] > 1)", "KeyError", "cti: where on stream 's' raised KeyError"),
    ('s.group_by("k").apply(lambda g: g.tumbling_window("1s").aggregate(n=agg.count()))',
     "NullKeyError", "null"),
    ("s.tumbling_window(3).aggregate(n=agg.count())", "InvalidSettingsError",
     "a bare number is not a duration"),
    ("s.where(lambda p: PointEvent(datetime(2014, 9, 10), {}))", "InvalidEventError",
     "naive datetime"),
    ('CepStream.create("f", CsvInputAdapterFactory(), FileInputConfig("nope.csv", "t"), '
     '"point", application=Application())', "BindingError", "input file nope.csv does not exist"),
    ('CepStream.create("m", MemoryInputAdapterFactory(), [InvalidInput("no time", "x,y")], '
     '"point", AdvanceTimeSettings.increasing_start_time(), application=Application())',
     "BadInputError", "stream 'm'"),
])
def test_mistakes_print_the_message_and_the_users_frame(tmp_path, query, error, message):
    path = tmp_path / "mistake.py"
    path.write_text(MISTAKES.format(query=query))
    result = CliRunner().invoke(main, ["run", str(path), "--runtime", "local"])
    assert result.exit_code == 1, result.output
    assert f"Error: {error}: " in result.output and message in result.output
    assert "Traceback" not in result.output and "site-packages" not in result.output
    frame = re.search(rf'File "{re.escape(str(path))}", line \d+', result.output)
    assert bool(frame) == (error not in ("NullKeyError", "BadInputError")), result.output
    assert "--debug shows the traceback" in result.output
    debug = CliRunner().invoke(main, ["run", str(path), "--runtime", "local", "--debug"])
    assert debug.exit_code == 1 and type(debug.exception).__name__ == error


# ---- the local runtime, live: resumes from its checkpoint, Ctrl-C stops it -------------------

LIVE_QUERY = """
from datetime import timedelta

from cti import AdvanceTimeSettings, Application, CepStream, EventShape, agg
from cti.io.files import FileInputConfig, JsonLinesInputAdapterFactory


def streams():
    s = CepStream.create("readings", JsonLinesInputAdapterFactory(),
                         FileInputConfig({data!r}, start_column="t", time_format="ticks",
                                         live=True),
                         EventShape.POINT, AdvanceTimeSettings.increasing_start_time(),
                         application=Application(), on_bad_input="dead_letter")
    return {{"per_key": s.group_by("k").apply(
        lambda g: g.tumbling_window(timedelta(seconds=10)).aggregate(n=agg.count())),
        "raw": s}}
"""


def live_rows(lo: int, hi: int) -> str:
    import json

    return "".join(json.dumps({"t": t * 1_000_000, "k": "ab"[t % 2]}) + "\n" if t % 17
                   else "not json\n" for t in range(lo, hi))


def test_run_local_resumes_a_live_input_without_duplicates(tmp_path):
    """Three runs over a growing file, each from the last one's checkpoint: the tables hold
    what one run over the whole file gives, each row once; the dead letters too."""
    from cti.cli.dead_letters import read_dead_letters

    data = tmp_path / "in.jsonl"
    path = tmp_path / "live_job.py"
    path.write_text(LIVE_QUERY.format(data=str(data)))
    out = tmp_path / "out"
    data.write_text(live_rows(1, 30))
    for hi in (30, 55, 80):
        if hi > 30:
            with data.open("a") as f:
                f.write(live_rows(hi - 25, hi))
        run = CliRunner().invoke(main, ["run", str(path), "--runtime", "local", "--until-idle",
                                        "--output", str(out), "--progress", "log"])
        assert run.exit_code == 0, run.output
    whole = tmp_path / "whole"
    once = CliRunner().invoke(main, ["run", str(path), "--runtime", "local", "--until-idle",
                                     "--output", str(whole)])
    assert once.exit_code == 0, once.output
    for name in ("per_key", "raw"):
        got, want = delta(out / name), delta(whole / name)
        assert len(got) == len(want) > 0
        key = ["start", "k", "n"] if name == "per_key" else ["start", "k"]
        assert sorted(map(tuple, got[key].astype(str).values.tolist())) == \
            sorted(map(tuple, want[key].astype(str).values.tolist()))
    letters = read_dead_letters(out / "_dead_letters" / "readings").to_pylist()
    assert [d["line"] for d in letters] == [t for t in range(1, 80) if t % 17 == 0]
    assert len({d["batch"] for d in letters}) == 3  # a micro-batch per run


def test_run_local_live_until_ctrl_c(tmp_path):
    """Without --until-idle the local runtime watches a live input, writing what is appended,
    until Ctrl-C, which stops it cleanly (status 0, the tables as a run over the whole file
    gives them)."""
    import signal
    import time

    data = tmp_path / "in.jsonl"
    data.write_text(live_rows(1, 10))
    path = tmp_path / "live_job.py"
    path.write_text(LIVE_QUERY.format(data=str(data)))
    out, log = tmp_path / "out", tmp_path / "stderr.log"
    cti = Path(sys.executable).with_name("cti")
    with log.open("w") as sink:
        proc = subprocess.Popen([str(cti), "run", str(path), "--runtime", "local", "--output",
                                 str(out), "--interval", "0.2", "--progress", "log"],
                                text=True, stdout=subprocess.PIPE, stderr=sink)
        deadline = time.monotonic() + 120
        for batch in (0, 1):
            while f"raw micro-batch {batch}:" not in log.read_text():
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline
                time.sleep(0.2)
            if batch == 0:
                with data.open("a") as f:
                    f.write(live_rows(10, 30))
        time.sleep(1)  # passes that find nothing new
        assert proc.poll() is None, "the job stopped by itself"
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, log.read_text()[-3000:]
    assert "stopping after the current micro-batch" in log.read_text()
    whole = CliRunner().invoke(main, ["run", str(path), "--runtime", "local", "--until-idle",
                                      "--output", str(tmp_path / "whole")])
    rows = len(delta(tmp_path / "whole" / "raw"))
    assert len(delta(out / "raw")) == rows > 0 and whole.exit_code == 0
    assert f"raw: {rows} rows -> {out / 'raw'} (stopped)" in stdout
