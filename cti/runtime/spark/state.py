"""A stateful function's state as the bytes of its one binary state column: pickled, then
compressed with zstd; a shard's large arrays kept beside the checkpoint as immutable parts.

Spark moves a group's state value whole every micro-batch (from the state store to the Python
worker and back, then into RocksDB and its changelog): about 10 ms per MB to read it into the
worker whether or not it changed, more to write it. What a shard holds for long is mostly
reference data: a join side's segments (``cti.operators.join_side``), arrays that stay as
they are from one micro-batch to the next, and an ingress edge book of reference edges
(``cti.forms.edges.StoredBook``). So a ``PartStore`` keeps every numpy array of at least
``min_bytes``, and every stored book, as a *part*: a file of its own, written once under a
unique name (to a temporary name, then renamed), never changed. The state value holds only
the part's name, and stays small. A plain array part is memory-mapped (the pages a step
touches are read, a join index's binary search reads a few; clean page cache, shared by the
workers that map it), also right after a worker wrote it; an edge book is read when a step
first looks inside it (``LazyBook``); parts of objects are unpickled. A worker keeps what it
read or wrote in a cache (``_CACHE``) that holds only the parts the latest state of each
shard it saw names, bounded by what it holds of the worker's own memory
(``PartStore.cache_bytes``). What a part hands out is read-only, so a step that would write
into it fails instead of changing a part other versions share. An object that came from a
part, or was written as one, is named again by its part on the next write (``_NAMES``, by
identity): a segment or a book that no step touched costs its name.

Exactly once: parts are written before the state value that names them, and Spark commits the
value; a failed micro-batch's parts (new names on the replay) are orphans nothing reads, and
a later micro-batch deletes them (``sweep_orphans``: a part's name starts with the
micro-batch that wrote it). A part the state no longer names may still be named by a version
Spark can restart from, so the state records when each stopped being named
(``Manifest.retired``) and it is deleted ``retain`` micro-batches later
(``spark.sql.streaming.minBatchesToRetain``).

Unpickling a large state creates many containers (an edge book's tuples and lists), and the
cyclic garbage collector, triggered by their count, walked them again and again: 0.1 s
became 0.4-0.6 s for a shard holding 100,000 reference rows. Plain data has no cycles to
collect, so the collector is paused while it loads.

The compressed form starts with ``MAGIC`` (no parts) or ``PARTS_MAGIC`` (a manifest and a
state naming parts); a value without either is a plain pickle, as checkpoints written before
compression hold, and is read as one.
"""

from __future__ import annotations

import contextlib
import gc
import io
import mmap
import os
import pickle
import sys
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pyarrow as pa

from cti.forms.edges import StoredBook

MAGIC = b"cti-zstd\x00"
PARTS_MAGIC = b"cti-part\x00"
_CODEC = pa.Codec("zstd")
_SIZE = 8  # bytes of the uncompressed length after the magic
# An array this large or larger becomes a part (None: none does, the state values hold
# everything as the release before parts wrote them; parts a state names are still read).
PART_BYTES: int | None = 256 * 1024
CACHE_BYTES = 512 << 20  # a worker's cache of parts (its own memory), by default at most
MAX_MAPS = 512  # a worker's cache of memory-mapped parts (each an open file), at most
CACHE_SETTING = "spark.cti.state.partCacheMB"  # the session's setting of a cache's bound
_OBJECTS = ".pkl.zst"  # a part of Python objects (pickled, compressed); else ``.npy``


@attrs.frozen
class PartStore:
    """Where one shard keeps its parts (``directory``), from which size an array becomes one
    (``min_bytes``), for how many micro-batches a part the state stopped naming is kept
    (``retain``) and how much of a worker's own memory its cache of parts may hold
    (``cache_bytes``)."""

    directory: str
    min_bytes: int | None = PART_BYTES
    retain: int = 100
    cache_bytes: int = CACHE_BYTES

    @property
    def writes(self) -> bool:
        """Whether states are written with parts (else whole, though read with them)."""
        return self.min_bytes is not None

    @property
    def min_entries(self) -> int:
        """From how many identities an edge book is stored as a part (about ``min_bytes`` of
        its pickle)."""
        return max(1, (self.min_bytes or 0) // 64)


def part_store(directory: str, retain: int, cache_bytes: int | None = None) -> PartStore:
    """A ``PartStore`` with this module's ``PART_BYTES`` as it is now (tests change it), and
    a cache bound of ``cache_bytes`` (None: ``CACHE_BYTES``)."""
    return PartStore(directory, PART_BYTES, retain,
                     CACHE_BYTES if cache_bytes is None else cache_bytes)


@attrs.frozen
class Manifest:
    """The parts a state value names, and those it stopped naming: (micro-batch, names)."""

    parts: frozenset[str] = frozenset()
    retired: tuple[tuple[int, tuple[str, ...]], ...] = ()


def dump_state(state: Any, store: PartStore | None = None, previous: Manifest | None = None,
               batch: int = 0) -> bytes:
    """``state`` (plain data) as the state column's bytes; with ``store``, its large arrays as
    parts (``previous``: the manifest of the state read, None for a new state or one written
    without parts; ``batch``: this micro-batch's id)."""
    if store is None or not store.writes:
        return _framed(MAGIC, pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
    _use(store)
    writer = _PartWriter(store, batch)
    raw = io.BytesIO()
    writer.pickler(raw).dump(state)
    named = frozenset(writer.named)
    manifest = _next_manifest(store, previous or Manifest(), named, batch)
    if previous is not None:
        sweep_orphans(store, previous, named, batch)
    _keep_only(Path(store.directory), named)
    outer = pickle.dumps((manifest, raw.getvalue()), protocol=pickle.HIGHEST_PROTOCOL)
    return _framed(PARTS_MAGIC, outer)


def load_state(blob: bytes, store: PartStore | None = None) -> Any:
    """The state ``dump_state`` wrote (or a plain pickle of it)."""
    return load_parts(blob, store)[0]


def load_parts(blob: bytes, store: PartStore | None = None) -> tuple[Any, Manifest | None]:
    """The state ``dump_state`` wrote and the manifest of the parts it names (None for a
    state without parts: an older checkpoint's, or one written inline; it tells nothing of
    the parts earlier versions named)."""
    blob = bytes(blob)
    magic = PARTS_MAGIC if blob.startswith(PARTS_MAGIC) else (
        MAGIC if blob.startswith(MAGIC) else None)
    if magic is not None:
        at = len(magic) + _SIZE
        size = int.from_bytes(blob[len(magic):at], "little")
        blob = _CODEC.decompress(blob[at:], size, asbytes=True)
    if magic is not PARTS_MAGIC:
        return _unpickled(blob), None
    manifest, raw = pickle.loads(blob)
    if store is None:
        raise ValueError("this state names parts (large arrays kept beside the checkpoint), "
                         "but no part directory was given to read them from")
    _use(store)
    _keep_only(Path(store.directory), manifest.parts)
    token = _READER.set(Path(store.directory))
    try:
        return _unpickled(raw), manifest
    finally:
        _READER.reset(token)


def _framed(magic: bytes, raw: bytes) -> bytes:
    return b"".join((magic, len(raw).to_bytes(_SIZE, "little"),
                     _CODEC.compress(raw, asbytes=True)))


def _unpickled(raw: bytes) -> Any:
    paused = gc.isenabled()
    gc.disable()
    try:
        return pickle.loads(raw)
    finally:
        if paused:
            gc.enable()


# ---- writing parts ------------------------------------------------------------------------


class _PartWriter:
    """Pickles a state with its large arrays as parts of ``store``, noting the names used."""

    def __init__(self, store: PartStore, batch: int) -> None:
        self.store = store
        self.batch = batch
        self.directory = Path(store.directory)
        self.named: set[str] = set()

    def pickler(self, out: io.BytesIO) -> pickle.Pickler:
        return _Pickler(out, self)

    def reduce(self, obj: Any) -> Any:
        kind = type(obj)
        book = kind is StoredBook or kind is LazyBook
        if not (book or kind is np.ndarray and obj.nbytes >= self.store.min_bytes):
            return NotImplemented
        name = _name_of(obj, self.directory)
        if name is None:
            name = _write_part(self.directory, obj, self.batch)
            if book or obj.dtype.hasobject:
                _remember(obj, self.directory, name)
            else:
                # A plain array is cached as the memory map of its file, whose pages the
                # write just put in the page cache (clean, shared with the other workers
                # that read the part), not as the array in this worker's own memory. A view
                # is not named by identity: its base, not read-only, may change under it.
                if obj.base is None:
                    _remember(obj, self.directory, name, cache=False)
                _remember(_read_part(self.directory / name), self.directory, name)
        self.named.add(name)
        return (_book, (name, len(obj))) if book else (_part, (name,))


class _Pickler(pickle.Pickler):
    """A pickler whose large arrays become parts. ``reducer_override`` is not called for the
    builtin containers and scalars (a ``persistent_id`` is called for each of them: an edge
    book's millions of tuples)."""

    def __init__(self, out: io.BytesIO, writer: _PartWriter) -> None:
        super().__init__(out, protocol=pickle.HIGHEST_PROTOCOL)
        self.writer = writer

    def reducer_override(self, obj: Any) -> Any:
        return self.writer.reduce(obj)


def _write_part(directory: Path, value: np.ndarray | StoredBook, batch: int) -> str:
    """``value`` as a new part in ``directory`` written by micro-batch ``batch`` (written
    whole under a temporary name, then renamed: a reader sees the whole part or none); its
    name, ``<batch>-<uuid>`` and the suffix of its form."""
    directory.mkdir(parents=True, exist_ok=True)
    objects = isinstance(value, StoredBook) or value.dtype.hasobject
    name = f"{batch}-{uuid.uuid4().hex}" + (_OBJECTS if objects else ".npy")
    tmp = directory / f".{name}.tmp"
    with open(tmp, "wb") as f:
        if objects:
            raw = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            f.write(len(raw).to_bytes(_SIZE, "little"))
            f.write(_CODEC.compress(raw, asbytes=True))
        else:
            np.lib.format.write_array(f, value, allow_pickle=False)
    os.replace(tmp, directory / name)
    return name


def _next_manifest(store: PartStore, previous: Manifest, named: frozenset[str],
                   batch: int) -> Manifest:
    """The manifest of a state naming ``named`` at micro-batch ``batch``: the parts
    ``previous`` named and this one does not are retired now; parts retired ``retain``
    micro-batches ago (no version Spark may restart from names them) are deleted."""
    retired = [(b, names) for b, names in previous.retired if b + store.retain >= batch]
    for b, names in previous.retired:
        if b + store.retain < batch:
            for name in names:
                with contextlib.suppress(FileNotFoundError):
                    (Path(store.directory) / name).unlink()
    dropped = tuple(sorted(previous.parts - named))
    if dropped:
        retired.append((batch, dropped))
    return Manifest(named, tuple(retired))


def written_at(name: str) -> int | None:
    """The micro-batch that wrote the part (or the temporary file of a part) ``name``; None
    for a name without one (parts written before names carried it)."""
    if name.startswith(".") and name.endswith(".tmp"):
        name = name[1:-4]
    head, dash, _ = name.partition("-")
    return int(head) if dash and head.isdigit() else None


def sweep_orphans(store: PartStore, previous: Manifest, named: frozenset[str],
                  batch: int) -> list[str]:
    """Delete the files of ``store`` that no state version Spark may still read can name;
    their names. Run by the task that writes the state of micro-batch ``batch`` after reading
    the committed state whose manifest is ``previous`` (``named``: the parts it names now).

    A part is an orphan when a micro-batch wrote it and then failed (a task that failed after
    writing its parts, or a process killed between writing parts and Spark's commit): its
    micro-batch ran again under new part names, and the committed state names those. Every
    part a retained version names is either named by ``previous`` or in its ``retired``
    list, kept there for as long as Spark keeps versions (``_next_manifest``). So a file is
    deleted when it was written by an earlier micro-batch than ``batch`` (an attempt of this
    micro-batch other than this one may still be running or may be the one Spark commits:
    its orphans go at the next micro-batch) and neither ``previous``, its retired list nor
    this write names it, temporary files of a write that never finished included. A name
    without a micro-batch (an older release's) is never deleted here. Each shard has its own
    directory and one task at a time writes it, and a restart reads the committed version
    again, so the rule holds across tasks and restarts."""
    directory = Path(store.directory)
    keep = set(previous.parts) | named
    for _, names in previous.retired:
        keep.update(names)
    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        return []
    swept = []
    for name in entries:
        written = written_at(name)
        if written is None or written >= batch or name in keep:
            continue
        with contextlib.suppress(FileNotFoundError):
            (directory / name).unlink()
            swept.append(name)
    return swept


# ---- reading parts ------------------------------------------------------------------------

# The part directory of the state ``load_parts`` is reading.
_READER: ContextVar[Path] = ContextVar("cti_part_directory")
# Parts read or written in this process, by path, the most recently used last: only parts
# that the latest state this process read or wrote of their shard names (``_keep_only``), at
# most ``_limit`` bytes of this process's own memory (``_footprint``) and ``MAX_MAPS`` memory
# maps; and each live array's part, by identity (the weak reference tells a live array from
# a later one at the same address).
_CACHE: OrderedDict[Path, tuple[Any, int]] = OrderedDict()
_cached_bytes = 0
_maps = 0
_limit = CACHE_BYTES
_NAMES: dict[int, tuple[weakref.ref, Path, str]] = {}


class LazyBook(StoredBook):
    """A stored edge book whose part is not read until a step looks inside it: a step that
    gets no edge of the book's stream only asks whether it is empty (its length, known from
    the state value), and a large table's book (about 340 bytes an identity once unpickled,
    1.4 s for 500,000) is then neither read nor held. The first look reads the part into the
    object itself, which is from then on the ``StoredBook`` it stands for (read-only, named
    by its part on the next write)."""

    def __init__(self, path: Path, size: int) -> None:
        super().__init__()
        self._path: Path | None = path
        self._size = size

    def _read(self) -> LazyBook:
        path = self._path
        if path is not None:
            dict.update(self, _read_part(path))
            self._path = None
            _account(path, self)
        return self

    def __len__(self) -> int:
        return self._size if self._path is not None else dict.__len__(self)

    def __iter__(self) -> Iterator[Any]:
        return dict.__iter__(self._read())

    def __reversed__(self) -> Iterator[Any]:
        return dict.__reversed__(self._read())

    def __contains__(self, key: Any) -> bool:
        return dict.__contains__(self._read(), key)

    def __getitem__(self, key: Any) -> Any:
        return dict.__getitem__(self._read(), key)

    def get(self, key: Any, default: Any = None) -> Any:
        return dict.get(self._read(), key, default)

    def keys(self) -> Any:
        return dict.keys(self._read())

    def values(self) -> Any:
        return dict.values(self._read())

    def items(self) -> Any:
        return dict.items(self._read())

    def copy(self) -> dict:
        return dict.copy(self._read())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyBook):
            other._read()
        return dict.__eq__(self._read(), other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def __or__(self, other: Any) -> Any:
        return dict.__or__(self._read(), other)

    def __ror__(self, other: Any) -> Any:
        return dict.__ror__(self._read(), other)

    def __repr__(self) -> str:
        return dict.__repr__(self._read())

    def __sizeof__(self) -> int:
        return dict.__sizeof__(self)

    def __reduce__(self) -> tuple:
        return StoredBook, (dict(self._read()),)


def _use(store: PartStore) -> None:
    """This process's cache bound, from the store (every store of a session has the same)."""
    global _limit
    _limit = store.cache_bytes


def _cached(name: str, read: Callable[[Path], Any]) -> Any:
    """The part ``name`` of the state being read: from the cache, else ``read`` from its
    path (and cached)."""
    directory = _reading()
    path = directory / name
    hit = _CACHE.get(path)
    if hit is not None:
        _CACHE.move_to_end(path)
        return hit[0]
    value = read(path)
    _remember(value, directory, name)
    return value


def _part(name: str) -> np.ndarray | StoredBook:
    """The part ``name`` of the state being read: from the cache, else from its file."""
    return _cached(name, _read_part)


def _lazy_book(path: Path, size: int) -> LazyBook:
    if not path.exists():
        _read_part(path)  # (says which part is missing and why)
    return LazyBook(path, size)


def _book(name: str, size: int) -> StoredBook:
    """The edge book of part ``name`` of the state being read (``size`` identities): the
    cached one, else a ``LazyBook`` that reads it when a step looks inside."""
    return _cached(name, lambda path: _lazy_book(path, size))


def _reading() -> Path:
    directory = _READER.get(None)
    if directory is None:
        raise ValueError("a state part is read outside load_state (no part directory)")
    return directory


def _read_part(path: Path) -> np.ndarray | StoredBook:
    """A part's array (read-only) or book: objects unpickled, plain arrays memory-mapped."""
    if not path.exists():
        raise FileNotFoundError(
            f"state part {path} is missing: a checkpoint's state keeps its large arrays in "
            "cti-parts beside it; copy or move the checkpoint with that directory")
    if path.name.endswith(_OBJECTS):
        data = path.read_bytes()
        size = int.from_bytes(data[:_SIZE], "little")
        value = _unpickled(_CODEC.decompress(data[_SIZE:], size, asbytes=True))
    else:
        value = np.load(path, mmap_mode="r", allow_pickle=False).view(np.ndarray)
    if type(value) is np.ndarray:
        value.flags.writeable = False
    return value


def _name_of(value: np.ndarray | StoredBook, directory: Path) -> str | None:
    """The part ``value`` is, if it is one of ``directory``'s."""
    entry = _NAMES.get(id(value))
    if entry is None or entry[0]() is not value or entry[1] != directory:
        return None
    return entry[2]


def _remember(value: np.ndarray | StoredBook, directory: Path, name: str,
              cache: bool = True) -> None:
    """``value`` is part ``name``: read-only from now on, named by identity, and (``cache``)
    cached."""
    if type(value) is np.ndarray:
        value.flags.writeable = False
    key = id(value)

    def forget(ref: weakref.ref, key: int = key) -> None:
        entry = _NAMES.get(key)
        if entry is not None and entry[0] is ref:
            del _NAMES[key]

    _NAMES[key] = (weakref.ref(value, forget), directory, name)
    if cache:
        _account(directory / name, value)


def _account(path: Path, value: Any) -> None:
    """Cache ``value`` as the part at ``path`` (again: its size may have changed), then drop
    the least recently used parts beyond the bounds."""
    global _cached_bytes, _maps
    _drop(path)
    size = _footprint(value)
    _CACHE[path] = (value, size)
    _cached_bytes += size
    _maps += _mapped(value)
    while (_cached_bytes > _limit or _maps > MAX_MAPS) and len(_CACHE) > 1:
        _drop(next(iter(_CACHE)))


def _drop(path: Path) -> None:
    global _cached_bytes, _maps
    entry = _CACHE.pop(path, None)
    if entry is not None:
        _cached_bytes -= entry[1]
        _maps -= _mapped(entry[0])


def _keep_only(directory: Path, names: frozenset[str]) -> None:
    """Drop the cached parts of ``directory`` (one shard's) that ``names`` (what its state
    read or written now names) does not hold: a part a shard's state stopped naming, or an
    orphan, is read again only on a restart from an older version, from its file."""
    for path in [p for p in _CACHE if p.parent == directory and p.name not in names]:
        _drop(path)


def _mapped(value: Any) -> bool:
    """Whether a cached part is a memory map (of a plain array's file)."""
    if type(value) is not np.ndarray:
        return False
    base = value.base
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, mmap.mmap)


def _footprint(value: np.ndarray | StoredBook) -> int:
    """About what a cached part holds in this process's own memory: a memory map nothing (its
    pages are the page cache's, clean and shared: ``MAX_MAPS`` bounds them), a book not read
    yet nothing, an array of objects its pointers and (from a sample) its objects."""
    if isinstance(value, StoredBook):
        return 340 * dict.__len__(value)  # an identity's tuples, a payload text, a value tuple
    if _mapped(value):
        return 0
    if not value.dtype.hasobject:
        return value.nbytes
    sample = _sample(value)
    # Objects the sample meets again (a column of one text) are counted once.
    distinct = {id(v): v for v in sample}
    return value.nbytes + sum(map(sys.getsizeof, distinct.values())) * value.size // max(
        1, len(sample))


def _sample(array: np.ndarray) -> list[Any]:
    flat = array.reshape(-1)
    step = max(1, len(flat) // 64)
    return list(flat[::step][:64])


def clear_cache() -> None:
    """Forget every part read or written (tests: a worker that never saw them)."""
    global _cached_bytes, _maps
    _CACHE.clear()
    _NAMES.clear()
    _cached_bytes = 0
    _maps = 0
