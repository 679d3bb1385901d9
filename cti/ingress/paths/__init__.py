"""The array paths of ingress under one contract, and the one place that picks a group's.

Each path is an object with ``accepts(specs)`` (does it take a group of these streams?) and
``step(group, rows, owner, settle) -> IngressOutput`` (a micro-batch of the group's input
rows, ``IN_ARROW`` columns as pandas, through it: exactly the row machine's output and state).
``path_for`` picks the first path that accepts a group; binding makes every group one that a
path takes, so a group no path takes is a bug in cti and raises saying so.

The paths: ``common`` (a group rooted at a stream whose CTIs are generated or its adapter's,
``cti.ingress.vectorized``) and ``ordered`` (rooted at an event-ordering stream,
``cti.ingress.ordered``); either runs the streams that import the root's CTIs through
``cti.ingress.importing``. A query shard whose stream comes as generation points runs
``cti.engine.timed`` instead (it needs the shard's route).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from cti.ingress.group import GroupRun
from cti.ingress.paths.common import CommonPath
from cti.ingress.paths.contract import IngressOutput, IngressPath
from cti.ingress.paths.ordered import OrderedPath
from cti.ingress.spec import StreamSpec

__all__ = ["PATHS", "IngressOutput", "IngressPath", "path_for", "step"]

PATHS: tuple[IngressPath, ...] = (CommonPath(), OrderedPath())


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
