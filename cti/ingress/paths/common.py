"""The ``common`` path: a group rooted at a stream whose CTIs are generated or its adapter's
(no event-ordering policy), the streams importing its CTIs after it (``cti.ingress.vectorized``)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from cti.ingress import vectorized
from cti.ingress.group import GroupRun
from cti.ingress.paths.contract import IngressOutput
from cti.ingress.spec import StreamSpec


class CommonPath:
    name = "common"

    def accepts(self, specs: Sequence[StreamSpec]) -> bool:
        return vectorized.common_root(list(specs)) is not None

    def step(self, group: GroupRun, rows: pd.DataFrame, owner: int | None = None,
             settle: bool = True) -> IngressOutput:
        got = vectorized.process_group(group, rows, owner, settle)
        if got is None:  # (a state this path never leaves: rows held, CTIs imported)
            raise RuntimeError(f"the {self.name} ingress path declined the group of streams "
                               f"{[s.name for s in group.specs]}: a bug in cti")
        return IngressOutput(got)
