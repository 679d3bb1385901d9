"""A Spark Python worker hands back the memory a task freed (``worker.release_memory``): the C
heap keeps freed chunks between live ones, and without ``malloc_trim`` a reused worker's
resident memory stays at its peak."""

from __future__ import annotations

import pytest

from cti.engine.heap import libc_function
from cti.runtime.spark import worker


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))


@pytest.mark.skipif(libc_function("malloc_trim") is None, reason="no malloc_trim in this C library")
def test_memory_freed_between_live_chunks_goes_back_to_the_system():
    # 200 MB from the heap (each below mmap's size), written so that every page is resident:
    # zeroed memory from calloc may never be touched, and untouched pages are not in the RSS
    chunks = [b"\x01" * 100_000 for _ in range(2_000)]
    kept = chunks[1::2]  # every other one stays: the heap cannot shrink from its top
    del chunks
    before = _rss_kb()
    worker.release_memory()
    assert before - _rss_kb() > 50_000, (before, _rss_kb())  # most of the 100 MB freed
    assert len(kept) == 1_000


_FREED_LARGE = """
import sys
import numpy as np
from cti.runtime.spark import worker
if sys.argv[1] == "lean":
    worker.settle("test")
def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
big = np.ones(1_000_000)
del big  # (glibc's own threshold now grows to 8 MB: smaller blocks come from the heap)
blocks, pins = [], []
for _ in range(100):  # each 2 MB block followed by a small live one: the heap cannot shrink
    blocks.append(np.ones(250_000))
    pins.append(np.ones(100))
before = rss()
del blocks
import pyarrow as pa
print(before - rss(), pa.default_memory_pool().backend_name)
"""


@pytest.mark.skipif(libc_function("mallopt") is None, reason="no glibc mallopt")
def test_a_settled_worker_hands_a_freed_large_block_back_at_once():
    """``settle`` (once per worker) makes the C heap map a block of ``MMAP_BYTES`` or more on
    its own, so that freeing it hands it back, whatever blocks were freed before, and Arrow
    allocate from the C heap too. (Whether the blocks stay without it depends on what the
    process did before: glibc's own threshold grows with the blocks it frees.)"""
    import subprocess
    import sys

    def freed(mode: str) -> tuple[int, str]:
        out = subprocess.run([sys.executable, "-c", _FREED_LARGE, mode], capture_output=True,
                             text=True, check=True).stdout.split()
        return int(out[0]), out[1]

    plain, lean = freed("plain"), freed("lean")
    assert lean[0] > 150_000 and lean[1] == "system", lean  # KB handed back, the pool
    assert plain[1] != "system", plain  # (Arrow's own pool without it)
