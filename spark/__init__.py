"""Spark connector for Pulsar (PySpark Python Data Source ``pulsar``) and a transactional Python producer.

- :class:`spark.datasource.PulsarDataSource`: ``spark.dataSource.register(PulsarDataSource)``, then
  ``spark.read/readStream/write/writeStream.format("pulsar")``.
- :mod:`spark.client`: a Pulsar client with transactions for Python (the official client has none),
  ``from spark.client import Client``.
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
