"""Every win_*.json conformance case (``conformance_cases.CONFORMANCE``: snapshot and count
windows, TopK; SPEC 8), on both runtimes, whole and split into micro-batches of one event;
in process also with a CTI after every event, which must not change the result.

On Spark every case of a variant runs as a query of one streaming query (a query costs
seconds)."""

from __future__ import annotations

import pytest
from conformance_cases import bind_win_case, case_files, load, win_expected, win_got, win_query

from cti import Application
from cti.runtime.local import LocalRuntime

CASES = case_files("win_")
VARIANTS = {"whole": (None, False), "batches-of-1": ([1], False), "ctis": (None, True),
            "ctis-batches-of-1": ([1], True)}


def _queries(ctis: bool) -> list:
    return [win_query(c, bind_win_case(c, Application(), ctis)).named(f"q{k}")
            for k, c in enumerate(load(p) for p in CASES)]


SPARK_VARIANTS = ("whole", "batches-of-1")  # (each Spark run costs about a minute here)


@pytest.fixture(scope="module")
def spark_results(spark):
    from cti.runtime.spark import SparkRuntime

    out = {}
    for name in SPARK_VARIANTS:
        sizes, ctis = VARIANTS[name]
        queries = _queries(ctis)
        results = SparkRuntime(spark, batch_sizes=sizes).run_queries(queries, with_inputs=False)
        out[name] = [r.items(q.name) for q, r in zip(queries, results, strict=True)]
    return out


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("index", range(len(CASES)), ids=[p.stem for p in CASES])
def test_conformance_local(index, variant):
    sizes, ctis = VARIANTS[variant]
    case = load(CASES[index])
    query = win_query(case, bind_win_case(case, Application(), ctis))
    got = query.run(LocalRuntime(batch_sizes=sizes)).items("output")
    assert win_got(got) == win_expected(case), case["why"]


@pytest.mark.spark
@pytest.mark.parametrize("variant", SPARK_VARIANTS)
@pytest.mark.parametrize("index", range(len(CASES)), ids=[p.stem for p in CASES])
def test_conformance_spark(index, variant, request):
    case = load(CASES[index])
    got = request.getfixturevalue("spark_results")[variant][index]
    assert win_got(got) == win_expected(case), case["why"]
