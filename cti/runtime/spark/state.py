"""A stateful function's state as the bytes of its one binary state column: pickled, then
compressed with zstd.

Spark moves a group's state value whole every micro-batch (from the state store to the Python
worker and back, then into RocksDB and its changelog), at about 35 ms per MB, so the bytes are
what a commit costs. What the state holds for long is mostly payload text (a join's reference
rows, a window's keys), which zstd shrinks about tenfold at some 1 ms per MB each way
(docs/spark-runtime.md, "State: one row per shard, rewritten whole").

Unpickling a large state creates many containers (an edge book's tuples and lists), and the
cyclic garbage collector, triggered by their count, walked them again and again: 0.1 s
became 0.4-0.6 s for a shard holding 100,000 reference rows. Plain data has no cycles to
collect, so the collector is paused while it loads.

The compressed form starts with ``MAGIC``; a value without it is a plain pickle, as
checkpoints written before compression hold, and is read as one.
"""

from __future__ import annotations

import gc
import pickle
from typing import Any

import pyarrow as pa

MAGIC = b"cti-zstd\x00"
_CODEC = pa.Codec("zstd")
_SIZE = 8  # bytes of the uncompressed length after the magic


def dump_state(state: Any) -> bytes:
    """``state`` (plain data) as the state column's bytes."""
    raw = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    return b"".join((MAGIC, len(raw).to_bytes(_SIZE, "little"),
                     _CODEC.compress(raw, asbytes=True)))


def load_state(blob: bytes) -> Any:
    """The state ``dump_state`` wrote (or a plain pickle of it)."""
    blob = bytes(blob)
    if blob.startswith(MAGIC):
        at = len(MAGIC) + _SIZE
        size = int.from_bytes(blob[len(MAGIC):at], "little")
        blob = _CODEC.decompress(blob[at:], size, asbytes=True)
    paused = gc.isenabled()
    gc.disable()
    try:
        return pickle.loads(blob)
    finally:
        if paused:
            gc.enable()
