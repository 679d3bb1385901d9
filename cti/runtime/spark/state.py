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
the part's name, and stays small. Reading a part, a worker keeps it in a cache bounded by
bytes (``_CACHE``), or memory-maps it (a plain array: the pages a step touches are read, a
join index's binary search reads a few); what it hands out is read-only, so a step that
would write into it fails instead of changing a part other versions share. An object that
came from a part, or was written as one, is named again by its part on the next write
(``_NAMES``, by identity): a segment or a book that no step touched costs its name.

Exactly once: parts are written before the state value that names them, and Spark commits the
value; a failed micro-batch's parts (new names on the replay) are orphans nothing reads. A part
the state no longer names may still be named by a version Spark can restart from, so the state
records when each stopped being named (``Manifest.retired``) and it is deleted ``retain``
micro-batches later (``spark.sql.streaming.minBatchesToRetain``).

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
import os
import pickle
import sys
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Iterator
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
CACHE_BYTES = 1 << 30  # a worker's cache of parts read, at most
_OBJECTS = ".pkl.zst"  # a part of Python objects (pickled, compressed); else ``.npy``


@attrs.frozen
class PartStore:
    """Where one shard keeps its parts (``directory``), from which size an array becomes one
    (``min_bytes``) and for how many micro-batches a part the state stopped naming is kept
    (``retain``)."""

    directory: str
    min_bytes: int | None = PART_BYTES
    retain: int = 100

    @property
    def writes(self) -> bool:
        """Whether states are written with parts (else whole, though read with them)."""
        return self.min_bytes is not None

    @property
    def min_entries(self) -> int:
        """From how many identities an edge book is stored as a part (about ``min_bytes`` of
        its pickle)."""
        return max(1, (self.min_bytes or 0) // 64)


def part_store(directory: str, retain: int) -> PartStore:
    """A ``PartStore`` with this module's ``PART_BYTES`` as it is now (tests change it)."""
    return PartStore(directory, PART_BYTES, retain)


@attrs.frozen
class Manifest:
    """The parts a state value names, and those it stopped naming: (micro-batch, names)."""

    parts: frozenset[str] = frozenset()
    retired: tuple[tuple[int, tuple[str, ...]], ...] = ()


def dump_state(state: Any, store: PartStore | None = None, previous: Manifest | None = None,
               batch: int = 0) -> bytes:
    """``state`` (plain data) as the state column's bytes; with ``store``, its large arrays as
    parts (``previous``: the manifest of the state read; ``batch``: this micro-batch's id)."""
    if store is None or not store.writes:
        return _framed(MAGIC, pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
    writer = _PartWriter(store)
    raw = io.BytesIO()
    writer.pickler(raw).dump(state)
    manifest = _next_manifest(store, previous or Manifest(), frozenset(writer.named), batch)
    outer = pickle.dumps((manifest, raw.getvalue()), protocol=pickle.HIGHEST_PROTOCOL)
    return _framed(PARTS_MAGIC, outer)


def load_state(blob: bytes, store: PartStore | None = None) -> Any:
    """The state ``dump_state`` wrote (or a plain pickle of it)."""
    return load_parts(blob, store)[0]


def load_parts(blob: bytes, store: PartStore | None = None) -> tuple[Any, Manifest]:
    """The state ``dump_state`` wrote and the manifest of the parts it names (empty for a
    state without parts: an older checkpoint's, or one written inline)."""
    blob = bytes(blob)
    magic = PARTS_MAGIC if blob.startswith(PARTS_MAGIC) else (
        MAGIC if blob.startswith(MAGIC) else None)
    if magic is not None:
        at = len(magic) + _SIZE
        size = int.from_bytes(blob[len(magic):at], "little")
        blob = _CODEC.decompress(blob[at:], size, asbytes=True)
    if magic is not PARTS_MAGIC:
        return _unpickled(blob), Manifest()
    manifest, raw = pickle.loads(blob)
    if store is None:
        raise ValueError("this state names parts (large arrays kept beside the checkpoint), "
                         "but no part directory was given to read them from")
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

    def __init__(self, store: PartStore) -> None:
        self.store = store
        self.directory = Path(store.directory)
        self.named: set[str] = set()

    def pickler(self, out: io.BytesIO) -> pickle.Pickler:
        return _Pickler(out, self)

    def reduce(self, obj: Any) -> Any:
        kind = type(obj)
        if not (kind is StoredBook or kind is np.ndarray and obj.nbytes >= self.store.min_bytes):
            return NotImplemented
        name = _name_of(obj, self.directory)
        if name is None:
            name = _write_part(self.directory, obj)
            # A view is cached as a copy: its base, not read-only, may change under it.
            kept = obj.copy() if kind is np.ndarray and obj.base is not None else obj
            _remember(kept, self.directory, name)
        self.named.add(name)
        return _part, (name,)


class _Pickler(pickle.Pickler):
    """A pickler whose large arrays become parts. ``reducer_override`` is not called for the
    builtin containers and scalars (a ``persistent_id`` is called for each of them: an edge
    book's millions of tuples)."""

    def __init__(self, out: io.BytesIO, writer: _PartWriter) -> None:
        super().__init__(out, protocol=pickle.HIGHEST_PROTOCOL)
        self.writer = writer

    def reducer_override(self, obj: Any) -> Any:
        return self.writer.reduce(obj)


def _write_part(directory: Path, value: np.ndarray | StoredBook) -> str:
    """``value`` as a new part in ``directory`` (written whole under a temporary name, then
    renamed: a reader sees the whole part or none); its name."""
    directory.mkdir(parents=True, exist_ok=True)
    objects = type(value) is StoredBook or value.dtype.hasobject
    name = uuid.uuid4().hex + (_OBJECTS if objects else ".npy")
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


# ---- reading parts ------------------------------------------------------------------------

# The part directory of the state ``load_parts`` is reading.
_READER: ContextVar[Path] = ContextVar("cti_part_directory")
# Parts read or written in this process, by path: the most recent first out last, at most
# CACHE_BYTES; and each live array's part, by identity (the weak reference tells a live array
# from a later one at the same address).
_CACHE: OrderedDict[Path, tuple[Any, int]] = OrderedDict()
_cached_bytes = 0
_NAMES: dict[int, tuple[weakref.ref, Path, str]] = {}


def _part(name: str) -> np.ndarray | StoredBook:
    """The part ``name`` of the state being read: from the cache, else from its file."""
    directory = _READER.get(None)
    if directory is None:
        raise ValueError("a state part is read outside load_state (no part directory)")
    path = directory / name
    hit = _CACHE.get(path)
    if hit is not None:
        _CACHE.move_to_end(path)
        return hit[0]
    array = _read_part(path)
    _remember(array, directory, name)
    return array


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


def _remember(value: np.ndarray | StoredBook, directory: Path, name: str) -> None:
    """``value`` is part ``name``: read-only from now on, named by identity, cached."""
    global _cached_bytes
    if type(value) is np.ndarray:
        value.flags.writeable = False
    key = id(value)

    def forget(ref: weakref.ref, key: int = key) -> None:
        entry = _NAMES.get(key)
        if entry is not None and entry[0] is ref:
            del _NAMES[key]

    _NAMES[key] = (weakref.ref(value, forget), directory, name)
    path = directory / name
    size = _footprint(value)
    old = _CACHE.pop(path, None)
    _cached_bytes += size - (old[1] if old else 0)
    _CACHE[path] = (value, size)
    while _cached_bytes > CACHE_BYTES and len(_CACHE) > 1:
        _, (_, dropped) = _CACHE.popitem(last=False)
        _cached_bytes -= dropped


def _footprint(array: np.ndarray | StoredBook) -> int:
    """About what a cached part holds in memory (a memory map: its pages, counted whole)."""
    if type(array) is StoredBook:
        return 250 * len(array)  # an identity's tuples, a payload text, a value tuple
    if not array.dtype.hasobject:
        return array.nbytes
    return array.nbytes + sum(map(sys.getsizeof, _sample(array))) * len(array) // max(
        1, min(len(array), 64))


def _sample(array: np.ndarray) -> Iterator[Any]:
    flat = array.reshape(-1)
    step = max(1, len(flat) // 64)
    return iter(flat[::step][:64].tolist())


def clear_cache() -> None:
    """Forget every part read or written (tests: a worker that never saw them)."""
    global _cached_bytes
    _CACHE.clear()
    _NAMES.clear()
    _cached_bytes = 0
