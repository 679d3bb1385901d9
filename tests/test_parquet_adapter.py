"""Parquet input: columnar reads (``read_frame``) on Spark, item reads in-process; both give the
same ingress and query results, bad rows name the file, row and rule."""

from __future__ import annotations

import pandas as pd
import pytest

from cti import AdvanceTimeSettings, Application, BadInputError, CepStream, EventShape, agg, ticks
from cti.io.parquet import ParquetInputAdapterFactory, ParquetInputConfig


def write(tmp_path, rows, name="in.parquet"):
    path = tmp_path / name
    pd.DataFrame(rows).to_parquet(path)
    return path


def bind(path, shape=EventShape.POINT, on_bad_input="raise", **columns):
    config = ParquetInputConfig(path, start_column="t", **columns)
    return CepStream.create("s", ParquetInputAdapterFactory(), config, shape,
                            AdvanceTimeSettings.unordered_start_time(ticks(2)),
                            application=Application(), on_bad_input=on_bad_input)


ROWS = [{"t": t, "k": "ab"[i % 2], "v": i, "x": i / 4} for i, t in
        enumerate([5, 3, 8, 1, 9, 12, 11, 20, 15, 30])]


def test_points_and_payloads_in_process(tmp_path):
    out = bind(write(tmp_path, ROWS)).run("local")["s"]
    starts = [e.start for e in out.items if hasattr(e, "payload")]
    assert starts == [5, 3, 8, 9, 12, 11, 20, 30]  # 1 and 15 come too late (delay 2)
    assert out.items[0].payload == {"k": "a", "v": 0, "x": 0.0}
    assert out.metrics["dropped"] == 2


def test_bad_rows_name_file_row_and_rule(tmp_path):
    rows = [{"t": 1, "e": 4}, {"t": None, "e": 5}, {"t": 6, "e": 6}]
    path = write(tmp_path, rows)
    with pytest.raises(BadInputError, match=r"row 1: null or out-of-range start"):
        bind(path, EventShape.INTERVAL, end_column="e").run("local")
    result = bind(path, EventShape.INTERVAL, "dead_letter", end_column="e").run("local")["s"]
    assert [d.reason.split(": ", 1)[1] for d in result.diagnostics] == [
        "null or out-of-range start time (rule: no null timestamps)",
        "end missing or not after start (rule: a lifetime is non-empty)"]


def test_float_payloads_keep_every_digit(tmp_path):
    """A float column's values reach the payloads as Arrow holds them, every digit kept (a
    float32's as the double it is), NaN and infinities as ``json.dumps`` writes them."""
    import math

    import pyarrow as pa
    import pyarrow.parquet as pq

    values = [0.1 + 0.2, 1 / 3, 2.5e-8, 123456789.12345679, -0.0, math.nan, math.inf, 1e300]
    path = tmp_path / "floats.parquet"
    pq.write_table(pa.table({"t": list(range(1, 9)), "f": values,
                             "g": pa.array(values, pa.float32())}), path)
    items = [e for e in bind(path).collect("local") if hasattr(e, "payload")]
    assert [e.payload["f"] for e in items if not math.isnan(e.payload["f"])] == \
        [v for v in values if not math.isnan(v)]
    assert math.isnan(items[5].payload["f"])
    assert items[0].payload["g"] == float(pa.array([0.1 + 0.2], pa.float32())[0].as_py())


def test_large_string_columns_are_payload_strings(tmp_path):
    """A file written with 64-bit string offsets (as Polars writes them) reads as any other."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "large.parquet"
    pq.write_table(pa.table({"t": [1, 2, 3], "k": pa.array(["a", "é", None], pa.large_string())}),
                   path)
    assert [e.payload for e in bind(path).collect("local") if hasattr(e, "payload")] == [
        {"k": "a"}, {"k": "é"}, {"k": None}]


def test_timestamp_columns_are_ticks(tmp_path):
    rows = [{"t": pd.Timestamp("2024-01-01T00:00:01Z"), "v": 1}]
    items = bind(write(tmp_path, rows)).collect("local")
    assert items[0].start == 1_704_067_201_000_000


@pytest.mark.spark
def test_spark_reads_columnar_batches_with_the_same_results(spark, tmp_path):
    from cti.runtime.spark import SparkRuntime

    path = write(tmp_path, ROWS)
    stream = bind(path)
    query = stream.group_by("k").apply(
        lambda g: g.tumbling_window(ticks(10)).aggregate(n=agg.count(), total=agg.sum("x")))
    got = SparkRuntime(spark, batch_sizes=[4]).run_queries([query])[0]
    want = query.run("local")
    assert got["output"].items == want["output"].items
    assert got["s"].items == want["s"].items and got["s"].metrics == want["s"].metrics
    # Without the input's rows, every shard groups by the adapter's field texts.
    alone = SparkRuntime(spark, batch_sizes=[4]).run_queries([query], with_inputs=False)[0]
    assert alone["output"].items == want["output"].items
