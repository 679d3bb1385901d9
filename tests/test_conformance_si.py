"""Every si_*.json case of ../shared/conformance, on both runtimes (SPEC sections 3-6)."""

from __future__ import annotations

import pytest
from conformance_cases import bind_si_case, case_files, load, si_item

from cti import Application
from cti.runtime.local import LocalRuntime

CASES = case_files("si_")


def check_case(case, result):
    for name, expected in case["expected"].items():
        assert result.items(name) == [si_item(e) for e in expected], name
    for name, ids in case.get("dropped", {}).items():
        dropped = [d.payload["id"] for d in result[name].dropped]
        assert dropped == ids, name
        metrics = result[name].metrics
        n_in = next(len(s["events"]) for s in case["streams"] if s["name"] == name)
        assert metrics["accepted"] + metrics["adjusted"] + metrics["dropped"] == n_in


def run_case(path, runtime):
    case = load(path)
    streams = bind_si_case(case, Application())
    return case, streams[0].run(runtime)


@pytest.mark.parametrize("path", CASES, ids=[f"{p.stem}-local" for p in CASES])
def test_conformance_local(path):
    case, result = run_case(path, LocalRuntime())
    check_case(case, result)


@pytest.mark.parametrize("path", CASES, ids=[f"{p.stem}-local-batches" for p in CASES])
@pytest.mark.parametrize("size", [1, 2])
def test_conformance_local_batches(path, size):
    case, result = run_case(path, LocalRuntime(batch_sizes=[size]))
    check_case(case, result)
