"""An ingress group at run time: the streams linked by CTI imports, their state
(``cti.ingress.state``), who imports whose CTIs, and the batch's bad input in a stream that
raises (``fault``, ``settle``). Every ingress path (``cti.ingress.paths``) steps a group;
the row machine the tests check them against (``tests/ingress_machine.py``) is one too.
"""

from __future__ import annotations

from collections.abc import Sequence

from cti.errors import CtiError
from cti.forms.rows import InRow
from cti.ingress.rules import elsewhere
from cti.ingress.spec import StreamSpec
from cti.ingress.state import GroupState

DONE = (float("inf"),)  # a merge key above every other: ``GroupRun.done_below``


class GroupRun:
    """One group of streams' ingress at run time. ``state`` is typed; its plain-data form is
    ``state.to_data()``."""

    def __init__(self, specs: Sequence[StreamSpec], state: GroupState | None = None) -> None:
        self.specs = list(specs)
        self.importers: list[list[int]] = [[] for _ in self.specs]
        for i, spec in enumerate(self.specs):
            if spec.import_from is not None:
                self.importers[spec.import_from].append(i)
        self.state = state if state is not None else GroupState.new(self.specs)
        # Bad input in a stream that raises for it: (merge key, another shard's event, the
        # error) of each met in this batch (``fault``), settled at its end (``settle``).
        self._faults: list[tuple[tuple, bool, CtiError]] = []
        # The batch's first bad input was another shard's event: its owner raises, naming it
        # whole, and fails the micro-batch; this shard raises for no later row (the same
        # error every run).
        self.failing = False

    def fault(self, key: tuple, row: InRow, error: CtiError) -> None:
        """Bad input ``row`` at merge key ``key`` in a stream that raises for it: it is not
        output, and the batch fails for the first such row in arrival order (``settle``),
        whichever stream met it first (another shard's event: its owner raises)."""
        if not self.failing:
            self._faults.append((key, elsewhere(row), error))

    def settle(self) -> None:
        """At the end of a batch: raise the error of its first bad input in arrival order,
        or, where that is another shard's event, go on failing (raise for no later row)."""
        faults, self._faults = self._faults, []
        if self.failing or not faults:
            return
        _, away, error = min(faults, key=lambda f: f[0])
        if not away:
            raise error
        self.failing = True

    def metrics(self) -> list[dict[str, int]]:
        return [dict(s.metrics) for s in self.state.streams]

    @property
    def finished(self) -> bool:
        return all(s.eos and not s.pending and not s.imported
                   for s in self.state.streams)

    def done_below(self, j: int) -> tuple | None:
        """The least merge key below which stream j has received and processed every row and
        every imported CTI (None: no key; ``DONE``: every key). Its imports count too, up the
        chain: a CTI that reaches j from further up (a -> b -> c) before a key may not have
        been exported yet."""
        bound: tuple = DONE
        while j is not None:
            st = self.state.streams[j]
            if not st.eos:
                if st.last_key is None:
                    return None
                bound = min(bound, st.last_key)
            for queue in (st.pending, st.imported):
                if queue:
                    bound = min(bound, queue[0][0])
            j = self.specs[j].import_from
        return bound

    def _done_below(self, j: int, key: tuple) -> bool:
        """Has stream j received and processed everything that comes before ``key`` (another
        stream's: no key of j equals it)?"""
        bound = self.done_below(j)
        return bound is not None and key < bound

    def import_ctis(self, i: int, ctis: Sequence[tuple[tuple, int]]) -> None:
        """Queue stream i's CTIs ((merge key, time), in order) in each stream importing them:
        imported at that place in arrival order, processed when the importer reaches it.
        A CTI at or below the importer's time would be skipped when processed: not queued."""
        for j in self.importers[i]:
            st = self.state.streams[j]
            queue = st.imported
            for key, t in ctis:
                if t > st.cti:
                    queue.append((key, t))
