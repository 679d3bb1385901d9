"""bench/run.py runs end to end, and spark-native, cti-local and the Arrow yardstick count the
same windows."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench" / "run.py"
REQUIRED = ("system", "events", "keys", "events_per_s", "peak_rss_mb", "startup_s", "output_rows")
EVENTS, KEYS = 2000, 10


def _bench_module(path: Path = BENCH):
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _queries():
    return _bench_module(BENCH.parent / "queries.py")


def _events(tmp_path: Path, key_rate: float | None = None) -> list[tuple[int, str, int]]:
    """The generated events (time, key, value), the end-of-stream row left out."""
    import pyarrow.parquet as pq

    _bench_module().generate(EVENTS, KEYS, 0, 1, tmp_path, key_rate)
    cols = pq.read_table(tmp_path / "part-00000.parquet").to_pydict()
    return [(t, k, v) for t, k, v in zip(cols["time"], cols["key"], cols["value"], strict=True)
            if k is not None]


def _us(query: str) -> tuple[int, int]:
    """The query's window size and hop in microseconds."""
    from datetime import timedelta

    size, hop = _queries().windows(query)
    return size // timedelta(microseconds=1), hop // timedelta(microseconds=1)


def _windows_of(t: int, size: int, hop: int) -> range:
    """The numbers w of the windows [w*hop, w*hop + size) that hold time t."""
    return range((t - size) // hop + 1, t // hop + 1)


def _expected_windows(tmp_path: Path, key_rate: float | None = None, where: bool = False,
                      query: str = "window") -> int:
    """Distinct (key, window) pairs of the generated data (10 s windows every 5 s; 1-hour
    windows every 5 minutes for ``long-window``): one output each (``where``: of the events
    whose value is not a multiple of 3)."""
    size, hop = _us(query)
    return len({(k, w) for t, k, v in _events(tmp_path, key_rate)
                if not (where and v % 3 == 0) for w in _windows_of(t, size, hop)})


@pytest.fixture
def bench_here(spark, monkeypatch, capsys):
    """bench/run.py's ``main`` in this process, its spark-native child too, on the tests'
    session (the child's ``start_spark()`` gets the active session: no JVM of its own to
    start); the other systems' children run in processes of their own, as the script runs
    them. Returns a function of the script's arguments giving its result lines."""
    bench = _bench_module()
    real = bench.run_system

    def run_system(system, root, args, shards=None, query="window"):
        if system != "spark-native":
            return real(system, root, args, shards, query)
        return bench.child(system, root, argparse.Namespace(**{**vars(args), "query": query}))

    monkeypatch.setattr(bench, "run_system", run_system)

    def run(*args: str) -> list[dict]:
        assert bench.main(list(args)) == 0
        return [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return run


@pytest.mark.spark
def test_bench_runs_and_counts_agree(tmp_path: Path, bench_here) -> None:
    # (Spark's streaming queries cost seconds each: its run once, the others' three times)
    common = ("--events", str(EVENTS), "--keys", str(KEYS), "--seed", "0")
    lines = bench_here(*common, "--systems", "spark-native", "--repeat", "1") + bench_here(
        *common, "--systems", "cti-local,arrow-floor", "--repeat", "3")
    by_system = {line["system"]: line for line in lines}
    assert list(by_system) == ["spark-native", "cti-local", "arrow-floor"]

    for line in lines:
        assert "error" not in line, line
        missing = [f for f in REQUIRED if f not in line]
        assert not missing, (line["system"], missing)
        assert (line["events"], line["keys"]) == (EVENTS, KEYS)
        assert line["events_per_s"] > 0
        assert line["peak_rss_mb"] > 0
        # run_s is the median of the timed runs
        runs = line["runs_s"]
        assert len(runs) == (1 if line["system"] == "spark-native" else 3)
        assert round(line["run_s"], 3) == sorted(runs)[len(runs) // 2]

    # The delay exceeds the bounded disorder, so neither drops anything: same windows.
    expected = _expected_windows(tmp_path / "data")
    assert by_system["spark-native"]["output_rows"] == expected
    assert by_system["cti-local"]["output_rows"] == expected
    assert by_system["arrow-floor"]["output_rows"] == expected


def test_where_by_payload_and_by_frame_count_the_same_windows(tmp_path: Path) -> None:
    """``--where row`` and ``--where frame`` filter the events first, by a function of each
    payload or of a frame of them: the same windows, those of the kept events."""
    rows = {}
    for where in ("row", "frame"):
        proc = subprocess.run(
            [sys.executable, str(BENCH), "--events", str(EVENTS), "--keys", str(KEYS),
             "--systems", "cti-local", "--where", where],
            cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        line = json.loads(proc.stdout.splitlines()[-1])
        assert "error" not in line and line["where"] == where, line
        rows[where] = line["output_rows"]
    expected = _expected_windows(tmp_path / "data", where=True)
    assert rows == {"row": expected, "frame": expected}
    assert expected < _expected_windows(tmp_path / "all")


@pytest.mark.parametrize("cti_by", ["span", "order", "order-by-key"])
def test_other_ctis_count_the_same_windows(tmp_path: Path, cti_by: str) -> None:
    """``--cti-by span``: a CTI every second of event time instead of every 1,000 events;
    ``order``, ``order-by-key``: an event-ordering policy over the arrival times, whose
    tolerances exceed the disorder. No event is dropped either way, so the same windows as
    every other system."""
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--events", str(EVENTS), "--keys", str(KEYS),
         "--systems", "cti-local", "--cti-by", cti_by],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = json.loads(proc.stdout.splitlines()[-1])
    assert line["cti_by"] == cti_by and line["output_rows"] == _expected_windows(tmp_path)


def test_an_ordering_policy_needs_the_parquet_input() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--cti-by", "order", "--cti-input", "memory"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "--cti-input parquet" in proc.stderr


def test_arrow_floor_carries_open_windows_across_files(tmp_path: Path) -> None:
    """The yardstick merges a window's counts from several micro-batch files: the same windows
    with 5 files as with one, and every event counted once in each of its two windows."""
    bench = _bench_module()
    for batches in (1, 5):
        bench.generate(EVENTS, KEYS, 0, batches, tmp_path / str(batches), key_rate=2.0)
    one, five = (bench._floor_run(tmp_path / str(b))[1:3] for b in (1, 5))
    assert one == five == (_expected_windows(tmp_path / "data", key_rate=2.0), 2 * EVENTS)


@pytest.mark.parametrize("keys", [10, 1000])
def test_key_rate_holds_each_keys_events_per_second(tmp_path: Path, keys: int) -> None:
    """With --key-rate, every key's events come at that rate whatever the number of keys (so
    events per key and window stay the same); without it, 1,000 events per second in all."""
    import numpy as np
    import pyarrow.parquet as pq

    bench = _bench_module()
    n = 10_000
    for rate, per_key_hz in ((2.0, 2.0), (None, 1_000 / keys)):
        out = tmp_path / f"{rate}"
        bench.generate(n, keys, 0, 1, out, rate)
        cols = pq.read_table(bench.cti_file(out)).to_pydict()
        span_s = (max(cols["time"]) - min(cols["time"])) / 1e6
        assert len(set(cols["key"])) == keys
        # n / keys events per key over the span; the jitter (50 ms) is small against it
        assert np.isclose(n / keys / span_s, per_key_hz, rtol=0.15), (rate, span_s)


@pytest.mark.spark
def test_the_reference_join_joins_every_event_with_its_row(bench_here) -> None:
    """``--query reference``: the events joined on key with reference rows (more rows than
    keys, so most match no event), by cti and by Spark's stream-static join: each event meets
    its key's row once; each line times its micro-batches."""
    lines = bench_here("--events", str(EVENTS), "--keys", str(KEYS),
                       "--systems", "cti-local,spark-native", "--query", "reference",
                       "--reference", str(5 * KEYS), "--batches", "4")
    assert [line["system"] for line in lines] == ["cti-local", "spark-native"]
    for line in lines:
        assert (line["query"], line["reference"]) == ("reference", 5 * KEYS), line
        assert line["output_rows"] == EVENTS, line
        # each micro-batch timed: the first, and the median of the rest
        assert line["timed_batches"] >= 4 and line["first_batch_s"] > 0, line
        assert 0 < line["median_batch_s"] < line["run_s"], line


@pytest.mark.parametrize("args, message", [
    (["--reference", "50"], "--reference R goes with --query reference"),
    (["--query", "reference", "--keys", "10", "--reference", "5"], "at least --keys"),
    (["--query", "reference", "--systems", "arrow-floor"], "no --query reference")])
def test_reference_options_are_checked(args: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, str(BENCH), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_the_partitions_bench_runs_both_ingresses_to_the_same_rows() -> None:
    """bench/partitions.py scaled down: per partition count one JSON line, each micro-batch
    (partitions new, then known) run vectorised and by the row machine, their rows checked
    equal by the script."""
    done = subprocess.run([sys.executable, str(REPO / "bench" / "partitions.py"),
                           "--partitions", "3,40", "--events", "400"],
                          capture_output=True, text=True, check=True, timeout=120)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["partitions"] for line in lines] == [3, 40]
    for line in lines:
        for batch in ("new", "known"):
            assert line[batch]["vectorised_events_per_s"] > 0
            assert line[batch]["row_machine_events_per_s"] > 0


def test_the_aggregates_bench_gives_pandas_results_count() -> None:
    """bench/aggregates.py scaled down: per aggregate a line for cti and one for pandas, with
    as many results (one per key and window with events), and the peak memory last."""
    done = subprocess.run([sys.executable, str(REPO / "bench" / "aggregates.py"),
                           "--events", "3000", "--keys", "3", "--repeat", "1"],
                          capture_output=True, text=True, check=True, timeout=300)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert "peak_rss_mb" in lines[-1]
    runs = {(line["system"], line["aggregate"]): line for line in lines[:-1]}
    assert {a for _, a in runs} == {"count", "avg_float", "max_float", "avg_int", "sum_int"}
    for (system, aggregate), line in runs.items():
        assert line["events_per_s"] > 0
        assert line["results"] == runs[("pandas", aggregate)]["results"] == 3 * 3, system


def _expected_rows(query: str, tmp_path: Path) -> int:
    """What each new query outputs over the generated data, computed here from the events:
    ``snapshot``, per key, a window between each two consecutive endpoints of the events'
    10-second lifetimes that some event covers; ``count``, per key, one window for each run
    of 10 consecutive distinct times; ``topk``, per key and 10 s window every 5 s, the events
    whose values have fewer than 3 larger ones in it (SQL RANK <= 3)."""
    from collections import defaultdict

    queries = _queries()
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for t, k, v in _events(tmp_path):
        by_key[k].append((t, v))
    if query == "count":
        return sum(max(0, len({t for t, _ in tv}) - queries.COUNT_N + 1) for tv in by_key.values())
    size, hop = _us("window")
    if query == "snapshot":
        rows = 0
        for tv in by_key.values():
            bounds = sorted({x for t, _ in tv for x in (t, t + size)})
            rows += sum(any(t <= a < t + size for t, _ in tv) for a in bounds[:-1])
        return rows
    ranked = 0
    for tv in by_key.values():
        members: dict[int, list[int]] = defaultdict(list)
        for t, v in tv:
            for w in _windows_of(t, size, hop):
                members[w].append(v)
        ranked += sum(sum(v < x for x in vs) < queries.TOP_K for vs in members.values()
                      for v in vs)
    return ranked


def test_snapshot_count_and_topk_beside_the_hopping_window(tmp_path: Path) -> None:
    """``--query snapshot,count,topk``: each query on the same data, one line each, with the
    rows computed here from the events; plain Spark has none of them, and says so."""
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--events", str(EVENTS), "--keys", str(KEYS),
         "--systems", "cti-local,spark-native", "--query", "snapshot,count,topk"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(line["system"], line["query"]) for line in lines] == [
        (s, q) for q in ("snapshot", "count", "topk") for s in ("cti-local", "spark-native")]
    for line in lines:
        if line["system"] == "spark-native":
            assert "no equivalent" in line["skipped"] and "events_per_s" not in line, line
            continue
        assert "error" not in line and line["events_per_s"] > 0 and line["peak_rss_mb"] > 0
        assert line["output_rows"] == _expected_rows(line["query"], tmp_path / line["query"])


def test_the_long_window_query_times_its_first_and_last_micro_batches(tmp_path: Path) -> None:
    """``--query long-window``: 1-hour windows every 5 minutes, each micro-batch 5 minutes of
    event time (the key rate that makes it so, on the line); every (key, window) counted
    once, and the medians of the first and the last ten micro-batches."""
    batches = 12
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--events", str(EVENTS), "--keys", str(KEYS),
         "--systems", "cti-local", "--query", "long-window", "--batches", str(batches)],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert line["query"] == "long-window" and "error" not in line, line
    assert line["key_rate"] == EVENTS / (KEYS * batches * 300)
    assert line["output_rows"] == _expected_windows(tmp_path, line["key_rate"],
                                                    query="long-window")
    assert line["timed_batches"] >= batches
    assert line["first10_batch_s"] > 0 and line["last10_batch_s"] > 0, line


@pytest.mark.parametrize("args, message", [
    (["--query", "window,long-window"], "run alone"),
    (["--query", "window,hopping"], "distinct queries from"),
    (["--query", "snapshot", "--systems", "arrow-floor"], "no --query snapshot")])
def test_query_lists_are_checked(args: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        _bench_module().parse_args(args)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.spark
def test_the_stateful_floor_runs_each_query_over_every_micro_batch(tmp_path: Path, spark) -> None:
    """bench/stateful_floor.py's queries each read every row of the bench's data, one file a
    micro-batch."""
    bench, floor = _bench_module(), _bench_module(BENCH.parent / "stateful_floor.py")
    data = tmp_path / "events"
    bench.generate(EVENTS, KEYS, 0, 3, data)
    bench.generate_reference(50, data)
    for variant in ("floor", "floor-hdfs", "grouped", "python"):
        _, progress = floor.floor_run(spark, data, variant)
        assert len(bench.progress_seconds(progress)) == 3, variant
        assert sum(p["numInputRows"] for p in progress) == EVENTS + 1, variant  # (and the EOS)
