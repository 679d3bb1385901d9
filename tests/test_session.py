"""The embedded session (``cti.runtime.spark.session``): its Python processes import the
installed pyspark, from cached bytecode, not PySpark's zip; its shuffles are not compressed."""

from __future__ import annotations

import os
from pathlib import Path

import pyspark
import pytest

from cti.runtime.spark.session import site_spark_home


@pytest.fixture
def embedded(spark):
    """The test session, when ``get_spark`` built it with its own SPARK_HOME (not when the
    environment brought a Spark installation or another Python for the workers)."""
    home = Path(os.environ.get("SPARK_HOME", ""))
    if not home.name.startswith("cti-spark-home-"):
        pytest.skip("the session runs on a SPARK_HOME of the environment's")
    return spark, home


def test_workers_import_the_installed_pyspark_not_the_zip(embedded):
    spark, _ = embedded

    def where(_: object) -> str:
        import pyspark

        return pyspark.__file__

    files = set(spark.sparkContext.parallelize(range(2), 2).map(where).collect())
    assert files == {pyspark.__file__}  # the driver's own copy: a file, not a zip member


def test_the_spark_home_links_everything_but_python(embedded):
    spark, home = embedded
    real = Path(pyspark.__file__).parent
    assert not (home / "python").exists() and (real / "python").exists()
    assert (home / "jars").resolve() == (real / "jars").resolve()
    assert (home / "bin" / "spark-submit").exists()
    assert spark.sparkContext.getConf().get("spark.shuffle.compress") == "false"


def test_no_home_of_its_own_where_spark_or_the_workers_python_is_the_users(monkeypatch):
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    home = site_spark_home()  # built, or found from an earlier session
    assert home is not None and (home / "jars").is_dir() and not (home / "python").exists()
    monkeypatch.setenv("PYSPARK_PYTHON", "/some/other/python")
    assert site_spark_home() is None
    monkeypatch.delenv("PYSPARK_PYTHON")
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    assert site_spark_home() is None
