"""Results whose payload texts an operator wrote as an Arrow column (a window of built-in
aggregates: ``json_text.object_texts``) keep it through the release buffer and into the output
rows, and meet payloads held as Python strings (earlier steps, other operators) unchanged."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.forms import frame
from cti.operators.output import step_table

TEXTS = st.lists(st.sampled_from(['{"a":1}', '{"a":2,"k":"x"}', '{}', '{"b":"\\u00e9"}']),
                 max_size=6)


def _frame(texts: list[str], arrow: bool, chunks: int = 1) -> pd.DataFrame:
    n = len(texts)
    if arrow:
        cut = n // 2 if chunks > 1 else n
        payload = pd.arrays.ArrowExtensionArray(pa.chunked_array(
            [pa.array(texts[:cut], pa.string()), pa.array(texts[cut:], pa.string())]))
    else:
        payload = np.asarray(texts, object)
    return frame.make(["point"] * n, np.arange(n), np.arange(n) + 1, payload, [""] * n)


@settings(max_examples=examples(60), deadline=None)
@given(parts=st.lists(st.tuples(TEXTS, st.booleans(), st.integers(1, 2)), min_size=1,
                      max_size=4))
def test_stacked_frames_keep_every_text_in_order(parts):
    frames = [_frame(texts, arrow, chunks) for texts, arrow, chunks in parts]
    stacked = frame.concat(frames)
    want = [t for texts, _, _ in parts for t in texts]
    assert stacked["payload"].tolist() == want
    if any(arrow and texts for texts, arrow, _ in parts):  # (Arrow stays Arrow)
        assert isinstance(stacked["payload"].dtype, pd.ArrowDtype)
    table = step_table(stacked.assign(release=np.full(len(stacked), 7, np.int64)), [7, 9])
    assert table.column("payload").to_pylist() == [*want, None, None]
    assert table.column("kind").to_pylist() == ["point"] * len(want) + ["cti", "cti"]


def test_a_released_block_of_arrow_texts_equals_the_same_as_python_strings():
    texts = ['{"count":2,"k":"b"}', '{"count":10,"k":"a"}', '{"count":1,"k":"a"}']
    events = _frame(texts, arrow=True, chunks=2)
    plain = _frame(texts, arrow=False)
    for f in (events, plain):
        f["release"] = np.full(len(f), 5, np.int64)
    assert step_table(events, [5]).equals(step_table(plain, [5]))
    assert frame.arrow_texts(events["payload"]).type == pa.string()
