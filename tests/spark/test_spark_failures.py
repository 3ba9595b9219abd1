"""Exactly-once writes through failures: a task failing mid-batch, and the driver killed after the commit.

In both cases the query is restarted from its checkpoint, Spark replays the unfinished micro-batch,
and the sink topic, read with a (read-committed) consumer, holds every record exactly once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from spark_driver import copy_query
from spark_helpers import batches_in, name, publish, read_committed, values

import pulsar_txn
from spark.commit_log import CommitLog
from spark.sink import SinkOptions

HERE = Path(__file__).resolve().parent
RECORDS = 300
PER_BATCH = 100


def _failing_copy(session: Any, url: str, source: str, sink: str, checkpoint: Path, fail_file: Path) -> Any:
    return (
        session.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", PER_BATCH)
        .load()
        .select("value", "__key")
        .writeStream.format("pulsar-faulty")
        .option("service.url", url)
        .option("topic", sink)
        .option("checkpointLocation", str(checkpoint))
        .option("batchingMaxMessages", 10)
        .option("fault.failTaskFile", str(fail_file))
        .trigger(availableNow=True)
        .start()
    )


def test_task_failing_mid_batch_then_restart_writes_each_record_once(
    session: Any, server: Any, tmp_path: Path
) -> None:
    source, sink = name("fail-src"), name("fail-sink")
    expected = [f"r{i}" for i in range(RECORDS)]
    publish(server.url, source, expected, partition_key="k")
    checkpoint, fail_file = tmp_path / "checkpoint", tmp_path / "fail"
    fail_file.write_text("1")

    query = _failing_copy(session, server.url, source, sink, checkpoint, fail_file)
    with pytest.raises(StreamingQueryException, match="injected task failure"):
        query.awaitTermination()
    assert not fail_file.exists()
    assert batches_in(checkpoint, "offsets") == {0, 1}
    assert batches_in(checkpoint, "commits") == {0}
    # Batch 1's half-written transaction was aborted: only batch 0 is visible.
    assert values(read_committed(server.url, sink, 800)) == expected[:PER_BATCH]

    _failing_copy(session, server.url, source, sink, checkpoint, fail_file).awaitTermination()
    assert batches_in(checkpoint, "commits") == {0, 1, 2}
    assert values(read_committed(server.url, sink)) == expected


def test_driver_killed_between_transaction_commit_and_spark_commit_log(
    session: Any, server: Any, tmp_path: Path
) -> None:
    source, sink = name("kill-src"), name("kill-sink")
    expected = [f"r{i}" for i in range(RECORDS)]
    publish(server.url, source, expected, partition_key="k")
    checkpoint, kill_file = tmp_path / "checkpoint", tmp_path / "kill"
    kill_file.write_text("1")
    args = [server.url, source, sink, str(checkpoint), str(kill_file), str(PER_BATCH)]

    driver = subprocess.run(
        [sys.executable, str(HERE / "spark_driver.py"), *args],
        start_new_session=True,
        capture_output=True,
        timeout=240,
    )
    assert driver.returncode == -signal.SIGKILL, driver.stderr.decode(errors="replace")[-3000:]
    # Killed inside the window: batch 1 is committed in Pulsar, not in Spark's commit log.
    assert batches_in(checkpoint, "offsets") == {0, 1}
    assert batches_in(checkpoint, "commits") == {0}
    assert values(read_committed(server.url, sink, 800)) == expected[: 2 * PER_BATCH]

    query = copy_query(session, *args[:4], str(tmp_path / "no-kill"), PER_BATCH)
    query.awaitTermination()
    assert batches_in(checkpoint, "commits") == {0, 1, 2}
    assert values(read_committed(server.url, sink)) == expected
    # The replayed batch 1 was recognised through the sink's durable "done" record.
    options = SinkOptions.parse(
        {"service.url": server.url, "topic": sink, "checkpointLocation": str(checkpoint)}, streaming=True
    )
    with pulsar_txn.Client(server.url) as client:
        state = CommitLog(client, options.commit_log_topic, options.sink_id).state()
    assert state.last_done == 2
    assert state.intent_batch is None
