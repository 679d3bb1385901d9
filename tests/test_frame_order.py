"""The stable orders of ``cti.forms.frame``: the same permutation as numpy's stable argsort,
ties kept in place, over narrow and wide spans of values."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.forms import frame


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(-(1 << 62), 1 << 62), max_size=60),
       narrow=st.sampled_from([None, 3, 1 << 16, (1 << 32) - 1]))
def test_orders_equal_numpys_stable_argsort(values, narrow):
    """``narrow``: values folded into that span (ties, offsets of 16 and 32 bits)."""
    v = np.asarray(values, np.int64)
    if narrow is not None:
        v = (1 << 40) + v % (narrow + 1)
    want = np.argsort(v, kind="stable")
    assert (frame.radix_order(v) == want).all()
    assert (frame.stable_order(v) == want).all()
