"""Shared fixtures: one local SparkSession per test process (local[2], few partitions, UI off;
under ``-n`` one per worker), and the order in which files go to the workers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent))
from budget import TEST_JAVA_OPTIONS, examples  # noqa: E402 (tests/ on the path first)

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

# The JVMs the tests start: C1 alone and the serial collector (``budget.TEST_JAVA_OPTIONS``).
if TEST_JAVA_OPTIONS not in os.environ.get("SPARK_SUBMIT_OPTS", ""):
    os.environ["SPARK_SUBMIT_OPTS"] = \
        f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {TEST_JAVA_OPTIONS}".strip()
# Each Python process Spark starts (a query's data source planning, its source runner, the
# workers) imports cti: from cached bytecode, not compiled anew in every one of them, where
# the environment said not to write it (__pycache__ is ignored by git).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# No per-example deadline: the suite shares 2 cores with Spark's JVMs, where an example that
# takes 12 ms alone took 418 ms once (a flaky failure that asserted nothing about cti).
settings.register_profile("cti", deadline=None, max_examples=examples(100))
settings.load_profile("cti")


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: a worker per core, at most two: each worker has its own SparkSession
    (``local[2]``), and more than two on a small machine only wait for each other."""
    return max(1, min(2, os.cpu_count() or 1))


# In-process files whose property tests take a minute or more on CI (many hypothesis examples):
# ahead of the other in-process files, so that none of them is among the last files handed
# out, where one long file keeps a worker busy after the other has finished.
HEAVY_IN_PROCESS = {"test_vectorized_ingress.py", "test_ordered_ingress.py",
                    "test_ingress_properties.py", "test_engine_oracle.py"}


def pytest_collection_modifyitems(items) -> None:
    """The files whose tests start processes of their own first, then those that use Spark,
    then ``HEAVY_IN_PROCESS``, then the rest (each group in its order): under ``-n`` whole
    files go to the workers in this order (``--no-loadscope-reorder`` in pyproject's addopts:
    xdist's default orders files by their number of tests, which sends the slowest, with one
    or two tests each, last), so the longest start first and the quick ones fill the end."""
    processes = {item.path for item in items if item.get_closest_marker("processes")}
    spark = {item.path for item in items if uses_spark(item)}
    items.sort(key=lambda item: (item.path not in processes, item.path not in spark,
                                 item.path.name not in HEAVY_IN_PROCESS))


def uses_spark(item) -> bool:
    """Marked ``spark``, taking the ``spark`` fixture, or a case named for it (a runtime
    parameter whose fixture asks for the session by name)."""
    return bool(item.get_closest_marker("spark")) or "spark" in item.fixturenames \
        or "spark" in item.name


@pytest.fixture(scope="session")
def spark():
    from cti.runtime.spark import get_spark

    session = get_spark(master="local[2]", shuffle_partitions=2)
    yield session
    session.stop()
