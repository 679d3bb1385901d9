"""Exactly-once restart: stop a Spark query mid-stream, restart it from its checkpoint, and the
output equals an uninterrupted run, with no duplicates and nothing lost."""

from __future__ import annotations

from restarts import run_twice_from_checkpoint

from cti import AdvanceTimeSettings, Application, CepStream, EventShape, ticks
from cti.io.files import FileInputConfig, JsonLinesInputAdapterFactory
from cti.runtime.local import LocalRuntime

ROWS = [{"t": t, "id": k} for k, t in enumerate([10, 12, 11, 15, 30, 22, 31, 40, 38, 45, 44, 50])]


def bind(path):
    config = FileInputConfig(path, start_column="t", time_format="ticks", live=True)
    return CepStream.create("s", JsonLinesInputAdapterFactory(), config, EventShape.POINT,
                            AdvanceTimeSettings.unordered_start_time(ticks(3)),
                            application=Application())


def test_restart_from_checkpoint_is_exactly_once(spark, tmp_path):
    _, restarted = run_twice_from_checkpoint(spark, tmp_path, ROWS, 5, bind, (2, 3))
    assert restarted == bind(tmp_path / "in.jsonl").collect(LocalRuntime())
    ids = [e.payload["id"] for e in restarted if hasattr(e, "payload")]
    assert len(ids) == len(set(ids))
