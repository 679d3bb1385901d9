"""Ingress: CTI generation, CTI import and the DROP/ADJUST policies (SPEC sections 3-6).

``IngressMachine`` is a deterministic state machine over one *ingress group*: the streams that
are linked by CTI imports. It takes input rows (each stream's rows in its own order, in any
number of batches) and returns output rows. The streams are merged by (arrival time, declaration
order, sequence); a row is processed only once no stream it depends on (by import) can still
deliver an earlier one, so the output does not depend on how the input is split into batches.
The whole state is plain data (``state``), so Spark can keep it in its state store.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from cti.edges import close_edge, open_edge, reopen_edge
from cti.errors import BadInputError, CtiError, CtiViolationError
from cti.events import EVENT_KINDS, INPUT_STATUSES, SHAPE_KINDS, EventShape, wrong_shape
from cti.ingress import ordering
from cti.ingress.spec import StreamSpec
from cti.rows import CLOCK, EOS, INVALID, InRow, OutRow, payload_to_json
from cti.settings import AdvanceTimePolicy
from cti.time import MAX_TIME, MIN_TIME, add, format_time

COUNTED = frozenset({"point", "interval", "edge_start"})
METRICS = (*INPUT_STATUSES, "cti_regressions", "ctis")


DONE = (float("inf"),)  # a merge key above every other: ``IngressMachine.done_below``


def _new_stream_state(spec: StreamSpec) -> dict[str, Any]:
    return {
        "ordering": ordering.new_state(spec.ordering, spec.declared_partitions)
        if spec.ordering else None,
        "partition_arrival": {},  # partition -> last arrival (event-ordering streams)
        "cti": MIN_TIME,  # the stream's current time
        "count": 0,  # counted events since the last count-generated CTI
        "max_start": None,  # largest start among counted events
        "gen_ref": None,  # start of the event that made the previous duration CTI
        "open_edges": {},  # OpenEdges: (start, payload) -> [start emitted, or None if dropped]
        "out_seq": 0,
        "next_in_seq": 0,
        "last_arrival": MIN_TIME,  # the merge arrival: data and clock ticks (running maximum)
        "data_arrival": MIN_TIME,  # the largest arrival of the stream's own rows
        "last_key": None,  # merge key of the last row received
        "eos": False,  # end of input received
        "pending": deque(),  # (merge key, row) received but not yet processed
        "imported": deque(),  # (merge key, time) CTIs imported but not yet processed
        "metrics": dict.fromkeys(METRICS, 0),
    }


def _drop_passed(st: dict[str, Any]) -> None:
    """Forget queued imported CTIs the stream's own time has reached: processed, each would
    be skipped (a stream's CTIs strictly increase, and queued CTIs increase)."""
    queue = st["imported"]
    while queue and queue[0][1] <= st["cti"]:
        queue.popleft()


def elsewhere(row: InRow) -> bool:
    """Whether the row is another query shard's event, routed here without its payload for its
    times (``cti.engine.batch.routed``): an error in it is its owner's to raise, naming it
    (every shard judges the events' times alike, so the owner meets it too)."""
    return row.payload is None and row.kind in EVENT_KINDS


def _describe(row: InRow) -> str:
    if row.kind in ("cti", EOS):
        return f"{row.kind} at {format_time(row.start)}"
    times = format_time(row.start)
    if row.end is not None:
        times += f", {format_time(row.end)}"
    return f"{row.kind}({times}) payload={row.payload}"


# ---- the rules a row can break (SPEC 9), worded once for every path --------------------------

UNREADABLE = "the adapter could not read this row"
STRAY_END = ("edge end with no open edge start of the same start time and payload (rule: an "
             "edge end closes an open start)")


def out_of_sequence(spec: StreamSpec, seq: int, expected: int) -> BadInputError:
    return BadInputError(f"stream {spec.name!r}: input row #{seq} arrived before row "
                         f"#{expected} (rule: a stream's rows arrive in sequence)")


def after_end(spec: StreamSpec, seq: int) -> BadInputError:
    return BadInputError(f"stream {spec.name!r}: row #{seq} after the end of input")


def tick_out_of_sequence(spec: StreamSpec, seq: int, expected: int) -> BadInputError:
    return BadInputError(f"stream {spec.name!r}: a clock tick before row #{seq} arrived before "
                         f"row #{expected} (rule: a stream's rows arrive in sequence)")


def tick_without_time(spec: StreamSpec, seq: int) -> BadInputError:
    return BadInputError(f"stream {spec.name!r}: a clock tick before row #{seq} has no time "
                         "(rule: a tick records the wall-clock time)")


def arrival_back(arrival: int, previous: int) -> str:
    return (f"arrival time {format_time(arrival)} is before the previous arrival "
            f"{format_time(previous)} (rule: arrival time never goes back within a stream)")


def unpoliced(spec: StreamSpec, row: InRow, c: int) -> str:
    """What an event of a stream without an ``AdvanceTimePolicy`` that violates the CTI ``c``
    (its adapter's) is told: an error (SPEC 3), raised or dead-lettered."""
    return (f"stream {spec.name!r}, input #{row.seq} ({_describe(row)}) violates CTI "
            f"{format_time(c)} enqueued by its adapter, and the stream declares no "
            "AdvanceTimePolicy (rule: sync time >= the latest CTI)")


ORDERED_CTI = ("an event-ordering stream takes no CTIs from its adapter (rule: the policy "
               "produces the stream's CTIs)")


def ordering_arrival_problem(row: InRow, last: int | None) -> str | None:
    """The rule a row of an event-ordering stream breaks by its arrival time (None: none),
    ``last`` its partition's last arrival: it needs one, and it never goes back."""
    if row.arrival is None:
        return "no arrival time (rule: an event-ordering policy needs each event's arrival time)"
    if last is not None and row.arrival < last:
        return (f"arrival time {format_time(row.arrival)} is before the previous arrival "
                f"{format_time(last)} in partition {row.partition!r} (rule: arrival time never "
                "goes back within a partition)")
    return None


def cti_regression(t: int, c: int) -> str:
    """Why an adapter's CTI at ``t`` is ignored, the stream's time being ``c``."""
    return f"CTI {format_time(t)} does not move the stream's time {format_time(c)} forward; ignored"


def bad_input(spec: StreamSpec, row: InRow, rule: str) -> BadInputError:
    return BadInputError(f"stream {spec.name!r}, input #{row.seq} ({_describe(row)}): {rule}")


def problem(spec: StreamSpec, row: InRow) -> str | None:
    """The rule a row of a stream without an event-ordering policy breaks (None: none),
    as processing meets it: unreadable or an error carried in (an arrival that went back), a
    CTI without a time, an event that does not fit the stream (``validate``)."""
    if row.kind == INVALID or row.error:
        return row.error or UNREADABLE
    if row.kind == "cti":
        return "a CTI needs a time (rule: no null timestamps)" if row.start is None else None
    return validate(spec, row)


def validate(spec: StreamSpec, row: InRow) -> str | None:
    """The rule an event row breaks, if any: the stream's shape, times present, a non-empty
    lifetime, no sentinel time."""
    if row.kind not in SHAPE_KINDS[spec.shape]:
        return wrong_shape(row.kind, spec.shape)
    if row.start is None:
        return "null start time (rule: no null timestamps)"
    if row.kind in ("interval", "edge_end"):
        if row.end is None:
            return "null end time (rule: no null timestamps)"
        if row.end <= row.start:
            return "end <= start (rule: a lifetime is non-empty)"
    for t in (row.start, row.end):
        if t is not None and t in (MIN_TIME, MAX_TIME):
            return f"time {format_time(t)} is a sentinel (rule: events lie strictly " \
                   "between MIN_TIME and MAX_TIME)"
    return None


class IngressMachine:
    """Runs ingress for one group of streams. ``state`` is plain, picklable data."""

    def __init__(self, specs: Sequence[StreamSpec], state: dict[str, Any] | None = None) -> None:
        self.specs = list(specs)
        self.importers: list[list[int]] = [[] for _ in self.specs]
        for i, spec in enumerate(self.specs):
            if spec.import_from is not None:
                self.importers[spec.import_from].append(i)
        self.state = state if state is not None else {
            "streams": [_new_stream_state(spec) for spec in self.specs]
        }
        self._out: list[OutRow] = []
        self._current_key: tuple = ()
        # Bad input in a stream that raises for it: (merge key, another shard's event, the
        # error) of each met in this batch (``fault``), settled at its end (``settle``).
        self._faults: list[tuple[tuple, bool, CtiError]] = []
        # The batch's first bad input was another shard's event: its owner raises, naming it
        # whole, and fails the micro-batch; this shard raises for no later row (the same
        # error every run).
        self.failing = False

    # ---- public -----------------------------------------------------------------------------

    def process(self, rows: Iterable[InRow]) -> list[OutRow]:
        """Take rows (any streams, any order in the batch); return the output they release."""
        self._out = []
        streams = self.state["streams"]
        # A clock tick precedes the row whose sequence number it carries.
        for row in sorted(rows, key=lambda r: (r.stream, r.seq, r.kind != CLOCK)):
            self._receive(streams[row.stream], row)
        self._merge()
        self.settle()
        self._emit_ordering_metrics()
        out, self._out = self._out, []
        return out

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
        return [dict(s["metrics"]) for s in self.state["streams"]]

    @property
    def finished(self) -> bool:
        return all(s["eos"] and not s["pending"] and not s["imported"]
                   for s in self.state["streams"])

    # ---- merge --------------------------------------------------------------------------------

    def _receive(self, st: dict[str, Any], row: InRow) -> None:
        spec = self.specs[row.stream]
        if row.kind == CLOCK:
            self._receive_clock(st, row)
            return
        if row.seq < st["next_in_seq"]:
            return  # already received: a replayed row
        if row.seq > st["next_in_seq"]:
            raise out_of_sequence(spec, row.seq, st["next_in_seq"])
        if st["eos"]:
            raise after_end(spec, row.seq)
        st["next_in_seq"] = row.seq + 1
        if row.kind == EOS:
            arrival = st["data_arrival"] = MAX_TIME
            st["eos"] = True
        elif spec.ordering is not None and row.kind not in (INVALID,):
            arrival, row = self._ordering_arrival(st, row)
        elif row.arrival is not None:
            # A clock tick may be ahead of the data's own arrival times: a row behind it is
            # merged at the tick, and only a row behind the stream's data is out of sequence.
            arrival = max(row.arrival, st["last_arrival"])
            if row.arrival < st["data_arrival"] and row.kind != INVALID:
                row = row._replace(error=arrival_back(row.arrival, st["data_arrival"]))
            st["data_arrival"] = max(st["data_arrival"], row.arrival)
        else:
            sync = row.end if row.kind == "edge_end" else row.start
            arrival = st["last_arrival"] if sync is None else max(st["last_arrival"], sync)
            if sync is not None:
                st["data_arrival"] = max(st["data_arrival"], sync)
        st["last_arrival"] = arrival
        key = (arrival, row.stream, row.seq)
        st["last_key"] = key
        st["pending"].append((key, row))

    def _receive_clock(self, st: dict[str, Any], row: InRow) -> None:
        """A wall-clock tick (``cti.rows.clock_row``): it moves the stream's merge arrival, so
        what waits for the stream's place in arrival order (imported CTIs, rows of streams that
        import its CTIs) goes on; processed in its place, it moves an event-ordering stream's
        arrival clock. A tick of a row already received, or after the end, changes nothing."""
        spec = self.specs[row.stream]
        if row.seq < st["next_in_seq"] or st["eos"]:
            return
        if row.seq > st["next_in_seq"]:
            raise tick_out_of_sequence(spec, row.seq, st["next_in_seq"])
        if row.arrival is None:
            raise tick_without_time(spec, row.seq)
        st["last_arrival"] = max(st["last_arrival"], row.arrival)
        key = (st["last_arrival"], row.stream, row.seq)
        st["last_key"] = key
        st["pending"].append((key, row))

    def _ordering_arrival(self, st: dict[str, Any], row: InRow) -> tuple[int, InRow]:
        """The merge arrival of a row of an event-ordering stream: arrival never goes back
        within a partition; across partitions the merge takes the running maximum. A row that
        breaks the rule carries the problem in ``error``, reported when it is processed."""
        last = st["partition_arrival"].get(row.partition)
        error = ordering_arrival_problem(row, last)
        if error:
            return st["last_arrival"], row._replace(error=error)
        st["partition_arrival"][row.partition] = row.arrival
        return max(st["last_arrival"], row.arrival), row

    def _merge(self) -> None:
        """Process every row whose place in arrival order is certain.

        A stream depends on the streams it imports CTIs from, directly or up a chain: its own
        rows wait until each has processed every row and imported CTI that comes earlier (so
        each CTI it imports is already in its queue), and an imported CTI waits until the
        stream itself has received every row that comes earlier. A stream that imports nothing
        never waits.
        """
        streams = self.state["streams"]
        progress = True
        while progress:
            progress = False
            for i, st in enumerate(streams):
                while self._process_next(i, st):
                    progress = True

    def done_below(self, j: int) -> tuple | None:
        """The least merge key below which stream j has received and processed every row and
        every imported CTI (None: no key; ``DONE``: every key). Its imports count too, up the
        chain: a CTI that reaches j from further up (a -> b -> c) before a key may not have
        been exported yet."""
        bound: tuple = DONE
        while j is not None:
            st = self.state["streams"][j]
            if not st["eos"]:
                if st["last_key"] is None:
                    return None
                bound = min(bound, st["last_key"])
            for queue in (st["pending"], st["imported"]):
                if queue:
                    bound = min(bound, queue[0][0])
            j = self.specs[j].import_from
        return bound

    def _done_below(self, j: int, key: tuple) -> bool:
        """Has stream j received and processed everything that comes before ``key`` (another
        stream's: no key of j equals it)?"""
        bound = self.done_below(j)
        return bound is not None and key < bound

    def _process_next(self, i: int, st: dict[str, Any]) -> bool:
        own = st["pending"][0] if st["pending"] else None
        imp = st["imported"][0] if st["imported"] else None
        if imp is not None and (own is None or imp[0] < own[0]):
            received = st["eos"] or (st["last_key"] is not None and st["last_key"] > imp[0])
            if not received:
                return False
            st["imported"].popleft()
            self._current_key = imp[0]
            self._advance(i, imp[1])
            return True
        if own is None:
            return False
        exporter = self.specs[i].import_from
        if exporter is not None and not self._done_below(exporter, own[0]):
            return False
        st["pending"].popleft()
        self._current_key = own[0]
        self._process_row(own[1])
        return True

    # ---- one row ------------------------------------------------------------------------------

    def _emit(self, i: int, in_seq: int, kind: str, start: int | None, end: int | None,
              payload: str | None, status: str, orig_start: int | None = None,
              orig_end: int | None = None, reason: str | None = None,
              partition: str | None = None) -> None:
        st = self.state["streams"][i]
        cti = None if st["cti"] == MIN_TIME else st["cti"]  # None: no CTI yet
        self._out.append(OutRow(i, st["out_seq"], in_seq, kind, start, end, payload, status,
                                orig_start, orig_end, cti, reason, partition))
        st["out_seq"] += 1
        metric = {"cti": "ctis", "cti_regression": "cti_regressions"}.get(status, status)
        if metric in st["metrics"]:
            st["metrics"][metric] += 1

    def _bad(self, row: InRow, rule: str) -> None:
        spec = self.specs[row.stream]
        if not spec.dead_letter:
            self.fault(self._current_key, row, bad_input(spec, row, rule))
            return
        self._emit(row.stream, row.seq, row.kind, None, None, row.payload,
                   "invalid", row.start, row.end, rule, row.partition)

    def _advance(self, i: int, t: int) -> None:
        """Move stream i's time to t (if that moves it forward) and pass the CTI to importers."""
        st = self.state["streams"][i]
        if t <= st["cti"]:
            return
        st["cti"] = t
        self._emit(i, -1, "cti", t, None, None, "cti")
        _drop_passed(st)
        self.import_ctis(i, [(self._current_key, t)])

    def import_ctis(self, i: int, ctis: Sequence[tuple[tuple, int]]) -> None:
        """Queue stream i's CTIs ((merge key, time), in order) in each stream importing them:
        imported at that place in arrival order, processed when the importer reaches it.
        A CTI at or below the importer's time would be skipped when processed: not queued."""
        for j in self.importers[i]:
            st = self.state["streams"][j]
            queue = st["imported"]
            for key, t in ctis:
                if t > st["cti"]:
                    queue.append((key, t))

    def _process_row(self, row: InRow) -> None:
        i = row.stream
        spec = self.specs[i]
        st = self.state["streams"][i]
        if spec.ordering is not None and row.kind not in (EOS, INVALID, CLOCK):
            self._ordered_row(row)
            return
        if row.kind == CLOCK:
            if spec.ordering is not None:
                ost = st["ordering"]
                ost["A"] = max(ost["A"], row.arrival)
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
            if row.start <= st["cti"]:
                self._emit(i, row.seq, "cti", None, None, None, "cti_regression", row.start,
                           reason=cti_regression(row.start, st["cti"]))
            else:
                self._advance(i, row.start)
            return
        if row.kind in COUNTED:
            st["max_start"] = row.start if st["max_start"] is None else max(st["max_start"],
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
        st = self.state["streams"][i]
        ost = st["ordering"]
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
        ost["A"] = max(ost["A"], row.arrival)
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
        cti = ordering.release(spec.ordering, self.state["streams"][i]["ordering"], tid,
                               self._ordered_emit(i), flush)
        if cti is not None:
            self._advance(i, cti)

    def _emit_ordering_metrics(self) -> None:
        for i, spec in enumerate(self.specs):
            ost = self.state["streams"][i]["ordering"]
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
        st = self.state["streams"][i]
        c = st["cti"]
        s, e = row.start, row.end
        edge_key = (s, row.payload)
        if s >= c:
            self._emit(i, row.seq, row.kind, s, e, row.payload, "accepted", s, e)
            if row.kind == "edge_start":
                open_edge(st["open_edges"], edge_key, s)
            return
        if not self._violation(row, c):
            return
        policy = self.specs[i].policy
        if policy is AdvanceTimePolicy.ADJUST and row.kind == "edge_start" and c < MAX_TIME:
            self._emit(i, row.seq, row.kind, c, e, row.payload, "adjusted", s, e, "cti_violation")
            open_edge(st["open_edges"], edge_key, c)
        elif policy is AdvanceTimePolicy.ADJUST and row.kind == "interval" and e > c:
            self._emit(i, row.seq, row.kind, c, e, row.payload, "adjusted", s, e, "cti_violation")
        else:
            self._emit(i, row.seq, row.kind, None, None, row.payload, "dropped", s, e,
                       "cti_violation")
            if row.kind == "edge_start":
                open_edge(st["open_edges"], edge_key, None)

    def _edge_end(self, row: InRow) -> None:
        i = row.stream
        st = self.state["streams"][i]
        c = st["cti"]
        s, e = row.start, row.end
        edge_key = (s, row.payload)
        found, a = close_edge(st["open_edges"], edge_key)
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
                reopen_edge(st["open_edges"], edge_key, a)
                return
            if self.specs[i].policy is AdvanceTimePolicy.DROP or c == MAX_TIME:
                # The end is dropped; its start stays open (and can still be closed). After a
                # CTI at MAX_TIME an open start already lasts to the end of time.
                reopen_edge(st["open_edges"], edge_key, a)
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
        st = self.state["streams"][i]
        if spec.event_count is not None:
            st["count"] += 1
            if st["count"] < spec.event_count:
                return
            st["count"] = 0
        else:
            if st["gen_ref"] is not None and start - st["gen_ref"] < spec.duration:
                return
            st["gen_ref"] = start
        self._advance(i, add(st["max_start"], -spec.delay))
