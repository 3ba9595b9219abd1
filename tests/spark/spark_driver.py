"""A Spark driver in its own process, for the test that kills the driver: copies a topic to another.

Usage: ``python spark_driver.py URL SOURCE SINK CHECKPOINT KILL_FILE MAX_RECORDS``. It runs a
``Trigger.AvailableNow`` query through ``pulsar-faulty``; the kill file makes it die after a commit.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["PYSPARK_PYTHON"] = sys.executable

from spark_faults import FaultyPulsar

from spark.pipeline import spark_session


def copy_query(spark: object, url: str, source: str, sink: str, checkpoint: str, kill_file: str, limit: int) -> object:
    """The copy query (the test restarts it with the same arguments)."""
    return (
        spark.readStream.format("pulsar")  # type: ignore[attr-defined]
        .option("service.url", url)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", limit)
        .load()
        .select("value", "__key")
        .writeStream.format("pulsar-faulty")
        .option("service.url", url)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .option("fault.killAfterCommitFile", kill_file)
        .option("fault.killProcessGroup", os.getpgrp())
        .trigger(availableNow=True)
        .start()
    )


def main() -> None:
    url, source, sink, checkpoint, kill_file, limit = sys.argv[1:7]
    spark = spark_session("pulsar-killed-driver")
    spark.dataSource.register(FaultyPulsar)
    copy_query(spark, url, source, sink, checkpoint, kill_file, int(limit)).awaitTermination()


if __name__ == "__main__":
    main()
