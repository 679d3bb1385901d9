"""The output rows' layouts (``cti.forms.layout``): a batch's columns read back as ``OutRow``
tuples column by column give what reading each row alone gives."""

from __future__ import annotations

import numpy as np
import pandas as pd
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.forms.layout import NULL_TIME, OUT_COLUMNS, out_row_from_values, out_rows_from_pandas

_VALUES = {
    "int": st.integers(0, 3),
    "long": st.sampled_from([NULL_TIME, -1, 0, 5, 2**62]),
    "string": st.sampled_from([None, float("nan"), "", "a", '{"x":1}', "caf\u00e9"]),
}


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.tuples(*(_VALUES[typ] for _, typ in OUT_COLUMNS)), max_size=12))
def test_rows_by_column_are_the_rows_one_by_one(rows):
    frame = pd.DataFrame({name: np.asarray([r[i] for r in rows],
                                           {"int": np.int32, "long": np.int64}.get(typ, object))
                          for i, (name, typ) in enumerate(OUT_COLUMNS)})
    got = out_rows_from_pandas(frame)
    want = [out_row_from_values(v) for v in zip(*(frame[name].tolist()
                                                  for name, _ in OUT_COLUMNS), strict=True)]
    assert got == want
    assert [[type(v) for v in r] for r in got] == [[type(v) for v in r] for r in want]
