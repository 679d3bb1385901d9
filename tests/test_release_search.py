"""Which CTI releases each row of an operator's output (``QueryMachine._release``): the
search run by run where the rows come in a few rising runs of sync time, as one search per
row gives it."""

from __future__ import annotations

import numpy as np
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.operators.machine import _RELEASE_RUNS, _releasing


@settings(max_examples=examples(300), deadline=None)
@given(ctis=st.sets(st.integers(0, 30), min_size=1, max_size=6),
       runs=st.lists(st.lists(st.integers(-2, 33), max_size=30), max_size=_RELEASE_RUNS + 3),
       rising=st.booleans())
def test_each_rows_releasing_cti_is_one_search_per_rows(ctis, runs, rising):
    """Rows in runs of rising sync time (a window's results after the rows held from the step
    before; more runs than are searched run by run too), or in any order: each row's number
    is the first CTI above its sync time, ``len(ctis)`` where none is."""
    c = np.asarray(sorted(ctis), np.int64)
    sync = np.asarray([t for run in runs for t in (sorted(run) if rising else run)], np.int64)
    assert (_releasing(c, sync) == np.searchsorted(c, sync, side="right")).all()
