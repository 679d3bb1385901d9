"""A stateful function's state bytes (``cti.runtime.spark.state``): what is written is what is
read back, a checkpoint's plain pickles still load, and reference rows held in a shard's state
cost a fraction of their pickle."""

from __future__ import annotations

import pickle
from datetime import timedelta

import numpy as np
import pandas as pd
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from shard_runs import run_shards

from cti import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimeSettings,
    Application,
    CepStream,
    EdgeEvent,
    EventShape,
    PointEvent,
)
from cti.io.memory import MemoryInputAdapter, MemoryInputAdapterFactory
from cti.runtime.spark.state import MAGIC, dump_state, load_state

PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.text(max_size=20)
    | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(
        st.text(max_size=5) | st.integers(), inner, max_size=5) | st.tuples(inner, inner),
    max_leaves=30)


@settings(max_examples=examples(100), deadline=None)
@given(PLAIN, st.lists(st.integers(-2**63, 2**63 - 1), max_size=50))
def test_state_reads_back_as_written(value, numbers):
    state = {"value": value, "array": np.asarray(numbers, np.int64),
             "frame": pd.DataFrame({"n": np.asarray(numbers, np.int64),
                                    "text": [str(n) for n in numbers]})}
    blob = dump_state(state)
    assert blob.startswith(MAGIC)
    back = load_state(blob)
    assert back["value"] == value
    assert back["array"].dtype == np.int64 and back["array"].tolist() == numbers
    pd.testing.assert_frame_equal(back["frame"], state["frame"])


def test_a_plain_pickle_from_an_older_checkpoint_loads():
    state = {"ingress": {0: None}, "machine": {"cti": 5, "nodes": [[1, 2]]}}
    assert load_state(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)) == state
    assert load_state(bytearray(dump_state(state))) == state  # Spark may hand a bytearray


def test_reference_rows_in_a_shards_state_take_a_fraction_of_their_pickle():
    """A join holds its reference edges until they end (these never do): the state every
    micro-batch rewrites."""
    n = 5_000
    edges = [EdgeEvent.start_edge(1, {"plate": f"P{i:05d}", "owner": f"Owner number {i}",
                                      "expired": i % 3 == 0}) for i in range(n)]
    fast = [PointEvent(2 + i, {"plate": f"P{i * 7 % n:05d}"}) for i in range(200)]
    app = Application()
    s = CepStream.create("s", MemoryInputAdapterFactory(), fast, EventShape.POINT,
                         AdvanceTimeSettings(AdvanceTimeGenerationSettings(
                             10, timedelta(0), False)), application=app)
    r = CepStream.create("r", MemoryInputAdapterFactory(), edges, EventShape.EDGE,
                         AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("s")),
                         application=app)
    query = s.join(r, on="plate")
    adapters = {"s": MemoryInputAdapter(fast, EventShape.POINT),
                "r": MemoryInputAdapter(edges, EventShape.EDGE)}
    _, outs, _, states = run_shards(query, adapters, [{"r": [(0, n, True)],
                                                       "s": [(0, 200, True)]}], 1)
    assert len(outs[0][0].events)  # points met their reference edges
    plain = pickle.dumps(states[0], protocol=pickle.HIGHEST_PROTOCOL)
    assert len(plain) > 100 * n  # the reference rows are in the state
    assert len(dump_state(states[0])) < len(plain) / 4
