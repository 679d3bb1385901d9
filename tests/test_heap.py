"""The heap kept between the in-process runtime's steps (``cti.engine.heap``)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from cti.engine.heap import DEFRAG, checked_mib, defrag_stalls, user_chose_allocator
from cti.runtime.local import LocalRuntime

REPO = Path(__file__).resolve().parents[1]

# A fresh process runs a small query on a LocalRuntime, then allocates and frees 64 MiB in
# arrays of 4 MiB: prints how much of it is still resident after the free (MiB), whether
# numpy's huge page hint is on, and Arrow's memory pool.
_FREED_AND_RESIDENT = """
import sys
import numpy as np
from cti import CepStream, EventShape, PointEvent
from cti.io.memory import MemoryInputAdapterFactory
from cti.runtime.local import LocalRuntime

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

stream = CepStream.create("readings", MemoryInputAdapterFactory(),
                          [PointEvent(t, {"v": t}) for t in range(10)], EventShape.POINT)
stream.where(lambda e: e["v"] > 2).run(LocalRuntime(keep_freed_mb=int(sys.argv[1]) or None))
before = rss()
arrays = [np.ones(1 << 19) for _ in range(16)]
del arrays
print(round(rss() - before))
from cti.engine.heap import _hugepage_hint
import pyarrow as pa
print(_hugepage_hint()(True), pa.default_memory_pool().backend_name)
"""


def _resident_after_free(mib: int, env: dict[str, str] | None = None
                         ) -> tuple[int, bool, str]:
    """MiB still resident of 64 freed, whether numpy's huge page hint is on and Arrow's
    pool, after a query on ``LocalRuntime(keep_freed_mb=mib)`` in a fresh process."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")
               and k not in ("NUMPY_MADVISE_HUGEPAGE", "ARROW_DEFAULT_MEMORY_POOL")}
    proc = subprocess.run([sys.executable, "-c", _FREED_AND_RESIDENT, str(mib)], cwd=REPO,
                          capture_output=True, text=True, check=False,
                          env={**environ, "PYTHONPATH": str(REPO), **(env or {})})
    assert proc.returncode == 0, proc.stderr
    resident, hint, pool = proc.stdout.split()[-3:]
    return int(resident), hint == "True", pool


glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the heap setting is glibc's")


@glibc_only
def test_freed_memory_stays_for_the_next_step() -> None:
    # Kept: the 64 MiB freed stay in the heap (the next step's arrays need no new pages),
    # numpy's huge page hint is off where the kernel compacts for it, and Arrow allocates
    # from the heap; not kept (the setting off, or the user's own MALLOC_ threshold): given
    # back, the hint and the pool as numpy and Arrow set them; the user's choices stand.
    stalls = defrag_stalls(DEFRAG)
    arrows = subprocess.run([sys.executable, "-c", "import pyarrow as pa; "
                             "print(pa.default_memory_pool().backend_name)"],
                            capture_output=True, text=True, check=True).stdout.strip()
    kept_pool = "system" if arrows == "mimalloc" else arrows
    assert _resident_after_free(128) == (pytest.approx(64, abs=8), not stalls, kept_pool)
    assert _resident_after_free(0) == (pytest.approx(0, abs=16), True, arrows)
    assert _resident_after_free(128, {"MALLOC_TRIM_THRESHOLD_": "131072",
                                      "MALLOC_MMAP_THRESHOLD_": "131072"}) == (
        pytest.approx(0, abs=16), True, arrows)
    assert _resident_after_free(128, {"NUMPY_MADVISE_HUGEPAGE": "1"})[1]
    assert _resident_after_free(128, {"ARROW_DEFAULT_MEMORY_POOL": arrows})[2] == arrows


def test_defrag_settings_that_stall(tmp_path: Path) -> None:
    setting = tmp_path / "defrag"
    for line, stalls in (("always defer defer+madvise [madvise] never", True),
                         ("always defer [defer+madvise] madvise never", True),
                         ("always [defer] defer+madvise madvise never", False),
                         ("always defer defer+madvise madvise [never]", False)):
        setting.write_text(line + "\n")
        assert defrag_stalls(setting) is stalls, line
    assert not defrag_stalls(tmp_path / "missing")


def test_user_settings_of_the_allocator_are_left_alone() -> None:
    assert user_chose_allocator({"MALLOC_TRIM_THRESHOLD_": "0"})
    assert user_chose_allocator({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"})
    assert not user_chose_allocator({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2"})
    assert not user_chose_allocator({"PATH": "/bin"})


@pytest.mark.parametrize("bad", [-1, 1.5, True, "128"])
def test_keep_freed_mb_is_a_whole_number(bad: object) -> None:
    with pytest.raises(ValueError, match=r"LocalRuntime\(keep_freed_mb=\.\.\.\)"):
        LocalRuntime(keep_freed_mb=bad)  # type: ignore[arg-type]


def test_keep_freed_mb_off() -> None:
    assert checked_mib(None, "LocalRuntime") is None
    assert checked_mib(0, "LocalRuntime") == 0
    assert LocalRuntime().keep_freed_mb == 128
