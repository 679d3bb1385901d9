"""The Spark runtime (the product): adapters as streaming sources, stateful ingress."""

from cti.runtime.spark.runtime import SparkRuntime
from cti.runtime.spark.session import get_spark

__all__ = ["SparkRuntime", "get_spark"]
