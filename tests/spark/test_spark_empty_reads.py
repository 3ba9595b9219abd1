"""Batch reads that find nothing: an empty topic, and an empty offset range (issue 22, defect 1)."""

from __future__ import annotations

from typing import Any

import pulsar
from spark_helpers import name, publish


def _read(session: Any, url: str, **options: str) -> Any:
    reader = session.read.format("pulsar").option("service.url", url)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_of_an_empty_topic_has_no_rows(session: Any, server: Any) -> None:
    topic = name("empty")
    client = pulsar.Client(server.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        client.create_producer(topic).close()  # the topic exists, with no message
    finally:
        client.close()
    frame = _read(session, server.url, topic=topic)
    assert frame.collect() == []
    assert frame.count() == 0


def test_batch_read_of_an_empty_offset_range_has_no_rows(session: Any, server: Any) -> None:
    topic = name("empty-range")
    ids = publish(server.url, topic, [f"m{i}" for i in range(5)], batching=False)
    same = list(ids[3].serialize())
    frame = _read(
        session,
        server.url,
        topic=topic,
        startingOffsets=f'{{"{topic}": {same}}}',
        endingOffsets=f'{{"{topic}": {same}}}',
    )
    assert frame.collect() == []
    # The range is empty, not the topic: the same read without offsets has every message.
    assert [r.value.decode() for r in _read(session, server.url, topic=topic).collect()] == [f"m{i}" for i in range(5)]
