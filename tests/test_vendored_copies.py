"""The repository carries copies of the workspace's sample data (``data/``) and conformance
cases (``tests/conformance/``), so that a clone anywhere runs the examples and the tests. Where
the workspace's ``../shared`` sits beside the project, the copies must equal it, file for file."""

from __future__ import annotations

from pathlib import Path

import pytest
from conformance_cases import SHARED, VENDORED

REPO = Path(__file__).resolve().parents[1]
COPIES = [(SHARED / "data", REPO / "data"), (SHARED / "conformance", VENDORED)]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize(("source", "copy"), COPIES, ids=["data", "conformance"])
def test_the_copies_equal_the_workspace(source, copy):
    if not source.is_dir():
        pytest.skip(f"no {source} beside this clone: the copy is all there is")
    assert _files(copy) == _files(source)
