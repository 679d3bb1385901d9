"""The stable orders of ``cti.forms.frame``: the same permutation as numpy's stable argsort,
ties kept in place, over narrow and wide spans of values."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.forms import frame


@settings(max_examples=examples(200), deadline=None)
@given(values=st.lists(st.integers(-(1 << 62), 1 << 62), max_size=60),
       narrow=st.sampled_from([None, 3, 1 << 16, (1 << 32) - 1]))
def test_orders_equal_numpys_stable_argsort(values, narrow):
    """``narrow``: values folded into that span (ties, offsets of 16 and 32 bits)."""
    v = np.asarray(values, np.int64)
    if narrow is not None:
        v = (1 << 40) + v % (narrow + 1)
    want = np.argsort(v, kind="stable")
    assert (frame.stable_order(v) == want).all()


@settings(max_examples=examples(200), deadline=None)
@given(first=st.lists(st.integers(0, 20), max_size=60),
       second=st.lists(st.integers(0, 20), max_size=60), long_second=st.booleans())
def test_two_rising_runs_merge_as_numpys_stable_argsort(first, second, long_second):
    """Values that rise but for one fall (a step's results, then its CTIs) are merged by a
    search: the same permutation as the stable sort, ties between the runs first-run first;
    a second run longer than the merge takes is sorted as any other values are."""
    tail = sorted(second) * (frame._MERGED_MOST // max(len(second), 1) + 1 if long_second
                             and second else 1)
    v = np.asarray(sorted(first) + tail, np.int64)
    assert (frame.stable_order(v) == np.argsort(v, kind="stable")).all()


@settings(max_examples=examples(300), deadline=None)
@given(before=st.lists(st.integers(0, 30), max_size=12),
       run=st.lists(st.integers(0, 30), max_size=80),
       after=st.lists(st.integers(0, 30), max_size=12))
def test_few_rows_around_a_rising_run_merge_as_numpys_stable_argsort(before, run, after):
    """A long rising run with a few rows in any order before and after it (a release's held
    rows ahead of a step's results, its CTIs behind): the same permutation as the stable
    sort, ties between the run and the rows before it those rows first, after it last."""
    v = np.asarray(before + sorted(run) + after, np.int64)
    assert (frame.stable_order(v) == np.argsort(v, kind="stable")).all()


def test_constant_columns_stack_as_views_and_others_as_copies():
    """Columns of one value that ``frame.repeated`` keeps (kinds, empty keys) stack into a
    view of it, also with a few rows of that value copied out (a release's held rows); a
    column of another value, or one written into, is stacked as values."""
    views = [frame.repeated(5, "interval"), frame.repeated(3, "interval")[1:]]
    copied = frame.filled(2, "interval")
    stacked = frame.stack([frame.framed({"kind": c}) for c in [*views, copied]])["kind"]
    assert stacked.tolist() == ["interval"] * 9
    assert not stacked.to_numpy().flags.writeable  # (a view: writing into it fails loudly)
    mixed = frame.stack([frame.framed({"kind": views[0]}),
                         frame.framed({"kind": frame.filled(2, "point")})])["kind"]
    assert mixed.tolist() == ["interval"] * 5 + ["point"] * 2
    assert mixed.to_numpy().flags.writeable
    text = frame.repeated_text(4, "point")
    assert text.to_pylist() == ["point"] * 4 and text.type == pa.string()


@settings(max_examples=examples(200), deadline=None)
@given(starts=st.lists(st.integers(0, 12), max_size=40), data=st.data(),
       constant=st.booleans())
def test_a_snapshots_endpoints_sort_as_numpys_stable_argsort(starts, data, constant):
    """The snapshot's endpoints (the rows' starts, then their ends) by time: the same
    permutation as numpy's stable sort, where the ends come in the starts' order (one
    duration: ties between rows alike) but for the first rows (held from the step before,
    their starts raised to the cut), and where they do not (an edge still open ends at
    MAX_TIME)."""
    from cti.operators.snapshot import _endpoints_by_time

    lo = np.asarray(starts, np.int64)
    if constant:
        end = lo + 5
        # (rows held from the step before: their lo raised to the cut, their ends not)
        lo = np.maximum(lo, np.where(np.arange(len(lo)) < data.draw(
            st.integers(0, len(lo))), data.draw(st.integers(0, 12)), 0))
    else:
        end = lo + np.asarray(data.draw(st.lists(st.sampled_from([1, 2, 7, (1 << 63) - 20]),
                                                 min_size=len(lo), max_size=len(lo))),
                              np.int64)
        end = np.where(end < lo, np.iinfo(np.int64).max, end)
    times = np.concatenate([lo, end])
    assert (_endpoints_by_time(times) == np.argsort(times, kind="stable")).all()


@settings(max_examples=examples(200), deadline=None)
@given(values=st.lists(st.integers(0, 12), max_size=50), data=st.data())
def test_an_order_from_one_that_nearly_sorts_is_numpys_stable_argsort(values, data):
    """``frame.stable_order_near``: from an order that sorts the values but for some rows
    (the snapshot's ends in its starts' order, its held rows' starts raised), from another
    value's stable order, or from any permutation: numpy's stable sort, ties by position."""
    v = np.asarray(values, np.int64)
    how = data.draw(st.sampled_from(["moved", "other", "any"]))
    if how == "moved":  # (the first rows' values raised: out of place in the order)
        raised = v.copy()
        raised[:data.draw(st.integers(0, len(v)))] += data.draw(st.integers(0, 6))
        near = np.argsort(v, kind="stable")
        v = raised
    elif how == "other":
        near = np.argsort(np.asarray(data.draw(st.lists(st.integers(0, 5), min_size=len(v),
                                                        max_size=len(v))), np.int64),
                          kind="stable")
    else:
        near = np.asarray(data.draw(st.permutations(range(len(v)))), np.int64)
    assert (frame.stable_order_near(v, near) == np.argsort(v, kind="stable")).all()


@settings(max_examples=examples(100), deadline=None)
@given(chunks=st.lists(st.lists(st.sampled_from(["a", "bb", "", "c"]), max_size=6), min_size=1,
                       max_size=5), encoded=st.booleans(), data=st.data())
def test_a_few_rows_taken_chunk_by_chunk_are_arrows_take(chunks, encoded, data):
    """``frame.take_few`` of a chunked column and of a table of one: the rows Arrow's take
    gives, in the order asked (repeats and any order), dictionary-encoded chunks too."""
    import pyarrow as pa

    parts = [pa.array(c, pa.string()) for c in chunks]
    if encoded:
        parts = [p.dictionary_encode() for p in parts]
    column = pa.chunked_array(parts, type=parts[0].type)
    n = len(column)
    at = np.asarray(data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=12)
                              if n else st.just([])), np.int64)
    want = column.combine_chunks().take(pa.array(at, pa.int64())).to_pylist()
    assert frame.take_few(column, at).to_pylist() == want
    table = pa.table({"x": column, "i": pa.chunked_array(
        [pa.array(np.arange(len(p)) + sum(map(len, parts[:j]))) for j, p in enumerate(parts)])})
    assert frame.take_few(table, at).column("x").to_pylist() == want
    assert frame.take_few(table, at).column("i").to_pylist() == at.tolist()
