"""Every ```python block of docs/*.md and README.md runs (one namespace per page, in order),
and a ```text block right after one must equal what it printed: the docs stay true."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)


@pytest.mark.parametrize("path", PAGES, ids=[p.name for p in PAGES])
def test_doc_snippets_run_and_print_what_they_say(path, request, monkeypatch):
    text = path.read_text()
    blocks = [(m.group(1), m.group(2), m.start(), m.end()) for m in FENCE.finditer(text)]
    if any(lang == "python" and "spark" in code.lower() for lang, code, _, _ in blocks):
        request.getfixturevalue("spark")  # the shared session, not a new one
    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": f"doc_{path.stem}"}
    for k, (lang, code, start, end) in enumerate(blocks):
        if lang != "python":
            continue
        where = f"{path.name}:{text.count(chr(10), 0, start) + 1}"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, where, "exec"), namespace)
        following = blocks[k + 1] if k + 1 < len(blocks) else None
        if following and following[0] == "text" and not text[end:following[2]].strip():
            assert out.getvalue() == following[1], f"{where} printed something else"
