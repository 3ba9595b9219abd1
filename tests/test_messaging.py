"""Messaging with the official client: produce/consume, batching, compression, partitions,
subscription types, acknowledgements, redelivery, unsubscribe and initial positions."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable

import mmh3
import pulsar
import pytest

from tests.helpers import drain

EARLIEST = pulsar.InitialPosition.Earliest
LATEST = pulsar.InitialPosition.Latest
SHARED = pulsar.ConsumerType.Shared
FAILOVER = pulsar.ConsumerType.Failover
KEY_SHARED = pulsar.ConsumerType.KeyShared


def receive_n(consumer: pulsar.Consumer, n: int, timeout_ms: int = 5000) -> list[pulsar.Message]:
    """Exactly ``n`` messages (fails on a receive timeout)."""
    return [consumer.receive(timeout_ms) for _ in range(n)]


def collect(consumers: list[pulsar.Consumer], total: int, ack: bool = True, deadline_s: float = 10.0
            ) -> list[list[pulsar.Message]]:
    """Poll several consumers until ``total`` messages arrived between them, then briefly for extras."""
    got: list[list[pulsar.Message]] = [[] for _ in consumers]
    end = time.monotonic() + deadline_s
    while sum(map(len, got)) < total and time.monotonic() < end:
        for i, consumer in enumerate(consumers):
            try:
                msg = consumer.receive(20)
            except pulsar.Timeout:
                continue
            got[i].append(msg)
            if ack:
                consumer.acknowledge(msg)
    for i, consumer in enumerate(consumers):
        got[i].extend(drain(consumer, 200))
    return got


def payloads(messages: list[pulsar.Message]) -> list[bytes]:
    return [m.data() for m in messages]


def produce(client: pulsar.Client, topic: str, data: list[bytes], **kwargs: object) -> list[pulsar.MessageId]:
    """Send each payload synchronously (no batching unless asked) and close the producer."""
    kwargs.setdefault("batching_enabled", False)
    producer = client.create_producer(topic, **kwargs)
    ids = [producer.send(d) for d in data]
    producer.close()
    return ids


def produce_batch(
    client: pulsar.Client, topic: str, data: list[bytes], **kwargs: object
) -> list[pulsar.MessageId]:
    """Send payloads with send_async + flush so they travel as one batch."""
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=len(data), batching_max_publish_delay_ms=5000,
        **kwargs,
    )
    ids: list[pulsar.MessageId | None] = [None] * len(data)

    def done(i: int) -> Callable[[pulsar.Result, pulsar.MessageId], None]:
        def callback(result: pulsar.Result, msg_id: pulsar.MessageId) -> None:
            assert result == pulsar.Result.Ok
            ids[i] = msg_id
        return callback

    for i, d in enumerate(data):
        producer.send_async(d, done(i))
    producer.flush()
    producer.close()
    assert all(i is not None for i in ids)
    return ids  # type: ignore[return-value]


def numbered(n: int, prefix: str = "m") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


# -- produce and consume ---------------------------------------------------------------------


def test_non_batched_metadata_round_trip(client: pulsar.Client, topic: str) -> None:
    """Payloads, order, ids, properties, keys and timestamps come back as sent."""
    consumer = client.subscribe(topic, "sub", initial_position=EARLIEST)
    producer = client.create_producer(topic, batching_enabled=False)
    before = int(time.time() * 1000)
    sent = [
        producer.send(
            f"p{i}".encode(), properties={"i": str(i), "k": "v"}, partition_key=f"key-{i % 3}",
            event_timestamp=1_600_000_000_000 + i,
        )
        for i in range(10)
    ]
    after = int(time.time() * 1000)
    received = receive_n(consumer, 10)
    assert payloads(received) == numbered(10, "p")
    assert [m.message_id() for m in received] == sent
    assert len({m.entry_id() for m in sent}) == 10
    assert all(m.batch_index() == -1 for m in sent)
    for i, msg in enumerate(received):
        assert msg.properties() == {"i": str(i), "k": "v"}
        assert msg.partition_key() == f"key-{i % 3}"
        assert msg.event_timestamp() == 1_600_000_000_000 + i
        assert before - 1000 <= msg.publish_timestamp() <= after + 1000
        assert msg.redelivery_count() == 0
        assert msg.topic_name() == topic
        consumer.acknowledge(msg)
    assert [m.publish_timestamp() for m in received] == sorted(m.publish_timestamp() for m in received)
    assert drain(consumer, 200) == []


def test_message_without_metadata(client: pulsar.Client, topic: str) -> None:
    """A plain message has no properties, key or event time; an empty payload survives."""
    consumer = client.subscribe(topic, "sub")
    produce(client, topic, [b"", b"x" * 100_000])
    first, second = receive_n(consumer, 2)
    assert first.data() == b""
    assert second.data() == b"x" * 100_000
    assert first.properties() == {}
    assert first.partition_key() == ""
    assert first.event_timestamp() == 0


def test_batched_send_async_and_flush(client: pulsar.Client, topic: str) -> None:
    """One batch: shared entry id, batch indexes 0..n-1, per-message metadata preserved."""
    consumer = client.subscribe(topic, "sub", initial_position=EARLIEST)
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=100, batching_max_publish_delay_ms=5000
    )
    ids: list[pulsar.MessageId] = []
    for i in range(20):
        producer.send_async(
            f"b{i}".encode(), lambda res, mid: ids.append(mid), properties={"n": str(i)},
            partition_key="k", event_timestamp=1000 + i,
        )
    producer.flush()
    received = receive_n(consumer, 20)
    assert payloads(received) == numbered(20, "b")
    assert sorted(ids) == [m.message_id() for m in received]
    assert len({m.message_id().entry_id() for m in received}) == 1
    assert [m.message_id().batch_index() for m in received] == list(range(20))
    for i, msg in enumerate(received):
        assert msg.properties() == {"n": str(i)}
        assert msg.partition_key() == "k"
        assert msg.event_timestamp() == 1000 + i
    producer.close()


def test_many_batches_keep_order(client: pulsar.Client, topic: str) -> None:
    """Several batches and plain messages in one stream arrive in send order."""
    consumer = client.subscribe(topic, "sub")
    first = produce_batch(client, topic, numbered(50, "a"))
    produce(client, topic, numbered(5, "b"))
    second = produce_batch(client, topic, numbered(50, "c"))
    received = receive_n(consumer, 105)
    assert payloads(received) == numbered(50, "a") + numbered(5, "b") + numbered(50, "c")
    assert [m.message_id() for m in received[:50]] == first
    assert [m.message_id() for m in received[55:]] == second


@pytest.mark.parametrize(
    "compression",
    [
        pulsar.CompressionType.LZ4,
        pulsar.CompressionType.ZLib,
        pulsar.CompressionType.ZSTD,
        pulsar.CompressionType.SNAPPY,
    ],
)
def test_compressed_batches(client: pulsar.Client, topic: str, compression: pulsar.CompressionType) -> None:
    """Compressed batches (and a compressed single message) decompress intact."""
    consumer = client.subscribe(topic, "sub")
    data = [(f"payload-{i}-" * (i + 1)).encode() for i in range(30)]
    produce_batch(client, topic, data, compression_type=compression)
    big = bytes(range(256)) * 400
    produce(client, topic, [big], compression_type=compression)
    received = receive_n(consumer, 31)
    assert payloads(received) == [*data, big]


# -- partitioned topics ----------------------------------------------------------------------


def test_partitioned_round_robin(partitioned: pulsar.Client, topic: str) -> None:
    """An auto-created topic has 3 partitions; round-robin routing spreads messages over all."""
    assert partitioned.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]
    consumer = partitioned.subscribe(topic, "sub", initial_position=EARLIEST)
    ids = produce(partitioned, topic, numbered(12))
    counts = Counter(mid.partition() for mid in ids)
    assert counts == {0: 4, 1: 4, 2: 4}
    # Round robin: consecutive messages go to consecutive partitions.
    assert all((b.partition() - a.partition()) % 3 == 1 for a, b in itertools.pairwise(ids))
    received = collect([consumer], 12)[0]
    assert sorted(payloads(received)) == sorted(numbered(12))
    for msg in received:
        index = msg.message_id().partition()
        assert msg.topic_name() == f"{topic}-partition-{index}"
        assert msg.message_id() == ids[int(msg.data()[1:])]
    # Within one partition, order is kept.
    for p in range(3):
        in_partition = [int(m.data()[1:]) for m in received if m.message_id().partition() == p]
        assert in_partition == sorted(in_partition)


def test_partitioned_keyed_messages_stick_to_a_partition(partitioned: pulsar.Client, topic: str) -> None:
    """Messages with the same partition key land on the same partition."""
    producer = partitioned.create_producer(topic, batching_enabled=False)
    ids = [producer.send(b"x", partition_key=f"k{i % 4}") for i in range(20)]
    for k in range(4):
        assert len({ids[i].partition() for i in range(k, 20, 4)}) == 1


def test_partition_names_usable_directly(partitioned: pulsar.Client, topic: str) -> None:
    """``-partition-N`` names work for producers and consumers, alongside the parent topic."""
    parent_consumer = partitioned.subscribe(topic, "parent", initial_position=EARLIEST)
    ids = produce(partitioned, topic, numbered(6))
    on_one = [int(d[1:]) for d, mid in zip(numbered(6), ids, strict=True) if mid.partition() == 1]
    direct = partitioned.subscribe(f"{topic}-partition-1", "direct", initial_position=EARLIEST)
    assert [int(m.data()[1:]) for m in drain(direct)] == on_one
    producer = partitioned.create_producer(f"{topic}-partition-2", batching_enabled=False)
    producer.send(b"direct-to-2")
    received = collect([parent_consumer], 7)[0]
    assert sorted(payloads(received)) == sorted([*numbered(6), b"direct-to-2"])
    direct_msg = next(m for m in received if m.data() == b"direct-to-2")
    assert direct_msg.message_id().partition() == 2
    assert direct_msg.topic_name() == f"{topic}-partition-2"


def test_partitioned_batched_and_shared(partitioned: pulsar.Client, topic: str) -> None:
    """Batches on a partitioned topic reach two Shared consumers, each message once."""
    consumers = [
        partitioned.subscribe(topic, "sub", consumer_type=SHARED, receiver_queue_size=5) for _ in range(2)
    ]
    # Round-robin routing with batching switches partition after each full batch of 10.
    producer = partitioned.create_producer(
        topic, batching_enabled=True, batching_max_messages=10, batching_max_publish_delay_ms=1000
    )
    for d in numbered(60):
        producer.send_async(d, lambda res, mid: None)
    producer.flush()
    got = collect(consumers, 60)
    assert got[0] and got[1]
    assert sorted(payloads(got[0] + got[1])) == sorted(numbered(60))
    assert {m.message_id().partition() for m in got[0] + got[1]} == {0, 1, 2}


# -- subscription types ----------------------------------------------------------------------


def test_exclusive_rejects_second_consumer(client: pulsar.Client, topic: str) -> None:
    """A second consumer on an Exclusive subscription fails with ConsumerBusy; after close it may join."""
    first = client.subscribe(topic, "sub")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub", consumer_type=SHARED)
    other = client.subscribe(topic, "other")  # another subscription is fine
    first.close()
    second = client.subscribe(topic, "sub")
    produce(client, topic, [b"x"])
    assert second.receive(5000).data() == b"x"
    assert other.receive(5000).data() == b"x"


def test_shared_spreads_messages(client: pulsar.Client, topic: str) -> None:
    """Two Shared consumers both receive; every message is delivered exactly once."""
    consumers = [
        client.subscribe(topic, "sub", consumer_type=SHARED, receiver_queue_size=2, consumer_name=f"c{i}")
        for i in range(2)
    ]
    produce(client, topic, numbered(40))
    got = collect(consumers, 40)
    assert got[0] and got[1]
    everything = payloads(got[0] + got[1])
    assert sorted(everything) == sorted(numbered(40))
    assert len(everything) == 40
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub")  # an Exclusive consumer cannot join a Shared subscription


def test_shared_consumer_leaving_hands_over_unacked(client: pulsar.Client, topic: str) -> None:
    """What a Shared consumer held unacknowledged goes to the other consumer when it closes."""
    a = client.subscribe(topic, "sub", consumer_type=SHARED, receiver_queue_size=5)
    produce(client, topic, numbered(5))
    held = receive_n(a, 5)
    b = client.subscribe(topic, "sub", consumer_type=SHARED)
    a.acknowledge(held[0])
    a.close()
    received = collect([b], 4)[0]
    assert sorted(payloads(received)) == numbered(5)[1:]


def test_failover_active_consumer_and_takeover(client: pulsar.Client, topic: str) -> None:
    """Only the active Failover consumer receives; when it closes the other gets the unacked rest."""
    consumers = [
        client.subscribe(topic, "sub", consumer_type=FAILOVER, consumer_name=name) for name in ("fa", "fb")
    ]
    produce(client, topic, numbered(10))
    got = collect(consumers, 10, ack=False, deadline_s=5)
    active = 0 if got[0] else 1
    standby = 1 - active
    assert payloads(got[active]) == numbered(10)
    assert got[standby] == []
    for msg in got[active][:4]:
        consumers[active].acknowledge(msg)
    consumers[active].close()
    rest = receive_n(consumers[standby], 6)
    assert payloads(rest) == numbered(10)[4:]
    assert drain(consumers[standby], 300) == []


def test_failover_partitioned_assigns_partitions(partitioned: pulsar.Client, topic: str) -> None:
    """Failover on a partitioned topic: partition i goes to consumer i % n, consumers sorted by name."""
    consumers = [
        partitioned.subscribe(topic, "sub", consumer_type=FAILOVER, consumer_name=name)
        for name in ("fb", "fa")
    ]
    produce(partitioned, topic, numbered(12))
    got = collect(consumers, 12, deadline_s=5)
    assert {m.message_id().partition() for m in got[1]} == {0, 2}
    assert {m.message_id().partition() for m in got[0]} == {1}
    assert sorted(payloads(got[0] + got[1])) == sorted(numbered(12))


def test_failover_cumulative_ack(client: pulsar.Client, topic: str) -> None:
    """A cumulative ack on Failover covers everything before it."""
    consumer = client.subscribe(topic, "sub", consumer_type=FAILOVER)
    produce(client, topic, numbered(8))
    received = receive_n(consumer, 8)
    consumer.acknowledge_cumulative(received[4])
    consumer.close()
    again = client.subscribe(topic, "sub", consumer_type=FAILOVER)
    assert payloads(drain(again)) == numbered(8)[5:]


def test_key_shared_auto_split(client: pulsar.Client, topic: str) -> None:
    """Key_Shared (auto split): every key goes to exactly one consumer, in order; all messages arrive."""
    consumers = [client.subscribe(topic, "sub", consumer_type=KEY_SHARED) for _ in range(2)]
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(100):
        producer.send(f"{i}".encode(), partition_key=f"key-{i % 20}")
    got = collect(consumers, 100)
    assert got[0] and got[1]
    owners: dict[str, set[int]] = {}
    for index, messages in enumerate(got):
        for msg in messages:
            owners.setdefault(msg.partition_key(), set()).add(index)
        for key in {m.partition_key() for m in messages}:
            sequence = [int(m.data()) for m in messages if m.partition_key() == key]
            assert sequence == sorted(sequence)
    assert len(owners) == 20
    assert all(len(o) == 1 for o in owners.values())
    assert sorted(int(m.data()) for m in got[0] + got[1]) == list(range(100))


def test_key_shared_consumer_leaving_hands_over_keys(client: pulsar.Client, topic: str) -> None:
    """When a Key_Shared consumer closes, its unacked messages and its keys go to the remaining one."""
    consumers = [client.subscribe(topic, "sub", consumer_type=KEY_SHARED) for _ in range(2)]
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(40):
        producer.send(f"{i}".encode(), partition_key=f"key-{i % 8}")
    first, second = collect(consumers, 40, ack=False)
    assert first and second
    for msg in second:
        consumers[1].acknowledge(msg)
    consumers[0].close()
    for i in range(40, 48):
        producer.send(f"{i}".encode(), partition_key=f"key-{i % 8}")
    rest = collect([consumers[1]], len(first) + 8)[0]
    assert sorted(int(m.data()) for m in rest) == sorted([int(m.data()) for m in first] + list(range(40, 48)))
    for key in {m.partition_key() for m in rest}:
        sequence = [int(m.data()) for m in rest if m.partition_key() == key]
        assert sequence == sorted(sequence)


def test_key_shared_ordering_key(client: pulsar.Client, topic: str) -> None:
    """The ordering key, when set, decides the consumer."""
    consumers = [client.subscribe(topic, "sub", consumer_type=KEY_SHARED) for _ in range(2)]
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(60):
        producer.send(f"{i}".encode(), partition_key="same", ordering_key=f"o{i % 12}")
    got = collect(consumers, 60)
    owners: dict[str, set[int]] = {}
    for index, messages in enumerate(got):
        for msg in messages:
            owners.setdefault(msg.ordering_key(), set()).add(index)
    assert len(owners) == 12
    assert all(len(o) == 1 for o in owners.values())
    assert sum(map(len, got)) == 60


def _slot(key: str) -> int:
    """Pulsar's Key_Shared slot of a key: Murmur3-32 (seed 0) & INT_MAX, modulo 65536."""
    return (mmh3.hash(key.encode(), 0, signed=False) & 0x7FFFFFFF) % 65536


def test_key_shared_sticky_ranges(client: pulsar.Client, topic: str) -> None:
    """Key_Shared sticky: a key goes to the consumer whose fixed range holds its hash slot."""
    ranges = [[(0, 32767)], [(32768, 65535)]]
    consumers = [
        client.subscribe(
            topic, "sub", consumer_type=KEY_SHARED,
            key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                key_shared_mode=pulsar.KeySharedMode.Sticky, sticky_ranges=r
            ),
        )
        for r in ranges
    ]
    with pytest.raises(pulsar.ConsumerAssignError):
        client.subscribe(
            topic, "sub", consumer_type=KEY_SHARED,
            key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                key_shared_mode=pulsar.KeySharedMode.Sticky, sticky_ranges=[(100, 200)]
            ),
        )
    producer = client.create_producer(topic, batching_enabled=False)
    keys = [f"sticky-{i}" for i in range(16)]
    for i in range(48):
        producer.send(f"{i}".encode(), partition_key=keys[i % 16])
    got = collect(consumers, 48)
    assert sum(map(len, got)) == 48
    for index, messages in enumerate(got):
        start, end = ranges[index][0]
        assert all(start <= _slot(m.partition_key()) <= end for m in messages)


# -- acknowledgements ------------------------------------------------------------------------


def test_individual_ack_survives_reconnect(client: pulsar.Client, topic: str) -> None:
    """Individually acked messages are not delivered to a later consumer of the subscription."""
    consumer = client.subscribe(topic, "sub")
    produce(client, topic, numbered(10))
    for i, msg in enumerate(receive_n(consumer, 10)):
        if i % 2 == 0:
            consumer.acknowledge(msg)
    consumer.close()
    again = client.subscribe(topic, "sub")
    assert payloads(drain(again)) == numbered(10)[1::2]


def test_ack_by_message_id(client: pulsar.Client, topic: str) -> None:
    """Acknowledging a MessageId (not the message) works the same."""
    consumer = client.subscribe(topic, "sub", consumer_type=SHARED)
    produce(client, topic, numbered(4))
    for msg in receive_n(consumer, 4)[:3]:
        consumer.acknowledge(msg.message_id())
    consumer.close()
    again = client.subscribe(topic, "sub", consumer_type=SHARED)
    assert payloads(drain(again)) == [b"m3"]


def test_cumulative_ack_exclusive(client: pulsar.Client, topic: str) -> None:
    """A cumulative ack on Exclusive acknowledges everything up to the message."""
    consumer = client.subscribe(topic, "sub")
    produce(client, topic, numbered(10))
    received = receive_n(consumer, 10)
    consumer.acknowledge_cumulative(received[5])
    consumer.close()
    again = client.subscribe(topic, "sub")
    assert payloads(drain(again)) == numbered(10)[6:]


def test_cumulative_ack_inside_batch(client: pulsar.Client, topic: str) -> None:
    """A cumulative ack in the middle of a batch keeps the batch until its last message is acked."""
    consumer = client.subscribe(topic, "sub", batch_index_ack_enabled=True)
    produce(client, topic, [b"before"])
    produce_batch(client, topic, numbered(6))
    received = receive_n(consumer, 7)
    consumer.acknowledge_cumulative(received[3])
    consumer.close()
    again = client.subscribe(topic, "sub", batch_index_ack_enabled=True)
    assert payloads(drain(again)) == numbered(6)[3:]


def test_cumulative_ack_not_allowed_on_shared(client: pulsar.Client, topic: str) -> None:
    """The client refuses cumulative acks on Shared subscriptions."""
    consumer = client.subscribe(topic, "sub", consumer_type=SHARED)
    produce(client, topic, [b"x"])
    msg = consumer.receive(5000)
    with pytest.raises(pulsar.CumulativeAcknowledgementNotAllowedError):
        consumer.acknowledge_cumulative(msg)


def test_batch_index_ack(client: pulsar.Client, topic: str) -> None:
    """Acking part of a batch: a new consumer receives exactly the unacked messages of it."""
    consumer = client.subscribe(topic, "sub", batch_index_ack_enabled=True)
    produce_batch(client, topic, numbered(10))
    received = receive_n(consumer, 10)
    assert len({m.message_id().entry_id() for m in received}) == 1
    for msg in received[::2]:
        consumer.acknowledge(msg)
    consumer.close()
    again = client.subscribe(topic, "sub", batch_index_ack_enabled=True)
    rest = drain(again)
    assert payloads(rest) == numbered(10)[1::2]
    assert [m.message_id().batch_index() for m in rest] == [1, 3, 5, 7, 9]
    for msg in rest[:3]:
        again.acknowledge(msg)
    again.close()
    third = client.subscribe(topic, "sub", batch_index_ack_enabled=True)
    assert payloads(drain(third)) == [b"m7", b"m9"]


def test_batch_fully_acked_by_index(client: pulsar.Client, topic: str) -> None:
    """A batch acked index by index is gone for the next consumer."""
    consumer = client.subscribe(topic, "sub", consumer_type=SHARED, batch_index_ack_enabled=True)
    produce_batch(client, topic, numbered(5))
    produce(client, topic, [b"after"])
    for msg in receive_n(consumer, 5):
        consumer.acknowledge(msg)
    consumer.close()
    again = client.subscribe(topic, "sub", consumer_type=SHARED, batch_index_ack_enabled=True)
    assert payloads(drain(again)) == [b"after"]


# -- redelivery ------------------------------------------------------------------------------


def test_negative_ack_redelivers_with_count(client: pulsar.Client, topic: str) -> None:
    """A negatively acked message comes back after the delay with redelivery_count incremented."""
    consumer = client.subscribe(topic, "sub", consumer_type=SHARED, negative_ack_redelivery_delay_ms=100)
    produce(client, topic, numbered(3))
    first = receive_n(consumer, 3)
    consumer.acknowledge(first[0])
    consumer.acknowledge(first[2])
    consumer.negative_acknowledge(first[1])
    again = consumer.receive(5000)
    assert again.data() == b"m1"
    assert again.message_id() == first[1].message_id()
    assert again.redelivery_count() == 1
    consumer.negative_acknowledge(again)
    third = consumer.receive(5000)
    assert third.data() == b"m1"
    assert third.redelivery_count() == 2
    consumer.acknowledge(third)
    assert drain(consumer, 400) == []


def test_negative_ack_exclusive(client: pulsar.Client, topic: str) -> None:
    """On an Exclusive subscription a negatively acked message is delivered again."""
    consumer = client.subscribe(topic, "sub", negative_ack_redelivery_delay_ms=100)
    produce(client, topic, numbered(2))
    first, second = receive_n(consumer, 2)
    consumer.acknowledge(first)
    time.sleep(0.2)  # the grouped ack reaches the server before the redelivery request
    consumer.negative_acknowledge(second)
    again = consumer.receive(5000)
    assert again.data() == b"m1"
    consumer.acknowledge(again)
    assert drain(consumer, 400) == []


def test_negative_ack_in_batch(client: pulsar.Client, topic: str) -> None:
    """Nacking one message of a batch redelivers it (and with batch index acks, only it)."""
    consumer = client.subscribe(
        topic, "sub", consumer_type=SHARED, negative_ack_redelivery_delay_ms=100, batch_index_ack_enabled=True
    )
    produce_batch(client, topic, numbered(4))
    received = receive_n(consumer, 4)
    for msg in received:
        if msg.data() != b"m2":
            consumer.acknowledge(msg)
    time.sleep(0.2)  # the grouped acks reach the server before the redelivery request
    consumer.negative_acknowledge(received[2])
    again = drain(consumer, 1000)
    assert payloads(again) == [b"m2"]
    assert again[0].redelivery_count() == 1


@pytest.mark.parametrize("consumer_type", [SHARED, KEY_SHARED])
@pytest.mark.parametrize("redeliver", ["nack", "redeliver_unacknowledged"])
def test_batch_index_ack_resets_redelivery_count(
    client: pulsar.Client, topic: str, consumer_type: pulsar.ConsumerType, redeliver: str
) -> None:
    """As in Pulsar, any acknowledgement of an entry (one batch index too) forgets its redelivery count: after a
    nack and a partial batch-index ack, the rest of the batch comes back counted once, not twice."""
    consumer = client.subscribe(
        topic, "sub", consumer_type=consumer_type, negative_ack_redelivery_delay_ms=100, batch_index_ack_enabled=True
    )
    produce_batch(client, topic, numbered(4))
    received = receive_n(consumer, 4)
    consumer.negative_acknowledge(received[2])
    again = receive_n(consumer, 4)
    assert [(m.data(), m.redelivery_count()) for m in again] == [(p, 1) for p in numbered(4)]
    consumer.acknowledge(again[0])
    time.sleep(0.5)  # the grouped batch-index ack reaches the server before the redelivery request
    if redeliver == "nack":
        for message in again[1:]:
            consumer.negative_acknowledge(message)
    else:
        consumer.redeliver_unacknowledged_messages()
    third = drain(consumer, 1000)
    assert sorted((m.data(), m.redelivery_count()) for m in third) == [(b"m1", 1), (b"m2", 1), (b"m3", 1)]


@pytest.mark.parametrize("consumer_type", [pulsar.ConsumerType.Exclusive, SHARED])
def test_redeliver_unacknowledged_messages(
    client: pulsar.Client, topic: str, consumer_type: pulsar.ConsumerType
) -> None:
    """redeliver_unacknowledged_messages() brings back everything not acked."""
    consumer = client.subscribe(topic, "sub", consumer_type=consumer_type)
    produce(client, topic, numbered(5))
    received = receive_n(consumer, 5)
    consumer.acknowledge(received[0])
    consumer.acknowledge(received[3])
    time.sleep(0.2)  # let the grouped acks reach the server first
    consumer.redeliver_unacknowledged_messages()
    again = drain(consumer, 1000)
    assert sorted(payloads(again)) == [b"m1", b"m2", b"m4"]
    if consumer_type == SHARED:
        assert all(m.redelivery_count() == 1 for m in again)


def test_unacked_message_timeout(client: pulsar.Client, topic: str) -> None:
    """Messages left unacked past the timeout are delivered again.

    The C++ client rejects timeouts below 10 s, so this waits that long.
    """
    with pytest.raises(ValueError):
        client.subscribe(topic, "other", unacked_messages_timeout_ms=1000)
    consumer = client.subscribe(topic, "sub", consumer_type=SHARED, unacked_messages_timeout_ms=10_000)
    produce(client, topic, numbered(3))
    received = receive_n(consumer, 3)
    consumer.acknowledge(received[1])
    began = time.monotonic()
    again = receive_n(consumer, 2, timeout_ms=15_000)
    assert time.monotonic() - began >= 5
    assert sorted(payloads(again)) == [b"m0", b"m2"]
    for msg in again:
        consumer.acknowledge(msg)


# -- subscriptions and positions ------------------------------------------------------------


def test_unsubscribe_deletes_subscription(client: pulsar.Client, topic: str) -> None:
    """After unsubscribe the subscription is gone: its name starts over at the initial position."""
    consumer = client.subscribe(topic, "sub", initial_position=EARLIEST)
    produce(client, topic, numbered(5, "old"))
    receive_n(consumer, 5)  # received, never acked
    consumer.unsubscribe()
    latest = client.subscribe(topic, "sub", initial_position=LATEST)
    assert drain(latest, 300) == []
    produce(client, topic, numbered(2, "new"))
    received = receive_n(latest, 2)
    assert payloads(received) == numbered(2, "new")
    for msg in received:
        latest.acknowledge(msg)
    latest.unsubscribe()
    earliest = client.subscribe(topic, "sub", initial_position=EARLIEST)
    assert payloads(drain(earliest)) == numbered(5, "old") + numbered(2, "new")


def test_unsubscribe_shared_with_other_consumers_fails(client: pulsar.Client, topic: str) -> None:
    """A Shared consumer cannot unsubscribe while other consumers are attached."""
    a = client.subscribe(topic, "sub", consumer_type=SHARED)
    b = client.subscribe(topic, "sub", consumer_type=SHARED)
    with pytest.raises(pulsar.BrokerMetadataError):
        a.unsubscribe()
    b.close()
    a.unsubscribe()


def test_initial_position_earliest_vs_latest(client: pulsar.Client, topic: str) -> None:
    """Earliest starts at the first stored message, Latest after the last; an existing cursor wins."""
    produce(client, topic, numbered(3, "before"))
    earliest = client.subscribe(topic, "e", initial_position=EARLIEST)
    latest = client.subscribe(topic, "l", initial_position=LATEST)
    default = client.subscribe(topic, "d")
    produce(client, topic, numbered(2, "after"))
    assert payloads(drain(earliest)) == numbered(3, "before") + numbered(2, "after")
    assert payloads(drain(latest)) == numbered(2, "after")
    assert payloads(drain(default)) == numbered(2, "after")
    latest.close()
    # The subscription exists now: Earliest on reconnect does not rewind it.
    resumed = client.subscribe(topic, "l", initial_position=EARLIEST)
    assert payloads(drain(resumed)) == numbered(2, "after")


def test_earliest_on_empty_topic(client: pulsar.Client, topic: str) -> None:
    """Earliest on a topic with no messages yet receives what comes later, from the first."""
    consumer = client.subscribe(topic, "sub", initial_position=EARLIEST)
    produce(client, topic, numbered(3))
    assert payloads(receive_n(consumer, 3)) == numbered(3)


def test_key_shared_new_consumer_waits_for_earlier_messages_of_its_keys(client: pulsar.Client, topic: str) -> None:
    """A consumer joining a Key_Shared subscription gets no message of a key it takes over before the
    messages of that key sent before it joined are acknowledged (per-key order across consumers)."""
    producer = client.create_producer(topic, batching_enabled=False)
    first = client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name="a")
    keys = [f"k{i}" for i in range(20)]
    for key in keys:
        producer.send(f"before-{key}".encode(), partition_key=key)
    held = [first.receive(5000) for _ in keys]
    second = client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name="b")
    for key in keys:
        producer.send(f"after-{key}".encode(), partition_key=key)
    early = []
    try:
        while True:
            early.append(second.receive(500).data())
    except pulsar.Timeout:
        pass
    assert early == [], "the new consumer got messages while older ones of its keys were unacknowledged"
    for msg in held:
        first.acknowledge(msg)
    got: dict[str, list[bytes]] = {"a": [], "b": []}
    for name, consumer in (("a", first), ("b", second)):
        try:
            while True:
                msg = consumer.receive(1500)
                got[name].append(msg.data())
                consumer.acknowledge(msg)
        except pulsar.Timeout:
            pass
    assert sorted(got["a"] + got["b"]) == sorted(f"after-{k}".encode() for k in keys)
    assert got["b"], "the new consumer took over no key"
