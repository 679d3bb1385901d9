"""A join's state from a checkpoint of the previous release (each side one pandas table, the
pending pairs a list) resumes in this one (each side indexed by key, ``join_side``) and gives
the output the previous release gave.

``data/join_state_f2d58ea.pickle`` was written by release f2d58ea itself: ``write_fixture()``
run with that release's ``cti`` first on the path (``git archive f2d58ea cti | tar -x -C old``,
then ``PYTHONPATH=old:tests python -c "from test_join_resume import write_fixture;
write_fixture()"``). It holds the query machine's state after the first step and the output
rows of the later steps as that release gave them.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

from cti import AdvanceTimeSettings, Application, CepStream, EventShape
from cti.forms import frame
from cti.io.memory import MemoryInputAdapterFactory
from cti.operators.machine import QueryMachine
from cti.operators.output import rows_of_step
from cti.time import MAX_TIME

FIXTURE = Path(__file__).parent / "data" / "join_state_f2d58ea.pickle"


def _query() -> Any:
    app = Application()
    left = CepStream.create("l", MemoryInputAdapterFactory(), [], EventShape.INTERVAL,
                            AdvanceTimeSettings.increasing_start_time(), application=app)
    right = CepStream.create("r", MemoryInputAdapterFactory(), [], EventShape.EDGE,
                             AdvanceTimeSettings.increasing_start_time(), application=app)
    return left.join(right, on="k")


def _chunk(events: list[tuple[str, int, int, str, int]], ctis: list[int]) -> frame.Chunk:
    payloads = [json.dumps({"k": k, "n": n}, separators=(",", ":")) for *_, k, n in events]
    return frame.Chunk(frame.make([e[0] for e in events], [e[1] for e in events],
                                  [e[2] for e in events], payloads, [""] * len(events)), ctis)


# Step 1 leaves every kind of join state: a decided point pair, a pending pair (its edge's
# side's CTI not past it), an open edge pair (an interval with an open edge), held rows.
STEPS = [
    ([("interval", 10, 11, "a", 1), ("interval", 20, 21, "b", 2),
      ("interval", 12, 30, "b", 3)], [5],
     [("edge_start", 0, MAX_TIME, "a", 10), ("edge_start", 15, MAX_TIME, "b", 11),
      ("edge_start", 1, MAX_TIME, "c", 12)], [16]),
    ([("interval", 25, 26, "a", 4), ("interval", 26, 40, "c", 5)], [24],
     [("edge_end", 15, 22, "b", 11), ("edge_start", 23, MAX_TIME, "b", 13)], [23]),
    ([("interval", 41, 45, "b", 6)], [40, MAX_TIME],
     [("edge_end", 0, 42, "a", 10)], [40, MAX_TIME]),
]


def _step(machine: QueryMachine, k: int) -> list[Any]:
    left, lctis, right, rctis = STEPS[k]
    rows = rows_of_step(*machine.step([_chunk(left, lctis), _chunk(right, rctis)]))
    return sorted(rows, key=repr)  # (a step releases in no particular order)


def write_fixture() -> None:
    """Write ``FIXTURE`` with the ``cti`` on the path (the previous release's)."""
    query = _query()
    machine = QueryMachine(query.node, query.inputs())
    _step(machine, 0)
    state = pickle.dumps(machine.state, protocol=pickle.HIGHEST_PROTOCOL)
    later = [_step(machine, k) for k in range(1, len(STEPS))]
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_bytes(pickle.dumps({"state": state, "later": later}))


def test_a_join_state_of_the_previous_release_resumes_with_its_output() -> None:
    saved = pickle.loads(FIXTURE.read_bytes())
    old = pickle.loads(saved["state"])
    assert any(isinstance(s, dict) and "sides" in s for s in old["nodes"])  # the old form
    query = _query()
    machine = QueryMachine(query.node, query.inputs(), old)
    later = []
    for k in range(1, len(STEPS)):
        later.append(_step(machine, k))
        machine = QueryMachine(query.node, query.inputs(), machine.state)  # as a shard does
    assert later == saved["later"]
    assert any(rows for rows in later)


def test_this_release_gives_the_same_output_from_scratch() -> None:
    """The fixture's later output is what this release gives without a checkpoint, too."""
    saved = pickle.loads(FIXTURE.read_bytes())
    query = _query()
    machine = QueryMachine(query.node, query.inputs())
    _step(machine, 0)
    assert [_step(machine, k) for k in range(1, len(STEPS))] == saved["later"]
