"""The heap kept between the in-process runtime's steps (``cti.engine.heap``)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from cti.engine.heap import checked_mib, user_chose_allocator
from cti.runtime.local import LocalRuntime

REPO = Path(__file__).resolve().parents[1]

# A fresh process runs a small query on a LocalRuntime, then allocates and frees 64 MiB in
# arrays of 4 MiB: prints how much of it is still resident after the free (MiB).
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
"""


def _resident_after_free(mib: int, env: dict[str, str] | None = None) -> int:
    proc = subprocess.run([sys.executable, "-c", _FREED_AND_RESIDENT, str(mib)], cwd=REPO,
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1])


glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the heap setting is glibc's")


@glibc_only
def test_freed_memory_stays_for_the_next_step() -> None:
    # Kept: the 64 MiB freed stay in the heap (the next step's arrays need no new pages);
    # not kept (the setting off, or the user's own MALLOC_ threshold): given back.
    assert _resident_after_free(128) >= 56
    assert _resident_after_free(0) <= 16
    assert _resident_after_free(128, {"MALLOC_TRIM_THRESHOLD_": "131072",
                                      "MALLOC_MMAP_THRESHOLD_": "131072"}) <= 16


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
