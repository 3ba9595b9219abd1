"""Subscription types through the official Python client: Exclusive, Failover, Shared and Key_Shared."""

from __future__ import annotations

import mmh3
import pulsar

from pulsar_txn_proxy.conformance.framework import Outcome, Run, drain, drain_each, receive_n, scenario, send_all, texts

Earliest = pulsar.InitialPosition.Earliest
T = pulsar.ConsumerType


@scenario
def test_exclusive_admits_one_consumer(run: Run) -> Outcome:
    """A second consumer on an Exclusive subscription is refused; other subscriptions and types are checked too."""
    client = run.client()
    topic = run.topic("t")
    first = client.subscribe(topic, "sub", consumer_type=T.Exclusive)
    outcome = {
        "second_exclusive": run.attempt(lambda: client.subscribe(topic, "sub", consumer_type=T.Exclusive) and 1),
        "shared_on_exclusive": run.attempt(lambda: client.subscribe(topic, "sub", consumer_type=T.Shared) and 1),
        "other_subscription": run.attempt(lambda: client.subscribe(topic, "other", consumer_type=T.Exclusive) and 1),
    }
    first.close()
    outcome["after_close"] = run.attempt(lambda: client.subscribe(topic, "sub", consumer_type=T.Shared) and 1)
    outcome["exclusive_on_shared"] = run.attempt(
        lambda: client.subscribe(topic, "sub", consumer_type=T.Exclusive) and 1
    )
    return outcome


def _ring_choice(topic: str, names: list[str]) -> str:
    """Pulsar's active consumer of a non-partitioned Failover subscription: consistent hashing of the topic name
    over 100 points per consumer (AbstractDispatcherSingleActiveConsumer#makeHashRing)."""
    ring: dict[int, int] = {}
    ordered = sorted(names)
    for index, name in enumerate(ordered):
        for point in range(100):
            ring[mmh3.hash(f"{name}{point}".encode(), 0, signed=False) & 0x7FFFFFFF] = index
    wanted = mmh3.hash(topic.encode(), 0, signed=False) & 0x7FFFFFFF
    above = [h for h in ring if h >= wanted]
    return ordered[ring[min(above)] if above else ring[min(ring)]]


@scenario
def test_failover_active_consumer(run: Run) -> Outcome:
    """Failover on a non-partitioned topic: one consumer, picked by hashing the topic name, gets everything; when
    it leaves, the other gets what it left unacknowledged."""
    client = run.client()
    topic = run.topic("t")
    consumers = {
        name: client.subscribe(topic, "sub", consumer_type=T.Failover, consumer_name=name, initial_position=Earliest)
        for name in ("b", "a")
    }
    producer = client.create_producer(topic, batching_enabled=False)
    send_all(producer, [f"m{i}" for i in range(4)])
    got = dict(zip(consumers, drain_each(list(consumers.values()), 2500, expect=4), strict=True))
    active = [name for name, msgs in got.items() if msgs]
    outcome: dict[str, object] = {"consumers_with_messages": len(active)}
    if len(active) == 1:
        (name,) = active
        other = "a" if name == "b" else "b"
        outcome["active_got"] = texts(got[name])
        outcome["active_is_hash_ring_choice"] = name == _ring_choice(topic, ["a", "b"])
        for msg in got[name][:2]:
            consumers[name].acknowledge(msg)
        consumers[name].close()
        outcome["other_after_active_closed"] = [run.msg(m) for m in drain(consumers[other], 3000, expect=2)]
    return outcome


@scenario
def test_failover_partitions_spread_over_consumers(run: Run) -> Outcome:
    """Failover on 3 partitions with consumers a and b: partition i goes to the (i mod 2)-th by name."""
    client = run.client()
    topic = run.partitioned_topic("pt", 3)
    a = client.subscribe(topic, "sub", consumer_type=T.Failover, consumer_name="a", initial_position=Earliest)
    b = client.subscribe(topic, "sub", consumer_type=T.Failover, consumer_name="b", initial_position=Earliest)
    producer = client.create_producer(
        topic,
        batching_enabled=False,
        message_routing_mode=pulsar.PartitionsRoutingMode.CustomPartition,
        message_router=lambda msg, n: int(msg.partition_key()),
    )
    for i in range(6):
        producer.send(f"m{i}".encode(), partition_key=str(i % 3))
    got = dict(zip("ab", drain_each([a, b], 1500, expect=6), strict=True))
    return {name: sorted({m.topic_name().rsplit("-", 1)[-1] for m in msgs}) for name, msgs in got.items()} | {
        "total": sum(len(v) for v in got.values())
    }


@scenario
def test_shared_spreads_each_message_once(run: Run) -> Outcome:
    """Shared: every message goes to exactly one consumer, both consumers get some, each in publish order."""
    client = run.client()
    topic = run.topic("t")
    consumers = [
        client.subscribe(topic, "sub", consumer_type=T.Shared, receiver_queue_size=5, initial_position=Earliest)
        for _ in range(2)
    ]
    producer = client.create_producer(topic, batching_enabled=False)
    send_all(producer, [f"m{i:02d}" for i in range(20)])
    got = [texts(msgs) for msgs in drain_each(consumers, 1000, expect=20)]
    union = sorted(got[0] + got[1])
    return {
        "union": union,
        "duplicates": len(union) - len(set(union)),
        "both_received": all(got),
        "each_in_order": all(g == sorted(g) for g in got),
    }


@scenario
def test_shared_redelivery_after_consumer_closes(run: Run) -> Outcome:
    """Shared: unacknowledged messages of a closed consumer go to the remaining one, with redelivery counts."""
    client = run.client()
    topic = run.topic("t")
    first = client.subscribe(topic, "sub", consumer_type=T.Shared, initial_position=Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    send_all(producer, [f"m{i}" for i in range(3)])
    got = receive_n(first, 3)
    first.acknowledge(got[0])
    second = client.subscribe(topic, "sub", consumer_type=T.Shared, initial_position=Earliest)
    first.close()
    redelivered = drain(second, 1500, expect=2)
    return {"first": texts(got), "second": [run.msg(m) for m in redelivered]}


@scenario
def test_key_shared_sticks_keys_to_consumers(run: Run) -> Outcome:
    """Key_Shared: each key goes to one consumer only, in order; together they get everything."""
    client = run.client()
    topic = run.topic("t")
    consumers = [
        client.subscribe(topic, "sub", consumer_type=T.KeyShared, consumer_name=f"c{i}", initial_position=Earliest)
        for i in range(2)
    ]
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(24):
        producer.send(f"{i:02d}".encode(), partition_key=f"key-{i % 6}")
    got = drain_each(consumers, 1000, expect=24)
    owners: dict[str, set[int]] = {}
    for n, msgs in enumerate(got):
        for m in msgs:
            owners.setdefault(m.partition_key(), set()).add(n)
    per_key: dict[str, list[str]] = {}
    for msgs in got:
        for m in msgs:
            per_key.setdefault(m.partition_key(), []).append(m.data().decode())
    return {
        "total": sum(len(g) for g in got),
        "keys": sorted(owners),
        "keys_on_one_consumer": all(len(v) == 1 for v in owners.values()),
        "per_key_in_order": all(v == sorted(v) for v in per_key.values()),
    }


@scenario
def test_key_shared_batched_keys(run: Run) -> Outcome:
    """Key_Shared with key-based batching: each key still lands on one consumer."""
    client = run.client()
    topic = run.topic("t")
    consumers = [client.subscribe(topic, "sub", consumer_type=T.KeyShared, initial_position=Earliest) for _ in range(2)]
    producer = client.create_producer(
        topic, batching_enabled=True, batching_type=pulsar.BatchingType.KeyBased, batching_max_publish_delay_ms=50
    )
    for i in range(30):
        producer.send_async(f"{i:02d}".encode(), None, partition_key=f"key-{i % 5}")
    producer.flush()
    got = drain_each(consumers, 1000, expect=30)
    owners: dict[str, set[int]] = {}
    for n, msgs in enumerate(got):
        for m in msgs:
            owners.setdefault(m.partition_key(), set()).add(n)
    return {
        "total": sum(len(g) for g in got),
        "keys_on_one_consumer": all(len(v) == 1 for v in owners.values()),
    }


@scenario
def test_subscription_type_of_existing_subscription(run: Run) -> Outcome:
    """A Shared subscription with connected consumers refuses Failover and Key_Shared consumers."""
    client = run.client()
    topic = run.topic("t")
    client.subscribe(topic, "sub", consumer_type=T.Shared)
    return {
        "failover": run.attempt(lambda: client.subscribe(topic, "sub", consumer_type=T.Failover) and 1),
        "key_shared": run.attempt(lambda: client.subscribe(topic, "sub", consumer_type=T.KeyShared) and 1),
        "shared": run.attempt(lambda: client.subscribe(topic, "sub", consumer_type=T.Shared) and 1),
    }
