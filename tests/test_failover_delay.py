"""Failover subscriptions wait ``active-consumer-failover-delay-time-millis`` after a change of active consumer
before telling the consumers and delivering to the new one, as Pulsar 4.2.4 does (activeConsumerFailoverDelayTimeMillis,
1000 ms there by default; PersistentDispatcherSingleActiveConsumer sends the notices with the read after the delay).

pulsar-client-go's own TestPartitionTopic_ActiveConsumerChanged depends on it: the Go client knows a consumer id
only once the SUBSCRIBE's SUCCESS is read, and drops an ACTIVE_CONSUMER_CHANGE that comes right after it (passes on
Pulsar 4.2.4 and, with the delay, here: tests/go_suite_results). Here the engine with a manual clock."""

from __future__ import annotations

from pathlib import Path

from engine.broker import Broker, BrokerConfig
from engine.clock import ManualClock
from engine.store import Store
from engine.subscription import Consumer, Delivery, SubType
from engine.topic import AccessMode, Producer
from wire.framing import make_body
from wire.pulsar_api_pb2 import MessageMetadata

#: A partition: Failover's active consumer is then the partition index modulo the consumers, sorted by name ("a").
TOPIC = "persistent://public/default/failover-delay-partition-0"


class Sink:
    """What the engine sends to the consumers' connection, in order."""

    writable = True

    def __init__(self) -> None:
        self.events: list[tuple[str, str, object]] = []

    def deliver(self, consumer: Consumer, deliveries: list[Delivery]) -> None:
        self.events += [("message", consumer.name, d.entry.entry_id) for d in deliveries]

    def active_consumer_change(self, consumer: Consumer, is_active: bool) -> None:
        self.events.append(("active", consumer.name, is_active))

    def close_consumer(self, consumer: Consumer) -> None:
        pass

    def reached_end_of_topic(self, consumer: Consumer) -> None:
        pass

    def close_producer(self, producer: Producer) -> None:
        pass

    def producer_ready(self, producer: Producer) -> None:
        pass


def _broker(tmp_path: Path, delay_ms: int) -> tuple[Broker, ManualClock, Sink]:
    clock = ManualClock()
    broker = Broker(Store(tmp_path / "store.sqlite"), clock, BrokerConfig(active_consumer_failover_delay_ms=delay_ms))
    sink = Sink()
    topic = broker.topic(TOPIC)
    producer = Producer(1, "p", AccessMode.SHARED, 0, sink)
    topic.add_producer(producer)
    for seq in (1, 2):
        meta = MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1)
        topic.publish(producer, seq, -1, make_body(meta, b"m"), meta, lambda _: None, None)
    clock.advance(0)
    return broker, clock, sink


def _subscribe(broker: Broker, consumer_id: int, name: str, sink: Sink) -> Consumer:
    consumer = Consumer(consumer_id, name, sink)
    sub = broker.topic(TOPIC).subscribe(
        "sub", SubType.FAILOVER, consumer, durable=True, earliest=True, start_entry=None, sticky=False
    )
    sub.flow(consumer, 10)
    return consumer


def test_notices_and_messages_wait_for_the_delay(tmp_path: Path) -> None:
    broker, clock, sink = _broker(tmp_path, 1000)
    _subscribe(broker, 1, "a", sink)
    clock.advance(0.999)
    assert sink.events == []
    clock.advance(0.001)
    assert sink.events == [("active", "a", True), ("message", "a", 0), ("message", "a", 1)]
    # A consumer that does not become the active one is told at once, as Pulsar tells it.
    sink.events.clear()
    _subscribe(broker, 2, "b", sink)
    assert sink.events == [("active", "b", False)]
    broker.close()


def test_the_new_active_consumer_waits_too(tmp_path: Path) -> None:
    broker, clock, sink = _broker(tmp_path, 1000)
    a = _subscribe(broker, 1, "a", sink)
    _subscribe(broker, 2, "b", sink)
    clock.advance(1)
    sink.events.clear()
    broker.topic(TOPIC).subscriptions["sub"].remove_consumer(a)
    clock.advance(0.5)
    assert sink.events == []
    clock.advance(0.5)
    # Unacknowledged messages go to the new active consumer, after the notices.
    assert sink.events == [("active", "b", True), ("message", "b", 0), ("message", "b", 1)]
    broker.close()


def test_no_delay_tells_and_delivers_at_once(tmp_path: Path) -> None:
    broker, clock, sink = _broker(tmp_path, 0)
    _subscribe(broker, 1, "a", sink)
    clock.advance(0)
    assert sink.events == [("active", "a", True), ("message", "a", 0), ("message", "a", 1)]
    broker.close()
