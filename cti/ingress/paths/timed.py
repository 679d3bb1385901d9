"""The ``timed`` path: a query shard's step of a group whose root stream the source may send
as generation points (``cti.ingress.timed``): each run of its rows in order on the same state
(pieces of points by ``timed_step``; rows sent whole by the shard's chunk of the common path,
or the group's path), then the streams that import its CTIs (``importers_step``). It needs
the shard's context (``ShardContext``), so only ``shard_step`` runs it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from cti.forms import frame
from cti.ingress import timed, vectorized
from cti.ingress.group import GroupRun
from cti.ingress.paths.contract import IngressOutput, ShardContext, weighted
from cti.ingress.spec import StreamSpec


class TimedPath:
    name = "timed"

    def accepts(self, specs: Sequence[StreamSpec]) -> bool:
        return bool(timed.timed_streams(specs))

    def step(self, group: GroupRun, rows: pd.DataFrame, ctx: ShardContext,
             general: Callable[..., IngressOutput]) -> IngressOutput:
        """The group's output rows (weighted), the rows the shard reports (its own events of
        the points; of the rest, ``ctx.counted``) and each stream's chunk; ``general``: the
        group's path (``paths.step``), for the rows sent whole."""
        index = ctx.timed
        specs = group.specs
        single = len(specs) == 1
        mine = rows["stream"].to_numpy() == index
        outs, kept, chunks = [], [], []
        for compact, part in timed.segments(rows if single else frame.rows_where(rows, mine)):
            if compact:
                got, step, ctis = timed.timed_step(group, part, ctx.owner, index)
                group.import_ctis(index, ctis)
            elif single and (done := vectorized.shard_chunk(group, part, ctx.owner)) \
                    is not None:
                got, step = done
            else:  # (the fast stream's CTIs are imported on the way)
                got = weighted(general(group, ctx.written(part), ctx.owner, False).rows)
                step = ctx.chunk(got, index, part)
            outs.append(got)
            kept.append(None if compact else ctx.counted(got, part))
            chunks.append(step)
        importers = None if single else frame.rows_where(rows, ~mine)
        if importers is not None:
            got = weighted(vectorized.importers_step(group, ctx.written(importers), index))
            outs.append(got)
            kept.append(ctx.counted(got, importers))
            del got
        # Stacked, then let go (with a million reference rows each is a copy of 50 MB or
        # more, which would otherwise stay beside the chunk made next).
        every, reported = frame.stack(outs), _reported(outs, kept)
        del outs, kept
        # (a piece of stream ``index`` taken whole runs the group's ingress: it may release
        # the other streams' rows held from earlier micro-batches, and their CTIs)
        # (the importers' input rows: an event's owner as routed and its typed columns)
        out = {i: timed.merged(chunks) if i == index else ctx.chunk(every, i, importers)
               for i in range(len(specs))}
        # The rows reported, a copy where they are some of the rows: made after the chunks,
        # so that it is not alive beside the chunks' work.
        report = every if reported is None else _taken(every, reported)
        return IngressOutput(every, out, report)


def _reported(outs: list[pd.DataFrame], kept: list[np.ndarray | None]) -> np.ndarray | None:
    """Which rows of the stacked outputs the shard reports (each output's ``counted`` mask,
    None: all of its rows); None where that is every row."""
    if all(k is None or k.all() for k in kept):
        return None
    return np.concatenate([np.ones(len(o), bool) if k is None else k
                           for o, k in zip(outs, kept, strict=True)])


def _taken(rows: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    """The rows of ``rows`` where ``mask`` is set, numbered from 0."""
    out = frame.rows_where(rows, mask)
    out.index = pd.RangeIndex(len(out))
    return out
