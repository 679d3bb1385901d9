"""The suite's budget on a small machine: how many examples each property test runs, and the
options of the JVMs the tests start.

A property's ``max_examples`` is written at its full count (what it was tuned to find) and
scaled by ``$CTI_TEST_EXAMPLES``: 0.3 by default, so that the README's test command runs in
minutes on two cores; ``CTI_TEST_EXAMPLES=1`` runs every property at its full count (before a
release, or after a change to the engine a property covers). A small count (a Spark test's
few cases, each a streaming query's worth) is never scaled below itself or ten.
"""

from __future__ import annotations

import os

EXAMPLES_SCALE = float(os.environ.get("CTI_TEST_EXAMPLES", "0.3"))

# The suite is CPU-bound on a 2-core machine, and most of its JVMs live for seconds to
# minutes: HotSpot's C2 compiler took half of a Spark test's JVM CPU, G1's threads a tenth
# of the rest (docs/development.md). Every driver JVM the tests start (the workers' sessions,
# `cti run`, `spark-submit`) gets C1 alone and the serial collector through spark-submit's
# own variable (conftest); a local cluster's executors through their options (test_cluster).
# A long-running job keeps Spark's defaults: this is the tests' choice.
TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def examples(full: int) -> int:
    """``full`` examples scaled by ``EXAMPLES_SCALE``, never fewer than ``min(full, 10)``."""
    if EXAMPLES_SCALE <= 0:
        raise ValueError(f"CTI_TEST_EXAMPLES must be above 0, not {EXAMPLES_SCALE}")
    return max(min(full, 10), round(full * EXAMPLES_SCALE))
