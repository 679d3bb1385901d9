"""bench/run.py runs end to end, and spark-native, cti-local and the Arrow yardstick count the
same windows."""

from __future__ import annotations

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


def _bench_module():
    spec = importlib.util.spec_from_file_location("bench_run", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _expected_windows(tmp_path: Path, key_rate: float | None = None, where: bool = False
                      ) -> int:
    """Distinct (key, 10 s window every 5 s) pairs of the generated data: one output each
    (``where``: of the events whose value is not a multiple of 3)."""
    import pyarrow.parquet as pq

    bench = _bench_module()
    bench.generate(EVENTS, KEYS, 0, 1, tmp_path, key_rate)
    cols = pq.read_table(tmp_path / "part-00000.parquet").to_pydict()
    hop = bench.HOP // bench.timedelta(microseconds=1)
    size = bench.WINDOW // bench.timedelta(microseconds=1)
    pairs = set()
    for t, k, v in zip(cols["time"], cols["key"], cols["value"], strict=True):
        if k is None or (where and v % 3 == 0):  # the end-of-stream row; filtered out
            continue
        first = (t - size) // hop + 1  # windows [w*hop, w*hop + size) holding t
        pairs.update((k, w) for w in range(first, t // hop + 1))
    return len(pairs)


@pytest.mark.spark
def test_bench_runs_and_counts_agree(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--events", str(EVENTS), "--keys", str(KEYS),
         "--systems", "spark-native,cti-local,arrow-floor", "--seed", "0", "--repeat", "3"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    by_system = {line["system"]: line for line in lines}
    assert list(by_system) == ["spark-native", "cti-local", "arrow-floor"]

    for line in lines:
        assert "error" not in line, line
        missing = [f for f in REQUIRED if f not in line]
        assert not missing, (line["system"], missing)
        assert (line["events"], line["keys"]) == (EVENTS, KEYS)
        assert line["events_per_s"] > 0
        assert line["peak_rss_mb"] > 0
        # run_s is the median of the three timed runs
        assert len(line["runs_s"]) == 3 and round(line["run_s"], 3) == sorted(line["runs_s"])[1]

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
def test_the_reference_join_joins_every_event_with_its_row() -> None:
    """``--query reference``: the events joined on key with reference rows (more rows than
    keys, so most match no event), by cti and by Spark's stream-static join: each event meets
    its key's row once; each line times its micro-batches."""
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--events", str(EVENTS), "--keys", str(KEYS),
         "--systems", "cti-local,spark-native", "--query", "reference",
         "--reference", str(5 * KEYS), "--batches", "4"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
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
