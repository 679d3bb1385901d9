"""Exactly-once restart: stop a Spark query mid-stream, restart it from its checkpoint, and the
output equals an uninterrupted run, with no duplicates and nothing lost."""

from __future__ import annotations

from datetime import timedelta

from restarts import put_file, run_twice_from_checkpoint

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


def test_started_live_directory_takes_new_files_and_resumes_exactly_once(spark, tmp_path):
    from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
    from cti.runtime.spark import SparkRuntime

    directory, out = tmp_path / "in", tmp_path / "out"

    def bind_directory():
        config = FileInputConfig(directory, start_column="t", time_format="ticks", live=True)
        return CepStream.create("s", JsonLinesInputAdapterFactory(), config, EventShape.POINT,
                                AdvanceTimeSettings.unordered_start_time(timedelta(microseconds=3)),
                                application=Application())

    put_file(directory, "1.json", ROWS[:4], 1000)
    query = bind_directory().to(JsonLinesOutputAdapterFactory(), str(out))
    runtime = SparkRuntime(spark, checkpoint_location=str(tmp_path / "checkpoint"))
    handle = query.start(runtime)
    handle.process_all_available()
    put_file(directory, "2.json", ROWS[4:7], 2000)  # a new file while it runs
    handle.process_all_available()
    read = [p["s.accepted"] + p["s.dropped"] for p in handle.progress]
    assert [n for n in read if n] == [4, 3]  # each file once, in the micro-batch it came in
    handle.stop()
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    put_file(directory, "3.json", ROWS[7:], 3000)  # while the query is down
    handle = query.start(runtime)
    handle.process_all_available()
    handle.stop()
    files = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {k: files[k] for k in first} == first and len(files) > len(first)
    got = read_json_lines_output(out)
    assert got == bind_directory().collect(LocalRuntime())
    ids = [e.payload["id"] for e in got if hasattr(e, "payload")]
    assert len(ids) == len(set(ids)) and len(ids) > 8
