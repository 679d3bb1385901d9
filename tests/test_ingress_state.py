"""A stream's typed ingress state (``cti.ingress.state``): its plain-data form reads back as
written, and a checkpoint's older dict form (``{"streams": [16-key dict]}``) still loads and
runs on exactly as the state it was."""

from __future__ import annotations

import pickle

import attrs
import pandas as pd
from ingress_machine import IngressMachine

from cti import EventShape
from cti.engine.shard import ingress_step
from cti.ingress.spec import StreamSpec
from cti.ingress.state import GroupState, StreamState, next_in_seq
from cti.settings import AdvanceTimePolicy, EventOrderingPolicy

FAST = StreamSpec("fast", EventShape.POINT, event_count=2, policy=AdvanceTimePolicy.ADJUST)
SLOW = StreamSpec("slow", EventShape.EDGE, import_from=0, policy=AdvanceTimePolicy.ADJUST)
ORDERED = StreamSpec("o", EventShape.POINT,
                     ordering=EventOrderingPolicy(out_of_order_tolerance="5s"))


def _rows(rows: list[tuple]) -> pd.DataFrame:
    cols = ["stream", "seq", "arrival", "kind", "start", "end", "payload", "error", "partition"]
    return pd.DataFrame([(s, q, a, k, t, e, p, None, None) for s, q, a, k, t, e, p in rows],
                        columns=cols).astype({c: "int64" for c in
                                              ("stream", "seq", "arrival", "start", "end")})


MIN = -2**63
FIRST = _rows([(0, 0, MIN, "point", 10, MIN, '{"a":1}'), (0, 1, MIN, "point", 30, MIN, '{}'),
               (1, 0, MIN, "edge_start", 5, MIN, '{"r":1}'), (0, 2, MIN, "point", 8, MIN, '{}')])
THEN = _rows([(0, 3, MIN, "point", 40, MIN, '{}'), (1, 1, MIN, "edge_end", 5, 50, '{"r":1}'),
              (0, 4, MIN, "point", 45, MIN, '{}')])


def _old_form(state: GroupState) -> dict:
    """The dict a checkpoint written before the typed state holds."""
    return {"streams": [attrs.asdict(s, recurse=False) for s in state.streams]}


def test_the_plain_form_reads_back_as_written():
    machine = IngressMachine([FAST, SLOW])
    ingress_step(machine, FIRST)
    data = pickle.loads(pickle.dumps(machine.state.to_data()))
    assert isinstance(data, tuple) and all(isinstance(s, tuple) for s in data[1])
    back = GroupState.from_data(data, [FAST, SLOW])
    assert back == machine.state
    assert back.streams[0].cti == 30 and back.streams[0].next_in_seq == 3
    assert next_in_seq(data, 1) == 1 and next_in_seq(None, 1) == 0


def test_an_old_checkpoints_dict_state_loads_and_runs_on_as_it_was():
    machine = IngressMachine([FAST, SLOW])
    ingress_step(machine, FIRST)
    old = pickle.loads(pickle.dumps(_old_form(machine.state)))
    assert sorted(old["streams"][0]) == sorted(f.name for f in attrs.fields(StreamState))
    assert len(old["streams"][0]) == 16
    loaded = GroupState.from_data(old, [FAST, SLOW])
    assert loaded == machine.state
    assert next_in_seq(old, 0) == 3
    resumed = IngressMachine([FAST, SLOW], loaded)
    pd.testing.assert_frame_equal(ingress_step(resumed, THEN), ingress_step(machine, THEN))
    assert resumed.state == machine.state


def test_a_new_state_is_the_row_machines_first():
    state = GroupState.from_data(None, [ORDERED, FAST])
    assert state.streams[0].ordering is not None and state.streams[1].ordering is None
    assert state.streams[1] == StreamState.new(FAST)
    assert state.streams[1].metrics == {"accepted": 0, "adjusted": 0, "dropped": 0,
                                        "invalid": 0, "cti_regressions": 0, "ctis": 0}
