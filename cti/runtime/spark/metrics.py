"""Ingress metrics in Spark's query progress (``observedMetrics``), per stream and micro-batch.

``observe`` aggregates over each micro-batch's ingress output rows, so the numbers are the
batch's own: events accepted, adjusted and dropped (with the rule: late, early, out of order,
CTI violation), invalid rows, CTIs, the stream's latest finite CTI (its watermark), and for
event-ordering streams the arrival clock and watermark delay (arrival clock minus the policy's
watermark; negative while early events hold the watermark ahead of the arrival clock). They
appear in ``query.lastProgress["observedMetrics"]["cti"]`` and in a ``StreamingQueryListener``'s
``event.progress.observedMetrics``, as ``<stream>.<metric>``.

A query's shards compute their part of these numbers themselves (``metric_vector``, one array
per shard and micro-batch) and ``observe_vectors`` only adds the arrays up: Spark gives every
aggregate of ``observe`` its own buffer, expressions and code in every task and its result, so
one conditional aggregate per metric over the rows cost a query's micro-batch about as much as
its stateful stage's own JVM work. A stream without an event-ordering policy has no arrival
clock: its ``arrival_clock`` and ``watermark_delay`` are NULL without an aggregate.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cti.events import INPUT_STATUSES, ORDERING_REASONS
from cti.time import MAX_TIME

if TYPE_CHECKING:
    import pandas as pd

    from cti.query import IngressGroup

OBSERVATION = "cti"
COUNTED_STATUSES = (*INPUT_STATUSES, "cti", "cti_regression")
REASONS = (*ORDERING_REASONS, "cti_violation")
# A stream's slots in a shard's metric array: its counts (summed over the shards), then its
# latest CTI, arrival clock and the policy's CTI (the largest over the shards).
COUNTS = (*COUNTED_STATUSES, *REASONS)
LATEST = ("watermark", "arrival_clock", "policy_cti")
SLOTS = len(COUNTS) + len(LATEST)
VECTOR = "metrics"  # the column of a query's stateful output that holds a shard's array
_NULL = "CAST(NULL AS BIGINT)"


def _named(groups: Sequence[IngressGroup], count: Callable[[int, int, str], str],
           latest: Callable[[int, int, str], str]) -> list[Column]:
    """Each stream's metrics, named ``<stream>.<metric>``, as SQL aggregates: ``count(g, i,
    metric)`` of a count, ``latest(g, i, slot)`` of a largest value (``LATEST``)."""
    cols = []
    for g, group in enumerate(groups):
        for i, (name, stream) in enumerate(zip(group.names, group.streams, strict=True)):
            exprs = {metric: count(g, i, metric) for metric in COUNTS}
            exprs["watermark"] = latest(g, i, "watermark")
            if stream.event_ordering_policy is None:  # (no snapshot rows: never a value)
                exprs |= {"arrival_clock": _NULL, "watermark_delay": _NULL}
            else:
                clock = latest(g, i, "arrival_clock")
                exprs |= {"arrival_clock": clock,
                          "watermark_delay": f"{clock} - {latest(g, i, 'policy_cti')}"}
            quoted = name.replace("`", "``")
            cols += [F.expr(f"{e} AS `{quoted}.{metric}`") for metric, e in exprs.items()]
    return cols


def metric_columns(groups: Sequence[IngressGroup], weight: str = "1") -> list[Column]:
    """The metrics over ingress rows, as SQL expressions (one call into the JVM each: built from
    Column objects they took hundreds). ``weight``: how many rows a row stands for, 1 by
    default."""
    def mine(g: int, i: int) -> str:
        return f"`group` = {g} AND stream = {i}"

    def count(g: int, i: int, metric: str) -> str:
        cond = (f"status = '{metric}'" if metric in COUNTED_STATUSES
                else f"reason = '{metric}' AND status IN ('adjusted', 'dropped')")
        return f"sum(CASE WHEN {mine(g, i)} AND {cond} THEN {weight} ELSE 0 END)"

    def latest(g: int, i: int, slot: str) -> str:
        if slot == "watermark":
            return f"max(CASE WHEN {mine(g, i)} AND status = 'cti' AND start < {MAX_TIME} " \
                   "THEN start END)"
        field = "arrival_clock" if slot == "arrival_clock" else "cti"
        return (f"max(CASE WHEN {mine(g, i)} AND status = 'metrics' THEN "
                f"CAST(get_json_object(payload, '$.{field}') AS BIGINT) END)")

    return _named(groups, count, latest)


def observe(frame: DataFrame, groups: Sequence[IngressGroup]) -> DataFrame:
    """The metrics of a frame of ingress rows (``metric_columns``) in its progress."""
    return frame.observe(OBSERVATION, *metric_columns(groups))


def vector_columns(groups: Sequence[IngressGroup]) -> list[Column]:
    """The metrics over rows that carry shards' metric arrays (``VECTOR``, see
    ``metric_vector``; the other rows' NULL): each metric one plain sum or maximum."""
    bases = slot_bases([len(g.streams) for g in groups])

    def slot(g: int, i: int, name: str) -> str:
        k = bases[g] + i * SLOTS + (COUNTS.index(name) if name in COUNTS
                                    else len(COUNTS) + LATEST.index(name))
        return f"get({VECTOR}, {k})"

    return _named(groups, lambda g, i, m: f"sum({slot(g, i, m)})",
                  lambda g, i, m: f"max({slot(g, i, m)})")


def observe_vectors(frame: DataFrame, groups: Sequence[IngressGroup]) -> DataFrame:
    """The metrics in the frame's progress from its shards' arrays (``vector_columns``),
    which the frame then drops."""
    return frame.observe(OBSERVATION, *vector_columns(groups)).drop(VECTOR)


def slot_bases(streams: Sequence[int]) -> list[int]:
    """Where each group's slots start in a metric array, given each group's stream count."""
    return [int(b) for b in np.cumsum([0, *streams[:-1]]) * SLOTS] if streams else []


def metric_vector(streams: Sequence[int], frames: Mapping[int, pd.DataFrame]
                  ) -> list[int | None]:
    """A shard's metric array of a micro-batch (``observe_vectors`` adds them up): for each
    group (``streams``: how many streams each has), the metrics ``metric_columns`` gives over
    ``frames[g]``, the group's weighted ingress rows the shard reports (none: counts of 0)."""
    out: list[int | None] = []
    for g, n in enumerate(streams):
        rows = frames.get(g)
        for i in range(n):
            out += _stream_slots(rows, i)
    return out


def _stream_slots(rows: pd.DataFrame | None, stream: int) -> list[int | None]:
    """One stream's slots over its weighted rows (``metric_vector``)."""
    if rows is None or not len(rows):
        return [0] * len(COUNTS) + [None] * len(LATEST)
    mine = rows["stream"].to_numpy() == stream
    status = rows["status"].to_numpy(object)[mine]
    weight = rows["weight"].to_numpy()[mine]
    reason = rows["reason"].to_numpy(object)[mine]
    fated = (status == "adjusted") | (status == "dropped")
    slots: list[int | None] = [int(weight[status == s].sum()) for s in COUNTED_STATUSES]
    slots += [int(weight[fated & (reason == r)].sum()) for r in REASONS]
    start = rows["start"].to_numpy()[mine]
    finite = start[(status == "cti") & (start < MAX_TIME)]
    slots.append(int(finite.max()) if len(finite) else None)
    snapshots = [json.loads(p) for p in rows["payload"].to_numpy(object)[mine][
        status == "metrics"]]
    for field in ("arrival_clock", "cti"):
        values = [int(s[field]) for s in snapshots if s.get(field) is not None]
        slots.append(max(values) if values else None)
    return slots
