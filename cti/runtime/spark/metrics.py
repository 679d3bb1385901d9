"""Ingress metrics in Spark's query progress (``observedMetrics``), per stream and micro-batch.

``observe`` aggregates over each micro-batch's ingress output rows, so the numbers are the
batch's own: events accepted, adjusted and dropped (with the rule: late, early, out of order,
CTI violation), invalid rows, CTIs, the stream's latest finite CTI (its watermark), and for
event-ordering streams the arrival clock and watermark delay (arrival clock minus the policy's
watermark; negative while early events hold the watermark ahead of the arrival clock). They
appear in ``query.lastProgress["observedMetrics"]["cti"]`` and in a ``StreamingQueryListener``'s
``event.progress.observedMetrics``, as ``<stream>.<metric>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cti.query import IngressGroup
from cti.time import MAX_TIME

OBSERVATION = "cti"
COUNTED_STATUSES = ("accepted", "adjusted", "dropped", "invalid", "cti", "cti_regression")
REASONS = ("late", "early", "out_of_order", "cti_violation")


def metric_columns(groups: Sequence[IngressGroup], weight: Column | None = None,
                   rows: Column | None = None) -> list[Column]:
    """The metrics over ingress rows. ``weight``: how many rows a row stands for (a query's
    summary rows, see ``cti.runtime.spark.operators``), 1 by default; ``rows``: which rows
    of the frame are ingress rows (all by default)."""
    weight = F.lit(1) if weight is None else weight

    def _count(cond: Column) -> Column:
        return F.sum(F.when(cond, weight).otherwise(0))

    cols = []
    for g, group in enumerate(groups):
        for i, name in enumerate(group.names):
            mine = (F.col("group") == g) & (F.col("stream") == i)
            if rows is not None:
                mine = mine & rows
            for status in COUNTED_STATUSES:
                cols.append(_count(mine & (F.col("status") == status)).alias(f"{name}.{status}"))
            for reason in REASONS:
                cols.append(_count(mine & (F.col("reason") == reason)
                                   & F.col("status").isin("adjusted", "dropped"))
                            .alias(f"{name}.{reason}"))
            cti = F.max(F.when(mine & (F.col("status") == "cti") & (F.col("start") < MAX_TIME),
                               F.col("start")))
            clock = F.max(F.when(mine & (F.col("status") == "metrics"),
                                 F.get_json_object("payload", "$.arrival_clock").cast("long")))
            last_cti = F.max(F.when(mine & (F.col("status") == "metrics"),
                                    F.get_json_object("payload", "$.cti").cast("long")))
            cols += [cti.alias(f"{name}.watermark"), clock.alias(f"{name}.arrival_clock"),
                     (clock - last_cti).alias(f"{name}.watermark_delay")]
    return cols


def observe(frame: DataFrame, groups: Sequence[IngressGroup], weight: Column | None = None,
            rows: Column | None = None) -> DataFrame:
    return frame.observe(OBSERVATION, *metric_columns(groups, weight, rows))
