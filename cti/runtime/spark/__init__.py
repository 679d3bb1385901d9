"""The Spark runtime (the product): adapters as streaming sources, stateful ingress.

Names load on first use, so that the process Spark starts for the Python streaming source,
which imports ``cti.runtime.spark.source``, does not import the whole runtime (pandas
included): that process starts on every query start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cti.lazy import lazy_names

if TYPE_CHECKING:
    from cti.runtime.spark.handle import RunningQuery
    from cti.runtime.spark.runtime import SparkRuntime
    from cti.runtime.spark.session import get_spark

__all__ = ["RunningQuery", "SparkRuntime", "get_spark"]


__getattr__, __dir__ = lazy_names(globals(), {
    "SparkRuntime": "cti.runtime.spark.runtime", "RunningQuery": "cti.runtime.spark.handle",
    "get_spark": "cti.runtime.spark.session"})
