"""The embedded SparkSession: ``local[*]``, few shuffle partitions, UI off, quiet logs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

_LOG4J = Path(__file__).with_name("log4j2.properties")


def get_spark(master: str | None = None, shuffle_partitions: int | None = None) -> SparkSession:
    """The active SparkSession, or a new embedded one.

    ``master`` defaults to ``$CTI_SPARK_MASTER`` or ``local[*]``; shuffle partitions default to
    the number of cores (Spark's 200 make tiny micro-batches take seconds). The state store is
    RocksDB: state beyond the JVM's heap spills to disk. (Spark's default HDFS-backed store was
    ~0.7 s faster per micro-batch for cti's few large state rows, but it keeps every key in the
    heap: plain Spark's 100,000-key window count ran out of the default 1 GB.) A session that
    is already active (a cluster, a notebook) is used as it is.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or os.environ.get("CTI_SPARK_MASTER", "local[*]")
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    partitions = shuffle_partitions or max(2, os.cpu_count() or 2)
    spark = (
        SparkSession.builder.master(master)
        .appName("cti")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.sql.streaming.stateStore.stateSchemaCheck", "true")
        .config("spark.sql.streaming.stateStore.providerClass",
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile={_LOG4J}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
