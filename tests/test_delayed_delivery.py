"""Delayed delivery on Shared and Key_Shared subscriptions, timed as Pulsar 4.2.4 (tick 1 s, not strict) times it.

Measured on Pulsar 4.2.4 standalone (official Python client, idle topics, 3 runs each): a message due within one
tick of being read is delivered at once (0.3 s and 0.9 s delays arrive immediately); one due later arrives between
0.26 s before and 0.9 s after its delivery time (its tracker's timer aims at the delivery time rounded down to 512
ms, at most once a tick, and releases what is due within the next tick). This endpoint fires at the delivery time
itself, so it never delivers earlier than Pulsar would; it used to fire one tick early (a 3 s delay arrived after
2.0 s).
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pulsar
import pytest

from engine.clock import now_ms
from engine.subscription import SubType
from tests.test_engine_transactions import Harness
from wire.framing import make_body
from wire.pulsar_api_pb2 import MessageMetadata


def _send_delayed(h: Harness, payload: bytes, delay_ms: int) -> None:
    h.seq += 1
    meta = MessageMetadata(producer_name="p", sequence_id=h.seq, publish_time=now_ms(h.clock))
    meta.deliver_at_time = now_ms(h.clock) + delay_ms
    meta.partition_key = "k"
    h.topic.publish(h.producer, h.seq, -1, make_body(meta, payload), meta, h.results.append, None)
    h.run()


def _arrivals(h: Harness, seconds: float, step: float = 0.01) -> dict[bytes, float]:
    """Advance the clock in steps; when (seconds after the start) each payload arrived."""
    start = h.clock.now()
    seen: dict[bytes, float] = {}
    while h.clock.now() - start < seconds:
        h.clock.advance(step)
        for payload in h.sink.payloads():
            seen.setdefault(payload, round(h.clock.now() - start, 3))
    return seen


@pytest.mark.parametrize("sub_type", [SubType.SHARED, SubType.KEY_SHARED])
def test_a_held_message_is_not_released_before_its_delivery_time(tmp_path: Path, sub_type: SubType) -> None:
    h = Harness(tmp_path)
    h.subscribe("s", sub_type)
    _send_delayed(h, b"3s", 3000)
    _send_delayed(h, b"half-second", 500)
    assert h.sink.payloads() == [b"half-second"]  # due within a tick: at once, as Pulsar
    arrived = _arrivals(h, 4.0)
    assert 3.0 <= arrived[b"3s"] <= 3.05
    h.close()


def test_held_messages_due_within_the_next_tick_go_together_and_releases_are_a_tick_apart(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.subscribe("s", SubType.SHARED)
    _send_delayed(h, b"at-3.0", 3000)
    _send_delayed(h, b"at-3.6", 3600)  # within a tick of the first release: released with it, as Pulsar does
    _send_delayed(h, b"at-4.7", 4700)
    _send_delayed(h, b"at-5.2", 5200)  # due 0.5 s after the previous release: waits for the next tick
    arrived = _arrivals(h, 7.0)
    assert 3.0 <= arrived[b"at-3.0"] == arrived[b"at-3.6"] <= 3.05
    assert 4.7 <= arrived[b"at-4.7"] == arrived[b"at-5.2"] <= 4.75
    h.close()


@pytest.mark.parametrize("consumer_type", [pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared])
def test_deliver_after_reaches_the_official_client_no_earlier_than_due(
    client: pulsar.Client, topic: str, consumer_type: pulsar.ConsumerType
) -> None:
    consumer = client.subscribe(topic, "s", consumer_type=consumer_type)
    producer = client.create_producer(topic, batching_enabled=False)
    sent = time.time()
    producer.send(b"later", deliver_after=datetime.timedelta(seconds=3))
    message = consumer.receive(6000)
    assert message.data() == b"later"
    assert time.time() - sent >= 2.98  # the client's own clock sets deliver_at; allow its rounding to the ms
