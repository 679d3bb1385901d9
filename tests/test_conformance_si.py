"""Every si_*.json conformance case (``conformance_cases.CONFORMANCE``), on both runtimes
(SPEC sections 3-6).

On Spark all cases run as separate ingress groups of one streaming query (one group key each),
once delivered in whole micro-batches and once split into micro-batches of 1 to 3 items.
"""

from __future__ import annotations

import pytest
from conformance_cases import bind_si_case, case_files, load, si_item

from cti import Application
from cti.runtime.local import LocalRuntime

CASES = case_files("si_")
RUNTIMES = ["local", "local-batches", "spark", "spark-batches"]


def check_case(case, result):
    for name, expected in case["expected"].items():
        assert result.items(name) == [si_item(e) for e in expected], name
    for name, ids in case.get("dropped", {}).items():
        dropped = [d.payload["id"] for d in result[name].dropped]
        assert dropped == ids, name
        metrics = result[name].metrics
        n_in = next(len(s["events"]) for s in case["streams"] if s["name"] == name)
        assert metrics["accepted"] + metrics["adjusted"] + metrics["dropped"] == n_in


def _groups():
    cases = [load(p) for p in CASES]
    return cases, [bind_si_case(c, Application())[0].ingress_group() for c in cases]


@pytest.fixture(scope="module")
def spark_results(spark):
    from cti.runtime.spark import SparkRuntime

    _, groups = _groups()
    return {
        "spark": SparkRuntime(spark).run_groups(groups),
        "spark-batches": SparkRuntime(spark, batch_sizes=[1, 3, 2]).run_groups(groups),
    }


@pytest.mark.parametrize(
    ("index", "runtime"),
    [(i, r) for i in range(len(CASES)) for r in RUNTIMES],
    ids=[f"{p.stem}-{r}" for p in CASES for r in RUNTIMES],
)
def test_conformance(index, runtime, request):
    cases, groups = _groups()
    if runtime.startswith("spark"):
        result = request.getfixturevalue("spark_results")[runtime][index]
    else:
        sizes = [1, 3, 2] if runtime == "local-batches" else None
        result = LocalRuntime(batch_sizes=sizes).run(groups[index])
    check_case(cases[index], result)
