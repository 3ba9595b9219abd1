"""Fixtures of the Spark connector tests: one local SparkSession (local[2]) for the whole suite.

Spark's Python workers must run this venv's interpreter (``PYSPARK_PYTHON``) and import the
fault-injecting data source of :mod:`spark_faults`, so this directory goes on ``PYTHONPATH``
before the JVM starts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")) if p
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "spark_cluster: runs a Spark standalone cluster (a master, two workers) with spark-submit"
    )


@pytest.fixture(scope="session")
def session() -> Iterator[Any]:
    """The suite's SparkSession, with the ``pulsar`` and ``pulsar-faulty`` data sources registered."""
    from spark_faults import FaultyPulsar

    from spark.pipeline import spark_session

    spark = spark_session("pulsar-connector-tests")
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "true")
    spark.dataSource.register(FaultyPulsar)
    yield spark
    spark.stop()
