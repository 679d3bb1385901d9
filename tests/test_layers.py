"""No import cycle inside cti: the API (cti.query, cti.query.methods) reaches the runtimes
only through cti.runtime.base's registry by name, and the runtimes depend on the layers below
them, never back. Every import counts: inside functions and under ``if TYPE_CHECKING`` too."""

from __future__ import annotations

import ast
from pathlib import Path

CTI = Path(__file__).resolve().parents[1] / "cti"


def _modules() -> dict[str, Path]:
    out = {}
    for path in CTI.rglob("*.py"):
        parts = path.relative_to(CTI.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cti"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("cti")}
    return found & set(modules)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (as a path that ends where it starts), or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_inside_cti():
    modules = _modules()
    graph = {m: _imports(p, modules) - {m} for m, p in modules.items()}
    assert "cti.runtime.base" in graph["cti.query.binding"]  # the API does reach the runtime layer
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


# The engine's layers, top down: a package imports only the packages below it. Ingress and the
# operators stand side by side (neither imports the other); both hand events on in the forms of
# ``cti.forms`` (rows, layouts, frames and chunks), the lowest of the internal layers.
LAYERS = {"cti.engine": 0, "cti.ingress": 1, "cti.operators": 1, "cti.forms": 2}


def _layer(module: str) -> tuple[str, int] | None:
    return next(((top, rank) for top, rank in LAYERS.items()
                 if module == top or module.startswith(top + ".")), None)


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a package above the importer's or beside it, as ``importer -> imported``."""
    bad = []
    for m, deps in graph.items():
        here = _layer(m)
        if here is None:
            continue
        for d in sorted(deps):
            there = _layer(d)
            if there is None or there[0] == here[0]:
                continue
            if there[1] <= here[1]:
                bad.append(f"{m} -> {d}")
    return bad


def test_upward_finder_finds_an_upward_import():
    assert _upward({"cti.ingress.x": {"cti.engine.shard", "cti.forms.frame"},
                    "cti.operators.window": {"cti.ingress.state"},
                    "cti.ingress.y": {"cti.operators.window"},
                    "cti.forms.rows": {"cti.operators.plan"},
                    "cti.engine.shard": {"cti.ingress.x", "cti.operators.window"}}) == [
        "cti.ingress.x -> cti.engine.shard", "cti.operators.window -> cti.ingress.state",
        "cti.ingress.y -> cti.operators.window", "cti.forms.rows -> cti.operators.plan"]


def test_engine_ingress_operators_import_only_downward():
    modules = _modules()
    graph = {m: _imports(p, modules) - {m} for m, p in modules.items()}
    assert "cti.ingress.group" in graph["cti.engine.shard"]  # (the engine does use ingress)
    assert _upward(graph) == []
