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
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cti.events import INPUT_STATUSES, ORDERING_REASONS
from cti.time import MAX_TIME

if TYPE_CHECKING:
    from cti.query import IngressGroup

OBSERVATION = "cti"
COUNTED_STATUSES = (*INPUT_STATUSES, "cti", "cti_regression")
REASONS = (*ORDERING_REASONS, "cti_violation")


def metric_columns(groups: Sequence[IngressGroup], weight: str = "1",
                   rows: str | None = None) -> list[Column]:
    """The metrics over ingress rows, as SQL expressions (one call into the JVM each: built from
    Column objects they took hundreds). ``weight``: how many rows a row stands for (a query's
    summary rows, see ``cti.runtime.spark.operators``), 1 by default; ``rows``: which rows of
    the frame are ingress rows (all by default)."""
    cols = []
    for g, group in enumerate(groups):
        for i, name in enumerate(group.names):
            mine = f"`group` = {g} AND stream = {i}" + (f" AND ({rows})" if rows else "")

            def count(cond: str, mine: str = mine) -> str:
                return f"sum(CASE WHEN {mine} AND {cond} THEN {weight} ELSE 0 END)"

            def latest(cond: str, value: str, mine: str = mine) -> str:
                return f"max(CASE WHEN {mine} AND {cond} THEN {value} END)"

            exprs = {status: count(f"status = '{status}'") for status in COUNTED_STATUSES}
            exprs |= {reason: count(f"reason = '{reason}' AND status IN ('adjusted', 'dropped')")
                      for reason in REASONS}
            clock = latest("status = 'metrics'",
                           "CAST(get_json_object(payload, '$.arrival_clock') AS BIGINT)")
            last_cti = latest("status = 'metrics'",
                              "CAST(get_json_object(payload, '$.cti') AS BIGINT)")
            exprs |= {"watermark": latest(f"status = 'cti' AND start < {MAX_TIME}", "start"),
                      "arrival_clock": clock, "watermark_delay": f"{clock} - {last_cti}"}
            quoted = name.replace("`", "``")
            cols += [F.expr(f"{e} AS `{quoted}.{metric}`") for metric, e in exprs.items()]
    return cols


def observe(frame: DataFrame, groups: Sequence[IngressGroup], weight: str = "1",
            rows: str | None = None) -> DataFrame:
    return frame.observe(OBSERVATION, *metric_columns(groups, weight, rows))
