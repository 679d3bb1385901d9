"""Exactly-once restart of a query with temporal operators on Spark: stop it mid-stream,
restart from its checkpoint, and the output equals an uninterrupted run, with no duplicates.
The query's window and join state lives in Spark's state store across the restart, its arrays
in the state values or (``parts``: every array, however small) as parts beside the
checkpoint (``cti.runtime.spark.state``)."""

from __future__ import annotations

import json

import pytest
from restarts import run_twice_from_checkpoint, write

from cti import AdvanceTimeSettings, Application, CepStream, EventShape, agg, ticks
from cti.io.files import FileInputConfig, JsonLinesInputAdapterFactory
from cti.runtime.local import LocalRuntime
from cti.runtime.spark import state
from cti.runtime.spark.runtime import recorded_partitions, recorded_shards

ROWS = [{"t": t, "k": "abc"[n % 3], "v": n}
        for n, t in enumerate([10, 12, 11, 15, 30, 22, 31, 40, 38, 45, 44, 50, 61, 58, 70, 83])]


def queries(path):
    config = FileInputConfig(path, start_column="t", time_format="ticks", live=True)
    s = CepStream.create("s", JsonLinesInputAdapterFactory(), config, EventShape.POINT,
                         AdvanceTimeSettings.unordered_start_time(ticks(3)),
                         application=Application())
    counts = s.group_by("k").apply(
        lambda g: g.hopping_window(ticks(20), ticks(10)).aggregate(n=agg.count(),
                                                                   total=agg.sum("v")))
    pairs = s.alter_event_duration(ticks(5)).join(s, on="k", select=lambda left, right: {
        "l": left["v"], "r": right["v"]})
    return counts, pairs


@pytest.fixture(params=["inline", "parts"])
def parts(request, monkeypatch, tmp_path):
    """``parts``: every array of a shard's state a part of its own; after the test, the
    checkpoint holds them."""
    if request.param == "parts":
        monkeypatch.setattr(state, "PART_BYTES", 0)
    yield request.param
    held = list((tmp_path / "checkpoint" / "cti-parts").rglob("*.*"))
    assert bool(held) == (request.param == "parts"), held


# Each pair of (query, where the arrays live, a restart on the same or on fewer tasks) once.
CASES = pytest.mark.parametrize(("which", "parts", "respread"), [
    (0, "inline", False), (0, "parts", True), (1, "inline", True), (1, "parts", False)],
    ids=["grouped-window-inline", "grouped-window-parts-respread", "join-inline-respread",
         "join-parts"], indirect=["parts"])


@pytest.mark.spark
@CASES
def test_query_restart_from_checkpoint_is_exactly_once(spark, tmp_path, which, parts,
                                                       respread):
    """Stopped mid-stream and restarted from its checkpoint, the query's output is the
    uninterrupted in-process one, no event twice. ``respread``: 4 shards on 4 tasks, then
    the restart on 2 (``parallelism=2``): the checkpoint's state is re-spread, each shard's
    whole, and the restart's output partitions show it ran on 2 tasks."""
    settings = ({"shards": 4, "parallelism": 4}, {"parallelism": 2}) if respread else ({}, {})
    _, restarted = run_twice_from_checkpoint(
        spark, tmp_path, ROWS, 7, lambda data: queries(data)[which], (3, 4), settings)
    assert restarted == queries(tmp_path / "in.jsonl")[which].collect(LocalRuntime())
    events = [json.dumps(e.payload, sort_keys=True) + str(e.start) for e in restarted
              if hasattr(e, "payload")]
    assert len(events) == len(set(events)) and events
    if respread:
        assert recorded_partitions(str(tmp_path / "checkpoint")) == 2
        assert recorded_shards(str(tmp_path / "checkpoint")) == 4
        last = max(int(p.name.split("-")[1]) for p in (tmp_path / "out").glob("batch-*"))
        tasks = {int(p.stem.rsplit("-", 1)[1])
                 for p in (tmp_path / "out").glob(f"batch-{last:010d}-*")}
        assert tasks <= {0, 1}, tasks


@pytest.mark.spark
def test_a_checkpoint_written_without_parts_resumes_with_them(spark, tmp_path, monkeypatch):
    """A checkpoint as the release before parts wrote it (every state value whole:
    ``PART_BYTES`` None writes that form) resumes on this release, which then keeps the
    shards' arrays as parts: the output is the uninterrupted in-process one."""
    from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
    from cti.runtime.spark import SparkRuntime

    data, out, checkpoint = tmp_path / "in.jsonl", tmp_path / "out", tmp_path / "checkpoint"
    write(data, ROWS[:7], "w")
    query = queries(data)[1].to(JsonLinesOutputAdapterFactory(), str(out))
    monkeypatch.setattr(state, "PART_BYTES", None)
    query.run(SparkRuntime(spark, checkpoint_location=str(checkpoint), batch_sizes=[3]))
    assert not (checkpoint / "cti-parts").exists()
    write(data, ROWS[7:], "a")
    monkeypatch.setattr(state, "PART_BYTES", 0)
    query.run(SparkRuntime(spark, checkpoint_location=str(checkpoint), batch_sizes=[4]))
    assert read_json_lines_output(out) == queries(data)[1].collect(LocalRuntime())
    assert list((checkpoint / "cti-parts").rglob("*.npy"))


@pytest.mark.spark
def test_a_restart_sweeps_the_parts_no_committed_state_names(spark, tmp_path, monkeypatch):
    """Parts left by micro-batches that failed (a part of an earlier micro-batch no state
    names, a write cut short) are swept by the next micro-batch after a restart; a part
    whose name carries no micro-batch (an older release's) or a later one is left; the
    output is the uninterrupted in-process one."""
    from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
    from cti.runtime.spark import SparkRuntime

    data, out, checkpoint = tmp_path / "in.jsonl", tmp_path / "out", tmp_path / "checkpoint"
    write(data, ROWS[:7], "w")
    query = queries(data)[1].to(JsonLinesOutputAdapterFactory(), str(out))
    monkeypatch.setattr(state, "PART_BYTES", 0)
    query.run(SparkRuntime(spark, checkpoint_location=str(checkpoint), batch_sizes=[3]))
    shards = [d for d in (checkpoint / "cti-parts").glob("*/*") if d.is_dir()]
    assert shards
    orphans, kept = [], []
    for d in shards:
        for name in ("1-00000000000000000000000000000001.npy",
                     ".2-00000000000000000000000000000002.npy.tmp"):
            (d / name).write_bytes(b"orphan")
            orphans.append(d / name)
        for name in ("00000000000000000000000000000003.npy",
                     "999999-00000000000000000000000000000004.npy"):
            (d / name).write_bytes(b"not this sweep's")
            kept.append(d / name)
    write(data, ROWS[7:], "a")
    query.run(SparkRuntime(spark, checkpoint_location=str(checkpoint), batch_sizes=[4]))
    assert read_json_lines_output(out) == queries(data)[1].collect(LocalRuntime())
    assert not [p for p in orphans if p.exists()]
    assert all(p.exists() for p in kept)
