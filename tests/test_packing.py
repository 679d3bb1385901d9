"""Routing in the source (``cti.runtime.spark.packing``): the shard of a key never depends on
the piece of input it is read in, and each shard gets the payloads it needs."""

from __future__ import annotations

import json
from unittest import mock

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.adapters import FIELD_COLUMN, field_marker
from cti.engine.batch import field_texts, key_shards, routed, text_hashes
from cti.engine.route import QueryRoute
from cti.forms.json_text import frame_payloads, repeats
from cti.forms.rows import payload_to_json
from cti.runtime.spark.packing import pack, unpack
from cti.runtime.spark.schema import IN_SCHEMA, arrow_schema
from cti.runtime.spark.source import MIN_PIECE, READ_CHUNK, cuts

VALUES = st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b", "é", 'q"']), st.booleans(),
                   st.sampled_from([1.0, 2.5]), st.none())


def _payloads(values: list) -> pa.Array:
    return pa.array([json.dumps({"k": v, "n": i}, sort_keys=True)
                     for i, v in enumerate(values)], pa.string())


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(VALUES, min_size=1, max_size=40), st.lists(VALUES, max_size=40),
       st.integers(2, 5))
def test_a_value_has_one_shard_whatever_piece_it_is_read_in(piece, other, shards):
    alone = key_shards(_payloads(piece), "k", shards)
    mixed = key_shards(_payloads(other + piece), "k", shards)[len(other):]
    one_by_one = [key_shards(_payloads([v]), "k", shards)[0] for v in piece]
    assert list(alone) == list(mixed) == one_by_one
    assert ((alone >= 0) & (alone < shards)).all()


def test_values_spread_over_shards():
    got = key_shards(_payloads([f"key{i}" for i in range(1000)]), "k", 4)
    assert min(np.bincount(got, minlength=4)) > 150
    for shards in (2, 3, 8):  # texts that differ in one byte, as keys often do
        got = key_shards(_payloads(list(range(20_000))), "k", shards)
        assert np.bincount(got, minlength=shards).min() > 20_000 / shards * 0.9


def _text_hash(text: str) -> int:
    """``text_hashes`` written out for one text, byte by byte."""
    m, mask = 0x9E3779B97F4A7C15, 2**64 - 1
    data = text.encode()
    h = (len(data) + sum(b * pow(m, j + 1, 2**64) for j, b in enumerate(data))) & mask
    for shift, factor in ((33, 0xFF51AFD7ED558CCD), (33, 0xC4CEB9FE1A85EC53), (33, 1)):
        h = ((h ^ (h >> shift)) * factor) & mask
    return h


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.text(max_size=12), max_size=30), st.integers(0, 5), st.integers(0, 5))
def test_text_hashes_are_the_written_out_hash_of_each_text(texts, head, tail):
    """Vectorised over Arrow's buffers, of a slice too, empty texts and multi-byte characters
    included: the same value as byte by byte."""
    whole = pa.array(["pad"] * head + texts + ["x"] * tail, pa.string())
    got = text_hashes(whole.slice(head, len(texts)))
    assert got.tolist() == [_text_hash(t) for t in texts]


def _rows(kinds: list[str], payloads: list[str | None], stream: int = 0) -> pa.Table:
    n = len(kinds)
    return pa.table({
        "stream": np.full(n, stream, np.int32), "seq": np.arange(n, dtype=np.int64),
        "arrival": np.zeros(n, np.int64), "kind": kinds, "start": np.arange(n, dtype=np.int64),
        "end": np.zeros(n, np.int64), "payload": payloads, "error": [None] * n,
        "partition": [None] * n}, schema=arrow_schema(IN_SCHEMA))


def test_each_shard_gets_every_row_and_only_its_own_payloads():
    payloads = [json.dumps({"k": f"v{i % 7}"}) for i in range(30)]
    rows = _rows(["point"] * 30 + ["cti"], [*payloads, None])
    route = QueryRoute(0, 3, {(0, 0): "k"}, with_inputs=False)
    parts = {shard: unpack_one(pack(part, 0)) for shard, part in routed(route, 0, rows)}
    assert sorted(parts) == [0, 1, 2]
    owners = key_shards(pa.array(payloads), "k", 3)
    for shard, part in parts.items():
        assert list(part["seq"]) == list(range(31))  # every row, CTIs too
        assert list(part["own"][:30]) == list(owners)
        kept = [p is not None for p in part["payload"][:30]]
        assert kept == [o == shard for o in owners]


def test_a_row_the_adapter_could_not_read_goes_to_every_shard_with_its_raw_text():
    """Its payload is the raw input, not JSON: it has no owner, every shard judges it alike
    (dead-lettered or raised) and shard 0 reports it."""
    payloads = [json.dumps({"k": f"v{i}"}) for i in range(8)]
    rows = _rows(["point"] * 4 + ["invalid"] + ["point"] * 4,
                 [*payloads[:4], "ts=,k=v9", *payloads[4:]])
    route = QueryRoute(0, 3, {(0, 0): "k"}, with_inputs=False)
    for _, part in routed(route, 0, rows):
        assert part.column("own")[4].as_py() == -1
        assert part.column("payload")[4].as_py() == "ts=,k=v9"
        assert part.column("own").to_pylist()[:4] == list(key_shards(
            pa.array(payloads[:4]), "k", 3))

def test_edges_go_to_their_owner_substreams_keys_to_all_and_passing_shard_all():
    payloads = [json.dumps({"k": i % 3}) for i in range(12)]
    rows = _rows(["edge_start", "edge_end"] * 6, payloads)
    owners = key_shards(pa.array(payloads), "k", 2)
    edges = QueryRoute(0, 2, {(0, 0): "k"}, with_inputs=False)
    for shard, part in routed(edges, 0, rows):
        assert part.column("seq").to_pylist() == list(range(12))  # every row's times
        assert part.column("payload").is_valid().to_pylist() == list(owners == shard)
    keyed = QueryRoute(0, 2, {(0, 0): "k"}, with_inputs=False, substreams={(0, 0): "d"})
    full = [json.dumps({"d": i % 4, "k": i % 3, "v": "x" * i}, separators=(",", ":"))
            for i in range(12)]
    for shard, part in routed(keyed, 0, _rows(["point"] * 12, full)):
        assert part.column("own").to_pylist() == list(owners)
        # its own events whole; of the others, the substream key and the spreading key
        assert part.column("payload").to_pylist() == [
            p if o == shard else json.dumps({"d": i % 4, "k": i % 3}, separators=(",", ":"))
            for i, (p, o) in enumerate(zip(full, owners, strict=True))]
    passing = QueryRoute(0, 2, {(0, 0): "k"}, with_inputs=True)
    shard0 = dict(routed(passing, 0, _rows(["point"] * 12, payloads)))[0]
    assert shard0.column("payload").null_count == 0


def unpack_one(blob: bytes, first_seq: int = 0) -> pd.DataFrame:
    return unpack(pd.DataFrame({"group": [0], "seq": [first_seq], "blob": [blob]}))


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 10**6), st.lists(st.integers(0, 3), max_size=30),
       st.lists(st.sampled_from(["point", "interval", "cti", "eos", "invalid"]), min_size=30,
                max_size=30))
def test_packed_rows_unpack_to_the_same_rows(first, steps, kinds):
    """Whether the sequence numbers count up (left out of the pack) or not (kept)."""
    n = len(steps)
    seq = first + np.cumsum(steps, dtype=np.int64)  # from `first` on, or not
    table = _rows(kinds[:n], [json.dumps({"k": i}) for i in range(n)]).set_column(
        1, "seq", pa.array(seq))
    table = table.append_column("own", pa.array(np.zeros(n, np.int32)))
    got = unpack_one(pack(table, first), first)
    got = got.drop(columns=["group"])
    want = table.to_pandas()
    assert got.columns.tolist() == want.columns.tolist()
    assert got.to_dict("list") == want.to_dict("list")


@pytest.mark.parametrize("distinct", [3, 20_000])
def test_payloads_unpack_to_their_texts_whether_they_repeat_or_not(distinct):
    """Payloads become Python strings with pandas' deduplication where a sample of them
    repeats (3 distinct texts) and without it where not (all distinct): the same texts."""
    n = 20_000
    payloads = [None if i % 3 == 0 else json.dumps({"k": i % distinct}) for i in range(n)]
    table = _rows(["point"] * n, payloads).append_column("own", pa.array(np.zeros(n, np.int32)))
    assert repeats(table.column("payload")) == (distinct == 3)
    got = unpack_one(pack(table, 0))["payload"]
    assert got.dtype == object and got.tolist() == payloads


# A typed payload column's type and its values (``cti.adapters.FIELD_COLUMN``).
TYPED = {pa.int64(): st.integers(-3, 3), pa.string(): st.sampled_from(["a", "b", "é", 'q"']),
         pa.bool_(): st.booleans(), pa.float64(): st.sampled_from([1.0, 2.5, -0.0])}


@st.composite
def typed_values(draw, min_size=1, max_size=30):
    """A typed column's type and values (nulls among them), and which rows have them."""
    kind = draw(st.sampled_from(sorted(TYPED, key=str)))
    values = draw(st.lists(st.none() | TYPED[kind], min_size=min_size, max_size=max_size))
    given = draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values)))
    return kind, values, given


@settings(max_examples=examples(60), deadline=None)
@given(typed_values(), st.integers(2, 4))
def test_a_shard_gets_the_typed_columns_of_its_own_events(typed, shards):
    """Where the adapter gives typed payload columns (and no text: the columns are the
    payload), each shard's own events carry them through the pack, and no other row does;
    the events go where their payloads send them, and their texts are written back exactly."""
    kind, values, given = typed
    n = len(values)
    texts = [payload_to_json(json.loads(t)) for t in _payloads(values).to_pylist()]
    marker = field_marker(["k", "n"])
    rows = _rows(["point"] * n + ["cti"], [None if g else t for t, g in zip(
        texts, given, strict=True)] + [None])
    rows = rows.append_column(FIELD_COLUMN, pa.array([marker if g else None for g in given]
                                                     + [None], pa.string())
                              ).append_column(FIELD_COLUMN + "k", pa.array([*values, None], kind)
                                              ).append_column(FIELD_COLUMN + "n", pa.array(
                                                  [*range(n), None], pa.int64()))
    route = QueryRoute(0, shards, {(0, 0): "k"}, with_inputs=False)
    owners = key_shards(_payloads(values), "k", shards)
    for shard, part in routed(route, 0, rows):
        got = unpack_one(pack(part, 0))
        mine = [o == shard for o in owners] + [False]
        assert (got["own"].to_numpy()[:n] == owners).all()
        marks = pa.array(got[FIELD_COLUMN].array).to_pylist()
        assert [marker if g and own else None for g, own in zip(
            [*given, False], mine, strict=True)] == marks
        assert frame_payloads(got).tolist()[:n] == [t if own else None for t, own in zip(
            texts, mine[:n], strict=True)]
        column = pa.array(got[FIELD_COLUMN + "k"].array)
        assert column.type == kind
        assert column.to_pylist() == [v if own else None for v, own in zip(
            [*values, None], mine, strict=True)]


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(0, 10**7), st.integers(0, 3 * 10**6), st.integers(1, 8))
def test_a_range_is_cut_into_bounded_pieces_that_fill_the_cores(start, n, cores):
    at = cuts(start, start + n, cores)
    sizes = np.diff([*at, start + n])
    assert at[0] == start and list(at) == sorted(set(at))
    assert n == 0 or (sizes > 0).all()
    assert sizes.max(initial=0) <= READ_CHUNK
    if n >= cores * MIN_PIECE:  # enough rows to keep every core busy
        assert len(at) % cores == 0
    if len(at) > 1:  # no piece smaller than needed, and pieces of equal size
        assert sizes.min() >= min(MIN_PIECE, n // len(at))
        assert sizes.max() - sizes.min() <= 1


@settings(max_examples=examples(60), deadline=None)
@given(typed_values(max_size=40), st.integers(2, 5))
def test_a_typed_columns_texts_give_the_shards_the_payloads_give(typed, shards):
    """The JSON texts of a typed column's values (``field_texts``: ``json.dumps``'s, null
    where not given) hash each event to the shard its payload does."""
    kind, values, given = typed
    texts = field_texts(pa.array(values, kind), np.asarray(given))
    assert [None if t is None else json.loads(t) for t in texts.to_pylist()] == [
        v if g else None for v, g in zip(values, given, strict=True)]
    assert [t for t, g in zip(texts.to_pylist(), given, strict=True) if g] == [
        json.dumps(v) for v, g in zip(values, given, strict=True) if g]
    payloads = _payloads(values)
    assert list(key_shards(payloads, "k", shards, texts)) == list(
        key_shards(payloads, "k", shards))


def test_sequence_numbers_that_count_up_from_the_first_are_left_out():
    table = _rows(["point"] * 5, [json.dumps({"k": i}) for i in range(5)])
    table = table.set_column(1, "seq", pa.array(np.arange(7, 12, dtype=np.int64))).append_column(
        "own", pa.array(np.zeros(5, np.int32)))
    assert "seq" not in pa.ipc.open_stream(pack(table, 7)).schema.names
    assert list(unpack_one(pack(table, 7), 7)["seq"]) == list(range(7, 12))
    # Otherwise as 32-bit steps (a shard's own events and the generation points after them),
    # or whole where a step does not fit.
    assert "seq_step" in pa.ipc.open_stream(pack(table, 6)).schema.names
    jumps = np.array([7, 9, 30, 8, 2**33], np.int64)
    for seq, column in ((jumps[:4], "seq_step"), (jumps, "seq")):
        part = table.slice(0, len(seq)).set_column(1, "seq", pa.array(seq))
        blob = pack(part, 7)
        assert column in pa.ipc.open_stream(blob).schema.names
        assert list(unpack_one(blob, 7)["seq"]) == list(seq)


OUT_ROWS = st.lists(st.tuples(st.integers(0, 5), st.sampled_from(
    ["point", "interval", "edge_start", "edge_end"]), st.integers(-3, 3), st.integers(0, 4),
    st.sampled_from(['{"a":1}', '{"a":2}', '{"b":"x"}', "{}"])), max_size=25)


@settings(max_examples=examples(60), deadline=None)
@given(OUT_ROWS, st.lists(st.integers(0, 6), max_size=3, unique=True), st.randoms())
def test_packed_output_unpacks_to_the_rows_and_ctis_and_orders_as_the_frame_does(
        rows, ctis, rnd):
    """A shard's released events and CTIs, packed into one blob (or none when there are none),
    come back as the same rows, CTI rows included, in output order; ordered as an Arrow table
    they come out as ``ordered`` puts the frame, and as the documented order does, whatever
    order the rows were released in."""
    from cti.operators.output import COLUMNS, OUTPUT_ARROW, ordered, ordered_table
    from cti.runtime.spark.packing import pack_output, unpack_output

    events = pd.DataFrame([(r, k, s, s + d, p) for r, k, s, d, p in rows],
                          columns=list(COLUMNS))
    blob = pack_output(events, ctis)
    assert (blob is None) == (not rows and not ctis)
    got = unpack_output([blob] if blob is not None else []).to_pandas()
    want = [*map(tuple, events.itertuples(index=False)), *((c, "cti", c, c, None) for c in ctis)]
    in_order = ordered(pd.DataFrame(want, columns=list(COLUMNS)))  # (sorted by the shard)
    assert list(got.itertuples(index=False, name=None)) == list(
        in_order.itertuples(index=False, name=None))
    shuffled = want[:]
    rnd.shuffle(shuffled)
    frame_rows = pd.DataFrame(shuffled, columns=list(COLUMNS))
    by_arrow = ordered_table(pa.Table.from_pandas(frame_rows, schema=OUTPUT_ARROW,
                                                  preserve_index=False)).to_pandas()
    assert by_arrow.to_dict("list") == ordered(frame_rows).to_dict("list")
    rank = {"point": 0, "interval": 1, "edge_end": 2, "edge_start": 3}

    def order(row):  # docs/operators.md: release; sync, kind, start, end, payload; the CTI
        r, k, s, e, p = row
        if k == "cti":
            return (r, True)
        return (r, False, e if k == "edge_end" else s, rank[k], s, e, p)

    assert list(by_arrow.itertuples(index=False, name=None)) == sorted(shuffled, key=order)


SYNC_ROWS = st.lists(st.tuples(st.sampled_from(
    ["point", "interval", "edge_start", "edge_end"]), st.integers(-3, 9), st.integers(0, 3),
    st.sampled_from(['{"a":1}', '{"a":2}', '{"b":"x"}', "{}", None])), max_size=40)


@settings(max_examples=examples(80), deadline=None)
@given(SYNC_ROWS, st.lists(st.integers(-2, 12), max_size=4, unique=True), st.randoms(),
       st.booleans())
def test_output_order_is_arrows_stable_sort_of_the_keys(rows, ctis, rnd, released):
    """``output._order`` is Arrow's stable sort of the output keys, ties (equal rows, null
    payloads) kept as they came: where each event's release is the first CTI above its sync
    time, as a machine releases them (then by the sync-time path, ``_by_sync``), and where
    releases are anything (then mostly by Arrow's sort)."""
    import pyarrow.compute as pc

    from cti.operators import output
    from cti.operators.output import OUTPUT_ARROW, _by_sync, _order, _sort_keys

    cs = sorted(ctis) or [20]  # (released: by the first CTI above the sync time, else 99)
    out = []
    for kind, s, d, p in rows:
        sync = s + d if kind == "edge_end" else s
        release = next((c for c in cs if c > sync), 99) if released else rnd.choice(cs)
        out.append((release, kind, s, s + d, p))
    out += [(c, "cti", c, c, None) for c in ctis]
    rnd.shuffle(out)
    table = pa.Table.from_pylist([dict(zip(OUTPUT_ARROW.names, r, strict=True)) for r in out],
                                 schema=OUTPUT_ARROW)
    keys = _sort_keys(table)
    want = pc.sort_indices(keys, sort_keys=[(c, "ascending") for c in keys.column_names])
    in_order = table.take(want)  # (runs of ties in order already: left as they are)
    # (tied neighbours compared pair by pair, or all through slices: ``DENSE_TIES``)
    for dense in (0.0, 1.0):
        with mock.patch.object(output, "DENSE_TIES", dense):
            assert _order(table).tolist() == want.to_numpy().tolist()
            assert released <= (_by_sync(table) is not None)
            assert _order(in_order).tolist() == list(range(len(out)))
            assert released <= (_by_sync(in_order) is not None)
    if all(r[1] != "edge_end" for r in out):  # (told there is no edge end: the same order)
        assert _order(table, edges=False).tolist() == want.to_numpy().tolist()


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(SYNC_ROWS, st.lists(st.integers(-2, 12), max_size=3, unique=True)),
                max_size=4), st.booleans(), st.randoms())
def test_steps_put_in_order_one_by_one_are_the_batch_in_order(steps, released, rnd):
    """``output.steps_in_order``: each step's rows in order by themselves, one step after
    the other, are the batch's rows in output order (``ordered_table``): where each step's
    CTIs rise above the last step's (a machine's), and where releases are anything (then
    the rows are put in order together)."""
    from cti.operators.output import OUTPUT_ARROW, ordered_table, steps_in_order

    tables, floor = [], -10
    for rows, ctis in steps:
        cs = [floor + 1 + c for c in sorted(ctis)] if released else sorted(ctis)
        out = []
        for kind, s, d, p in rows:
            sync = s + d if kind == "edge_end" else s
            release = next((c for c in cs if c > sync), None) if released else rnd.choice(
                cs or [5])
            if release is not None:  # (held: not in this step's output)
                out.append((release, kind, s, s + d, p))
        out += [(c, "cti", c, c, None) for c in cs]
        rnd.shuffle(out)
        floor = max(cs, default=floor)
        tables.append(pa.Table.from_pylist(
            [dict(zip(OUTPUT_ARROW.names, r, strict=True)) for r in out], schema=OUTPUT_ARROW))
    whole = pa.concat_tables(tables) if tables else OUTPUT_ARROW.empty_table()
    assert steps_in_order(tables).to_pylist() == ordered_table(whole).to_pylist()


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1999), st.integers(0, 700)), max_size=6))
def test_delivered_rows_taken_by_stretches_are_those_taken_one_by_one(moves):
    """``output._taken``: rows in order but for a few moved (taken by stretches, as they lie)
    are those ``take`` gives; with one moved, no row is copied."""
    from cti.operators.output import _taken

    order = np.arange(2000)
    for at, to in moves:
        order = np.insert(np.delete(order, at % len(order)), to, order[at % len(order)])
    table = pa.table({"a": pa.array(np.arange(2000) * 3),
                      "p": pa.array([f"t{i}" if i % 7 else None for i in range(2000)])})
    before = pa.total_allocated_bytes()
    got = _taken(pa.concat_tables([table.slice(0, 900), table.slice(900)]), order)
    assert got.equals(table.take(order))
    if len(moves) <= 1:
        assert pa.total_allocated_bytes() == before


@pytest.mark.parametrize(("starts", "tie_sorts_by"), [((0,), [["payload"]]), ((0, 5), [])])
def test_output_order_of_rows_mostly_tied_on_sync_time(monkeypatch, starts, tie_sorts_by):
    """A window's results share their window's sync time: ``_order`` does not take the
    sync-time path (it would copy nearly every row for its tie sort first). One window's
    results, tied on all but the payload, are sorted by the numbers in numpy and by the
    payload alone in Arrow (a sort by all seven keys took a third longer); several windows'
    results by Arrow's sort of all the keys (the faster there). The order is the same."""
    import pyarrow.compute as pc

    from cti.operators import output
    from cti.operators.output import OUTPUT_ARROW, _order, _sort_keys

    rows = [(10, "interval", s, s + 10, f'{{"key":"k{k}","count":{k % 3}}}')
            for s in starts for k in (3, 1, 2, 0)] + [(10, "cti", 10, 10, None),
                                                      (12, "cti", 12, 12, None)]
    table = pa.Table.from_pylist([dict(zip(OUTPUT_ARROW.names, r, strict=True)) for r in rows],
                                 schema=OUTPUT_ARROW)
    assert output._by_sync(table) is not None  # (the sync-time path would answer)
    tie_sorts = []
    sort_ties = output._sort_ties

    def noted(keys_of, order, tied):
        tie_sorts.append(keys_of(order[:1]).column_names)
        sort_ties(keys_of, order, tied)

    monkeypatch.setattr(output, "_sort_ties", noted)
    keys = _sort_keys(table)
    want = pc.sort_indices(keys, sort_keys=[(c, "ascending") for c in keys.column_names])
    assert _order(table).tolist() == want.to_numpy().tolist()
    assert tie_sorts == tie_sorts_by


TIMES = st.sampled_from([-(2**63), 2**63 - 1, 0, 5, -7, 2**31, -(2**31) - 1, 2**40]) | \
    st.integers(-(2**63), 2**63 - 1) | st.integers(0, 50)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.tuples(TIMES, st.sampled_from(["point", "interval", "edge_end", "edge_start",
                                                  "cti", "other"]),
                          TIMES, TIMES, st.sampled_from([None, '{"a":1}', '{"a":2}', "{}"])),
                max_size=30),
       st.integers(1, 3), st.booleans())
def test_output_rows_pack_compactly_and_unpack_to_the_same_rows(rows, chunks, repeat):
    """Output rows packed for the hold stage and the sink (``pack_rows``: times as steps,
    kinds and repeated payloads dictionary-encoded) unpack to the same rows, in the same
    order, whatever the times (the sentinels, steps beyond 32 bits), chunks and payloads."""
    from cti.operators.output import OUTPUT_ARROW
    from cti.runtime.spark.packing import pack_rows, unpack_output

    rows = rows * 3 if repeat else rows  # (payloads that repeat: dictionary-encoded)
    table = pa.Table.from_pylist([dict(zip(OUTPUT_ARROW.names, r, strict=True)) for r in rows],
                                 schema=OUTPUT_ARROW)
    at = sorted({len(rows) * i // chunks for i in range(chunks)} | {len(rows)})
    table = pa.Table.from_batches([b for a, z in zip(at, at[1:], strict=False) for b in
                                   table.slice(a, z - a).to_batches()], OUTPUT_ARROW)
    got = unpack_output([pack_rows(table)])
    assert got.schema == OUTPUT_ARROW
    assert got.to_pylist() == table.to_pylist()


def test_packed_output_rows_are_compact_and_unpacked_as_written_before():
    """A shard's snapshot results (times that rise in small steps, one kind, a few distinct
    payloads) pack to less than half the bytes of the rows as they are; a blob written as
    they were (a hold state checkpointed before) still unpacks."""
    from cti.operators.output import OUTPUT_ARROW
    from cti.runtime.spark.packing import _ipc, pack_rows, unpack_output

    n = 100_000
    rng = np.random.default_rng(0)
    start = 1_704_067_200_000_000 + np.cumsum(rng.integers(0, 2_000, n))
    table = pa.table({"release": start // 1_000_000 * 1_000_000 + 1_000_000,
                      "kind": ["interval"] * n, "start": start,
                      "end": start + rng.integers(1, 10_000_000, n),
                      "payload": [f'{{"count":{i % 300},"key":"k{i % 7}"}}' for i in range(n)]},
                     schema=OUTPUT_ARROW)
    assert 2 * len(pack_rows(table)) < len(_ipc(table))
    assert unpack_output([pack_rows(table)]).equals(table)
    assert unpack_output([_ipc(table)]).equals(table)


def test_a_windows_repeated_payloads_leave_the_query_dictionary_encoded_and_read_as_texts():
    """A count per key over a snapshot window writes each distinct payload once: its results
    leave the query machine dictionary-encoded (no text per row) and are packed so for the
    hold stage; the output rows, and an operator after the window, read them as texts."""
    from shard_runs import released, run_shards

    from cti import AdvanceTimeSettings, Application, CepStream, EventShape, PointEvent, agg
    from cti.engine.hold import tagged_table
    from cti.io.memory import MemoryInputAdapter, MemoryInputAdapterFactory
    from cti.operators.output import step_table
    from cti.runtime.spark.packing import _compact
    from cti.time import ticks

    events = [PointEvent(t * 3 + (t * 7) % 5, {"k": f"k{t % 3}"}) for t in range(300)]
    stream = CepStream.create("s", MemoryInputAdapterFactory(), events, EventShape.POINT,
                              AdvanceTimeSettings.unordered_start_time(ticks(60)),
                              application=Application())
    counts = stream.alter_event_duration(ticks(40)).group_by("k").apply(
        lambda g: g.snapshot_window().aggregate(n=agg.count()))
    adapters = {"s": MemoryInputAdapter(events, EventShape.POINT)}
    batches = [{"s": [(0, len(events), True)]}]
    _, outs, _, _ = run_shards(counts, adapters, batches, 1)
    out = outs[0][0]
    assert pa.types.is_dictionary(out.events["payload"].dtype.pyarrow_dtype)
    texts = step_table(out.events, out.ctis).column("payload")
    assert texts.type == pa.string()
    assert len(set(texts.to_pylist())) < len(out.events) // 10  # (the texts repeat)
    tagged = _compact(tagged_table(out.events, out.ctis, out.tags)).column("payload")
    assert pa.types.is_dictionary(tagged.type)
    assert tagged.cast(pa.string()).to_pylist()[:len(out.events)] == texts.to_pylist()[
        :len(out.events)]
    more = counts.where(lambda p: p["n"] > 1)
    _, after, _, _ = run_shards(more, adapters, batches, 1)
    want = [r for r in released(outs[0]) if json.loads(r[4])["n"] > 1]
    assert released(after[0]) == want and want
