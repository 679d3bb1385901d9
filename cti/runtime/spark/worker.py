"""What cti's code does once in each Python worker process of Spark.

PySpark's daemon reuses a worker process for task after task and runs a full garbage
collection (``gc.collect``) after each one. A worker that ran cti's code holds pandas,
pyarrow, pyspark and cti's modules: some 90,000 objects tracked by the collector, which each
of those collections walked again (about 40 ms of CPU per task, four tasks per micro-batch of
a query, more on a busy machine), although none of them is ever garbage. ``settle`` moves the
objects alive when cti's code first runs in the process (the modules it imported, the
function Spark unpickled) into the collector's permanent generation (``gc.freeze``), so the
daemon's collections walk only what the tasks themselves made. An object frozen this way is
still freed when nothing refers to it; only a reference cycle among them would stay, and
there are none to speak of at that moment (the daemon collected after the task before).

``release_memory`` hands back, after a read task or a stateful step, what the process's
allocators kept of the memory the task freed; ``lean_allocators`` (once per process, from
``settle``) makes them keep less of it during a task.
"""

from __future__ import annotations

import gc

from cti.engine.heap import M_MMAP_THRESHOLD, libc_function

_SETTLED: set[str] = set()


def settle(entry: str) -> None:
    """Freeze the objects alive now, once per process and ``entry`` (each executor-side entry
    point of cti imports its own modules first, then calls this)."""
    if entry not in _SETTLED:
        if not _SETTLED:
            lean_allocators()
        _SETTLED.add(entry)
        gc.freeze()


MMAP_BYTES = 1 << 20  # a C heap allocation this large or larger is a map of its own


def lean_allocators() -> None:
    """Allocators that hand a large block back to the system when it is freed, so that a
    step's freed intermediates (pandas' and numpy's arrays, Arrow's buffers) do not stay
    resident beside the ones it makes next.

    glibc maps a block of ``MMAP_BYTES`` or more on its own (``mallopt(M_MMAP_THRESHOLD)``;
    its default threshold grows with the blocks freed, up to 32 MB, after which large arrays
    come from the heap and their freed space stays resident), and pyarrow allocates from the
    C library's ``malloc`` (its system pool) instead of its own pool (mimalloc), which keeps
    freed pages for reuse by Arrow alone. A shard's first step over a million reference rows
    peaked about 60 MB lower (580 against 640 MB). Elsewhere (no glibc) only the pool
    changes."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    mallopt = libc_function("mallopt")
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, MMAP_BYTES)



def release_memory() -> None:
    """Hand back to the system the memory a task freed but the process's allocators keep:
    pyarrow's pool (mimalloc) and the C heap (glibc's ``malloc_trim``; elsewhere nothing).

    A reused worker keeps its peak: reading 500,000 reference rows left a worker at 560 MB
    resident after the task (150 MB before it; 270 MB after this), a shard's first step over
    them at 830 MB (530 MB after this), and the next tasks start from there. Called after
    each read task and each stateful step: about 1 ms after a small task, 0.1-0.2 s after
    one that freed hundreds of MB."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    trim = libc_function("malloc_trim")
    if trim is not None:
        trim(0)
