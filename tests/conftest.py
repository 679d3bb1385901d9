"""Shared fixtures: one local SparkSession for the whole run (local[2], few partitions, UI off)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark():
    from cti.runtime.spark import get_spark

    session = get_spark(master="local[2]", shuffle_partitions=2)
    yield session
    session.stop()
