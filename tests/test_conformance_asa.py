"""Every asa_*.json conformance case (``conformance_cases.CONFORMANCE``), on both runtimes
(SPEC section 7)."""

from __future__ import annotations

import pytest
from conformance_cases import asa_expected, bind_asa_case, case_files, load

from cti import Application, Cti
from cti.runtime.local import LocalRuntime

CASES = case_files("asa_")
RUNTIMES = ["local", "local-batches", "spark", "spark-batches"]


def _streams():
    cases = [load(p) for p in CASES]
    return cases, [bind_asa_case(c, Application()) for c in cases]


@pytest.fixture(scope="module")
def spark_results(spark):
    from cti.runtime.spark import SparkRuntime

    _, streams = _streams()
    groups = [s.ingress_group() for s in streams]
    return {
        "spark": SparkRuntime(spark).run_groups(groups),
        "spark-batches": SparkRuntime(spark, batch_sizes=[2, 1, 3]).run_groups(groups),
    }


def check_case(case, result):
    res = result[case["name"]]
    events = [i for i in res.items if not isinstance(i, Cti)]
    out = {e.payload["id"]: e for e in events}
    diags = {d.payload["id"]: d for d in res.diagnostics}
    for e in case["events"]:
        ts, status, reason = asa_expected(e)
        if status == "dropped":
            assert e["id"] not in out, e
            assert (diags[e["id"]].status, diags[e["id"]].reason) == ("dropped", reason), e
            continue
        assert out[e["id"]].start == ts, e
        assert out[e["id"]].payload["app_time"] == e["app_time"]  # payload untouched
        if status == "accepted":
            assert e["id"] not in diags, e
        else:
            assert (diags[e["id"]].status, diags[e["id"]].reason) == (status, reason), e
    order = [e.payload["id"] for e in events]
    if "expected_output_order" in case:
        assert order == case["expected_output_order"]
    for key in {e.payload["key"] for e in events}:  # within a key, timestamp order
        times = [e.start for e in events if e.payload["key"] == key]
        assert times == sorted(times)
    ctis = [i.time for i in res.items if isinstance(i, Cti)]
    assert ctis == sorted(set(ctis))
    m = res.metrics
    assert m["accepted"] + m["adjusted"] + m["dropped"] == len(case["events"])


@pytest.mark.parametrize(
    ("index", "runtime"),
    [(i, r) for i in range(len(CASES)) for r in RUNTIMES],
    ids=[f"{p.stem}-{r}" for p in CASES for r in RUNTIMES],
)
def test_conformance(index, runtime, request):
    cases, streams = _streams()
    if runtime.startswith("spark"):
        result = request.getfixturevalue("spark_results")[runtime][index]
    else:
        sizes = [2, 1, 3] if runtime == "local-batches" else None
        result = streams[index].run(LocalRuntime(batch_sizes=sizes))
    check_case(cases[index], result)
