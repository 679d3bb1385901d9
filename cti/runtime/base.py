"""What a runtime is, and how ``runtime=`` arguments are resolved."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from cti.query import IngressGroup, OutputBinding
    from cti.results import RunResult


class Runtime(Protocol):
    def run(self, group: IngressGroup) -> RunResult:
        """Run the group's ingress over all available input and return every stream's result."""

    def write(self, group: IngressGroup, outputs: Sequence[OutputBinding]) -> None:
        """Run the group's ingress over all available input into output adapters."""


_default: Runtime | None = None


def set_default_runtime(runtime: Runtime | str) -> None:
    """Make ``runtime`` (a Runtime, ``"spark"`` or ``"local"``) the default of ``run``."""
    global _default
    _default = resolve_runtime(runtime)


def resolve_runtime(runtime: Runtime | str | None) -> Runtime:
    """``None`` is the default (Spark on ``local[*]`` unless changed), or a name, or a Runtime."""
    global _default
    if runtime is None:
        if _default is None:
            from cti.runtime.spark import SparkRuntime

            _default = SparkRuntime()
        return _default
    if runtime == "local":
        from cti.runtime.local import LocalRuntime

        return LocalRuntime()
    if runtime == "spark":
        from cti.runtime.spark import SparkRuntime

        return SparkRuntime()
    if isinstance(runtime, str):
        raise ValueError(f"unknown runtime {runtime!r}: use 'spark', 'local' or a Runtime")
    return runtime
