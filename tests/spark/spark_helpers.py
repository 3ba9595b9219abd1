"""Helpers of the Spark connector tests: publishing, reading back with the official client, queries."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pulsar

from tests.test_admin_http import Http

_LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def name(prefix: str) -> str:
    """A fresh topic name."""
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def partitioned(server: Any, prefix: str, partitions: int) -> str:
    """A fresh topic name, created as a partitioned topic through the admin REST API (of this endpoint or Pulsar)."""
    topic = name(prefix)
    path = f"/admin/v2/{topic.replace('://', '/')}/partitions"
    assert Http(server.admin_url).request("PUT", path, partitions)[0] == 204
    return topic


def publish(
    url: str,
    topic: str,
    values: Iterable[str],
    batching: bool = True,
    compression: pulsar.CompressionType = pulsar.CompressionType.NONE,
    **send: Any,
) -> list[Any]:
    """Publish with the official client; returns the message ids (in order)."""
    client = pulsar.Client(url, logger=_LOGGER)
    try:
        producer = client.create_producer(
            topic, batching_enabled=batching, batching_max_messages=25, compression_type=compression
        )
        if not batching:
            return [producer.send(v.encode(), **send) for v in values]
        ids: list[Any] = []
        for v in values:
            producer.send_async(v.encode(), lambda res, mid: ids.append(mid), **send)
        producer.flush()
        return sorted(ids, key=lambda m: (m.ledger_id(), m.entry_id(), m.batch_index()))
    finally:
        client.close()


def read_committed(url: str, topic: str, timeout_ms: int = 1500) -> list[pulsar.Message]:
    """Everything a (read-committed) consumer gets from the start of ``topic``, until it goes quiet."""
    client = pulsar.Client(url, logger=_LOGGER)
    try:
        consumer = client.subscribe(
            topic, f"check-{uuid.uuid4().hex[:8]}", initial_position=pulsar.InitialPosition.Earliest
        )
        messages = []
        while True:
            try:
                messages.append(consumer.receive(timeout_ms))
            except pulsar.Timeout:
                return messages
    finally:
        client.close()


def values(messages: Iterable[pulsar.Message]) -> list[str]:
    return [m.data().decode() for m in messages]


def batches_in(checkpoint: Path, log: str) -> set[int]:
    """Batch ids recorded in a checkpoint's ``offsets`` or ``commits`` log."""
    folder = checkpoint / log
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.exists() else set()
