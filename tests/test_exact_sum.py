"""A window's sum and average of a float field do not depend on how the input is cut into
micro-batches: the sum is kept exactly (``cti.operators.exact_sum``) and rounded once."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti import AdvanceTimeSettings, Application, CepStream, EventShape, PointEvent, agg, ticks
from cti.io.memory import MemoryInputAdapterFactory
from cti.operators import exact_sum
from cti.runtime.local import LocalRuntime

FLOATS = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [0.1, 0.2, 0.3, -0.1, 1e308, -1e308, 5e-324, -5e-324, 2.0**-1022, 1e-300, 74.4, 74.5])


@given(parts=st.lists(st.lists(FLOATS, max_size=8), min_size=1, max_size=5))
def test_limbs_add_up_to_the_correctly_rounded_sum(parts):
    """Partial sums of the parts, added in any order, round to ``math.fsum`` of all."""
    frames = [pd.DataFrame(exact_sum.limbs("s", np.asarray(p, np.float64))).sum().to_frame().T
              for p in parts]
    columns = set().union(*(f.columns for f in frames))
    lined = [exact_sum.with_columns(f, columns) for f in frames]
    summed = pd.concat([lined[i] for i in reversed(range(len(lined)))]).sum().to_frame().T
    exact = sum(map(Fraction, (v for p in parts for v in p)), Fraction(0))
    try:
        want = float(exact)  # correctly rounded
    except OverflowError:
        want = math.inf if exact > 0 else -math.inf
    assert exact_sum.total(summed, "s")[0] == want


def test_infinities_and_nulls():
    values = np.asarray([1.5, np.inf, np.nan, 2.0])
    frame = pd.DataFrame(exact_sum.limbs("s", values)).sum().to_frame().T
    assert exact_sum.total(frame, "s")[0] == np.inf
    with np.errstate(invalid="ignore"):  # inf + -inf: NaN, as float addition gives
        both = pd.DataFrame(exact_sum.limbs("s", np.asarray([np.inf, -np.inf]))).sum()
    both = both.to_frame().T
    assert np.isnan(exact_sum.total(both, "s")[0])
    nulls = pd.DataFrame(exact_sum.limbs("s", np.asarray([np.nan, np.nan]))).sum().to_frame().T
    assert exact_sum.total(nulls, "s")[0] == 0.0  # only nulls: a sum of nothing


@settings(max_examples=examples(40), deadline=None)
@given(values=st.lists(FLOATS.filter(lambda v: abs(v) < 1e300), min_size=1, max_size=40),
       sizes=st.lists(st.integers(1, 7), min_size=1, max_size=3))
def test_window_sums_of_floats_are_the_same_in_any_micro_batches(values, sizes):
    events = [PointEvent(t, {"k": "ab"[t % 2], "v": v}) for t, v in enumerate(values)]
    s = CepStream.create("s", MemoryInputAdapterFactory(), events, EventShape.POINT,
                         AdvanceTimeSettings.increasing_start_time(), application=Application())
    query = s.group_by("k").apply(lambda g: g.tumbling_window(ticks(10)).aggregate(
        total=agg.sum("v"), mean=agg.avg("v")))
    whole = query.collect(LocalRuntime())
    assert query.collect(LocalRuntime(batch_sizes=sizes)) == whole
    for e in whole:
        if hasattr(e, "payload"):
            mine = [v for t, v in enumerate(values)
                    if "ab"[t % 2] == e.payload["k"] and e.start - 10 <= t < e.start]
            assert e.payload["total"] == math.fsum(mine)
