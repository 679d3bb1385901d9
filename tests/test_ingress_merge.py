"""How an ingress group merges its streams: only an importing stream waits, and only as needed."""

from __future__ import annotations

from ingress_machine import IngressMachine

from cti import EventShape
from cti.forms.rows import InRow, eos_row
from cti.ingress.spec import StreamSpec
from cti.settings import AdvanceTimePolicy

FAST = StreamSpec("fast", EventShape.POINT, event_count=1, policy=AdvanceTimePolicy.DROP)
SLOW = StreamSpec("slow", EventShape.EDGE, import_from=0, policy=AdvanceTimePolicy.ADJUST)


def point(seq, t, arrival):
    return InRow(0, seq, arrival, "point", t, None, f'{{"id":"f{seq}"}}')


def edge_start(seq, t, arrival):
    return InRow(1, seq, arrival, "edge_start", t, None, f'{{"id":"r{seq}"}}')


def test_fast_stream_is_not_held_back_by_a_silent_importer():
    m = IngressMachine([FAST, SLOW])
    out = m.process([point(0, 10, 1), point(1, 20, 3)])
    fast = [(r.kind, r.start) for r in out if r.stream == 0]
    assert fast == [("point", 10), ("cti", 10), ("point", 20), ("cti", 20)]
    # The slow stream has said nothing yet: its imported CTIs wait for its next row.
    assert [r for r in out if r.stream == 1] == []
    out = m.process([edge_start(0, 5, 2), edge_start(1, 15, 4)])
    slow = [(r.kind, r.start, r.status) for r in out if r.stream == 1]
    # Arrival order: CTI 10 (1), r0 (2), CTI 20 (3), r1 (4). r1 waits: the fast stream has only
    # shown arrival 3, so another fast CTI may still come before it.
    assert slow == [("cti", 10, "cti"), ("edge_start", 10, "adjusted"), ("cti", 20, "cti")]
    out = m.process([point(2, 30, 5)])
    # r1 is released; CTI 30 (arrival 5) waits until the slow stream shows it is past 5.
    assert [(r.kind, r.start, r.status) for r in out if r.stream == 1] == [
        ("edge_start", 20, "adjusted")]


def test_importer_rows_wait_for_the_exporter():
    m = IngressMachine([FAST, SLOW])
    # The slow row arrives at 4; the fast stream has only shown arrival 1, so a CTI of the fast
    # stream might still come before it. CTI 10 (arrival 1) is certain already.
    out = m.process([point(0, 10, 1), edge_start(0, 5, 4)])
    assert [(r.kind, r.start) for r in out if r.stream == 1] == [("cti", 10)]
    out = m.process([point(1, 20, 3), point(2, 30, 5)])
    slow = [(r.kind, r.start, r.status) for r in out if r.stream == 1]
    # CTI 20 (arrival 3) comes before the edge (arrival 4); CTI 30 (arrival 5) waits for the
    # slow stream to show it is past 5.
    assert slow == [("cti", 20, "cti"), ("edge_start", 20, "adjusted")]


def test_end_of_input_releases_everything():
    m = IngressMachine([FAST, SLOW])
    out = m.process([point(0, 10, 1), edge_start(0, 5, 4), eos_row(0, 1), eos_row(1, 1)])
    assert m.finished
    assert [(r.kind, r.start) for r in out if r.stream == 1] == [("cti", 10), ("edge_start", 10)]
