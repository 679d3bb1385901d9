"""The process's heap kept between the engine's steps (glibc's allocator on Linux).

A step works on whole columns: it allocates and frees arrays of megabytes (a sort's order, a
gather, a cumulative sum), and the next step allocates the same sizes again. glibc maps a
block above its mmap threshold afresh and unmaps it when freed, and returns the free memory
at the top of its heap to the system once more than its trim threshold is free; both
thresholds rise by themselves only up to the largest block freed so far. So every step had
the kernel map and zero the same pages again: a snapshot window over a million events took
~28,000 page faults a run, 15 % of its time (docs/performance.md).

``keep_freed_memory`` sets the mmap threshold to glibc's own ceiling for it (32 MiB on 64-bit
systems) and the trim threshold to ``mib``: arrays below 32 MiB come from the heap, and up
to ``mib`` of freed memory stays for the next step. The setting is the process's: made once
(the first runtime to ask sets it), and never where the user chose the allocator's
thresholds (``MALLOC_*_`` variables or ``glibc.malloc`` tunables) or the C library is not
glibc. (Spark's Python workers do the opposite, ``cti.runtime.spark.worker``: a worker runs
task after task for many shards, and what it keeps it keeps between them.)

With it, numpy's hint that its large arrays take huge pages (``madvise(MADV_HUGEPAGE)`` on
each array of 4 MiB or more) falls on heap memory, where the kernel, under a ``defrag``
setting that compacts for such regions (``always``, ``madvise``, ``defer+madvise``), stalls
the first touch of each 2 MiB to compact memory (numpy/numpy#31590): a fresh process's first
snapshot window over a million events took 0.95 s against 0.6 s without the hint (0.49 s
of system time against 0.1), later runs the same. So the hint is turned off there too,
unless ``NUMPY_MADVISE_HUGEPAGE`` says otherwise.

Arrow's default pool (mimalloc) reserves its segments with huge pages as well, and its first
large buffers (a step's result texts) stalled a fresh process's first run by 0.2-0.35 s in
one run of three; so Arrow allocates from the same kept heap (its system pool, as in Spark's
workers), unless ``ARROW_DEFAULT_MEMORY_POOL`` or an earlier ``pyarrow.set_memory_pool``
chose another. First runs of the windows' bench 0.58-0.95 -> 0.65-0.70 s (snapshot),
0.69-0.78 -> 0.53-0.60 s (count window); later runs the same or faster.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # (glibc's malloc.h)
MMAP_CEILING = 32 << 20  # (glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems)
USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_",
                 "MALLOC_MMAP_MAX_")

DEFRAG = Path("/sys/kernel/mm/transparent_hugepage/defrag")
STALLING = ("always", "madvise", "defer+madvise")  # (compact on a fault in a hinted region)

_kept = False  # (the thresholds set, once per process)


def checked_mib(value: object, owner: str) -> int | None:
    """``value`` as a ``keep_freed_mb`` setting: a whole number of MiB >= 0, or None (0 and
    None: the allocator left as it is); else a ValueError naming ``owner``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{owner}(keep_freed_mb=...) must be a whole number of MiB >= 0 "
                         f"(0 or None: glibc's allocator left as it is), not {value!r}")
    return value


def user_chose_allocator(environ: Mapping[str, str]) -> bool:
    """Whether the process was started with glibc's malloc thresholds of the user's choosing."""
    return any(name in environ for name in USER_SETTINGS) or \
        "glibc.malloc." in environ.get("GLIBC_TUNABLES", "")


def keep_freed_memory(mib: int | None) -> bool:
    """Keep up to ``mib`` MiB of freed memory in the heap for the next step, and arrays below
    ``MMAP_CEILING`` in it, numpy's huge page hint off where the kernel would stall on it,
    Arrow's buffers from the same heap (once per process; not where the user set the
    allocator or it is not glibc's, nor the hint or Arrow's pool where the user chose them).
    Whether the thresholds are ours now."""
    global _kept
    if _kept:
        return True
    if not mib or platform.system() != "Linux" or platform.libc_ver()[0] != "glibc" or \
            user_chose_allocator(os.environ):
        return False
    mallopt = libc_function("mallopt")
    if mallopt is None or mallopt(M_MMAP_THRESHOLD, MMAP_CEILING) != 1 or \
            mallopt(M_TRIM_THRESHOLD, mib << 20) != 1:
        return False
    _kept = True
    if not numpy_chose_hugepages(os.environ) and defrag_stalls(DEFRAG):
        hint = _hugepage_hint()
        if hint is not None:
            hint(False)
    _arrow_from_the_heap(os.environ)
    return True


def _arrow_from_the_heap(environ: Mapping[str, str]) -> None:
    """Arrow's buffers from the C heap (its system pool), where its pool is still its own
    default (mimalloc) and the user did not name one."""
    import pyarrow as pa

    if "ARROW_DEFAULT_MEMORY_POOL" not in environ and \
            pa.default_memory_pool().backend_name == "mimalloc":
        pa.set_memory_pool(pa.system_memory_pool())


_LIBC: dict[str, Any] = {}


def libc_function(name: str) -> Any:
    """The C library's function ``name``, None where it has none."""
    if name not in _LIBC:
        try:
            _LIBC[name] = getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"),
                                  name)
        except (OSError, AttributeError):
            _LIBC[name] = None
    return _LIBC[name]


def numpy_chose_hugepages(environ: Mapping[str, str]) -> bool:
    """Whether the user set numpy's huge page hint (``NUMPY_MADVISE_HUGEPAGE``)."""
    return "NUMPY_MADVISE_HUGEPAGE" in environ


def defrag_stalls(setting: Path) -> bool:
    """Whether the kernel's THP ``defrag`` setting (the file ``setting``) compacts memory
    when a region hinted for huge pages is first touched."""
    try:
        chosen = re.search(r"\[([^\]]+)\]", setting.read_text())
    except OSError:
        return False
    return chosen is not None and chosen.group(1) in STALLING


def _hugepage_hint() -> Callable[[bool], bool] | None:
    """numpy's switch of its huge page hint (giving the setting before), where it has one."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:
        try:
            from numpy.core.multiarray import _set_madvise_hugepage  # (numpy 1.26)
        except ImportError:
            return None
    return _set_madvise_hugepage
