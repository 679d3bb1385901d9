"""TopK's ranking of all complete windows at once (``cti.operators.ranking``) against the
per-window sort it replaced, kept here as the oracle: random windows with ties, mixed
directions, several fields, nulls and missing fields, numbers of mixed types (``1 == 1.0 ==
True``), texts, and values only the per-window sort orders (NaN, integers beyond 2**53,
lists, a number tied with a text: the fallback); the order-by values read from payload texts
one by one, by Arrow's JSON reader and from typed columns; the output payloads written
column-wise equal to those written one by one."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import test_operator_properties as props
from budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cti import Cti, CtiError, PointEvent, ticks
from cti.forms import frame
from cti.forms.rows import payload_from_json, payload_to_json
from cti.operators import plan, ranking, top_k
from cti.operators.top_k import Ranked

FIELDS = ("a", "b", "c")


def oracle(payloads: Sequence[dict[str, Any]], order_by: Sequence[tuple[str, str]],
           k: int) -> list[tuple[int, int]]:
    """The per-window sort TopK had: a stable sort by a comparison (nulls last either way,
    values that do not compare an error naming the field), SQL RANK, ranks <= k."""
    def compare(a: tuple, b: tuple) -> int:
        for (name, direction), x, y in zip(order_by, a, b, strict=True):
            if x is None or y is None:
                if x is None and y is None:
                    continue
                return 1 if x is None else -1
            try:
                if x == y:
                    continue
                before = x < y
            except TypeError:
                raise CtiError(f"field {name!r} does not compare") from None
            return (-1 if before else 1) * (-1 if direction == "desc" else 1)
        return 0

    values = [tuple(p.get(f) for f, _ in order_by) for p in payloads]
    order = sorted(range(len(payloads)), key=functools.cmp_to_key(
        lambda a, b: compare(values[a], values[b])))
    out, rank = [], 0
    for place, i in enumerate(order, 1):
        if place == 1 or compare(values[order[place - 2]], values[i]) != 0:
            rank = place
        if rank > k:
            break
        out.append((i, rank))
    return out


ORDERABLE = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from([0.5, 1.0, -0.0, 2.5]),
                      st.booleans(), st.sampled_from(["", "a", "b", "é", "B"]))
ODD = st.sampled_from([math.nan, 2 ** 60, 2 ** 60 + 1, [1], [0, 2]])


@st.composite
def windows(draw: st.DrawFn, odd: bool) -> dict[str, Any]:
    """Members of a few windows of two keys: lifetimes, payloads (a field may be missing),
    the order-by fields and directions, and k."""
    value = st.one_of(ORDERABLE, ODD) if odd else ORDERABLE
    typed = draw(st.booleans())  # (one JSON type per field: typed columns can hold them)
    kinds = {f: draw(st.sampled_from(["int", "float", "str", "bool"])) for f in FIELDS}
    of_kind = {"int": st.integers(-3, 3), "float": st.sampled_from([0.5, 1.0, -0.0, 2.5]),
               "str": st.sampled_from(["", "a", "b", "é"]), "bool": st.booleans()}
    n = draw(st.integers(1, 30))
    rows = []
    for _ in range(n):
        if typed:
            p = {f: draw(st.one_of(st.none(), of_kind[kinds[f]])) for f in FIELDS}
        else:
            p = {f: draw(value) for f in FIELDS if draw(st.integers(0, 5))}
        rows.append((draw(st.sampled_from(['["x"]', '["y"]'])), draw(st.integers(0, 2)),
                     draw(st.integers(0, 3)), draw(st.integers(4, 5)), payload_to_json(p)))
    fields = draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3, unique=True))
    order_by = tuple((f, draw(st.sampled_from(["asc", "desc"]))) for f in fields)
    return {"rows": rows, "order_by": order_by, "k": draw(st.integers(1, 4)),
            "typed": typed, "kinds": kinds}


def members_of(case: dict[str, Any], via: str) -> dict[str, np.ndarray]:
    """The members as a window keeps them, their values read ``via`` payload texts one by
    one, Arrow's JSON reader (256 rows or more: the case repeated in windows of its own) or
    typed columns."""
    rows = case["rows"]
    if via == "arrow":
        rows = [(key, k + 10 * copy, s, e, p) for copy in range(-(-256 // len(rows)))
                for key, k, s, e, p in rows]
    key, ks, start, end, payload = (list(c) for c in zip(*rows, strict=True))
    ev = frame.make(["interval"] * len(rows), start, end, payload, key)
    columns = None
    if via == "columns":
        types = {"int": pa.int64(), "float": pa.float64(), "str": pa.string(),
                 "bool": pa.bool_()}
        columns = {f: pa.array([payload_from_json(p).get(f) for p in payload],
                               types[case["kinds"][f]]) for f in FIELDS}
    values = ranking.order_values(ev, [f for f, _ in case["order_by"]], columns)
    members = {"key": np.asarray(key, object), "k": np.asarray(ks, np.int64),
               "start": np.asarray(start, np.int64), "end": np.asarray(end, np.int64),
               "payload": np.asarray(payload, object), **values}
    if columns:  # (the payloads' texts left out: the columns are the payloads)
        members["columns"] = pa.table(columns)
    return members


def expected(members: dict[str, np.ndarray], windows: list[tuple[str, int]],
             order_by: Sequence[tuple[str, str]], k: int) -> list[list[tuple[str, int]]]:
    """Each window's ranked members by the oracle over its events in (start, end, payload)
    order, as the window gives them."""
    out = []
    for key, kk in windows:  # (``payload``: the texts, also beside typed columns)
        at = np.flatnonzero((members["key"] == key) & (members["k"] == kk))
        events = sorted(zip(members["start"][at].tolist(), members["end"][at].tolist(),
                            members["payload"][at].tolist(), strict=True))
        texts = [e[2] for e in events]
        out.append([(texts[i], r) for i, r in oracle(
            [payload_from_json(t) for t in texts], order_by, k)])
    return out


def got(members: dict[str, np.ndarray], windows: list[tuple[str, int]],
        order_by: Sequence[tuple[str, str]], k: int) -> list[list[tuple[str, int]]]:
    ranked = Ranked(k, tuple(order_by), "rank")
    out = ranking.rank_windows(members, np.asarray([w[0] for w in windows], object),
                               np.asarray([w[1] for w in windows], np.int64), order_by, k,
                               ranked.ranked)
    pairs = list(zip(out.payload_texts().tolist(), out.ranks.tolist(), strict=True))
    ends = np.cumsum(out.counts).tolist()
    return [pairs[b:e] for b, e in zip([0, *ends[:-1]], ends, strict=True)]


def check(case: dict[str, Any], via: str, shuffle: st.DataObject) -> None:
    members = members_of(case, via)
    windows = sorted(set(zip(members["key"].tolist(), members["k"].tolist(), strict=True)))
    windows = shuffle.draw(st.permutations(windows))  # (any order of the windows)
    given = members
    if "columns" in members:
        given = {**members, "payload": np.empty(len(members["k"]), object)}
    try:
        want = expected(members, windows, case["order_by"], case["k"])
    except CtiError as exc:
        field = str(exc).split("field ")[1].split(" ")[0]
        with pytest.raises(CtiError, match=f"of field {field} do not compare"):
            got(given, windows, case["order_by"], case["k"])
        return
    assert got(given, windows, case["order_by"], case["k"]) == want


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=windows(odd=False), via=st.sampled_from(["rows", "arrow", "columns"]),
       data=st.data())
def test_ranks_equal_the_per_window_sort(case, via, data):
    if via == "columns" and not case["typed"]:
        via = "rows"
    check(case, via, data)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=windows(odd=True), via=st.sampled_from(["rows", "arrow"]), data=st.data())
def test_values_the_codes_cannot_order_fall_back_to_the_per_window_sort(case, via, data):
    check(case, via, data)


PAYLOAD = st.dictionaries(st.sampled_from(["a", "b", "g", "rank", "é", "z"]), st.one_of(
    st.none(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(), st.text(max_size=4), st.lists(st.integers(0, 3), max_size=2),
    st.just("2020-01-01T00:00:00")), max_size=4)


@settings(max_examples=examples(200), deadline=None)
@given(payloads=st.lists(PAYLOAD, min_size=1, max_size=20), uniform=st.booleans(),
       group=st.sampled_from([None, "g", "a"]))
def test_payloads_written_column_wise_equal_those_written_one_by_one(payloads, uniform,
                                                                     group):
    """Where ``_column_payloads`` writes them at all (every field read back exactly)."""
    if uniform:  # (one shape and type per field: the column-wise case)
        payloads = [{f: i if isinstance(v, int) else v for f, v in payloads[0].items()}
                    for i in range(len(payloads))]
    texts = np.asarray([payload_to_json(p) for p in payloads], object)
    ranked = ranking.Ranking(np.asarray([len(texts)]), texts, np.arange(1, len(texts) + 1))
    node = plan.TopK(None, None, 3, (("a", "asc"),), "rank")  # type: ignore[arg-type]
    keys = np.asarray(["[7]"] * len(texts), object)
    slow = top_k._payloads(node, texts, ranked.ranks, keys, group)
    fast = top_k._column_payloads(node, texts, ranked.ranks, keys, group)
    if fast is not None:
        assert list(fast) == slow


@settings(max_examples=examples(100), deadline=None)
@given(columns=st.fixed_dictionaries({}, optional={
    "a": st.lists(st.one_of(st.none(), st.integers(-2 ** 63, 2 ** 63 - 1))),
    "g": st.lists(st.one_of(st.none(), st.floats())),
    "rank": st.lists(st.one_of(st.none(), st.booleans())),
    "z": st.lists(st.one_of(st.none(), st.text(max_size=3)))}), rows=st.integers(1, 6),
    group=st.sampled_from([None, "g"]))
def test_payloads_written_from_typed_columns_equal_those_written_one_by_one(columns, rows,
                                                                            group):
    types = {"a": pa.int64(), "g": pa.float64(), "rank": pa.bool_(), "z": pa.string()}
    table = pa.table({name: pa.array((values * rows)[:rows] if values else [None] * rows,
                                     types[name]) for name, values in columns.items()})
    if not table.num_columns:
        table = pa.table({"a": pa.array([1] * rows)})
    ranked = ranking.Ranking(np.asarray([rows]), None, np.arange(1, rows + 1), table)
    node = plan.TopK(None, None, 3, (("a", "asc"),), "rank")  # type: ignore[arg-type]
    keys = np.asarray(["[7]"] * rows, object)
    fast = top_k._typed_payloads(node, ranked, group)
    if group is not None and group not in table.column_names:
        assert fast is None
        return
    assert list(fast) == top_k._payloads(node, ranked.payload_texts(), ranked.ranks, keys,
                                         group)


def test_nan_and_mixed_types_rank_through_the_engine_as_before():
    """End to end: NaN (the per-window sort's order) in one window, 1, 1.0 and True tied and
    -0.0 and 0 tied in another, texts in a third; nulls last. (Each window's members: the
    output adapter orders events of one time its own way; the order within a step is
    ``rank_windows``', checked above.)"""
    items = [PointEvent(1, {"v": 2.0}), PointEvent(2, {"v": math.nan}),
             PointEvent(3, {"v": 1}), PointEvent(11, {"v": 1.0}), PointEvent(12, {"v": True}),
             PointEvent(13, {"v": 1}), PointEvent(14, {"v": -0.0}), PointEvent(15, {"v": 0}),
             PointEvent(21, {"v": "b"}), PointEvent(22, {"v": None}),
             PointEvent(23, {"v": "a"})]
    s = props.one_stream(items)
    out = props.run_items(s.tumbling_window(ticks(10)).top_k(2, [("v", "desc")]))
    by_end: dict[Any, list] = {}  # (each window's output: a point at its end)
    for e in out:
        if not isinstance(e, Cti):
            by_end.setdefault(e.start, []).append(e.payload)
    by_window = {10 * i: by_end[end] for i, end in enumerate(sorted(by_end))}
    assert len(by_window) == 3
    for start, window in by_window.items():
        members = [i.payload for i in items if start <= i.start < start + 10]
        texts = [payload_to_json(p) for p in members]  # (each at its own time: time order)
        want = [{**payload_from_json(texts[i]), "rank": r}
                for i, r in oracle(members, (("v", "desc"),), 2)]
        assert sorted(map(payload_to_json, window)) == sorted(map(payload_to_json, want))
    assert sorted(map(payload_to_json, by_window[10])) == [
        '{"rank":1,"v":1.0}', '{"rank":1,"v":1}', '{"rank":1,"v":true}']


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.integers(0, 50), unique=True),
       st.lists(st.integers(0, 60), max_size=40), st.sampled_from([1, 10 ** 9]))
def test_window_positions_by_table_or_search_are_each_ones_place(distinct, wanted, scale):
    """``_positions``: each wanted value's place among the distinct ones (-1: absent), by its
    table (values near as many as there are: ``scale`` 1) and by its search (spread wide)."""
    values = np.asarray(distinct, np.int64) * scale
    asked = np.asarray(wanted, np.int64) * scale
    place = {v: i for i, v in enumerate(values.tolist())}
    got = ranking._positions(values, asked)
    assert got.tolist() == [place.get(v, -1) for v in asked.tolist()]


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.one_of(st.integers(-3000, 3000).map(float), st.sampled_from(
    [0.5, -0.0, 0.0, 2.0 ** 60, -(2.0 ** 60), math.inf, -math.inf])), min_size=1))
def test_number_keys_order_as_the_numbers_do(numbers):
    """``_number_key``: equal numbers one key, smaller ones a smaller key, within its bound,
    whether by offsets (whole numbers near together) or by places among the distinct ones."""
    num = np.asarray(numbers, np.float64)
    key, bound = ranking._number_key(num)
    assert key.min() >= 0 and key.max() < bound
    for i in range(len(num)):
        assert ((key == key[i]) == (num == num[i])).all()
        assert ((key < key[i]) == (num < num[i])).all()


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(-3, 3), st.integers(0, 2)),
                max_size=60))
def test_members_by_packed_key_then_times_are_the_lexsorts_order(rows):
    """``_by_packed``: one sort of the packed key, its ties by start and end, is
    ``np.lexsort``'s order, but for members tied on all three (in some order: ``_sorted``
    sorts those again with their texts)."""
    packed, start, end = (np.asarray([r[i] for r in rows], np.int64) for i in range(3))
    got = ranking._by_packed(packed, [end, start])
    want = np.lexsort([end, start, packed])
    assert sorted(got.tolist()) == list(range(len(rows)))
    assert [rows[i] for i in got] == [rows[i] for i in want]
    if len(set(rows)) == len(rows):
        assert got.tolist() == want.tolist()


@settings(max_examples=examples(300), deadline=None)
@given(k=st.integers(1, 5), windows=st.integers(1, 6), data=st.data())
def test_the_members_kept_to_rank_are_those_at_or_below_their_windows_kth_least(k, windows,
                                                                                data):
    """``_best_only`` against each window's sorted keys: the members whose key is no greater
    than their window's ``k``-th least (ties at the cut kept), whatever order the members
    come in and however the bound of the k-th least falls; None only where it keeps more
    than half or no window has more than ``k`` members."""
    n = data.draw(st.integers(0, 80))
    win = np.asarray(data.draw(st.lists(st.integers(0, windows - 1), min_size=n, max_size=n)),
                     np.int64)
    value = np.asarray(data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)), np.int64)
    packed = win * 7 + value
    want = []
    for w in range(windows):
        mine = np.flatnonzero(win == w)
        if len(mine):
            kth = np.sort(value[mine])[min(len(mine), k) - 1]
            want += mine[value[mine] <= kth].tolist()
    got = ranking._best_only([packed], win, [np.full(n, ranking.NUMBER, np.int8)], windows, k)
    if got is None:
        assert not n or np.bincount(win).max() <= k or 2 * len(want) > n
    else:
        assert sorted(got.tolist()) == sorted(want)
