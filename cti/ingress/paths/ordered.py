"""The ``ordered`` path: a group rooted at a stream with an event-ordering policy, the streams
importing its CTIs after it (``cti.ingress.ordered``)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from cti.ingress import ordered
from cti.ingress.group import GroupRun
from cti.ingress.paths.contract import IngressOutput
from cti.ingress.spec import StreamSpec


class OrderedPath:
    name = "ordered"

    def accepts(self, specs: Sequence[StreamSpec]) -> bool:
        return ordered.ordered_stream(list(specs)) is not None

    def step(self, group: GroupRun, rows: pd.DataFrame, owner: int | None = None,
             settle: bool = True) -> IngressOutput:
        # (an event-ordering stream's rows are all output: ``owner`` changes nothing here)
        got = ordered.process_group(group, rows, settle)
        if got is None:  # (a state this path never leaves: rows held, CTIs imported)
            raise RuntimeError(f"the {self.name} ingress path declined the group of streams "
                               f"{[s.name for s in group.specs]}: a bug in cti")
        return IngressOutput(got)
