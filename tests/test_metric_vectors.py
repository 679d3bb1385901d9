"""A query's shards compute their ingress metrics as arrays (``metrics.metric_vector``) that
Spark only adds up (``metrics.vector_columns``): the same numbers as the conditional
aggregates over the rows themselves (``metrics.metric_columns``), however the rows are split
among the shards, NULL where those give NULL."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cti import (
    Application,
    CepStream,
    EventOrderingPolicy,
    EventShape,
    PointEvent,
    ticks,
)
from cti.io.memory import MemoryInputAdapterFactory
from cti.time import MAX_TIME

STATUSES = ("accepted", "adjusted", "dropped", "invalid", "cti", "cti_regression", "metrics")
REASONS = (None, "", "late", "early", "out_of_order", "cti_violation")


def groups():
    """Three groups: two streams without an event-ordering policy, one with, one never seen."""
    from cti.query.binding import IngressGroup

    app = Application()
    events = [PointEvent(1, {"k": "a"})]
    plain = [CepStream.create(name, MemoryInputAdapterFactory(), events, EventShape.POINT,
                              application=app) for name in ("a", "b`c")]
    ordered = CepStream.create("o", MemoryInputAdapterFactory(), events, EventShape.POINT,
                               application=app, event_ordering_policy=EventOrderingPolicy(
                                   late_arrival_tolerance=ticks(8)))
    quiet = CepStream.create("q", MemoryInputAdapterFactory(), events, EventShape.POINT,
                             application=app)
    return [IngressGroup(plain), IngressGroup([ordered]), IngressGroup([quiet])]


def ingress_rows(rng: np.random.Generator, group: int, streams: int, n: int) -> pd.DataFrame:
    """Weighted ingress rows of one group with every status and reason, CTIs at infinity,
    event-ordering snapshots whose clock or CTI may be missing."""
    status = rng.choice(STATUSES, n)
    start = rng.integers(0, 1000, n)
    start[rng.random(n) < 0.2] = MAX_TIME
    snapshot = {"arrival_clock": None, "cti": None}
    payload = [json.dumps({k: (None if rng.random() < 0.3 else int(rng.integers(0, 1000)))
                           for k in snapshot}) if s == "metrics" else None for s in status]
    return pd.DataFrame({
        "group": np.full(n, group, np.int32), "stream": rng.integers(0, streams, n).astype(
            np.int32), "status": status, "reason": rng.choice(np.array(REASONS, object), n),
        "weight": rng.integers(0, 4, n).astype(np.int64), "start": start.astype(np.int64),
        "payload": pd.Series(payload, dtype=object)})


@pytest.mark.spark
@pytest.mark.parametrize("seed", range(4))
def test_shard_arrays_give_the_rows_metrics(spark, seed):
    from cti.runtime.spark.metrics import (
        VECTOR,
        metric_columns,
        metric_vector,
        vector_columns,
    )

    rng = np.random.default_rng(seed)
    gs = groups()
    streams = [len(g.streams) for g in gs]
    fixed = pd.DataFrame({  # (a finite CTI of "a", a whole snapshot of "o")
        "group": np.array([0, 1], np.int32), "stream": np.zeros(2, np.int32),
        "status": ["cti", "metrics"], "reason": [None, None], "weight": np.ones(2, np.int64),
        "start": np.array([5, 0], np.int64),
        "payload": [None, json.dumps({"arrival_clock": 10, "cti": 4})]})
    rows = pd.concat([fixed, *(ingress_rows(rng, g, streams[g], int(rng.integers(20, 60)))
                               for g in (0, 1))], ignore_index=True)
    want = spark.createDataFrame(rows, "`group` int, stream int, status string, reason "
                                 "string, weight long, start long, payload string"
                                 ).agg(*metric_columns(gs, "weight")).first().asDict()
    shard = rng.integers(0, 3, len(rows))  # (the rows split among three shards)
    arrays = [metric_vector(streams, {g: part[part["group"] == g] for g in (0, 1)})
              for part in (rows[shard == s] for s in range(3))]
    got = spark.createDataFrame([(a,) for a in arrays], f"{VECTOR} array<long>").agg(
        *vector_columns(gs)).first().asDict()
    assert got == want
    assert got["q.accepted"] == 0 and got["a.arrival_clock"] is None
    assert got["a.watermark"] is not None and got["o.watermark_delay"] is not None


@pytest.mark.spark
def test_no_rows_give_null_metrics(spark):
    from cti.runtime.spark.metrics import VECTOR, vector_columns

    got = spark.createDataFrame([], f"{VECTOR} array<long>").agg(
        *vector_columns(groups())).first().asDict()
    assert len(got) == 4 * 13 and set(got.values()) == {None}
