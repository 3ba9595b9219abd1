"""Spark connector for Pulsar (PySpark Python Data Source ``pulsar``), on the project's Python client :mod:`pulsar_txn`.

- :class:`spark.datasource.PulsarDataSource`: ``spark.dataSource.register(PulsarDataSource)``, then
  ``spark.read/readStream/write/writeStream.format("pulsar")``.
- :mod:`spark.pipeline`: the example pipeline (``pulsar-txn-proxy demo``).
- :mod:`spark.cluster`: a local Spark standalone cluster and ``spark-submit`` (``make spark-cluster-demo``).

Importing this package does not import PySpark; :func:`register` does.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the ``pulsar`` data source with a SparkSession."""
    from spark.datasource import PulsarDataSource

    spark.dataSource.register(PulsarDataSource)
