"""The rules an input row can break (SPEC 9), worded once for every ingress path: the row
machine (the tests' oracle) and the array paths (``cti.ingress.paths``) word a bad row alike,
so a dead letter's reason and a raised error are the same whichever path met the row."""

from __future__ import annotations

from cti.errors import BadInputError
from cti.events import EVENT_KINDS, SHAPE_KINDS, wrong_shape
from cti.forms.rows import EOS, INVALID, InRow
from cti.ingress.spec import StreamSpec
from cti.time import MAX_TIME, MIN_TIME, format_time


def elsewhere(row: InRow) -> bool:
    """Whether the row is another query shard's event, routed here without its payload for its
    times (``cti.engine.batch.routed``): an error in it is its owner's to raise, naming it
    (every shard judges the events' times alike, so the owner meets it too)."""
    return row.payload is None and row.kind in EVENT_KINDS


def describe(row: InRow) -> str:
    if row.kind in ("cti", EOS):
        return f"{row.kind} at {format_time(row.start)}"
    times = format_time(row.start)
    if row.end is not None:
        times += f", {format_time(row.end)}"
    return f"{row.kind}({times}) payload={row.payload}"


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
    return (f"stream {spec.name!r}, input #{row.seq} ({describe(row)}) violates CTI "
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
    return BadInputError(f"stream {spec.name!r}, input #{row.seq} ({describe(row)}): {rule}")


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
