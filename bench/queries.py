"""The queries ``bench/run.py --query`` runs: each one's cti query and, where plain Spark has
an equivalent, its Structured Streaming query, over the same events (``key``, ``value``).

- ``window``: a count per key over 10 s windows every 5 s (the bench's yardstick query).
- ``snapshot``: per key, the count over the last 10 s whenever it changes
  (``alter_event_duration(10 s)`` then ``snapshot_window()``, StreamInsight's sliding window).
- ``count``: per key, a count over every ``COUNT_N`` consecutive start times
  (``count_window``, StreamInsight's ``CountByStartTimeWindow``).
- ``topk``: per key and 10 s window every 5 s, the ``TOP_K`` largest values with their rank
  (``hopping_window(...).top_k(...)``: the window query's window, ranked instead of counted).
- ``long-window``: ``window`` with 1-hour windows every 5 minutes (held state much larger
  than a micro-batch).
- ``reference``: the events joined on key with reference rows (``--reference R``).

Plain Spark has no snapshot window, count window or streaming rank: ``snapshot``, ``count``
and ``topk`` run on the cti systems only (``NATIVE`` names those it has).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

WINDOW = timedelta(seconds=10)
HOP = timedelta(seconds=5)
LONG_WINDOW = timedelta(hours=1)
LONG_HOP = timedelta(minutes=5)
COUNT_N = 10  # count windows: "every 10 readings"
TOP_K = 3  # TopK: the 3 largest values
QUERIES = ("window", "snapshot", "count", "topk", "long-window", "reference")
NATIVE = ("window", "long-window", "reference")  # the queries plain Spark has
ALONE = ("long-window", "reference")  # each on data of its own: not in a list of queries
FLOOR = ("window",)  # the queries arrow-floor does


def windows(query: str) -> tuple[timedelta, timedelta]:
    """The hopping window (size, hop) of a query that has one."""
    return (LONG_WINDOW, LONG_HOP) if query == "long-window" else (WINDOW, HOP)


def cti_query(query: str, events: Any, reference: Any = None) -> Any:
    """The cti query ``query`` over the stream ``events`` (``reference``: the reference rows'
    stream, for ``reference``)."""
    from cti import agg

    if query == "reference":
        return events.join(reference, on="key")
    if query == "snapshot":
        return events.alter_event_duration(WINDOW).group_by("key").apply(
            lambda g: g.snapshot_window().aggregate(count=agg.count()))
    if query == "count":
        return events.group_by("key").apply(
            lambda g: g.count_window(COUNT_N).aggregate(count=agg.count()))
    size, hop = windows(query)
    if query == "topk":
        return events.group_by("key").apply(lambda g: g.hopping_window(size, hop).top_k(
            TOP_K, order_by=[("value", "desc")]))
    return events.group_by("key").apply(
        lambda g: g.hopping_window(size, hop).aggregate(count=agg.count()))


def native_query(query: str, rows: Any, delay_ms: int, reference: Any = None) -> Any:
    """Plain Spark's ``query`` over the streaming DataFrame ``rows``: a watermark ``delay_ms``
    behind and ``groupBy(key, window(...)).count()``, or (``reference``, a static DataFrame)
    the stream-static join."""
    from pyspark.sql import functions as F

    if query not in NATIVE:
        raise ValueError(f"plain Spark has no {query!r} query")
    if query == "reference":
        return rows.join(reference, "key")
    size, hop = windows(query)
    return (rows.withColumn("ts", F.timestamp_micros("time"))
            .withWatermark("ts", f"{delay_ms} milliseconds")
            .groupBy("key", F.window("ts", f"{int(size.total_seconds())} seconds",
                                     f"{int(hop.total_seconds())} seconds"))
            .count())
