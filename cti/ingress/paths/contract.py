"""The contract every array path of ingress keeps (``cti.ingress.paths``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs
import pandas as pd

from cti.ingress.group import GroupRun
from cti.ingress.spec import StreamSpec


@attrs.frozen
class IngressOutput:
    """A group's ingress output rows of a micro-batch (``OUT`` columns as pandas; with an
    ``owner``, a ``weight`` column: how many rows each stands for)."""

    rows: pd.DataFrame


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
