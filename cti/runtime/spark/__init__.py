"""The Spark runtime (the product): adapters as streaming sources, stateful ingress.

Names load on first use, so that the process Spark starts for the Python streaming source,
which imports ``cti.runtime.spark.source``, does not import the whole runtime (pandas
included): that process starts on every query start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cti.runtime.spark.handle import RunningQuery
    from cti.runtime.spark.runtime import SparkRuntime
    from cti.runtime.spark.session import get_spark

__all__ = ["RunningQuery", "SparkRuntime", "get_spark"]


def __getattr__(name: str) -> Any:
    if name == "SparkRuntime":
        from cti.runtime.spark.runtime import SparkRuntime

        return SparkRuntime
    if name == "RunningQuery":
        from cti.runtime.spark.handle import RunningQuery

        return RunningQuery
    if name == "get_spark":
        from cti.runtime.spark.session import get_spark

        return get_spark
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
