"""Exactly-once restart: stop a Spark query mid-stream, restart it from its checkpoint, and the
output equals an uninterrupted run, with no duplicates and nothing lost."""

from __future__ import annotations

import json

from adapters.files import FileInputConfig, JsonLinesInputAdapterFactory
from adapters.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
from cti import AdvanceTimeSettings, Application, CepStream, EventShape
from cti.runtime.local import LocalRuntime

ROWS = [{"t": t, "id": k} for k, t in enumerate([10, 12, 11, 15, 30, 22, 31, 40, 38, 45, 44, 50])]


def bind(path):
    config = FileInputConfig(path, start_column="t", time_format="ticks", live=True)
    return CepStream.create("s", JsonLinesInputAdapterFactory(), config, EventShape.POINT,
                            AdvanceTimeSettings.unordered_start_time(3), application=Application())


def write(path, rows, mode):
    with open(path, mode) as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def test_restart_from_checkpoint_is_exactly_once(spark, tmp_path):
    from cti.runtime.spark import SparkRuntime

    data, out, checkpoint = tmp_path / "in.jsonl", tmp_path / "out", tmp_path / "checkpoint"
    write(data, ROWS[:5], "w")
    stream = bind(data)
    query = stream.to(JsonLinesOutputAdapterFactory(), str(out))
    query.run(SparkRuntime(spark, checkpoint_location=str(checkpoint), batch_sizes=[2]))
    first = read_json_lines_output(out)
    first_files = {p.name: p.read_bytes() for p in out.iterdir()}
    assert first, "the first run wrote its output"

    write(data, ROWS[5:], "a")  # more input arrives while the query is down
    query.run(SparkRuntime(spark, checkpoint_location=str(checkpoint), batch_sizes=[3]))
    restarted = read_json_lines_output(out)

    # A restart, not a rerun: the first run's batches are untouched (a rerun from scratch with
    # other batch sizes would rewrite them) and the restart only added later batches.
    files = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {k: files[k] for k in first_files} == first_files
    assert min(set(files) - set(first_files)) > max(first_files)

    uninterrupted = bind(data).collect(LocalRuntime())
    assert restarted == uninterrupted
    assert restarted[:len(first)] == first  # the first run's output is final: never retracted
    ids = [e.payload["id"] for e in restarted if hasattr(e, "payload")]
    assert len(ids) == len(set(ids))
