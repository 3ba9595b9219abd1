"""A streaming query rides out an endpoint outage (issue 22, defect 2), and a longer one fails it saying so.

The endpoint is SIGKILLed mid-stream and kept down for 25 s (a broker restart, not a blip): the driver (planning,
committing) and the tasks (reading, writing in transactions) reconnect with exponential back-off and carry on, and
the sink holds every record exactly once. Local mode fails a query on the first task failure, so the tasks must
ride the outage out themselves.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import batches_in, name, read_committed, values

import pulsar_txn

RECORDS = 3000
PER_BATCH = 150
OUTAGE_SECONDS = 25


def publish_keyed(url: str, topic: str, payloads: list[str]) -> None:
    """Publish in batches with this project's client (its queue blocks rather than drops when full)."""
    with pulsar_txn.Client(url) as client:
        producer = client.create_producer(topic, batching_enabled=True, block_if_queue_full=True)
        for payload in payloads:
            producer.send_async(payload.encode(), None, partition_key="k")
        producer.flush()
        producer.close()


def _copy(session: Any, url: str, source: str, sink: str, checkpoint: Path, **options: Any) -> Any:
    reader = (
        session.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", PER_BATCH)
    )
    writer_options = {"transactionTimeoutMs": 30_000, **options}
    for key, value in options.items():
        reader = reader.option(key, value)
    writer = (
        reader.load()
        .select("value", "__key")
        .writeStream.format("pulsar")
        .option("service.url", url)
        .option("topic", sink)
        .option("checkpointLocation", str(checkpoint))
    )
    for key, value in writer_options.items():
        writer = writer.option(key, value)
    return writer.trigger(availableNow=True).start()


def _wait_for_batches(checkpoint: Path, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(batches_in(checkpoint, "commits")) < count:
        assert time.monotonic() < deadline, "the query did not make progress"
        time.sleep(0.1)


def test_an_endpoint_down_for_25_seconds_mid_stream_loses_and_duplicates_nothing(
    session: Any, server_factory: Any, tmp_path: Path
) -> None:
    server = server_factory()
    source, sink = name("outage-src"), name("outage-sink")
    expected = [f"r{i}" for i in range(RECORDS)]
    publish_keyed(server.url, source, expected)
    checkpoint = tmp_path / "checkpoint"
    query = _copy(session, server.url, source, sink, checkpoint)
    try:
        _wait_for_batches(checkpoint, 3)
        server.kill()
        down_at = time.monotonic()
        time.sleep(OUTAGE_SECONDS)
        server.start()
        assert query.isActive, f"the query ended during the outage: {query.exception()}"
        assert query.awaitTermination(240)
        assert query.exception() is None
    finally:
        query.stop()
    assert time.monotonic() - down_at >= OUTAGE_SECONDS
    assert len(batches_in(checkpoint, "commits")) == RECORDS // PER_BATCH
    assert sorted(values(read_committed(server.url, sink))) == sorted(expected)


def test_an_outage_longer_than_the_reconnect_timeout_fails_the_query_saying_so(
    session: Any, server_factory: Any, tmp_path: Path
) -> None:
    server = server_factory()
    source, sink = name("gone-src"), name("gone-sink")
    publish_keyed(server.url, source, [f"r{i}" for i in range(RECORDS)])
    checkpoint = tmp_path / "checkpoint"
    query = _copy(session, server.url, source, sink, checkpoint, reconnectTimeoutMs=3000, reconnectBackoffMaxMs=500)
    try:
        _wait_for_batches(checkpoint, 1)
        server.kill()
        with pytest.raises(Exception) as failure:
            query.awaitTermination(120)
        # A task's failure is Spark's "Writing job failed"; its cause, in the JVM stack trace, is the task's error.
        text = str(failure.value) + str(getattr(failure.value, "_stackTrace", ""))
        found = re.search(r"unreachable for (\d+) s \(\d+ attempts\), longer than the reconnect timeout of 3 s", text)
        assert found, text[-3000:]
        # One attempt lasts the client's operation timeout, cut to the reconnect timeout: not pulsar-client's 30 s.
        assert int(found[1]) < 30, found[0]
    finally:
        query.stop()
