"""A shard's state with its large arrays as parts (``cti.runtime.spark.state``): what is
written is what is read back; a part is written once and named again while the state keeps
the array; an array read from a part refuses to be written in place; a part the state stopped
naming is deleted only ``retain`` micro-batches later; a part no retained version can name (a
failed micro-batch's) is swept by a later micro-batch; a state written without parts (this
release inline, or an older checkpoint) still loads."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.operators import join_side
from cti.runtime.spark import state
from cti.runtime.spark.state import PartStore, dump_state, load_parts, load_state


@pytest.fixture(autouse=True)
def _fresh_cache():
    state.clear_cache()
    yield
    state.clear_cache()


def _files(store: PartStore) -> set[str]:
    path = Path(store.directory)
    return {p.name for p in path.iterdir()} if path.exists() else set()


ARRAYS = st.one_of(
    st.lists(st.integers(-2**63, 2**63 - 1), max_size=40).map(lambda v: np.asarray(v, np.int64)),
    st.lists(st.floats(allow_nan=False), max_size=40).map(lambda v: np.asarray(v, np.float64)),
    st.lists(st.booleans(), max_size=40).map(lambda v: np.asarray(v, bool)),
    st.lists(st.none() | st.text(max_size=8), max_size=40).map(
        lambda v: np.asarray(v + [0], object)[:-1]))


@settings(max_examples=examples(60), deadline=None)
@given(arrays=st.lists(ARRAYS, min_size=1, max_size=6), min_bytes=st.sampled_from([0, 64, 1 << 20]),
       cached=st.booleans())
def test_a_state_with_parts_reads_back_as_written(tmp_path_factory, arrays, min_bytes, cached):
    store = PartStore(str(tmp_path_factory.mktemp("parts")), min_bytes)
    strided = [a[::2] for a in arrays]  # views of arrays, not contiguous
    blob = dump_state({"arrays": arrays, "views": strided, "n": 3}, store, None, 1)
    if not cached:
        state.clear_cache()  # another worker: the parts come from their files
    back = load_state(blob, store)
    for got, want in zip(back["arrays"] + back["views"], arrays + strided, strict=True):
        assert got.dtype == want.dtype and got.tolist() == want.tolist()
    assert back["n"] == 3
    big = [a for a in arrays + strided if a.nbytes >= min_bytes]
    assert len(_files(store)) <= len(big) and bool(_files(store)) == bool(big)


def test_an_array_kept_is_named_again_not_written_again(tmp_path):
    store = PartStore(str(tmp_path), 1024)
    table = np.arange(10_000)
    blob = dump_state({"table": table, "same": table}, store, None, 1)
    assert len(_files(store)) == 1  # one part, named twice
    back, manifest = load_parts(blob, store)
    assert back["table"] is back["same"]
    back["new"] = np.arange(5_000)
    blob = dump_state(back, store, manifest, 2)
    assert len(_files(store)) == 2  # the new array only
    state.clear_cache()  # read from the files: the same arrays
    again, manifest = load_parts(blob, store)
    assert again["table"].tolist() == table.tolist() and len(again["new"]) == 5_000
    assert manifest.parts == frozenset(_files(store))


def test_an_array_read_from_a_part_refuses_an_in_place_write(tmp_path):
    store = PartStore(str(tmp_path), 0)
    blob = dump_state({"ends": np.arange(1_000), "texts": np.asarray(["a", "b"], object)},
                      store, None, 1)
    for cached in (True, False):
        if not cached:
            state.clear_cache()
        back = load_state(blob, store)
        for name in ("ends", "texts"):
            with pytest.raises(ValueError, match="read-only"):
                back[name][0] = back[name][1]
    state.clear_cache()
    assert load_state(blob, store)["ends"].tolist() == list(range(1_000))


def test_a_join_side_closes_its_edges_on_a_copy_of_a_stored_segment(tmp_path):
    """``join_side.close_edges`` writes the ends it learns into its segment's arrays: on a
    segment read from parts it writes into copies, and the stored state keeps its open edges."""
    import pandas as pd

    from cti.time import MAX_TIME

    n = 2_000
    cols = {"id": np.arange(n, dtype=np.int64), "kind": np.full(n, "edge_start", object),
            "start": np.arange(n, dtype=np.int64), "end": np.full(n, MAX_TIME, np.int64),
            "known": np.zeros(n, bool), "payload": np.asarray([f"p{i}" for i in range(n)], object),
            "key": np.full(n, "", object), "jkey": np.asarray([f"k{i}" for i in range(n)], object)}
    side = join_side.Side()
    join_side.add(side, join_side.make_segment(cols))
    store = PartStore(str(tmp_path), 0)
    blob = dump_state(side, store, None, 1)
    for _ in range(2):
        back = load_state(blob, store)
        ends = pd.DataFrame({"start": [5], "end": [50], "payload": ["p5"], "key": [""]})
        join_side.close_edges(back, ends, np.asarray(["k5"], object))
        seg = back.segments[0]
        assert seg.known[5] and seg.end[5] == 50 and seg.open_n == n - 1
    stored = load_state(blob, store).segments[0]
    assert not stored.known[5] and stored.end[5] == MAX_TIME


def test_a_part_no_longer_named_is_deleted_retain_batches_later(tmp_path):
    store = PartStore(str(tmp_path), 0, retain=3)
    blob = dump_state({"a": np.arange(10)}, store, None, 0)
    back, manifest = load_parts(blob, store)
    (old,) = manifest.parts
    back["a"] = np.arange(20)  # the old part is named no more
    for batch in range(1, 8):
        blob = dump_state(back, store, manifest, batch)
        back, manifest = load_parts(blob, store)
        # retired at batch 1; versions up to batch 0 name it: kept while Spark may return there
        assert (old in _files(store)) == (batch <= 4), batch
    assert manifest.retired == () and _files(store) == set(manifest.parts)


def test_a_failed_micro_batchs_parts_are_swept_by_a_later_one_and_nothing_named(tmp_path):
    """Parts written by an attempt of a micro-batch that failed (and its temporary files) are
    named by no version: the next write from a committed state deletes those of earlier
    micro-batches. What a retained version names (the state read, its retired parts), what an
    attempt of the running micro-batch writes, and an older release's names stay."""
    store = PartStore(str(tmp_path), 0, retain=3)
    directory = Path(store.directory)
    blob = dump_state({"a": np.arange(10), "b": np.arange(30)}, store, None, 1)
    committed, manifest = load_parts(blob, store)
    committed["b"] = np.arange(40)  # b's part retired at 2, named by the version of 1
    blob = dump_state(committed, store, manifest, 2)
    committed, manifest = load_parts(blob, store)
    kept = _files(store)
    # batch 3 fails twice after writing its parts: a task error, then a crash mid-write
    for attempt in range(2):
        failed = dict(committed, c=np.arange(50 + attempt))
        dump_state(failed, store, manifest, 3)
    (directory / ".3-0123abcd.npy.tmp").write_bytes(b"half a part")
    (directory / "0123456789abcdef0123456789abcdef.npy").write_bytes(b"an older release's")
    orphans = _files(store) - kept - {"0123456789abcdef0123456789abcdef.npy"}
    assert len(orphans) == 3 and {state.written_at(n) for n in orphans} == {3}
    # batch 3 again (this attempt may race another of batch 3): its orphans stay for now
    again = dict(committed, c=np.arange(60))
    blob = dump_state(again, store, manifest, 3)
    assert orphans <= _files(store)
    written = _files(store) - kept - orphans - {"0123456789abcdef0123456789abcdef.npy"}
    back, manifest3 = load_parts(blob, store)
    # batch 4 reads the committed version of 3: the failed attempts' files go
    dump_state(back, store, manifest3, 4)
    assert not orphans & _files(store)
    assert kept | written | {"0123456789abcdef0123456789abcdef.npy"} <= _files(store)
    state.clear_cache()  # every version Spark may restart from still reads
    for version in (blob,):
        assert load_state(version, store)["c"].tolist() == list(range(60))


def test_a_sweep_keeps_what_any_retained_version_names(tmp_path):
    """Over micro-batches that replace arrays, with a failed attempt now and then, each
    retained version still loads from its files, and only the parts those versions name (and
    an attempt's of the running micro-batch) are on disk. (Retired at micro-batch b, a part
    stays while b + retain >= the micro-batch written: the versions back to ``retain + 1``
    before it.)"""
    store = PartStore(str(tmp_path), 0, retain=2)
    rng = np.random.default_rng(7)
    value = {"a": np.arange(10)}
    blob = dump_state(value, store, None, 0)
    versions = [blob]
    for batch in range(1, 12):
        back, manifest = load_parts(versions[-1], store)
        if batch % 3 == 0:  # a failed attempt first
            dump_state(dict(back, f=rng.integers(0, 9, 20)), store, manifest, batch)
        back = dict(back)
        if batch % 2:
            back["a"] = rng.integers(0, 9, 10 + batch)
        back[f"b{batch % 3}"] = rng.integers(0, 9, 5 + batch)
        versions.append(dump_state(back, store, manifest, batch))
        retained = versions[-(store.retain + 2):]
        named = set()
        for version in retained:
            state.clear_cache()
            load_state(version, store)  # reads every part it names
            named |= load_parts(version, store)[1].parts
        assert named <= _files(store)
        assert {n for n in _files(store) - named if state.written_at(n) < batch} == set(), batch


def test_a_state_written_inline_or_by_an_older_release_still_loads(tmp_path):
    """Values of the release before parts: zstd-compressed (``MAGIC``) or a plain pickle,
    arrays inline; they load with or without a part store, and they have no manifest."""
    value = {"ingress": {0: None}, "side": np.arange(100_000)}
    store = PartStore(str(tmp_path), 0)
    for blob in (dump_state(value), pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)):
        for reader in (None, store):
            back, manifest = load_parts(blob, reader)
            assert back["side"].tolist() == value["side"].tolist()
            assert manifest is None
    # the next write, with parts, retires nothing and writes the array once
    back, manifest = load_parts(dump_state(value), store)
    load_parts(dump_state(back, store, manifest, 7), store)
    assert len(_files(store)) == 1


def test_a_missing_part_or_a_missing_store_says_what_is_missing(tmp_path):
    store = PartStore(str(tmp_path / "parts"), 0)
    blob = dump_state({"a": np.arange(10)}, store, None, 1)
    with pytest.raises(ValueError, match="no part directory"):
        load_state(blob)
    state.clear_cache()
    for p in Path(store.directory).iterdir():
        p.unlink()
    with pytest.raises(FileNotFoundError, match="cti-parts beside it"):
        load_state(blob, store)


@pytest.mark.parametrize(("location", "want"), [
    ("/data/ckpt", "/data/ckpt/cti-parts"), ("file:///data/ckpt", "/data/ckpt/cti-parts"),
    ("s3a://bucket/ckpt", None), ("hdfs://nn/ckpt", None), ("dbfs:/ckpt", None)])
def test_parts_go_beside_a_file_system_checkpoint_only(location, want):
    from cti.runtime.spark.runtime import parts_directory

    assert parts_directory(location) == want


def test_a_stored_book_refuses_changes_and_writable_gives_a_copy_to_change():
    from cti.forms import edges

    book = {(5, "a"): [5, 6], (7, "b"): [None]}
    stored = edges.stored_book(book)
    assert stored == {(5, "a"): (5, 6), (7, "b"): (None,)} and list(stored) == list(book)
    for change in (lambda b: b.__setitem__((1, "x"), [1]), lambda b: b.pop((5, "a")),
                   lambda b: b.setdefault((1, "x"), []), lambda b: b.clear(),
                   lambda b: b.update({}), lambda b: b.__delitem__((5, "a")),
                   lambda b: edges.open_edge(b, (1, "x"), 1),
                   lambda b: edges.close_edge(b, (5, "a"))):
        with pytest.raises((TypeError, AttributeError)):
            change(stored)
    assert stored == {(5, "a"): (5, 6), (7, "b"): (None,)}
    copy = edges.writable(stored)
    assert type(copy) is dict and copy == book and list(copy) == list(book)
    assert edges.close_edge(copy, (5, "a")) == (True, 5)
    assert edges.writable(stored, changing=False) is stored and edges.writable(book) is book
    assert pickle.loads(pickle.dumps(stored)) == stored


def test_a_large_ingress_book_is_a_part_named_again_until_its_stream_changes(tmp_path):
    """``with_stored_books`` makes a group's large edge book a ``StoredBook``: stored once,
    named again while nothing changes it; a book below the threshold stays a dict."""
    from cti import EventShape
    from cti.forms.edges import StoredBook
    from cti.ingress.spec import StreamSpec
    from cti.ingress.state import _BOOK, GroupState, with_stored_books

    store = PartStore(str(tmp_path), 64 * 100)  # books of 100 identities or more
    group = GroupState.new([StreamSpec("ref", EventShape.EDGE),
                            StreamSpec("small", EventShape.EDGE)])
    group.streams[0].open_edges = {(5, f"row {i}"): [5] for i in range(300)}
    group.streams[1].open_edges = {(5, "row"): [5]}
    data = with_stored_books(group.to_data(), store.min_entries)
    books = [s[_BOOK] for s in data[1]]
    assert type(books[0]) is StoredBook and type(books[1]) is dict
    blob = dump_state({"ingress": {0: data}}, store, None, 1)
    assert len(_files(store)) == 1
    for _ in range(2):
        back, manifest = load_parts(blob, store)
        again = with_stored_books(back["ingress"][0], store.min_entries)
        blob = dump_state({"ingress": {0: again}}, store, manifest, 2)
        assert len(_files(store)) == 1  # the same book, named again
    state.clear_cache()
    back = load_state(blob, store)["ingress"][0]
    assert GroupState.from_data(back, []).streams[0].open_edges == {
        (5, f"row {i}"): (5,) for i in range(300)}


def test_a_bulk_book_is_its_arrays_as_parts_named_again_until_its_stream_changes(tmp_path):
    """A ``BulkBook`` (a reference table's starts, opened at once) is written as its arrays'
    parts (the times as ``.npy``, the payloads pickled), named again while nothing changes
    it, read back as the book it was, and ``with_stored_books`` leaves it as it is."""
    import numpy as np

    from cti import EventShape
    from cti.forms.edges import BulkBook, writable
    from cti.ingress.spec import StreamSpec
    from cti.ingress.state import _BOOK, GroupState, with_stored_books

    store = PartStore(str(tmp_path), 1024)
    n = 1000
    book = BulkBook(((np.full(n, 5, np.int64), np.asarray([f"row {i}" for i in range(n)],
                                                           object), np.full(n, 5, np.int64)),))
    group = GroupState.new([StreamSpec("ref", EventShape.EDGE)])
    group.streams[0].open_edges = book
    data = with_stored_books(group.to_data(), store.min_entries)
    assert data[1][0][_BOOK] is book
    blob = dump_state({"ingress": {0: data}}, store, None, 1)
    assert sorted(name.split(".", 1)[1] for name in _files(store)) == ["npy", "npy", "pkl.zst"]
    back, manifest = load_parts(blob, store)
    blob = dump_state(back, store, manifest, 2)
    assert len(_files(store)) == 3  # the same arrays, named again
    state.clear_cache()
    got = GroupState.from_data(load_state(blob, store)["ingress"][0], []).streams[0].open_edges
    assert type(got) is BulkBook and got == book
    assert list(writable(got).items()) == [((5, f"row {i}"), [5]) for i in range(n)]


def test_a_book_part_is_read_when_a_step_looks_inside_it_not_before(tmp_path):
    """A stored edge book comes back as a ``LazyBook``: its length (whether it is empty) and
    the next write (which names it again) need no read of its part; the first look inside
    reads it, and it is then the book that was written, still read-only."""
    from cti.forms.edges import StoredBook, writable

    store = PartStore(str(tmp_path), 0)
    book = StoredBook({(i, f"row {i}"): (i,) for i in range(500)})
    blob = dump_state({"book": book, "n": 1}, store, None, 1)
    state.clear_cache()  # another worker
    back, manifest = load_parts(blob, store)
    lazy = back["book"]
    assert type(lazy) is state.LazyBook and len(lazy) == 500 and lazy
    assert state._footprint(lazy) == 0  # nothing of it held yet
    files = _files(store)
    blob = dump_state(back, store, manifest, 2)
    assert _files(store) == files and lazy._path is not None  # named again, not read
    assert lazy[(7, "row 7")] == (7,) and lazy._path is None  # read at the first look
    assert lazy == book and book == lazy and dict(lazy) == dict(book)
    assert state._footprint(lazy) > 0
    with pytest.raises(TypeError, match="read-only"):
        lazy[(1, "x")] = (1,)
    state.clear_cache()
    for look in (list, lambda b: writable(b), lambda b: b.get((3, "row 3")),
                 lambda b: pickle.loads(pickle.dumps(b))):
        again = load_state(blob, store)["book"]
        assert type(again) is state.LazyBook
        got = look(again)
        assert got == (3,) if not isinstance(got, (list, dict)) else len(got) == 500
    assert type(pickle.loads(pickle.dumps(load_state(blob, store)["book"]))) is StoredBook
    # written into another shard's directory (not one of its parts there): read, then written
    moved = PartStore(str(tmp_path / "elsewhere"), 0)
    again = load_state(dump_state(load_state(blob, store), moved, None, 3), moved)["book"]
    assert again == book


def test_a_written_array_is_cached_as_the_map_of_its_file(tmp_path):
    """A plain array written as a part is cached as the memory map of its file (page cache,
    not this worker's own memory: no footprint against the bound), an array of objects as
    itself."""
    store = PartStore(str(tmp_path), 0)
    table = np.arange(100_000)
    texts = np.asarray([f"t{i}" for i in range(1_000)], object)
    blob = dump_state({"table": table, "view": table[::2], "texts": texts}, store, None, 1)
    cached = [v for v, _ in state._CACHE.values()]
    assert sum(map(state._mapped, cached)) == 2 and any(v is texts for v in cached)
    assert state._cached_bytes == state._footprint(texts)
    assert not table.flags.writeable  # (as before: the array written is a part now)
    back = load_state(blob, store)
    assert state._mapped(back["table"]) and state._mapped(back["view"])
    assert back["table"].tolist() == table.tolist() and back["view"].tolist() == table[
        ::2].tolist()


def test_the_cache_holds_what_the_latest_state_of_each_shard_names(tmp_path):
    """A part a shard's state stopped naming leaves the cache at the write that dropped it (it
    stays on disk while retained), and reading a version (a restart from an older one) keeps
    only that version's parts; another shard's parts stay."""
    store = PartStore(str(tmp_path / "0"), 0)
    other = PartStore(str(tmp_path / "1"), 0)
    dump_state({"x": np.asarray(["o"] * 10, object)}, other, None, 1)
    old = {"a": np.asarray(["a"] * 10, object), "b": np.asarray(["b"] * 10, object)}
    first = dump_state(old, store, None, 1)
    back, manifest = load_parts(first, store)
    back["b"] = np.asarray(["c"] * 10, object)
    second = dump_state(back, store, manifest, 2)

    def cached(store: PartStore) -> set[str]:
        return {p.name for p in state._CACHE if p.parent == Path(store.directory)}

    assert cached(store) == load_parts(second, store)[1].parts and len(cached(store)) == 2
    assert len(_files(store)) == 3 and len(cached(other)) == 1
    assert cached(store) != load_parts(first, store)[1].parts
    assert cached(store) == load_parts(first, store)[1].parts
    assert len(cached(other)) == 1


def test_a_cache_bound_of_zero_keeps_no_part_of_objects(tmp_path):
    store = PartStore(str(tmp_path), 0, cache_bytes=0)
    blob = dump_state({"a": np.asarray([f"a{i}" for i in range(100)], object),
                       "b": np.asarray([f"b{i}" for i in range(100)], object)}, store, None, 1)
    assert len(state._CACHE) <= 1  # (the last one read stays: the state being read uses it)
    assert load_state(blob, store)["b"].tolist() == [f"b{i}" for i in range(100)]
    assert state._cached_bytes <= max(state._footprint(v) for v, _ in state._CACHE.values())


def test_the_cache_bound_is_the_sessions_setting(tmp_path):
    """``spark.cti.state.partCacheMB`` gives each worker's cache bound (default 512 MB); a
    value that is no number of MB is refused, naming the setting."""
    from cti.errors import BindingError
    from cti.runtime.spark import SparkRuntime

    class Conf:
        def __init__(self, values: dict[str, str]) -> None:
            self.values = values

        def get(self, key: str, default: str | None = None) -> str | None:
            return self.values.get(key, default)

    def store(values: dict[str, str]) -> PartStore:
        runtime = SparkRuntime()
        runtime._spark = type("Session", (), {"conf": Conf(values),
                                              "dataSource": type("DS", (), {
                                                  "register": lambda self, _: None})()})()
        return runtime._parts(str(tmp_path))

    assert store({}).cache_bytes == state.CACHE_BYTES == 512 << 20
    assert store({state.CACHE_SETTING: "64"}).cache_bytes == 64 << 20
    assert store({state.CACHE_SETTING: "0"}).cache_bytes == 0
    for bad in ("-1", "lots"):
        with pytest.raises(BindingError, match="partCacheMB"):
            store({state.CACHE_SETTING: bad})


@pytest.mark.spark
def test_on_spark_reference_rows_are_written_once_whatever_the_micro_batches(spark, tmp_path,
                                                                             monkeypatch):
    """A join of cars with 3,000 reference rows (their join side's arrays and the ingress's
    edge book are parts: ``PART_BYTES`` lowered), one car per micro-batch: a run of 6
    micro-batches writes no more parts than a run of 2, and both give the in-process output."""
    from cti import (
        AdvanceTimeImportSettings,
        AdvanceTimePolicy,
        AdvanceTimeSettings,
        Application,
        Arriving,
        CepStream,
        EventShape,
        PointEvent,
    )
    from cti.io.memory import MemoryInputAdapterFactory
    from cti.io.reference import reference_data
    from cti.runtime.local import LocalRuntime
    from cti.runtime.spark import SparkRuntime

    monkeypatch.setattr(state, "PART_BYTES", 4096)
    rows = [{"plate": f"P{i}", "owner": f"owner {i}"} for i in range(3_000)]

    def query(cars: int):
        app = Application()
        arriving = [Arriving(PointEvent(10 * t, {"plate": f"P{t * 7}"}), 10 * t)
                    for t in range(1, cars + 1)]
        s = CepStream.create("cars", MemoryInputAdapterFactory(), arriving, EventShape.POINT,
                             AdvanceTimeSettings.increasing_start_time(), application=app)
        ref = CepStream.create("ref", MemoryInputAdapterFactory(), reference_data(rows, 5),
                               EventShape.EDGE, AdvanceTimeSettings(
                                   import_settings=AdvanceTimeImportSettings("cars"),
                                   policy=AdvanceTimePolicy.ADJUST), application=app)
        return s.join(ref, on="plate")

    held = []
    for cars in (2, 6):
        checkpoint = tmp_path / f"run-{cars}"
        got = query(cars).collect(SparkRuntime(spark, checkpoint_location=str(checkpoint),
                                               batch_sizes={"cars": [1]}, shards=1))
        assert got == query(cars).collect(LocalRuntime({"cars": [1]}))
        held.append(len(list((checkpoint / "cti-parts").rglob("*.*"))))
    assert 0 < held[1] <= held[0], held
