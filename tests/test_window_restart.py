"""Exactly-once restart of snapshot windows, count windows and TopK on Spark: stop the query
mid-stream, restart it from its checkpoint, and the output equals an uninterrupted run: their
state (``SnapshotState``, ``CountState``, a window's ranked events) lives in Spark's state
store across the restart."""

from __future__ import annotations

import pytest
from restarts import run_twice_from_checkpoint
from test_operator_restart import ROWS

from cti import AdvanceTimeSettings, Application, CepStream, EventShape, agg, ticks
from cti.io.files import FileInputConfig, JsonLinesInputAdapterFactory
from cti.runtime.local import LocalRuntime

QUERIES = {
    "snapshot": lambda s: s.alter_event_duration(ticks(12)).group_by("k").apply(
        lambda g: g.snapshot_window().aggregate(n=agg.count(), top=agg.max("v"))),
    "count_window": lambda s: s.group_by("k").apply(
        lambda g: g.count_window(2).aggregate(total=agg.sum("v"))),
    "top_k": lambda s: s.group_by("k").apply(
        lambda g: g.tumbling_window(ticks(25)).top_k(1, [("v", "desc")])),
}


def query(which: str, path):
    config = FileInputConfig(path, start_column="t", time_format="ticks", live=True)
    s = CepStream.create("s", JsonLinesInputAdapterFactory(), config, EventShape.POINT,
                         AdvanceTimeSettings.unordered_start_time(ticks(3)),
                         application=Application())
    return QUERIES[which](s)


@pytest.mark.spark
@pytest.mark.parametrize("which", list(QUERIES))
def test_restart_from_checkpoint_is_exactly_once(spark, tmp_path, which):
    _, restarted = run_twice_from_checkpoint(
        spark, tmp_path, ROWS, 7, lambda data: query(which, data), (3, 4))
    want = query(which, tmp_path / "in.jsonl").collect(LocalRuntime())
    assert restarted == want
    assert any(hasattr(e, "payload") for e in want)
