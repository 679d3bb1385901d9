"""The restart check shared by the ingress and the operator restart tests: run a Spark query on
part of a live input, stop, let more input arrive, restart from the checkpoint."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output


def write(path: Path, rows: list[dict], mode: str) -> None:
    with open(path, mode) as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def run_twice_from_checkpoint(spark: Any, tmp_path: Path, rows: list[dict], first: int,
                              stream_of: Callable[[Path], Any], sizes: tuple[int, int],
                              settings: tuple[dict, dict] = ({}, {})) -> tuple[list, list]:
    """Run ``stream_of(data)`` into a JSON-lines output on ``rows[:first]``, then on all rows
    from the checkpoint (each run's ``SparkRuntime`` with its ``settings``). Asserts the
    restart kept the first run's batches and only added later ones; returns (first run's
    output, output after the restart)."""
    from cti.runtime.spark import SparkRuntime

    data, out, checkpoint = tmp_path / "in.jsonl", tmp_path / "out", tmp_path / "checkpoint"
    write(data, rows[:first], "w")
    query = stream_of(data).to(JsonLinesOutputAdapterFactory(), str(out))
    query.run(SparkRuntime(spark, checkpoint_location=str(checkpoint), batch_sizes=[sizes[0]],
                           **settings[0]))
    before = read_json_lines_output(out)
    first_files = {p.name: p.read_bytes() for p in out.iterdir()}
    assert before, "the first run wrote its output"

    write(data, rows[first:], "a")  # more input arrives while the query is down
    query.run(SparkRuntime(spark, checkpoint_location=str(checkpoint), batch_sizes=[sizes[1]],
                           **settings[1]))
    after = read_json_lines_output(out)
    # A restart, not a rerun: the first run's batches are untouched (a rerun from scratch with
    # other batch sizes would rewrite them) and the restart only added later batches.
    files = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {k: files[k] for k in first_files} == first_files
    assert min(set(files) - set(first_files)) > max(first_files)
    assert after[:len(before)] == before  # released output is final: never retracted
    return before, after


def put_file(directory: Path, name: str, rows: list[dict], mtime_s: int) -> None:
    """A file of JSON lines in a directory input, modified at ``mtime_s`` (seconds)."""
    import os

    directory.mkdir(exist_ok=True)
    write(directory / name, rows, "w")
    os.utime(directory / name, ns=(mtime_s * 10**9,) * 2)
