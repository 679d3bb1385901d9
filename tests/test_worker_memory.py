"""A Spark Python worker hands back the memory a task freed (``worker.release_memory``): the C
heap keeps freed chunks between live ones, and without ``malloc_trim`` a reused worker's
resident memory stays at its peak."""

from __future__ import annotations

import pytest

from cti.runtime.spark import worker


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))


@pytest.mark.skipif(worker._malloc_trim() is None, reason="no malloc_trim in this C library")
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
