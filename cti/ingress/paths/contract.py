"""The contract every array path of ingress keeps (``cti.ingress.paths``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import attrs
import numpy as np
import pandas as pd

from cti.forms.frame import Chunk
from cti.ingress.group import GroupRun
from cti.ingress.spec import StreamSpec


@attrs.frozen
class IngressOutput:
    """A group's ingress output rows of a micro-batch (``OUT`` columns as pandas; with an
    ``owner``, a ``weight`` column: how many rows each stands for). For a query shard
    (``shard_step``): the chunks its operators take that the path built itself, by stream,
    and the rows it reports, where the path picked them (None: the caller picks)."""

    rows: pd.DataFrame
    chunks: Mapping[int, Chunk] = attrs.field(factory=dict)
    report: pd.DataFrame | None = None


@attrs.frozen
class ShardContext:
    """What a query shard knows of a group that ingress does not (its route, in
    ``cti.engine``), given to ``shard_step``: the shard (``owner``; None: it passes the
    group's output rows on in full), the stream the source
    sends as generation points (``timed``; None: none), and the engine's functions that
    write the payloads' text into input rows (``written``), build a stream's chunk from
    output rows (``chunk(rows, stream, input_rows)``) and say which output rows the shard
    reports (``counted(rows, input_rows)``: a mask, None for every row; ``input_rows``, where
    given, the rows they came from: an event's owner is the one its input row was routed to,
    not hashed again)."""

    owner: int | None
    timed: int | None
    written: Callable[[pd.DataFrame], pd.DataFrame]
    chunk: Callable[[pd.DataFrame, int, pd.DataFrame | None], Chunk]
    counted: Callable[[pd.DataFrame, pd.DataFrame | None], np.ndarray | None]


def weighted(got: pd.DataFrame) -> pd.DataFrame:
    """``got`` with ``weight`` (how many rows each row stands for): 1 where it has none."""
    if "weight" not in got:
        got["weight"] = np.int64(1)
    return got


class IngressPath(Protocol):
    """One array path of ingress."""

    name: str

    def accepts(self, specs: Sequence[StreamSpec]) -> bool:
        """Whether this path takes a group of these streams (in declaration order)."""

    def step(self, group: GroupRun, rows: pd.DataFrame, owner: int | None = None,
             settle: bool = True) -> IngressOutput:
        """The group's output of a micro-batch of its input ``rows``; ``group.state`` moves
        on. ``owner``: a query shard (output only its own events of the root stream, and
        weigh the rows); ``settle``: raise the batch's first bad input at the end (else the
        caller settles, ``GroupRun.settle``)."""
