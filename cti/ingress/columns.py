"""Ingress output rows as arrays, shared by the vectorised paths (``vectorized``, ``ordered``,
``importing``, ``cti.engine.timed``): the layout's missing time, the event statuses by code,
the policy on events against the CTI in force (SPEC 3), and the frame of output rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cti.events import EVENT_STATUSES, EventShape
from cti.ingress.spec import StreamSpec
from cti.settings import AdvanceTimePolicy
from cti.time import MAX_TIME, MIN_TIME

NULL = MIN_TIME  # the Spark layout's missing time
STATUS = np.asarray(EVENT_STATUSES, dtype=object)  # by code: 0 accepted, 1 adjusted, 2 dropped


def judged(spec: StreamSpec, is_ev: np.ndarray | bool, start: np.ndarray, end: np.ndarray,
           before: np.ndarray) -> tuple[np.ndarray, ...]:
    """The policy (SPEC 3) on events (``is_ev``: points, intervals or edge starts) against the
    CTI in force ``before`` each: an event below it violates the CTI; an interval whose end
    lies beyond it, or an edge start below a finite CTI, is adjusted (ADJUST), else dropped.
    (violates, adjusted, dropped, accepted) masks."""
    violates = is_ev & (start < before)
    movable = (end > before) if spec.shape is EventShape.INTERVAL else (
        before < MAX_TIME) if spec.shape is EventShape.EDGE else False
    adjust = violates & (spec.policy is AdvanceTimePolicy.ADJUST) & movable
    return violates, adjust, violates & ~adjust, is_ev & ~violates


def output_frame(cols: dict[str, Any], index: int) -> pd.DataFrame:
    """Output rows of stream ``index`` in the Spark layout (no partition)."""
    n = len(cols.get("seq", ()))
    times = ("seq", "in_seq", "start", "end", "orig_start", "orig_end", "cti")
    return pd.DataFrame({
        "stream": np.full(n, index, np.int32),
        **{c: np.asarray(cols.get(c, np.zeros(0)), np.int64 if c in times else object)
           for c in ("seq", "in_seq", "kind", "start", "end", "payload", "status",
                     "orig_start", "orig_end", "cti", "reason")},
        "partition": np.full(n, None, object),
    }, copy=False)
