"""pulsar_txn, the project's Python client, beside the official clients, on this endpoint and on Apache Pulsar 4.2.4.

Plain messaging: each scenario runs one script twice, with ``pulsar`` (the official client) and with ``pulsar_txn``
passed in as the module, and records both observations and whether they are the same (``same`` is true in the
golden recorded from Pulsar, so a difference between the clients fails on either broker). Transactions: the
official Python client has none; those scenarios record what pulsar_txn observes, and the golden is what it observed
on Pulsar 4.2.4. The Java client's view of the same semantics (commit and abort visibility, acks in transactions,
conflicts, timeouts, ending twice) is checked by tests/conformance/test_transactions.py and test_txn_acks.py through
the Java harness; the error names here are the Python client's for the same Java exceptions (InvalidTxnStatusError
for Java's InvalidTxnStatusException raised by checkIfOpen, TransactionConflict for TransactionConflictException).
"""

from __future__ import annotations

import re
import time
from types import ModuleType
from typing import Any

import pulsar

import pulsar_txn
from pulsar_txn_proxy.conformance.framework import SETTLE_S, Outcome, Run, scenario

CLIENTS: dict[str, ModuleType] = {"official": pulsar, "pulsar_txn": pulsar_txn}


def _client(run: Run, module: ModuleType) -> Any:
    if module is pulsar:
        return run.client()
    client = pulsar_txn.Client(run.target.service_url, operation_timeout_seconds=20)
    run._clients.append(client)  # type: ignore[arg-type]  # closed with the run's clients
    return client


def _drain(module: ModuleType, source: Any, quiet_ms: int = 700, expect: int = 0) -> list[Any]:
    """Until ``quiet_ms`` passes with nothing; the first ``expect`` (as many as Pulsar delivers there) are each waited
    for up to ``SETTLE_S``, so that a loaded machine observes the same."""
    receive = source.read_next if hasattr(source, "read_next") else source.receive
    got = []
    while True:
        try:
            got.append(receive(int(SETTLE_S * 1000) if len(got) < expect else quiet_ms))
        except module.Timeout:
            return got


def _texts(messages: list[Any]) -> list[str]:
    return [m.data().decode() for m in messages]


def _error(step: Any) -> str:
    try:
        step()
    except Exception as exc:
        return type(exc).__name__
    return "ok"


def _both(run: Run, script: Any) -> Outcome:
    observed = {label: script(run, module, label) for label, module in CLIENTS.items()}
    return {**observed, "same": observed["official"] == observed["pulsar_txn"]}


# -- plain messaging: the same script with both clients --------------------------------------------


def _basics(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    client = _client(run, pulsar)
    topic = run.topic(f"basics-{label}")
    consumer = client.subscribe(topic, "s", receiver_queue_size=5)
    producer = client.create_producer(topic)
    sent = [producer.send(f"m{i}".encode(), {"i": str(i)}, f"k{i % 2}", event_timestamp=1000 + i) for i in range(6)]
    got = [consumer.receive(5000) for _ in range(6)]
    consumer.acknowledge(got[0])
    consumer.acknowledge(got[1].message_id())
    consumer.close()
    again = client.subscribe(topic, "s")
    back = _drain(pulsar, again, expect=4)
    return {
        "texts": _texts(got),
        "keys": [m.partition_key() for m in got],
        "props": [m.properties() for m in got],
        "event_times": [m.event_timestamp() for m in got],
        "ids_match": [str(m.message_id()) == str(s) for m, s in zip(got, sent, strict=True)],
        "redelivered": _texts(back),
        "redelivery_counts": [m.redelivery_count() for m in back],
        "timeout": _error(lambda: again.receive(100)),
        "second_exclusive": _error(lambda: client.subscribe(topic, "s")),
    }


@scenario
def test_produce_consume_acknowledge_and_redeliver(run: Run) -> Outcome:
    """Sends with properties, key and event time; two acks (message, id); the rest come back to a new consumer."""
    return _both(run, _basics)


def _batches(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    client = _client(run, pulsar)
    topic = run.topic(f"batches-{label}")
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=200)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=100,
                                      compression_type=pulsar.CompressionType.ZSTD)
    results = []
    for i in range(10):
        producer.send_async(f"b{i}".encode(), lambda res, mid: results.append(str(res).rsplit(".", 1)[-1]))
    producer.flush()
    got = [consumer.receive(5000) for _ in range(10)]
    for msg in got:
        if msg.data() in (b"b3", b"b7"):
            consumer.negative_acknowledge(msg)
        else:
            consumer.acknowledge(msg)
    back = _drain(pulsar, consumer, 1500, expect=10)  # the whole batch: none of it was acknowledged on the broker
    for msg in back:
        consumer.acknowledge(msg)
    return {
        "results": results,
        "texts": _texts(got),
        "batch_indexes": [m.message_id().batch_index() for m in got],
        "back": sorted(_texts(back)),
        "counts": [m.redelivery_count() for m in back],
        "cumulative_on_shared": _error(lambda: consumer.acknowledge_cumulative(back[0])),
        "left": _texts(_drain(pulsar, consumer)),
    }


@scenario
def test_batched_compressed_sends_and_negative_acknowledgements(run: Run) -> Outcome:
    """send_async callbacks of a ZSTD batch; two nacks on a Shared subscription: the batch comes back whole (its
    other messages were acknowledged by the client only, which acknowledges a batch once all of it is)."""
    return _both(run, _batches)


def _partitions(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    client = _client(run, pulsar)
    topic = run.partitioned_topic(f"parts-{label}", 3)
    producer = client.create_producer(topic)
    by_key: dict[str, set[int]] = {}
    for i in range(24):
        key = f"key-{i % 4}"
        by_key.setdefault(key, set()).add(producer.send(f"m{i}".encode(), partition_key=key).partition())
    unkeyed = {producer.send(b"u").partition() for _ in range(6)}
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    pattern = client.subscribe(re.compile(f"persistent://public/default/parts-{label}-{run.suffix}"), "p",
                               initial_position=pulsar.InitialPosition.Earliest)
    listed = client.subscribe([f"{topic}-partition-0", f"{topic}-partition-1"], "l",
                              initial_position=pulsar.InitialPosition.Earliest)
    return {
        "partitions": [p.rsplit("-", 1)[-1] for p in client.get_topic_partitions(topic)],
        "one_partition_per_key": all(len(p) == 1 for p in by_key.values()),
        "unkeyed_spread": len(unkeyed),
        "all": sorted(_texts(_drain(pulsar, consumer, expect=30))),
        "regex": sorted(_texts(_drain(pulsar, pattern, expect=30))),
        "listed_count": len(_drain(pulsar, listed, expect=16)) < 30,
    }


@scenario
def test_partitioned_topics_list_and_regex_consumers(run: Run) -> Outcome:
    """Keys keep their partition, unkeyed sends spread; partitioned, regex and list consumers read them."""
    return _both(run, _partitions)


def _seek_and_readers(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    client = _client(run, pulsar)
    topic = run.topic(f"seek-{label}")
    producer = client.create_producer(topic)
    ids = [producer.send(f"m{i}".encode()) for i in range(6)]
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    first = _texts(_drain(pulsar, consumer, expect=6))
    consumer.seek(ids[3])
    after_seek = _texts(_drain(pulsar, consumer, expect=2))
    consumer.seek(pulsar.MessageId.earliest)
    after_earliest = _texts(_drain(pulsar, consumer, expect=6))
    readers = {}
    for name, start, inclusive in (("exclusive", ids[2], False), ("inclusive", ids[2], True),
                                   ("earliest", pulsar.MessageId.earliest, False)):
        reader = client.create_reader(topic, start, start_message_id_inclusive=inclusive)
        readers[name] = _texts(_drain(pulsar, reader, expect=3))
    latest = client.create_reader(topic, pulsar.MessageId.latest)
    before = latest.has_message_available()
    producer.send(b"new")
    time.sleep(0.2)
    return {
        "first": first,
        "after_seek": after_seek,
        "after_earliest": after_earliest,
        "readers": readers,
        "latest_available": [before, latest.has_message_available()],
        "latest_reads": _texts(_drain(pulsar, latest, expect=1)),
        "unsubscribe": _error(consumer.unsubscribe),
    }


@scenario
def test_seek_and_readers(run: Run) -> Outcome:
    """Seek to an id and to earliest; readers from an id (exclusive, inclusive), earliest and latest."""
    return _both(run, _seek_and_readers)


def _closed(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    client = _client(run, pulsar)
    topic = run.topic(f"closed-{label}")
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "s")
    producer.close()
    consumer.close()
    outcome = {"send_after_producer_close": _error(lambda: producer.send(b"x")),
               "receive_after_consumer_close": _error(lambda: consumer.receive(100))}
    other = client.create_producer(topic)
    client.close()
    outcome["send_after_client_close"] = _error(lambda: other.send(b"x"))
    outcome["create_after_client_close"] = _error(lambda: client.create_producer(topic))
    return outcome


@scenario
def test_closed_producers_consumers_and_clients_refuse(run: Run) -> Outcome:
    """Sends and receives after close raise AlreadyClosed (the old client returned a MessageId)."""
    return _both(run, _closed)


def _schemas(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    class User(pulsar.schema.Record):
        name = pulsar.schema.String()
        age = pulsar.schema.Integer()

    class Other(pulsar.schema.Record):
        size = pulsar.schema.Double(required=True)

    client = _client(run, pulsar)
    outcome = {}
    for kind in ("JsonSchema", "AvroSchema"):
        topic = run.topic(f"schema-{kind}-{label}")
        schema = getattr(pulsar.schema, kind)(User)
        consumer = client.subscribe(topic, "s", schema=schema)
        producer = client.create_producer(topic, schema=schema)
        producer.send(User(name="ada", age=36))
        value = consumer.receive(5000).value()
        outcome[kind] = {
            "value": [value.name, value.age],
            "incompatible": _error(lambda t=topic, k=kind: client.create_producer(
                t, schema=getattr(pulsar.schema, k)(Other))),
        }
    topic = run.topic(f"schema-string-{label}")
    consumer = client.subscribe(topic, "s", schema=pulsar.schema.StringSchema())
    client.create_producer(topic, schema=pulsar.schema.StringSchema()).send("héllo")
    outcome["string"] = consumer.receive(5000).value()
    return outcome


@scenario
def test_schemas(run: Run) -> Outcome:
    """JSON and Avro records, a string schema; an incompatible schema is refused."""
    return _both(run, _schemas)


def _failover_and_key_shared(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    client = _client(run, pulsar)
    topic = run.topic(f"failover-{label}")
    first = client.subscribe(topic, "f", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a")
    second = client.subscribe(topic, "f", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b")
    producer = client.create_producer(topic)
    for i in range(6):
        producer.send(f"m{i}".encode())
    # Pulsar picks the active consumer again when the second one joins and waits activeConsumerFailoverDelayTimeMillis
    # (1 s) before it dispatches: wait longer than that for "nothing more".
    by_first, by_second = _texts(_drain(pulsar, first, 2500)), _texts(_drain(pulsar, second, 2500))
    active, standby = (first, second) if by_first else (second, first)
    active.close()  # nothing acknowledged: the standby takes over and gets everything again
    taken_over = _drain(pulsar, standby, 2500, expect=6)
    keyed = run.topic(f"keyshared-{label}")
    policy = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.AutoSplit)
    ks = [client.subscribe(keyed, "k", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=name,
                           key_shared_policy=policy) for name in ("x", "y")]
    keyed_producer = client.create_producer(keyed)
    for i in range(20):
        keyed_producer.send(f"v{i}".encode(), partition_key=f"key-{i % 4}")
    owners: dict[str, set[int]] = {}
    orders: dict[str, list[int]] = {}
    total = 0
    for index, consumer in enumerate(ks):
        for msg in _drain(pulsar, consumer, expect=10):
            total += 1
            owners.setdefault(msg.partition_key(), set()).add(index)
            orders.setdefault(msg.partition_key(), []).append(int(msg.data()[1:]))
            consumer.acknowledge(msg)
    return {
        "one_consumer_active": sorted([len(by_first), len(by_second)]),
        "active_got": by_first or by_second,
        "taken_over": _texts(taken_over),
        "taken_over_counts": [m.redelivery_count() for m in taken_over],
        "key_shared_total": total,
        "one_consumer_per_key": all(len(o) == 1 for o in owners.values()),
        "in_order_per_key": all(v == sorted(v) for v in orders.values()),
        "keys": sorted(owners),
    }


@scenario
def test_failover_and_key_shared_subscriptions(run: Run) -> Outcome:
    """Failover: one of two consumers gets everything, the other takes over unacknowledged messages when it closes;
    Key_Shared: each key goes to one consumer, in order."""
    return _both(run, _failover_and_key_shared)


def _policy_made(pulsar: ModuleType, *args: Any) -> Any:
    try:
        made = pulsar.ConsumerKeySharedPolicy(*args)
    except Exception as exc:
        return type(exc).__name__
    return [made.key_shared_mode.name, made.allow_out_of_order_delivery, [list(r) for r in made.sticky_ranges]]


def _sticky_key_shared(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    policy, sticky = pulsar.ConsumerKeySharedPolicy, pulsar.KeySharedMode.Sticky
    policies = {
        "sticky": _policy_made(pulsar, sticky, True, [(0, 99), (200, 299)]),
        "sticky_without_ranges": _policy_made(pulsar, sticky),
        "empty_ranges": _policy_made(pulsar, sticky, False, []),
        "out_of_bounds": _policy_made(pulsar, sticky, False, [(0, 65536)]),
        "overlapping": _policy_made(pulsar, sticky, False, [(0, 100), (10, 20)]),
        "touching": _policy_made(pulsar, sticky, False, [(5, 10), (0, 5)]),
        "auto_split_with_ranges": _policy_made(pulsar, pulsar.KeySharedMode.AutoSplit, False, [(0, 10)]),
    }
    client = _client(run, pulsar)
    topic = run.topic(f"sticky-{label}")

    def subscribe(name: str, mode: Any, ranges: list[tuple[int, int]] | None) -> Any:
        return client.subscribe(topic, "k", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=name,
                                key_shared_policy=policy(mode, False, ranges))

    low = subscribe("low", sticky, [(0, 32767)])
    high = subscribe("high", sticky, [(32768, 65535)])
    refused = {
        "overlapping_range": _error(lambda: subscribe("overlap", sticky, [(30000, 40000)])),
        "auto_split_beside_sticky": _error(lambda: subscribe("auto", pulsar.KeySharedMode.AutoSplit, None)),
    }
    producer = client.create_producer(topic)
    for i in range(40):
        producer.send(f"v{i}".encode(), partition_key=f"key-{i % 8}")
    got: dict[str, list[Any]] = {"low": _drain(pulsar, low, expect=20), "high": _drain(pulsar, high, expect=20)}
    for name, consumer in (("low", low), ("high", high)):
        for msg in got[name]:
            consumer.acknowledge(msg)
    high.close()  # its hash range has no consumer now: those keys wait
    for i in range(40, 48):
        producer.send(f"v{i}".encode(), partition_key=f"key-{i % 8}")
    later = _drain(pulsar, low, expect=4)
    return {
        "policies": policies,
        "refused": refused,
        "keys": {name: sorted({m.partition_key() for m in msgs}) for name, msgs in got.items()},
        "in_order": all(
            [int(m.data()[1:]) for m in msgs if m.partition_key() == key] == sorted(
                int(m.data()[1:]) for m in msgs if m.partition_key() == key)
            for msgs in got.values() for key in {m.partition_key() for m in msgs}
        ),
        "total": sum(len(msgs) for msgs in got.values()),
        "low_after_high_closed": sorted({m.partition_key() for m in later}),
        "later_count": len(later),
    }


@scenario
def test_key_shared_sticky_hash_ranges(run: Run) -> Outcome:
    """ConsumerKeySharedPolicy with KeySharedMode.Sticky: the policy's checks (ranges required, in 0..65535, not
    overlapping); two consumers owning half the hash space each get the keys hashing there, in order; a consumer
    whose range overlaps a connected one's, and an AutoSplit consumer beside sticky ones, are refused; once a
    consumer leaves, the keys of its range go to nobody."""
    return _both(run, _sticky_key_shared)


def _cumulative_redeliver_batch_receive(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    client = _client(run, pulsar)
    topic = run.topic(f"cumulative-{label}")
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(f"m{i}".encode())
    got = [consumer.receive(5000) for _ in range(10)]
    consumer.acknowledge_cumulative(got[4])
    consumer.redeliver_unacknowledged_messages()
    redelivered = _drain(pulsar, consumer, expect=5)
    consumer.acknowledge_cumulative(redelivered[-1].message_id())
    consumer.close()
    batched = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=200)
    for i in range(10):
        batched.send_async(f"b{i}".encode(), None)
    batched.flush()
    again = client.subscribe(topic, "s")
    in_batch = [again.receive(5000) for _ in range(10)]
    again.acknowledge_cumulative(in_batch[4])  # inside the batch: acknowledges up to the entry before it
    again.close()
    policy = pulsar.ConsumerBatchReceivePolicy(4, -1, 1000)
    third = client.subscribe(topic, "s", batch_receive_policy=policy)
    batches = []
    for _ in range(4):
        batch = third.batch_receive()
        batches.append(_texts(batch))
        for msg in batch:
            third.acknowledge(msg)
    third.unsubscribe()
    producer.send(b"after-unsubscribe")
    fresh = client.subscribe(topic, "s")
    producer.send(b"after-resubscribe")
    return {
        "redelivered": _texts(redelivered),
        "redelivery_counts": [m.redelivery_count() for m in redelivered],
        "batch_indexes": [m.message_id().batch_index() for m in in_batch],
        "after_cumulative_in_batch": batches,
        "fresh_subscription": _texts(_drain(pulsar, fresh, expect=1)),
    }


@scenario
def test_cumulative_acks_redelivery_batch_receive_and_unsubscribe(run: Run) -> Outcome:
    """A cumulative ack then redeliver_unacknowledged_messages; a cumulative ack inside a batch (the whole batch comes
    back to the next consumer); batch_receive with a count policy; unsubscribe, then a new subscription from latest."""
    return _both(run, _cumulative_redeliver_batch_receive)


def _producer_options(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    client = _client(run, pulsar)
    topic = run.topic(f"producer-{label}")
    name = run.name(f"named-{label}")
    consumer = client.subscribe(topic, "s")
    named = client.create_producer(topic, producer_name=name, initial_sequence_id=100)
    before = named.last_sequence_id()
    named.send(b"a")
    named.send(b"b", sequence_id=200)
    outcome: dict[str, Any] = {
        "name": named.producer_name() == name,
        "sequence_ids": [before, named.last_sequence_id()],
        "same_name_again": _error(lambda: client.create_producer(topic, producer_name=name)),
        "generated_name": bool(client.create_producer(topic).producer_name()),
        "received_from": [m.producer_name() == name for m in _drain(pulsar, consumer, expect=2)],
    }
    exclusive_topic = run.topic(f"exclusive-{label}")
    client.create_producer(exclusive_topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    outcome["second_on_exclusive"] = _error(lambda: client.create_producer(exclusive_topic))
    compressed = {}
    for kind in ("LZ4", "ZLib", "ZSTD", "SNAPPY"):
        ctopic = run.topic(f"compressed-{kind.lower()}-{label}")
        reader = client.subscribe(ctopic, "s")
        sender = client.create_producer(ctopic, compression_type=getattr(pulsar.CompressionType, kind),
                                        batching_enabled=kind != "SNAPPY")
        sender.send_async(b"z" * 3000, None)
        sender.send_async(b"small", None)
        sender.flush()
        compressed[kind] = [len(m.data()) for m in _drain(pulsar, reader, expect=2)]
    outcome["compressed"] = compressed
    parts = run.partitioned_topic(f"routed-{label}", 3)
    routes = {}
    for mode in ("UseSinglePartition", "RoundRobinDistribution"):
        sender = client.create_producer(parts, message_routing_mode=getattr(pulsar.PartitionsRoutingMode, mode))
        routes[mode] = len({sender.send(b"r").partition() for _ in range(9)})
    custom = client.create_producer(parts, message_router=lambda msg, count: int(msg.partition_key()[1:]) % count)
    routes["message_router"] = [custom.send(b"c", partition_key=f"k{i}").partition() for i in range(5)]
    outcome["routes"] = routes
    return outcome


@scenario
def test_producer_names_sequence_ids_access_compression_and_routing(run: Run) -> Outcome:
    """Producer and sequence ids (initial, explicit), a name in use, an Exclusive producer, each compression type,
    the routing modes and a message router on a partitioned topic."""
    return _both(run, _producer_options)


def _message_ids(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    client = _client(run, pulsar)
    topic = run.topic(f"ids-{label}")
    producer = client.create_producer(topic)
    sent = []
    for i in range(4):
        sent.append(producer.send(f"m{i}".encode()))
        time.sleep(0.05)
    batched = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=100)
    for i in range(3):
        batched.send_async(f"b{i}".encode(), None)
    batched.flush()
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    got = _drain(pulsar, consumer, expect=7)
    restored = [pulsar.MessageId.deserialize(m.message_id().serialize()) for m in got]
    consumer.seek(restored[1])
    after_seek = _texts(_drain(pulsar, consumer, expect=5))
    consumer.seek(got[2].publish_timestamp())
    after_time_seek = _texts(_drain(pulsar, consumer, expect=5))
    reader = client.create_reader(topic, restored[5])
    earliest_bytes = pulsar.MessageId.deserialize(pulsar.MessageId.earliest.serialize())
    latest_bytes = pulsar.MessageId.deserialize(pulsar.MessageId.latest.serialize())
    return {
        "round_trip_equal": [r == m.message_id() for r, m in zip(restored, got, strict=True)],
        "round_trip_fields": [[r.batch_index(), r.partition()] for r in restored],
        "sent_equal_received": [s == m.message_id() for s, m in zip(sent, got, strict=False)],
        "ordered": [restored[i] < restored[i + 1] for i in range(len(restored) - 1)],
        "after_seek": after_seek,
        "after_time_seek": after_time_seek,
        "reader_from_batch_index": _texts(_drain(pulsar, reader, expect=1)),
        "earliest_round_trip": [earliest_bytes.ledger_id(), earliest_bytes.entry_id()] == [
            pulsar.MessageId.earliest.ledger_id(), pulsar.MessageId.earliest.entry_id()],
        "latest_round_trip": [latest_bytes.ledger_id(), latest_bytes.entry_id()] == [
            pulsar.MessageId.latest.ledger_id(), pulsar.MessageId.latest.entry_id()],
        "earliest_reader_first": _texts(
            _drain(pulsar, client.create_reader(topic, pulsar.MessageId.earliest), expect=1)
        )[:1],
    }


@scenario
def test_message_ids_serialize_compare_and_seek(run: Run) -> Outcome:
    """Received ids (batched too) serialized and read back are equal and ordered; seek to one and to a publish time;
    a reader from a batch message's id; earliest and latest through bytes."""
    return _both(run, _message_ids)


def _kind(step: Any) -> list[str]:
    """The error's class and whether it is a PulsarException (or "ok")."""
    try:
        step()
    except Exception as exc:
        base = (pulsar.PulsarException, pulsar_txn.PulsarException)
        return [type(exc).__name__, "PulsarException" if isinstance(exc, base) else "other"]
    return ["ok"]


def _errors(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    client = _client(run, pulsar)
    topic = run.topic(f"errors-{label}")
    shared = client.subscribe(topic, "shared", consumer_type=pulsar.ConsumerType.Shared)
    client.create_producer(topic).send(b"x")
    msg = shared.receive(5000)
    client.subscribe(topic, "exclusive")
    unreachable = pulsar.Client(f"pulsar://127.0.0.1:{_closed_port()}", operation_timeout_seconds=2,
                                connection_timeout_ms=500)
    outcome = {
        "cumulative_on_shared": _kind(lambda: shared.acknowledge_cumulative(msg)),
        "receive_timeout": _kind(lambda: shared.receive(50)),
        "second_exclusive": _kind(lambda: client.subscribe(topic, "exclusive")),
        "unknown_tenant": _kind(lambda: client.create_producer(f"persistent://no-such-tenant-{run.suffix}/ns/t")),
        "unreachable_broker": _kind(lambda: unreachable.create_producer(topic)),
        "unknown_scheme": _kind(lambda: pulsar.Client("foo://127.0.0.1:6650")),
        "no_scheme": _kind(lambda: pulsar.Client("127.0.0.1:6650")),
        "reader_needs_message_id": _kind(lambda: client.create_reader(topic, "earliest")),
        "hierarchy": {name: [b.__name__ for b in getattr(pulsar, name).__mro__[1:3]]
                      for name in ("Timeout", "AlreadyClosed", "ConsumerBusy", "TopicNotFound", "ProducerBusy",
                                   "IncompatibleSchema", "TransactionConflict", "NotConnected", "ConnectError",
                                   "CumulativeAcknowledgementNotAllowedError", "InvalidConfiguration")},
    }
    unreachable.close()
    return outcome


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@scenario
def test_errors_and_their_classes(run: Run) -> Outcome:
    """The error each client raises for a cumulative ack on Shared, a receive timeout, a busy subscription, an
    unknown tenant, an unreachable broker (Timeout once the operation timeout passed), service URLs with an unknown
    scheme or none, a reader without a MessageId; the exception hierarchy."""
    return _both(run, _errors)


def _threads(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    import threading

    client = _client(run, pulsar)
    topic = run.topic(f"threads-{label}")
    consumer = client.subscribe(topic, "s")
    shared_producer = client.create_producer(topic)
    ids: list[str] = []
    errors: list[str] = []

    def work(index: int) -> None:
        own = client.create_producer(topic)
        for i in range(25):
            try:
                ids.append(str(shared_producer.send(f"s{index}-{i}".encode())))
                ids.append(str(own.send(f"o{index}-{i}".encode())))
            except Exception as exc:
                errors.append(type(exc).__name__)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    received: list[str] = []

    def receive() -> None:
        while len(received) < 200:
            try:
                msg = consumer.receive(5000)
            except Exception as exc:
                errors.append(type(exc).__name__)
                return
            received.append(msg.data().decode())
            consumer.acknowledge(msg)

    receiver = threading.Thread(target=receive)
    receiver.start()
    for thread in threads:
        thread.join()
    receiver.join()
    per_sender = {}
    for text in received:
        per_sender.setdefault(text.split("-")[0], []).append(int(text.split("-")[1]))
    return {
        "sent": len(ids),
        "unique_ids": len(set(ids)),
        "received": len(received),
        "in_order_per_sender": all(v == sorted(v) for v in per_sender.values()),
        "errors": errors,
    }


@scenario
def test_one_client_from_many_threads(run: Run) -> Outcome:
    """Four threads send on one shared producer and on producers of their own while a fifth receives and
    acknowledges, all on one client: every message once, each sender's in order."""
    return _both(run, _threads)


def _asyncio_script(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    import asyncio
    import importlib

    aio = importlib.import_module(f"{pulsar.__name__}.asyncio")
    topic = run.topic(f"asyncio-{label}")

    async def script() -> Outcome:
        client = aio.Client(run.target.service_url, operation_timeout_seconds=20)
        try:
            consumer = await client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
            producer = await client.create_producer(topic)
            ids = await asyncio.gather(*(producer.send(f"m{i}".encode(), {"i": str(i)}) for i in range(5)))
            got = [await consumer.receive() for _ in range(5)]
            await consumer.acknowledge(got[0])
            await consumer.acknowledge(got[1].message_id())
            await consumer.acknowledge_cumulative(got[3])
            await consumer.seek(got[0].publish_timestamp())  # (pulsar.asyncio's seek refuses the ids it hands out)
            again = [await consumer.receive() for _ in range(5)]
            errors = {}
            try:
                await consumer.seek("nowhere")
            except Exception as exc:
                errors["seek_to_a_string"] = type(exc).__name__
            await consumer.unsubscribe()
            await producer.close()
            try:
                await producer.send(b"late")
            except aio.PulsarException as exc:  # pulsar.asyncio raises its one class, the Result telling what failed
                errors["send_after_close"] = exc.error().name
            return {
                "batch_indexes": [i.batch_index() for i in ids],
                "texts": _texts(got),
                "props": [m.properties() for m in got],
                "after_seek": _texts(again),
                "errors": errors,
                "producer_name": bool(producer.producer_name()),
            }
        finally:
            await client.close()

    return asyncio.run(script())


@scenario
def test_asyncio_api(run: Run) -> Outcome:
    """The same coroutine script with ``pulsar.asyncio`` and ``pulsar_txn.asyncio``: concurrent sends (the default
    batching of the asyncio producer), receive, the three acknowledgements, seek, unsubscribe, send after close."""
    return _both(run, _asyncio_script)


def _listeners_schemas_and_client_options(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    import threading

    client = _client(run, pulsar)
    topic = run.topic(f"listener-{label}")
    heard: list[str] = []
    done = threading.Event()

    def listener(consumer: Any, msg: Any) -> None:
        heard.append(msg.data().decode())
        consumer.acknowledge(msg)
        if len(heard) == 5:
            done.set()

    client.subscribe(topic, "s", message_listener=listener)
    producer = client.create_producer(topic)
    for i in range(5):
        producer.send(f"l{i}".encode())
    done.wait(10)
    outcome: dict[str, Any] = {"listener_heard": heard}
    bytes_topic = run.topic(f"bytes-{label}")
    reader = client.subscribe(bytes_topic, "s", schema=pulsar.schema.BytesSchema())
    client.create_producer(bytes_topic, schema=pulsar.schema.BytesSchema()).send(b"\x00raw")
    raw = reader.receive(5000)
    outcome["bytes_schema"] = [raw.value() == b"\x00raw", raw.data() == b"\x00raw"]
    definition = {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "int"},
                                                                 {"name": "y", "type": "int"}]}
    avro_topic = run.topic(f"avro-definition-{label}")
    avro = pulsar.schema.AvroSchema(None, schema_definition=definition)
    points = client.subscribe(avro_topic, "s", schema=avro)
    client.create_producer(avro_topic, schema=avro).send({"x": 1, "y": -2})
    outcome["avro_definition"] = points.receive(5000).value()

    class Shape(pulsar.schema.Record):
        name = pulsar.schema.String()
        sides = pulsar.schema.Array(pulsar.schema.Integer())
        tags = pulsar.schema.Map(pulsar.schema.String())
        area = pulsar.schema.Double()

    json_topic = run.topic(f"json-nested-{label}")
    shapes = client.subscribe(json_topic, "s", schema=pulsar.schema.JsonSchema(Shape))
    client.create_producer(json_topic, schema=pulsar.schema.JsonSchema(Shape)).send(
        Shape(name="tri", sides=[3, 4, 5], tags={"k": "v"}, area=6.0))
    shape = shapes.receive(5000).value()
    outcome["json_nested"] = [shape.name, shape.sides, shape.tags, shape.area]
    elsewhere = pulsar.Client(run.target.service_url, operation_timeout_seconds=3, listener_name="nowhere")
    outcome["unknown_listener_name"] = _kind(lambda: elsewhere.create_producer(run.topic(f"listener-name-{label}")))
    elsewhere.close()
    return outcome


@scenario
def test_message_listener_schemas_and_client_options(run: Run) -> Outcome:
    """A message_listener that acknowledges; BytesSchema; AvroSchema from a definition; a JSON record with an
    array, a map and a double; a client whose listener_name the broker does not advertise."""
    return _both(run, _listeners_schemas_and_client_options)


def _batch_index_acks(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    client = _client(run, pulsar)
    outcome: dict[str, Any] = {}
    for case in ("individual", "cumulative"):
        topic = run.topic(f"batch-index-{case}-{label}")
        producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=200)
        for i in range(10):
            producer.send_async(f"b{i}".encode(), None)
        producer.flush()
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest,
                                    batch_index_ack_enabled=True)
        got = [consumer.receive(5000) for _ in range(10)]
        if case == "individual":
            for msg in (got[0], got[1], got[2], got[3], got[7]):
                consumer.acknowledge(msg)
        else:
            consumer.acknowledge_cumulative(got[4])
        time.sleep(0.5)  # the clients group acknowledgements for 100 ms
        consumer.close()
        again = client.subscribe(topic, "s", batch_index_ack_enabled=True)
        back = _drain(pulsar, again, expect=5)
        outcome[case] = {"batch_indexes": [m.message_id().batch_index() for m in got], "back": _texts(back),
                         "back_indexes": [m.message_id().batch_index() for m in back]}
    return outcome


@scenario
def test_batch_index_acknowledgements(run: Run) -> Outcome:
    """batch_index_ack_enabled: five messages of a batch of ten acknowledged one by one, or the first five
    cumulatively; the next consumer gets only the others."""
    return _both(run, _batch_index_acks)


def _held_send(run: Run, pulsar: ModuleType, label: str, policy: str, send_timeout: int) -> Outcome:
    namespace, _ = run.namespace(f"held-{label}-{policy.rsplit('_', 1)[-1]}")
    path = f"/admin/v2/namespaces/{namespace}/backlogQuota?backlogQuotaType=destination_storage"
    run.admin("POST", path, {"limitSize": 2048, "policy": policy})
    topic = f"persistent://{namespace}/t"
    client = _client(run, pulsar)
    consumer = client.subscribe(topic, "slow")
    producer = client.create_producer(topic, send_timeout_millis=send_timeout, batching_enabled=False)
    for _ in range(20):
        producer.send(b"x" * 200)
    case: dict[str, Any] = {"check": run.admin("GET", "/admin/v2/brokers/backlog-quota-check").status}
    time.sleep(1)  # the broker closed the producer; its reconnections are refused
    results: list[str] = []
    producer.send_async(b"async", lambda res, mid: results.append(str(res).rsplit(".", 1)[-1]))
    began = time.monotonic()
    case["send"] = _error(lambda: producer.send(b"held"))
    waited, seconds = time.monotonic() - began, send_timeout / 1000
    case["failed"] = (
        "before the send timeout" if waited < seconds - 0.2
        else "at the send timeout" if waited < seconds + 1.5 else "well after the send timeout"
    )
    deadline = time.monotonic() + 5
    while not results and time.monotonic() < deadline:
        time.sleep(0.05)
    case["async"] = results
    case["connected_while_held"] = producer.is_connected()
    received = _drain(pulsar, consumer, 1000, expect=20)
    consumer.acknowledge_cumulative(received[-1])  # no backlog: the next reconnection is accepted
    deadline, sent = time.monotonic() + 30, "not sent"
    while sent != "ok" and time.monotonic() < deadline:
        sent = _error(lambda: producer.send(b"after"))
    case["after"] = sent
    case["received"] = [t for t in _texts(received) + _texts(_drain(pulsar, consumer, 1000, expect=1)) if "x" not in t]
    return case


def _held_sends(run: Run, pulsar: ModuleType, label: str) -> Outcome:
    # The hold policy refuses the producer's reconnections with a retryable error: its sends stay queued until
    # send_timeout_millis. The exception policy fails them when a reconnection is refused (before that timeout).
    return {
        policy: _held_send(run, pulsar, label, policy, send_timeout)
        for policy, send_timeout in (("producer_request_hold", 2000), ("producer_exception", 15000))
    }


@scenario
def test_send_timeouts_while_a_backlog_quota_holds_the_producer(run: Run) -> Outcome:
    """send_timeout_millis: a backlog over its quota gets the producer closed by the quota check
    (``brokers/backlog-quota-check``) and its reconnections refused; with ``producer_request_hold`` a send (and a
    send_async) waiting for the reconnection fails with Timeout at the send timeout, with ``producer_exception`` it
    fails with ProducerBlockedQuotaExceededException when a reconnection is refused; once the backlog is
    acknowledged the producer sends again. Nothing that failed was stored."""
    return _both(run, _held_sends)


# -- transactions: pulsar_txn, compared with what Pulsar gives the Java client ----------------------


@scenario
def test_transactions_commit_abort_and_acknowledge(run: Run) -> Outcome:
    """Sends in a committed and an aborted transaction; acks in a committed, an aborted and a conflicting one."""
    client = _client(run, pulsar_txn)
    topic, sub = run.topic("t"), run.name("sub")
    consumer = client.subscribe(topic, sub, initial_position=pulsar_txn.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=True)
    kept, dropped = client.new_transaction(), client.new_transaction()
    producer.send(b"kept-0", partition_key="k", txn=kept)
    for i in range(3):
        producer.send_async(f"dropped-{i}".encode(), None, txn=dropped)
    producer.send_async(b"kept-1", None, txn=kept)
    producer.flush()
    before = _texts(_drain(pulsar_txn, consumer))
    kept.commit()
    dropped.abort()
    received = [consumer.receive(5000) for _ in range(2)]
    acker = client.new_transaction()
    consumer.acknowledge(received[0], txn=acker)
    conflict = _error(lambda: consumer.acknowledge(received[0], txn=client.new_transaction()))
    undone = client.new_transaction()
    consumer.acknowledge(received[1], txn=undone)
    acker.commit()
    undone.abort()
    back = _texts(_drain(pulsar_txn, consumer, expect=1))
    return {
        "before_commit": before,
        "after_commit": _texts(received),
        "states": [kept.state.value, dropped.state.value, acker.state.value, undone.state.value],
        "conflict": conflict,
        "back_after_abort": back,
    }


@scenario
def test_transaction_state_checks(run: Run) -> Outcome:
    """Ending twice; a send into an ended transaction; a context manager that commits and one that aborts."""
    client = _client(run, pulsar_txn)
    topic = run.topic("t")
    observer = client.subscribe(topic, run.name("sub"))
    producer = client.create_producer(topic)
    outcome = {}
    for first in ("commit", "abort"):
        for second in ("commit", "abort"):
            txn = client.new_transaction()
            getattr(txn, first)()
            outcome[f"{first}_then_{second}"] = _error(getattr(txn, second))
    ended = client.new_transaction()
    ended.commit()
    outcome["send_after_commit"] = _error(lambda: producer.send(b"late", txn=ended))
    with client.new_transaction() as txn:
        producer.send(b"with-commit", txn=txn)
    try:
        with client.new_transaction() as txn:
            producer.send(b"with-abort", txn=txn)
            raise KeyError("x")
    except KeyError:
        pass
    outcome["seen"] = _texts(_drain(pulsar_txn, observer, expect=1))
    return outcome


@scenario
def test_a_transaction_past_its_timeout(run: Run) -> Outcome:
    """A transaction of 1 s, used after 2 s: sends, acks and the commit raise; nothing of it shows."""
    client = _client(run, pulsar_txn)
    topic = run.topic("t")
    consumer = client.subscribe(topic, run.name("sub"), initial_position=pulsar_txn.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    producer.send(b"plain")
    msg = consumer.receive(5000)
    txn = client.new_transaction(1000)
    producer.send(b"in-time", txn=txn)
    time.sleep(2)
    return {
        "state": txn.state.value,
        "send": _error(lambda: producer.send(b"late", txn=txn)),
        "ack": _error(lambda: consumer.acknowledge(msg, txn=txn)),
        "commit": _error(txn.commit),
        "abort": _error(txn.abort),
        "seen": _texts(_drain(pulsar_txn, consumer)),
    }


@scenario
def test_an_abort_in_a_consume_transform_produce_loop(run: Run) -> Outcome:
    """60 inputs; each in its own transaction (send the output, ack the input), every 10th aborted: every input is
    committed once, none is delivered again after being committed, no TransactionConflict."""
    client = _client(run, pulsar_txn)
    source, sink = run.topic("in"), run.topic("out")
    official = run.client().create_producer(source, batching_enabled=True)
    for i in range(60):
        official.send_async(f"m{i:02d}".encode(), None)
    official.flush()
    consumer = client.subscribe(source, run.name("loop"), initial_position=pulsar_txn.InitialPosition.Earliest)
    observer = client.subscribe(sink, run.name("observer"), initial_position=pulsar_txn.InitialPosition.Earliest)
    producer = client.create_producer(sink)
    committed, errors, count = [], [], 0
    while True:
        try:
            msg = consumer.receive(1500)
        except pulsar_txn.Timeout:
            break
        count += 1
        txn = client.new_transaction()
        try:
            producer.send(msg.data(), txn=txn)
            consumer.acknowledge(msg, txn=txn)
        except pulsar_txn.PulsarException as exc:
            errors.append(type(exc).__name__)
            txn.abort()
            continue
        if count % 10 == 0:
            txn.abort()
        else:
            txn.commit()
            committed.append(msg.data().decode())
    outputs = _texts(_drain(pulsar_txn, observer, expect=60))
    return {
        "committed_once": sorted(committed) == [f"m{i:02d}" for i in range(60)],
        "outputs_once": sorted(outputs) == [f"m{i:02d}" for i in range(60)],
        "errors": errors,
    }
