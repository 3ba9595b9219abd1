"""A driver for ``spark-submit`` in the cluster test: copies a topic to another, exactly once, then exits.

Usage: ``spark-submit ... cluster_copy_job.py URL SOURCE SINK CHECKPOINT MAX_RECORDS``.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession

import spark as connector


def main() -> None:
    url, source, sink, checkpoint, limit = sys.argv[1:6]
    session = SparkSession.builder.appName("pulsar-cluster-copy").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    connector.register(session)
    query = (
        session.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", int(limit))
        .load()
        .select("value", "__key")
        .writeStream.format("pulsar")
        .option("service.url", url)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .option("transactionTimeoutMs", 20_000)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    session.stop()


if __name__ == "__main__":
    main()
