"""The array paths of ingress under one contract, and the one place that picks a group's.

Each path is an object with ``accepts(specs)`` (does it take a group of these streams?) and
``step(group, rows, owner, settle) -> IngressOutput`` (a micro-batch of the group's input
rows, ``IN_ARROW`` columns as pandas, through it: exactly the row machine's output and state).
``path_for`` picks the first path that accepts a group; binding makes every group one that a
path takes, so a group no path takes is a bug in cti and raises saying so.

The paths: ``common`` (a group rooted at a stream whose CTIs are generated or its adapter's,
``cti.ingress.vectorized``) and ``ordered`` (rooted at an event-ordering stream,
``cti.ingress.ordered``); either runs the streams that import the root's CTIs through
``cti.ingress.importing``. A query shard's step goes through ``shard_step``, the one
dispatcher for a shard: it also runs ``timed`` (a stream the source sends as generation
points, ``cti.ingress.timed``) and the common path's chunk straight from the arrays, given
what only the shard's route knows (``ShardContext``).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from cti.ingress import vectorized
from cti.ingress.group import GroupRun
from cti.ingress.paths.common import CommonPath
from cti.ingress.paths.contract import IngressOutput, IngressPath, ShardContext, weighted
from cti.ingress.paths.ordered import OrderedPath
from cti.ingress.paths.timed import TimedPath
from cti.ingress.spec import StreamSpec

__all__ = ["PATHS", "TIMED", "IngressOutput", "IngressPath", "ShardContext", "path_for",
           "shard_step", "step", "weighted"]

PATHS: tuple[IngressPath, ...] = (CommonPath(), OrderedPath())
TIMED = TimedPath()


def path_for(specs: Sequence[StreamSpec]) -> IngressPath:
    """The path that runs a group of these streams: the first in ``PATHS`` that accepts it."""
    for path in PATHS:
        if path.accepts(specs):
            return path
    raise RuntimeError(f"no vectorised ingress for the group of streams "
                       f"{[s.name for s in specs]}: a bug in cti")


def step(group: GroupRun, rows: pd.DataFrame, owner: int | None = None,
         settle: bool = True) -> IngressOutput:
    """A micro-batch of the group's input rows through its path (``path_for``)."""
    return path_for(group.specs).step(group, rows, owner, settle)


def shard_step(group: GroupRun, rows: pd.DataFrame, ctx: ShardContext) -> IngressOutput:
    """A query shard's micro-batch of a group (``ROUTED_ARROW`` columns as pandas): the one
    place that decides which path runs it. A shard that passes the rows on in full: the
    group's path, every row reported. Else the timed path where the source sends the
    group's stream as generation points (``ctx.timed``); else, for a group of one common
    stream, the shard's chunk straight from the arrays (``vectorized.shard_chunk``) where
    it can; else the group's path. The caller settles (``GroupRun.settle``)."""
    if ctx.owner is None:
        got = step(group, ctx.written(rows)).rows
        return IngressOutput(got, report=got)
    if ctx.timed is not None:
        return TIMED.step(group, rows, ctx, step)
    done = vectorized.shard_chunk(group, rows, ctx.owner)
    if done is not None:
        return IngressOutput(done[0], {0: done[1]})
    return step(group, ctx.written(rows), ctx.owner)
