"""Shared fixtures: one local SparkSession per test process (local[2], few partitions, UI off;
under ``-n`` one per worker), and the order in which files go to the workers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: a worker per core, at most two: each worker has its own SparkSession
    (``local[2]``), and more than two on a small machine only wait for each other."""
    return max(1, min(2, os.cpu_count() or 1))


def pytest_collection_modifyitems(items) -> None:
    """The files whose tests start processes of their own first (else in their order): under
    ``-n`` whole files go to the workers in this order, so the longest start first and the
    quick ones fill the end."""
    first = {item.path for item in items if item.get_closest_marker("processes")}
    items.sort(key=lambda item: item.path not in first)


@pytest.fixture(scope="session")
def spark():
    from cti.runtime.spark import get_spark

    session = get_spark(master="local[2]", shuffle_partitions=2)
    yield session
    session.stop()
