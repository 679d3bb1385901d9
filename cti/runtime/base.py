"""What a runtime is, and how ``runtime=`` arguments are resolved."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from cti.results import RunResult

# The API layer's ingress group and output binding (``cti.query``): the API imports this
# module, so it names them without importing them (the layers import downwards only).
IngressGroup = Any
OutputBinding = Any


class Runtime(Protocol):
    def run(self, group: IngressGroup) -> RunResult:
        """Run the group's ingress over all available input and return every stream's result."""

    def write(self, group: IngressGroup, outputs: Sequence[OutputBinding]) -> None:
        """Run the group's ingress over all available input into output adapters."""

    def run_query(self, query: Any, with_inputs: bool = True) -> RunResult:
        """Run a derived stream (a query) over all available input; with ``with_inputs`` the
        result holds each input stream's own result too."""

    def write_query(self, query: Any) -> None:
        """Run a derived stream bound to an output adapter (``DerivedQuery``)."""


_default: Runtime | None = None


def set_default_runtime(runtime: Runtime | str) -> None:
    """Make ``runtime`` (a Runtime, ``"spark"`` or ``"local"``) the default of ``run``."""
    global _default
    _default = resolve_runtime(runtime)


# The runtimes by name: each is imported when first asked for, so the API (which resolves
# ``runtime=`` arguments here) does not depend on the runtimes; they depend on it.
RUNTIMES = {"spark": ("cti.runtime.spark", "SparkRuntime"),
            "local": ("cti.runtime.local", "LocalRuntime")}


def _named(name: str) -> Runtime:
    if name not in RUNTIMES:
        raise ValueError(f"unknown runtime {name!r}: use 'spark', 'local' or a Runtime")
    module, cls = RUNTIMES[name]
    return getattr(importlib.import_module(module), cls)()


def resolve_runtime(runtime: Runtime | str | None) -> Runtime:
    """``None`` is the default (Spark on ``local[*]`` unless changed), or a name, or a Runtime."""
    global _default
    if runtime is None:
        if _default is None:
            _default = _named("spark")
        return _default
    if isinstance(runtime, str):
        return _named(runtime)
    return runtime


def streaming_runtime(runtime: Runtime | str | None, what: str) -> Any:
    """The runtime for ``start()`` / ``to_dataframe()``: one that runs Spark streaming queries
    (``SparkRuntime``); others are refused naming ``what``."""
    runtime = resolve_runtime(runtime)
    if not hasattr(runtime, "start_query"):
        from cti.errors import BindingError

        raise BindingError(f"{what} needs SparkRuntime (a long-running Spark streaming query); "
                           f"{type(runtime).__name__} runs to the end of the available input: "
                           "use run() or collect()")
    return runtime


def query_inputs(query: Any) -> tuple[list[IngressGroup], list[tuple[int, int]]]:
    """The ingress groups a derived stream reads, and for each of its input streams (in
    ``query.inputs()`` order) its (group, index in group)."""
    groups, refs = queries_inputs([query])
    return groups, refs[0]


def queries_inputs(queries: Sequence[Any]
                   ) -> tuple[list[IngressGroup], list[list[tuple[int, int]]]]:
    """The ingress groups several derived streams read (each once), and per query, for each
    of its input streams, its (group, index in group)."""
    from cti.errors import BindingError

    groups: list[IngressGroup] = []
    all_refs: list[list[tuple[int, int]]] = []
    for query in queries:
        refs = []
        for stream in query.inputs():
            group = stream.ingress_group()
            same = [g for g, known in enumerate(groups) if known.names == group.names
                    and known.streams[0].application is group.streams[0].application]
            if not same:
                groups.append(group)
            g = same[0] if same else len(groups) - 1
            refs.append((g, groups[g].names.index(stream.name)))
            if query.name in group.names:
                raise BindingError(f"the query's name {query.name!r} is also an input stream's "
                                   "name; give it another with .named(...)")
        all_refs.append(refs)
    return groups, all_refs


BatchSizes = Sequence[int] | Mapping[str, Sequence[int]]


def stream_caps(batch_sizes: BatchSizes | None, names: Sequence[str]
                ) -> list[list[int] | None] | None:
    """Each stream's micro-batch caps, in turn (None: it delivers all it has at once), from
    ``batch_sizes``: one list for every stream, or lists by stream name (a stream not named is
    not capped); None where nothing is capped."""
    if not batch_sizes:
        return None
    if isinstance(batch_sizes, Mapping):
        return [list(batch_sizes[n]) if batch_sizes.get(n) else None for n in names]
    return [list(batch_sizes)] * len(names)
