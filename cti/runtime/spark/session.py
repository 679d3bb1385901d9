"""The embedded SparkSession: ``local[*]``, few shuffle partitions, UI off, quiet logs."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

_LOG4J = Path(__file__).with_name("log4j2.properties")
_WORKER_ZIP = Path("python", "lib", "pyspark.zip")
FILE_SYSTEM_CHECKPOINTS = ("org.apache.spark.sql.execution.streaming.checkpointing."
                           "FileSystemBasedCheckpointFileManager")


def site_spark_home() -> Path | None:
    """A SPARK_HOME for an embedded session whose Python processes import the installed pyspark.

    pip's PySpark puts ``<SPARK_HOME>/python/lib/pyspark.zip`` first on every Python process
    Spark starts. Python never caches bytecode for a module imported from a zip, so each new
    process compiles pyspark again: about 0.6 s of CPU. The Python data source's driver-side
    process starts anew with every streaming query, so each query start paid it. This home links
    everything of the installed PySpark home but ``python/``: Spark finds no zip, and its
    processes import the pyspark installed beside the interpreter, from cached bytecode. The
    same files either way.

    None (Spark's own home, unchanged) when the user set ``SPARK_HOME``, when workers may run
    another Python than this one (``PYSPARK_PYTHON``), or when the home cannot be built.
    """
    if os.name != "posix" or "SPARK_HOME" in os.environ:
        return None
    if os.environ.get("PYSPARK_PYTHON", sys.executable) != sys.executable:
        return None
    real = Path(pyspark.__file__).resolve().parent
    if not (real / "bin" / "spark-submit").exists() or not (real / _WORKER_ZIP).exists():
        return None
    tag = hashlib.sha256(str(real).encode()).hexdigest()[:12]
    home = Path(tempfile.gettempdir()) / f"cti-spark-home-{os.getuid()}-{tag}"
    # (``work``: the scratch directory a local-cluster's workers make in their home, not a
    # part of the installed PySpark)
    entries = [e for e in real.iterdir() if e.name not in ("python", "__pycache__", "work")]
    if all((home / e.name).exists() for e in entries):
        return home
    try:
        staging = Path(tempfile.mkdtemp(prefix=f"{home.name}.", dir=home.parent))
        for e in entries:
            (staging / e.name).symlink_to(e)
        try:
            staging.rename(home)
        except OSError:  # another process built it meanwhile (or a stale one is in the way)
            for link in staging.iterdir():
                link.unlink()
            staging.rmdir()
    except OSError:
        return None
    return home if all((home / e.name).exists() for e in entries) else None


def get_spark(master: str | None = None, shuffle_partitions: int | None = None) -> SparkSession:
    """The active SparkSession, or a new embedded one.

    ``master`` defaults to ``$CTI_SPARK_MASTER`` or ``local[*]``; shuffle partitions default to
    the number of cores (Spark's 200 make tiny micro-batches take seconds). A local session
    does not compress shuffles (cti's are compressed already) and its Python processes import
    the installed pyspark (``site_spark_home``). The state store is RocksDB: state beyond the
    JVM's heap spills to disk. (Spark's default HDFS-backed store was
    ~0.7 s faster per micro-batch for cti's few large state rows, but it keeps every key in the
    heap: plain Spark's 100,000-key window count ran out of the default 1 GB.) Its commits
    write a changelog of the micro-batch's changes, not a snapshot of the store (Spark's
    changelog checkpointing: a snapshot is taken in the background now and then), which
    halved the commit of a cti query's micro-batch. On a local master, checkpoint files are
    written through Hadoop's ``FileSystem`` API (``FILE_SYSTEM_CHECKPOINTS``): its default,
    ``FileContext``, started a ``readlink`` process per file it renamed there, a third of a
    small micro-batch. A session that is already active (a cluster, a notebook) is used as it
    is; under ``spark-submit`` the master it was given is.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Started by spark-submit (it hands the driver its JVM's port): its --master holds.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    master = master or os.environ.get("CTI_SPARK_MASTER") or (None if submitted else "local[*]")
    if master is not None and master.startswith("local") and not submitted:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        home = site_spark_home()
        if home is not None:
            os.environ["SPARK_HOME"] = str(home)
    partitions = shuffle_partitions or max(2, os.cpu_count() or 2)
    builder = SparkSession.builder if master is None else SparkSession.builder.master(master)
    if master is not None and master.startswith("local"):
        # cti's shuffles are packed rows already compressed (``packing``): compressing them
        # again cost ~10 % of a query; a local shuffle never crosses a network.
        builder = builder.config("spark.shuffle.compress", "false")
        # Checkpoint files through Hadoop's FileSystem API, not its FileContext: on a local
        # disk without Hadoop's native library, FileContext's rename starts a ``readlink``
        # process per file it looks at (about 14 per micro-batch of a stateful query).
        builder = builder.config("spark.sql.streaming.checkpointFileManagerClass",
                                 FILE_SYSTEM_CHECKPOINTS)
    spark = (
        builder
        .appName("cti")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.sql.streaming.stateStore.stateSchemaCheck", "true")
        .config("spark.sql.streaming.stateStore.providerClass",
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile={_LOG4J}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
