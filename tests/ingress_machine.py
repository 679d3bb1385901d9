"""The row machine: ingress (CTI generation, CTI import, the DROP/ADJUST policies and event
ordering, SPEC sections 3-7) one row at a time: the definition the array paths
(``cti.ingress.paths``) are checked against, kept with the tests (no runtime runs it).

``IngressMachine`` is a deterministic state machine over one *ingress group*: the streams that
are linked by CTI imports. It takes input rows (each stream's rows in its own order, in any
number of batches) and returns output rows. The streams are merged by (arrival time, declaration
order, sequence); a row is processed only once no stream it depends on (by import) can still
deliver an earlier one, so the output does not depend on how the input is split into batches.
Its state is the group's (``cti.ingress.state``), as the array paths leave it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cti.errors import CtiViolationError
from cti.events import SHAPE_KINDS, EventShape
from cti.forms.edges import close_edge, open_edge, reopen_edge
from cti.forms.rows import CLOCK, EOS, INVALID, InRow, OutRow, payload_to_json
from cti.ingress import ordering
from cti.ingress.group import GroupRun
from cti.ingress.rules import (
    ORDERED_CTI,
    STRAY_END,
    after_end,
    arrival_back,
    bad_input,
    cti_regression,
    elsewhere,
    ordering_arrival_problem,
    out_of_sequence,
    problem,
    tick_out_of_sequence,
    tick_without_time,
    unpoliced,
    validate,
)
from cti.ingress.spec import StreamSpec
from cti.ingress.state import GroupState, StreamState
from cti.settings import AdvanceTimePolicy
from cti.time import MAX_TIME, MIN_TIME, add

COUNTED = frozenset({"point", "interval", "edge_start"})


def _drop_passed(st: StreamState) -> None:
    """Forget queued imported CTIs the stream's own time has reached: processed, each would
    be skipped (a stream's CTIs strictly increase, and queued CTIs increase)."""
    queue = st.imported
    while queue and queue[0][1] <= st.cti:
        queue.popleft()


class IngressMachine(GroupRun):
    """Runs ingress for one group of streams, a row at a time."""

    def __init__(self, specs: Sequence[StreamSpec], state: GroupState | None = None) -> None:
        super().__init__(specs, state)
        self._out: list[OutRow] = []
        self._current_key: tuple = ()

    # ---- public -----------------------------------------------------------------------------

    def process(self, rows: Iterable[InRow]) -> list[OutRow]:
        """Take rows (any streams, any order in the batch); return the output they release."""
        self._out = []
        streams = self.state.streams
        # A clock tick precedes the row whose sequence number it carries.
        for row in sorted(rows, key=lambda r: (r.stream, r.seq, r.kind != CLOCK)):
            self._receive(streams[row.stream], row)
        self._merge()
        self.settle()
        self._emit_ordering_metrics()
        out, self._out = self._out, []
        return out

    # ---- merge --------------------------------------------------------------------------------

    def _receive(self, st: StreamState, row: InRow) -> None:
        spec = self.specs[row.stream]
        if row.kind == CLOCK:
            self._receive_clock(st, row)
            return
        if row.seq < st.next_in_seq:
            return  # already received: a replayed row
        if row.seq > st.next_in_seq:
            raise out_of_sequence(spec, row.seq, st.next_in_seq)
        if st.eos:
            raise after_end(spec, row.seq)
        st.next_in_seq = row.seq + 1
        if row.kind == EOS:
            arrival = st.data_arrival = MAX_TIME
            st.eos = True
        elif spec.ordering is not None and row.kind not in (INVALID,):
            arrival, row = self._ordering_arrival(st, row)
        elif row.arrival is not None:
            # A clock tick may be ahead of the data's own arrival times: a row behind it is
            # merged at the tick, and only a row behind the stream's data is out of sequence.
            arrival = max(row.arrival, st.last_arrival)
            if row.arrival < st.data_arrival and row.kind != INVALID:
                row = row._replace(error=arrival_back(row.arrival, st.data_arrival))
            st.data_arrival = max(st.data_arrival, row.arrival)
        else:
            sync = row.end if row.kind == "edge_end" else row.start
            arrival = st.last_arrival if sync is None else max(st.last_arrival, sync)
            if sync is not None:
                st.data_arrival = max(st.data_arrival, sync)
        st.last_arrival = arrival
        key = (arrival, row.stream, row.seq)
        st.last_key = key
        st.pending.append((key, row))

    def _receive_clock(self, st: StreamState, row: InRow) -> None:
        """A wall-clock tick (``cti.forms.rows.clock_row``): it moves the stream's merge arrival, so
        what waits for the stream's place in arrival order (imported CTIs, rows of streams that
        import its CTIs) goes on; processed in its place, it moves an event-ordering stream's
        arrival clock. A tick of a row already received, or after the end, changes nothing."""
        spec = self.specs[row.stream]
        if row.seq < st.next_in_seq or st.eos:
            return
        if row.seq > st.next_in_seq:
            raise tick_out_of_sequence(spec, row.seq, st.next_in_seq)
        if row.arrival is None:
            raise tick_without_time(spec, row.seq)
        st.last_arrival = max(st.last_arrival, row.arrival)
        key = (st.last_arrival, row.stream, row.seq)
        st.last_key = key
        st.pending.append((key, row))

    def _ordering_arrival(self, st: StreamState, row: InRow) -> tuple[int, InRow]:
        """The merge arrival of a row of an event-ordering stream: arrival never goes back
        within a partition; across partitions the merge takes the running maximum. A row that
        breaks the rule carries the problem in ``error``, reported when it is processed."""
        last = st.partition_arrival.get(row.partition)
        error = ordering_arrival_problem(row, last)
        if error:
            return st.last_arrival, row._replace(error=error)
        st.partition_arrival[row.partition] = row.arrival
        return max(st.last_arrival, row.arrival), row

    def _merge(self) -> None:
        """Process every row whose place in arrival order is certain.

        A stream depends on the streams it imports CTIs from, directly or up a chain: its own
        rows wait until each has processed every row and imported CTI that comes earlier (so
        each CTI it imports is already in its queue), and an imported CTI waits until the
        stream itself has received every row that comes earlier. A stream that imports nothing
        never waits.
        """
        streams = self.state.streams
        progress = True
        while progress:
            progress = False
            for i, st in enumerate(streams):
                while self._process_next(i, st):
                    progress = True

    def _process_next(self, i: int, st: StreamState) -> bool:
        own = st.pending[0] if st.pending else None
        imp = st.imported[0] if st.imported else None
        if imp is not None and (own is None or imp[0] < own[0]):
            received = st.eos or (st.last_key is not None and st.last_key > imp[0])
            if not received:
                return False
            st.imported.popleft()
            self._current_key = imp[0]
            self._advance(i, imp[1])
            return True
        if own is None:
            return False
        exporter = self.specs[i].import_from
        if exporter is not None and not self._done_below(exporter, own[0]):
            return False
        st.pending.popleft()
        self._current_key = own[0]
        self._process_row(own[1])
        return True

    # ---- one row ------------------------------------------------------------------------------

    def _emit(self, i: int, in_seq: int, kind: str, start: int | None, end: int | None,
              payload: str | None, status: str, orig_start: int | None = None,
              orig_end: int | None = None, reason: str | None = None,
              partition: str | None = None) -> None:
        st = self.state.streams[i]
        cti = None if st.cti == MIN_TIME else st.cti  # None: no CTI yet
        self._out.append(OutRow(i, st.out_seq, in_seq, kind, start, end, payload, status,
                                orig_start, orig_end, cti, reason, partition))
        st.out_seq += 1
        metric = {"cti": "ctis", "cti_regression": "cti_regressions"}.get(status, status)
        if metric in st.metrics:
            st.metrics[metric] += 1

    def _bad(self, row: InRow, rule: str) -> None:
        spec = self.specs[row.stream]
        if not spec.dead_letter:
            self.fault(self._current_key, row, bad_input(spec, row, rule))
            return
        self._emit(row.stream, row.seq, row.kind, None, None, row.payload,
                   "invalid", row.start, row.end, rule, row.partition)

    def _advance(self, i: int, t: int) -> None:
        """Move stream i's time to t (if that moves it forward) and pass the CTI to importers."""
        st = self.state.streams[i]
        if t <= st.cti:
            return
        st.cti = t
        self._emit(i, -1, "cti", t, None, None, "cti")
        _drop_passed(st)
        self.import_ctis(i, [(self._current_key, t)])

    def _process_row(self, row: InRow) -> None:
        i = row.stream
        spec = self.specs[i]
        st = self.state.streams[i]
        if spec.ordering is not None and row.kind not in (EOS, INVALID, CLOCK):
            self._ordered_row(row)
            return
        if row.kind == CLOCK:
            if spec.ordering is not None:
                ost = st.ordering
                ost.A = max(ost.A, row.arrival)
                self._ordered_release(i, None)
            return
        if row.kind == EOS:
            if spec.ordering is not None:
                self._ordered_release(i, None, flush=True)
                return
            if spec.generates and spec.advance_to_infinity_on_shutdown:
                self._advance(i, MAX_TIME)
            return
        rule = problem(spec, row)
        if rule:
            self._bad(row, rule)
            return
        if row.kind == "cti":
            if row.start <= st.cti:
                self._emit(i, row.seq, "cti", None, None, None, "cti_regression", row.start,
                           reason=cti_regression(row.start, st.cti))
            else:
                self._advance(i, row.start)
            return
        if row.kind in COUNTED:
            st.max_start = row.start if st.max_start is None else max(st.max_start,
                                                                            row.start)
        if elsewhere(row) and row.kind in SHAPE_KINDS[EventShape.EDGE]:
            pass  # another shard's edge, routed here for its time: its owner pairs and judges it
        elif row.kind == "edge_end":
            self._edge_end(row)
        else:
            self._start_event(row)
        if row.kind in COUNTED and spec.generates:
            self._generate(i, row.start)

    # ---- event-ordering streams (SPEC 7) -------------------------------------------------------

    def _ordered_emit(self, i: int) -> ordering.Emit:
        def emit(row: InRow, status: str, start: int | None, end: int | None,
                 reason: str | None, timeline: str) -> None:
            self._emit(i, row.seq, row.kind, start, end, row.payload, status, row.start,
                       row.end, reason, row.partition)
        return emit

    def _ordered_row(self, row: InRow) -> None:
        i = row.stream
        spec = self.specs[i]
        st = self.state.streams[i]
        ost = st.ordering
        if row.kind == "cti":
            self._bad(row, ORDERED_CTI)
            return
        rule = row.error or validate(spec, row)
        tid = None
        if rule is None and not (elsewhere(row) and spec.ordering.over is not None):
            tid, rule = ordering.timeline_id(spec.ordering, row)
        if rule:
            self._bad(row, rule)
            return
        ost.A = max(ost.A, row.arrival)
        if tid is None:
            # Another shard's event of another shard's substream (``routed`` leaves out the
            # payload where the query is spread by the substream key): its owner keeps the
            # key's timeline and judges it; here it moves the arrival clock alone.
            self._ordered_release(i, None)
            return
        ordering.process_event(spec.ordering, ost, row, tid, self._ordered_emit(i))
        self._ordered_release(i, tid)

    def _ordered_release(self, i: int, tid: str | None, flush: bool = False) -> None:
        spec = self.specs[i]
        cti = ordering.release(spec.ordering, self.state.streams[i].ordering, tid,
                               self._ordered_emit(i), flush)
        if cti is not None:
            self._advance(i, cti)

    def _emit_ordering_metrics(self) -> None:
        for i, spec in enumerate(self.specs):
            ost = self.state.streams[i].ordering
            if ost is not None:
                self._emit(i, -1, "metrics", None, None,
                           payload_to_json(ordering.snapshot(spec.ordering, ost)), "metrics")

    def _violation(self, row: InRow, c: int) -> bool:
        """True when the event should get the policy; for a stream with no policy, False:
        the event is dead-lettered, or the batch's fault."""
        spec = self.specs[row.stream]
        if spec.policy is not None:
            return True
        msg = unpoliced(spec, row, c)
        if spec.dead_letter:
            self._emit(row.stream, row.seq, row.kind, None, None, row.payload,
                       "invalid", row.start, row.end, msg, row.partition)
        else:
            self.fault(self._current_key, row, CtiViolationError(msg))
        return False

    def _start_event(self, row: InRow) -> None:
        i = row.stream
        st = self.state.streams[i]
        c = st.cti
        s, e = row.start, row.end
        edge_key = (s, row.payload)
        if s >= c:
            self._emit(i, row.seq, row.kind, s, e, row.payload, "accepted", s, e)
            if row.kind == "edge_start":
                open_edge(st.open_edges, edge_key, s)
            return
        if not self._violation(row, c):
            return
        policy = self.specs[i].policy
        if policy is AdvanceTimePolicy.ADJUST and row.kind == "edge_start" and c < MAX_TIME:
            self._emit(i, row.seq, row.kind, c, e, row.payload, "adjusted", s, e, "cti_violation")
            open_edge(st.open_edges, edge_key, c)
        elif policy is AdvanceTimePolicy.ADJUST and row.kind == "interval" and e > c:
            self._emit(i, row.seq, row.kind, c, e, row.payload, "adjusted", s, e, "cti_violation")
        else:
            self._emit(i, row.seq, row.kind, None, None, row.payload, "dropped", s, e,
                       "cti_violation")
            if row.kind == "edge_start":
                open_edge(st.open_edges, edge_key, None)

    def _edge_end(self, row: InRow) -> None:
        i = row.stream
        st = self.state.streams[i]
        c = st.cti
        s, e = row.start, row.end
        edge_key = (s, row.payload)
        found, a = close_edge(st.open_edges, edge_key)
        if not found:
            self._bad(row, STRAY_END)
            return
        if a is None:
            self._emit(i, row.seq, row.kind, None, None, row.payload, "dropped", s, e,
                       "start_dropped")
            return
        reason = None if a == s else "start_adjusted"
        if e < c:
            if not self._violation(row, c):
                reopen_edge(st.open_edges, edge_key, a)
                return
            if self.specs[i].policy is AdvanceTimePolicy.DROP or c == MAX_TIME:
                # The end is dropped; its start stays open (and can still be closed). After a
                # CTI at MAX_TIME an open start already lasts to the end of time.
                reopen_edge(st.open_edges, edge_key, a)
                self._emit(i, row.seq, row.kind, None, None, row.payload, "dropped", s, e,
                           "cti_violation")
                return
            e, reason = c, "cti_violation"
        if e <= a:
            # The end lies at or before its adjusted start. The start is already final output,
            # so close the edge at the earliest time the CTI still allows: one tick after it.
            e, reason = add(a, 1), "end_before_adjusted_start"
        status = "accepted" if reason is None else "adjusted"
        self._emit(i, row.seq, row.kind, a, e, row.payload, status, s, row.end, reason)

    def _generate(self, i: int, start: int) -> None:
        spec = self.specs[i]
        st = self.state.streams[i]
        if spec.event_count is not None:
            st.count += 1
            if st.count < spec.event_count:
                return
            st.count = 0
        else:
            if st.gen_ref is not None and start - st.gen_ref < spec.duration:
                return
            st.gen_ref = start
        self._advance(i, add(st.max_start, -spec.delay))
