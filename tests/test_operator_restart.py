"""Exactly-once restart of a query with temporal operators on Spark: stop it mid-stream,
restart from its checkpoint, and the output equals an uninterrupted run, with no duplicates.
The query's window and join state lives in Spark's state store across the restart."""

from __future__ import annotations

import json

import pytest

from adapters.files import FileInputConfig, JsonLinesInputAdapterFactory
from adapters.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
from cti import AdvanceTimeSettings, Application, CepStream, EventShape, agg
from cti.runtime.local import LocalRuntime

ROWS = [{"t": t, "k": "abc"[n % 3], "v": n}
        for n, t in enumerate([10, 12, 11, 15, 30, 22, 31, 40, 38, 45, 44, 50, 61, 58, 70, 83])]


def query(path):
    config = FileInputConfig(path, start_column="t", time_format="ticks", live=True)
    s = CepStream.create("s", JsonLinesInputAdapterFactory(), config, EventShape.POINT,
                         AdvanceTimeSettings.unordered_start_time(3), application=Application())
    counts = s.group_by("k").apply(
        lambda g: g.hopping_window(20, 10).aggregate(n=agg.count(), total=agg.sum("v")))
    pairs = s.alter_event_duration(5).join(s, on="k", select=lambda l, r: {
        "l": l["v"], "r": r["v"]})
    return counts, pairs


def write(path, rows, mode):
    with open(path, mode) as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


@pytest.mark.spark
@pytest.mark.parametrize("which", [0, 1], ids=["grouped-window", "join"])
def test_query_restart_from_checkpoint_is_exactly_once(spark, tmp_path, which):
    from cti.runtime.spark import SparkRuntime

    data, out, checkpoint = tmp_path / "in.jsonl", tmp_path / "out", tmp_path / "checkpoint"
    write(data, ROWS[:7], "w")
    bound = query(data)[which].to(JsonLinesOutputAdapterFactory(), str(out))
    bound.run(SparkRuntime(spark, checkpoint_location=str(checkpoint), batch_sizes=[3]))
    first = read_json_lines_output(out)
    first_files = {p.name: p.read_bytes() for p in out.iterdir()}
    assert first, "the first run released output"

    write(data, ROWS[7:], "a")  # more input arrives while the query is down
    bound.run(SparkRuntime(spark, checkpoint_location=str(checkpoint), batch_sizes=[4]))
    restarted = read_json_lines_output(out)

    files = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {k: files[k] for k in first_files} == first_files  # a restart, not a rerun
    assert min(set(files) - set(first_files)) > max(first_files)
    uninterrupted = query(data)[which].collect(LocalRuntime())
    assert restarted == uninterrupted
    assert restarted[:len(first)] == first  # released output is final: never retracted
    events = [json.dumps(e.payload, sort_keys=True) + str(e.start) for e in restarted
              if hasattr(e, "payload")]
    assert len(events) == len(set(events)) and events
