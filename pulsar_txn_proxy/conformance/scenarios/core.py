"""Core messaging through the official Python client: order, ids, batching, routing, acks, errors, schemas."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pulsar
from pulsar.schema import AvroSchema, BytesSchema, Integer, JsonSchema, Record, String, StringSchema

from pulsar_txn_proxy.conformance.framework import Outcome, Run, drain, receive_n, scenario, send_all, texts

Exclusive = pulsar.ConsumerType.Exclusive
Shared = pulsar.ConsumerType.Shared
Earliest = pulsar.InitialPosition.Earliest


class User(Record):
    """A record with a JSON/Avro schema."""

    name = String()
    age = Integer()


class Pet(Record):
    """A record incompatible with :class:`User`."""

    species = String()
    legs = Integer(required=True)


@scenario
def test_produce_consume_in_order(run: Run) -> Outcome:
    """Unbatched sends with keys and properties arrive in order with the ids the sends returned."""
    client = run.client()
    topic = run.topic("t")
    consumer = client.subscribe(topic, "sub", consumer_type=Exclusive, initial_position=Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    sent = [
        producer.send(f"m{i}".encode(), partition_key=f"k{i % 2}", properties={"i": str(i), "kind": "test"})
        for i in range(5)
    ]
    got = receive_n(consumer, 5)
    for msg in got:
        consumer.acknowledge(msg)
    return {
        "received": [run.msg(m) for m in got],
        "sent_ids": [run.mid(i, topic) for i in sent],
        "topic_names": sorted({m.topic_name() for m in got}),
        "last_sequence_id": producer.last_sequence_id(),
        "extra": texts(drain(consumer)),
    }


@scenario
def test_batched_sends_share_entries(run: Run) -> Outcome:
    """Two batches of 4: each batch is one entry; messages carry batch indexes."""
    client = run.client()
    topic = run.topic("t")
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=4, batching_max_publish_delay_ms=60_000
    )
    for i in range(8):
        producer.send_async(f"b{i}".encode(), None)
    producer.flush()
    got = receive_n(consumer, 8)
    consumer.acknowledge_cumulative(got[-1])
    return {"received": [run.msg(m) for m in got], "extra": texts(drain(consumer))}


@scenario
def test_partitioned_topic_routing(run: Run) -> Outcome:
    """A 3-partition topic: keyed messages go to the key's partition, round-robin spreads unkeyed ones evenly."""
    client = run.client()
    topic = run.partitioned_topic("pt", 3)
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    keyed = [producer.send(f"k-{key}-{i}".encode(), partition_key=key) for i in range(2) for key in "abcd"]
    plain = send_all(producer, [f"p{i}" for i in range(6)])
    got = drain(consumer, 1000, expect=14)
    per_partition: dict[str, list[str]] = {}
    for msg in got:
        per_partition.setdefault(msg.topic_name().rsplit("-", 1)[-1], []).append(msg.data().decode())
    return {
        "partitions": [p.rsplit("-", 1)[-1] for p in client.get_topic_partitions(topic)],
        "keyed_partitions": [k.partition() for k in keyed],
        "plain_per_partition_counts": sorted(len([x for x in v if x.startswith("p")]) for v in per_partition.values()),
        "keyed_order_per_partition": {p: [x for x in v if x.startswith("k")] for p, v in sorted(per_partition.items())},
        "received_count": len(got),
        "plain_partitions_distinct": len({p.partition() for p in plain}),
    }


@scenario
def test_exclusive_producer_access_modes(run: Run) -> Outcome:
    """Exclusive producers: a second Exclusive one is refused; ExclusiveWithFencing takes over and fences."""
    client = run.client()
    topic = run.topic("t")
    first = client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    second = run.attempt(lambda: client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive))
    shared = run.attempt(lambda: client.create_producer(topic))
    first_send = run.attempt(lambda: first.send(b"one") and "sent")
    fencing = run.attempt(
        lambda: client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.ExclusiveWithFencing) and "created"
    )
    fenced_send = run.attempt(lambda: first.send(b"two") and "sent")
    return {
        "second_exclusive": second.get("error", "created"),
        "shared_while_exclusive": shared.get("error", "created"),
        "first_send": first_send,
        "fencing": fencing,
        "fenced_send": fenced_send,
    }


@scenario
def test_producer_name_conflict_and_sequence_ids(run: Run) -> Outcome:
    """A second producer with a connected producer's name is refused; sequence ids count from the given one."""
    client = run.client()
    topic = run.topic("t")
    name = run.name("prod")
    producer = client.create_producer(topic, producer_name=name, initial_sequence_id=10, batching_enabled=False)
    duplicate = run.attempt(lambda: client.create_producer(topic, producer_name=name) and "created")
    send_all(producer, ["a", "b"])
    explicit = producer.send(b"c", sequence_id=20)
    last = producer.last_sequence_id()
    producer.close()
    again = client.create_producer(topic, producer_name=name)
    return {
        "producer_name": producer.producer_name(),
        "duplicate_name": duplicate,
        "last_sequence_id": last,
        "explicit_id": run.mid(explicit, topic),
        # Without deduplication the broker does not remember sequence ids: a new producer starts from -1.
        "reconnected_last_sequence_id": again.last_sequence_id(),
    }


@scenario
def test_negative_ack_redelivers(run: Run) -> Outcome:
    """A negatively acknowledged message comes back with redelivery count 1; acked ones do not."""
    client = run.client()
    topic = run.topic("t")
    consumer = client.subscribe(
        topic, "sub", consumer_type=Shared, initial_position=Earliest, negative_ack_redelivery_delay_ms=100
    )
    producer = client.create_producer(topic, batching_enabled=False)
    send_all(producer, ["m0", "m1", "m2"])
    first = receive_n(consumer, 3)
    consumer.acknowledge(first[0])
    consumer.negative_acknowledge(first[1])
    consumer.acknowledge(first[2])
    again = receive_n(consumer, 1)
    for msg in again:
        consumer.acknowledge(msg)
    return {"first": [run.msg(m) for m in first], "again": [run.msg(m) for m in again], "extra": texts(drain(consumer))}


@scenario
def test_unacked_messages_go_to_next_consumer(run: Run) -> Outcome:
    """Messages left unacknowledged when a consumer closes are delivered to the next one on the subscription."""
    client = run.client()
    topic = run.topic("t")
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    send_all(producer, [f"m{i}" for i in range(4)])
    got = receive_n(consumer, 4)
    consumer.acknowledge(got[0])
    consumer.acknowledge(got[2])
    consumer.close()
    second = client.subscribe(topic, "sub", initial_position=Earliest)
    later = drain(second, expect=2)
    return {"first": texts(got), "second": [run.msg(m) for m in later]}


@scenario
def test_cumulative_ack_and_resubscribe(run: Run) -> Outcome:
    """A cumulative ack covers everything before it; a new consumer resumes after it."""
    client = run.client()
    topic = run.topic("t")
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    send_all(producer, [f"m{i}" for i in range(5)])
    got = receive_n(consumer, 5)
    consumer.acknowledge_cumulative(got[2])
    consumer.close()
    again = client.subscribe(topic, "sub", initial_position=Earliest)
    shared = client.subscribe(topic, run.name("shared-sub"), consumer_type=Shared, initial_position=Earliest)
    shared_cumulative = run.attempt(lambda: shared.acknowledge_cumulative(receive_n(shared, 1)[0]) or "acked")
    return {"after_resubscribe": texts(drain(again, expect=2)), "shared_cumulative_ack": shared_cumulative}


@scenario
def test_initial_positions_and_unsubscribe(run: Run) -> Outcome:
    """Latest skips what is already there, Earliest does not; after unsubscribe the subscription starts over."""
    client = run.client()
    topic = run.topic("t")
    producer = client.create_producer(topic, batching_enabled=False)
    send_all(producer, ["old0", "old1"])
    latest = client.subscribe(topic, "latest-sub")
    earliest = client.subscribe(topic, "earliest-sub", initial_position=Earliest)
    send_all(producer, ["new0"])
    latest_got = texts(drain(latest, expect=1))
    earliest_got = receive_n(earliest, 3)
    earliest.acknowledge_cumulative(earliest_got[-1])
    earliest.unsubscribe()
    resubscribed = client.subscribe(topic, "earliest-sub", initial_position=Earliest)
    return {
        "latest": latest_got,
        "earliest": texts(earliest_got),
        "after_unsubscribe": texts(drain(resubscribed, expect=3)),
    }


@scenario
def test_compression_codecs(run: Run) -> Outcome:
    """Every codec, batched and not, reaches the consumer intact."""
    client = run.client()
    topic = run.topic("t")
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    codecs = ["LZ4", "ZLib", "ZSTD", "SNAPPY"]
    for codec in codecs:
        for batched in (False, True):
            producer = client.create_producer(
                topic,
                compression_type=getattr(pulsar.CompressionType, codec),
                batching_enabled=batched,
                batching_max_publish_delay_ms=60_000,
            )
            for i in range(3):
                producer.send_async((f"{codec}-{batched}-{i}-" + "x" * 200).encode(), None)
            producer.flush()
            producer.close()
    got = drain(consumer, expect=24)
    return {"received": [m.data().decode()[:20] for m in got], "sizes": sorted({len(m.data()) for m in got})}


@scenario
def test_schemas(run: Run) -> Outcome:
    """JSON records round-trip; an incompatible schema is refused; schema-less producers are allowed."""
    client = run.client()
    topic = run.topic("t")
    producer = client.create_producer(topic, schema=JsonSchema(User))
    consumer = client.subscribe(topic, "sub", schema=JsonSchema(User), initial_position=Earliest)
    producer.send(User(name="ada", age=36))
    got = receive_n(consumer, 1)
    incompatible = run.attempt(lambda: client.create_producer(topic, schema=AvroSchema(Pet)) and "created")
    string_producer = run.attempt(lambda: client.create_producer(topic, schema=StringSchema()) and "created")
    bytes_producer = run.attempt(lambda: client.create_producer(topic) and "created")
    other = run.topic("s")
    strings = client.create_producer(other, schema=StringSchema())
    strings.send("héllo")
    string_consumer = client.subscribe(other, "sub", schema=StringSchema(), initial_position=Earliest)
    return {
        "json": [{"name": m.value().name, "age": m.value().age} for m in got],
        "avro_incompatible": incompatible,
        "string_on_json_topic": string_producer,
        "bytes_on_json_topic": bytes_producer,
        "string_values": [m.value() for m in receive_n(string_consumer, 1)],
        "json_consumer_on_string_topic": run.attempt(
            lambda: client.subscribe(other, "sub2", schema=JsonSchema(User)) and "subscribed"
        ),
    }


@scenario
def test_delayed_delivery(run: Run) -> Outcome:
    """deliver_after holds a message back on Shared and Key_Shared subscriptions; Exclusive gets it at once."""
    client = run.client()
    topic = run.topic("t")
    subs = {
        name: client.subscribe(topic, name, consumer_type=kind, initial_position=Earliest)
        for name, kind in (("shared", Shared), ("exclusive", Exclusive), ("key_shared", pulsar.ConsumerType.KeyShared))
    }
    producer = client.create_producer(topic, batching_enabled=False)
    # Pulsar releases delayed messages up to one tick (1 s) early: 4 s keeps "later" well clear of the first look.
    producer.send(b"later", deliver_after=datetime.timedelta(seconds=4))
    producer.send(b"soon", deliver_after=datetime.timedelta(milliseconds=100))
    producer.send(b"now")
    early = {name: texts(drain(c, 300, expect=2)) for name, c in subs.items()}
    # Key_Shared may hand out a message with a delivery time (even a past one) after later plain ones.
    early["key_shared"] = sorted(early["key_shared"])
    late = {name: texts(receive_n(subs[name], 1)) for name in ("shared", "key_shared")}
    return {"early": early, "late": late, "extra": {name: texts(drain(c, 300)) for name, c in subs.items()}}


@scenario
def test_last_message_id_and_availability(run: Run) -> Outcome:
    """getLastMessageId on an empty topic and after sends; a reader's hasMessageAvailable follows it."""
    client = run.client()
    topic = run.topic("t")
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    empty_last = consumer.get_last_message_id()
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    empty_available = reader.has_message_available()
    producer = client.create_producer(topic, batching_enabled=False)
    sent = send_all(producer, ["a", "b"])
    last = consumer.get_last_message_id()
    available = reader.has_message_available()
    read = texts(drain(reader, expect=2))
    return {
        "empty_last": run.mid(empty_last, topic),
        "empty_available": empty_available,
        "last": run.mid(last, topic),
        "last_is_last_sent": last == sent[-1],
        "available": available,
        "read": read,
        "available_after_reading": reader.has_message_available(),
    }


@scenario
def test_bad_topics_and_sizes(run: Run) -> Outcome:
    """Errors: unknown namespace, invalid names, a payload over the broker's maximum, a missing subscription."""
    client = run.client()
    topic = run.topic("t")
    producer = client.create_producer(topic, batching_enabled=False)
    return {
        "unknown_namespace_producer": run.attempt(
            lambda: client.create_producer(f"persistent://public/nope-{run.suffix}/t") and "created"
        ),
        "unknown_tenant_consumer": run.attempt(
            lambda: client.subscribe(f"persistent://nope-{run.suffix}/default/t", "s") and "subscribed"
        ),
        "invalid_name": run.attempt(lambda: client.create_producer("persistent://public/default") and "created"),
        "too_big": run.attempt(lambda: producer.send(b"x" * (5 * 1024 * 1024 + 1)) and "sent"),
        "max_size_ok": run.attempt(lambda: producer.send(b"x" * (5 * 1024 * 1024 - 1024)) and "sent"),
    }


@scenario
def test_many_producers_one_topic(run: Run) -> Outcome:
    """Three producers interleave on one topic: each producer's messages keep their order."""
    client = run.client()
    topic = run.topic("t")
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    producers = [client.create_producer(topic, batching_enabled=False) for _ in range(3)]
    for i in range(4):
        for n, producer in enumerate(producers):
            producer.send(f"p{n}-{i}".encode())
    got = texts(drain(consumer, expect=12))
    return {
        "count": len(got),
        "per_producer": {f"p{n}": [x for x in got if x.startswith(f"p{n}-")] for n in range(3)},
        "arrival": got,
    }


@scenario
def test_chunked_large_message(run: Run) -> Outcome:
    """A 6 MB payload (over the 5 MB maximum) goes through in chunks and is reassembled for the consumer."""
    client = run.client()
    topic = run.topic("t")
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    producer = client.create_producer(topic, batching_enabled=False, chunking_enabled=True)
    payload = bytes(range(256)) * (6 * 1024 * 4)
    sent = producer.send(payload)
    producer.send(b"after")
    got = receive_n(consumer, 2)
    return {
        "sizes": [len(m.data()) for m in got],
        "intact": bool(got) and got[0].data() == payload,
        "received_id_is_sent_id": bool(got) and got[0].message_id() == sent,
        "after": texts(got[1:]),
    }


@scenario
def test_dead_letter_topic(run: Run) -> Outcome:
    """After its redeliveries run out, a negatively acknowledged message goes to the dead-letter topic."""
    client = run.client()
    topic = run.topic("t")
    dlq = run.topic("dlq")
    consumer = client.subscribe(
        topic,
        "sub",
        consumer_type=Shared,
        initial_position=Earliest,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=2, dead_letter_topic=dlq),
    )
    dead = client.subscribe(dlq, "dlq-sub", initial_position=Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    send_all(producer, ["poison", "fine"])
    deliveries = []
    poison_id = None
    for _ in range(6):
        try:
            msg = consumer.receive(2000)
        except pulsar.Timeout:
            break
        deliveries.append({"data": msg.data().decode(), "redelivered": msg.redelivery_count()})
        if msg.data() == b"fine":
            consumer.acknowledge(msg)
        else:
            poison_id = str(msg.message_id())
            consumer.negative_acknowledge(msg)
    letters = drain(dead, 2000, expect=1)
    return {
        "deliveries": sorted(deliveries, key=lambda d: (d["data"], d["redelivered"])),
        "dead_letters": [m.data().decode() for m in letters],
        "dead_letter_properties": [
            {k: v for k, v in sorted(m.properties().items()) if k != "ORIGIN_MESSAGE_ID"} for m in letters
        ],
        "origin_is_poison_id": [m.properties().get("ORIGIN_MESSAGE_ID") == poison_id for m in letters],
    }


@scenario
def test_non_persistent_topic(run: Run) -> Outcome:
    """A non-persistent topic delivers to connected consumers only."""
    client = run.client()
    topic = f"non-{run.topic('np')}"
    early = run.attempt(lambda: client.subscribe(topic, "sub") and "subscribed")
    if "error" in early:
        return {"subscribe": early}
    consumer = client.subscribe(topic, "sub2")
    producer = client.create_producer(topic, batching_enabled=False)
    send_all(producer, ["a", "b"])
    late = client.subscribe(topic, "late", initial_position=Earliest)
    return {"subscribe": early, "received": texts(drain(consumer)), "late_subscriber": texts(drain(late))}


@scenario
def test_non_persistent_acks_and_admin(run: Run) -> Outcome:
    """On a non-persistent topic: individual and cumulative acks, a negative ack, a redelivery request and seeks
    change nothing and keep the consumers connected (what is published next arrives); the admin routes of its
    subscriptions and stored messages answer as Pulsar's."""
    client = run.client()
    topic = f"non-{run.topic('npacks')}"
    shared = client.subscribe(
        topic, "s", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=100
    )
    exclusive = client.subscribe(topic, "e")
    producer = client.create_producer(topic, batching_enabled=False)
    send_all(producer, ["m0", "m1", "m2"])
    got = receive_n(shared, 3)
    mine = receive_n(exclusive, 3)
    shared.acknowledge(got[0])
    shared.negative_acknowledge(got[1])
    exclusive.acknowledge_cumulative(mine[-1])
    shared.redeliver_unacknowledged_messages()
    time.sleep(0.5)
    again = texts(drain(shared, 300))
    seeks = {
        "by_id": run.attempt(lambda: exclusive.seek(mine[0].message_id()) or "done"),
        "by_time": run.attempt(lambda: exclusive.seek(int(time.time() * 1000) - 60_000) or "done"),
    }
    time.sleep(0.5)
    send_all(producer, ["after"])
    base = f"/admin/v2/non-persistent/public/default/{topic.rsplit('/', 1)[1]}"
    # Not compared: internalStats, backlog (their ledger figures), ledger/0/entry/0 and skip (Pulsar fails them with
    # a ClassCastException, 500).
    routes = [
        ("GET", "/stats"),
        ("GET", "/subscriptions"),
        ("GET", "/lastMessageId"),
        ("GET", "/subscription/s/position/1"),
        ("GET", "/examinemessage?initialPosition=latest&messagePosition=1"),
        ("POST", "/subscription/s/resetcursor/0"),
        ("POST", "/subscription/s/expireMessages/1"),
        ("POST", "/all_subscription/expireMessages/1"),
        ("POST", "/terminate"),
    ]
    admin = {}
    for method, path in routes:
        answer = run.admin(method, base + path)
        admin[f"{method} {path}"] = [answer.status, answer.body if path != "/stats" else None]
    return {
        "redelivered": again,
        "seeks": seeks,
        "after_shared": texts(drain(shared, expect=1)),
        "after_exclusive": texts(drain(exclusive, expect=1)),
        "admin": admin,
    }


@scenario
def test_consumer_schema_on_a_fresh_topic(run: Run) -> Outcome:
    """When a STRING reader may give a fresh topic its schema (Pulsar counts the topic's producers, its connected
    consumers that are not AUTO_CONSUME, its entries and schema): after a consumer without a schema connected (and
    closed, or on another topic), a BYTES consumer, a producer (open, closed), another reader, a STRING consumer,
    and on another partition of a partitioned topic."""
    client = run.client()

    def reader(topic: str) -> Any:
        return client.create_reader(topic, pulsar.MessageId.earliest, schema=StringSchema())

    def closed_consumer(topic: str) -> None:
        client.subscribe(topic, "s").close()

    def partition_of_other(topic: str) -> str:
        run.admin("PUT", f"/admin/v2/persistent/{topic.removeprefix('persistent://')}/partitions", 2)
        client.subscribe(topic + "-partition-0", "s")
        return topic + "-partition-1"

    setups: dict[str, Any] = {
        "consumer_connected": lambda topic: client.subscribe(topic, "s"),
        "consumer_closed": closed_consumer,
        "consumer_on_other_topic": lambda topic: client.subscribe(run.topic("other"), "s"),
        "bytes_consumer": lambda topic: client.subscribe(topic, "s", schema=BytesSchema()),
        "producer_open": lambda topic: client.create_producer(topic),
        "producer_closed": lambda topic: client.create_producer(topic).close(),
        "reader_without_schema": lambda topic: client.create_reader(topic, pulsar.MessageId.earliest),
        "string_consumer": lambda topic: client.subscribe(topic, "s", schema=StringSchema()),
        "other_partition": partition_of_other,
    }
    out: dict[str, Any] = {}
    for name, setup in setups.items():
        topic = run.topic(f"schema-{name}")
        target = setup(topic)
        where = target if isinstance(target, str) else topic
        out[name] = run.attempt(lambda t=where: reader(t) and "subscribed")
    return out
