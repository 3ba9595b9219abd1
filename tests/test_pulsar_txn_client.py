"""pulsar_txn, the project's Python client, through the real path (client -> socket -> server -> storage), checked
against the official Python client on the same topics: what one writes the other reads, and both observe the same.

Every test uses ``server`` only, so ``pytest --against-pulsar`` runs them against Apache Pulsar 4.2.4 as well.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator

import pulsar
import pytest

import pulsar_txn
from pulsar_txn_proxy.conformance.framework import admin_call


@pytest.fixture
def ptx(server) -> Iterator[pulsar_txn.Client]:
    c = pulsar_txn.Client(server.url, operation_timeout_seconds=10)
    yield c
    c.close()


def _topic(tag: str = "t") -> str:
    return f"persistent://public/default/ptx-{tag}-{uuid.uuid4().hex[:10]}"


def _partitioned(server, partitions: int = 3) -> str:
    topic = _topic("p")
    answer = admin_call(server.admin_url, "PUT", f"/admin/v2/{topic.replace('://', '/')}/partitions", partitions)
    assert answer.status in (200, 204), answer
    return topic


def _drain(receive, timeout_ms: int = 500) -> list:
    out = []
    while True:
        try:
            out.append(receive(timeout_ms))
        except (pulsar.Timeout, pulsar_txn.Timeout):
            return out


# -- the same API as pulsar-client ---------------------------------------------------------------


def test_names_and_hierarchy_match_the_official_client() -> None:
    for name in dir(pulsar.exceptions):
        official = getattr(pulsar.exceptions, name)
        if isinstance(official, type) and issubclass(official, Exception):
            ours = getattr(pulsar_txn, name)
            assert issubclass(ours, pulsar_txn.PulsarException), name
    for enum in ("ConsumerType", "InitialPosition", "CompressionType", "PartitionsRoutingMode", "ProducerAccessMode"):
        official = {k: int(v) for k, v in getattr(pulsar, enum).__members__.items()}
        assert {k: int(v) for k, v in getattr(pulsar_txn, enum).__members__.items()} == official


def test_message_id_serializes_as_the_official_client(ptx, client, server) -> None:
    assert str(pulsar_txn.MessageId.earliest) == str(pulsar.MessageId.earliest)
    assert str(pulsar_txn.MessageId.latest) == str(pulsar.MessageId.latest)
    theirs = pulsar.MessageId(2, 10, 20, 3)
    ours = pulsar_txn.MessageId.deserialize(theirs.serialize())
    assert (ours.partition(), ours.ledger_id(), ours.entry_id(), ours.batch_index()) == (2, 10, 20, 3)
    assert str(pulsar.MessageId.deserialize(ours.serialize())) == str(theirs) == str(ours)
    topic = _topic()
    official = client.create_producer(topic)
    mid = official.send(b"x")
    consumer = ptx.subscribe(topic, "s", initial_position=pulsar_txn.InitialPosition.Earliest)
    msg = consumer.receive(5000)
    assert str(msg.message_id()) == str(mid)
    consumer.acknowledge(pulsar_txn.MessageId.deserialize(mid.serialize()))


def test_send_argument_order_and_message_accessors(ptx, client) -> None:
    topic = _topic()
    theirs = client.subscribe(topic, "official")
    consumer = ptx.subscribe(topic, "ours")
    producer = ptx.create_producer(topic, producer_name="ptx-producer")
    mid = producer.send(b"hello", {"a": "1"}, "key-1", event_timestamp=1234)
    for msg in (theirs.receive(5000), consumer.receive(5000)):
        assert msg.data() == b"hello"
        assert msg.properties() == {"a": "1"}
        assert msg.partition_key() == "key-1"
        assert msg.event_timestamp() == 1234
        assert msg.publish_timestamp() > 0
        assert msg.producer_name() == "ptx-producer"
        assert str(msg.message_id()) == str(mid)
    assert producer.producer_name() == "ptx-producer"
    assert producer.last_sequence_id() == 0
    consumer.acknowledge(mid)  # a MessageId, as the official client takes


@pytest.mark.parametrize("compression", ["NONE", "LZ4", "ZLib", "ZSTD", "SNAPPY"])
def test_batched_compressed_send_async_is_read_by_the_official_client(ptx, client, compression) -> None:
    topic = _topic()
    theirs = client.subscribe(topic, "official")
    producer = ptx.create_producer(
        topic,
        batching_enabled=True,
        batching_max_publish_delay_ms=50,
        compression_type=getattr(pulsar_txn.CompressionType, compression),
    )
    results = []
    for i in range(300):
        producer.send_async(f"m{i}".encode(), lambda res, mid: results.append((res, mid)), partition_key=f"k{i % 3}")
    producer.flush()
    assert len(results) == 300
    assert all(res == pulsar_txn.Result.Ok for res, _ in results)
    received = _drain(theirs.receive)
    assert [m.data() for m in received] == [f"m{i}".encode() for i in range(300)]
    assert [m.partition_key() for m in received[:3]] == ["k0", "k1", "k2"]
    assert [str(m.message_id()) for m in received] == [str(mid) for _, mid in results]
    ours = ptx.subscribe(topic, "ours", initial_position=pulsar_txn.InitialPosition.Earliest)
    assert [m.data() for m in _drain(ours.receive)] == [f"m{i}".encode() for i in range(300)]


def test_a_full_queue_fails_send_async_through_its_callback_as_the_official_client(ptx, client) -> None:
    outcomes = {}
    for name, c in (("official", client), ("pulsar_txn", ptx)):
        producer = c.create_producer(
            _topic(), max_pending_messages=5, batching_enabled=True, batching_max_publish_delay_ms=1000
        )
        results: list[str] = []
        record = results.append
        for i in range(8):
            producer.send_async(f"m{i}".encode(), lambda res, mid, record=record: record(str(res)))
        producer.flush()
        outcomes[name] = sorted(results)
    expected = sorted(["Result.Ok"] * 5 + ["Result.ProducerQueueIsFull"] * 3)
    assert outcomes["pulsar_txn"] == outcomes["official"] == expected


def test_reads_what_the_official_client_batches(ptx, client) -> None:
    topic = _topic()
    consumer = ptx.subscribe(topic, "ours")
    official = client.create_producer(
        topic, batching_enabled=True, batching_max_publish_delay_ms=50, compression_type=pulsar.CompressionType.LZ4
    )
    for i in range(100):
        official.send_async(f"m{i}".encode(), None, properties={"i": str(i)})
    official.flush()
    received = _drain(consumer.receive)
    assert [m.data() for m in received] == [f"m{i}".encode() for i in range(100)]
    assert received[42].properties() == {"i": "42"}
    for msg in received:
        consumer.acknowledge(msg)
    consumer.close()
    again = ptx.subscribe(topic, "ours")
    assert _drain(again.receive, 300) == []  # the whole batch was acknowledged


def test_partitioned_topic_routes_by_key_and_is_consumed_whole(ptx, client, server) -> None:
    topic = _partitioned(server)
    producer = ptx.create_producer(topic)
    ids = {}
    for i in range(30):
        ids[i] = producer.send(f"m{i}".encode(), partition_key=f"key-{i % 5}")
    by_key: dict[str, set[int]] = {}
    for i, mid in ids.items():
        by_key.setdefault(f"key-{i % 5}", set()).add(mid.partition())
    assert all(len(parts) == 1 for parts in by_key.values())
    assert {mid.partition() for mid in ids.values()} <= {0, 1, 2}
    unkeyed = {producer.send(b"x").partition() for _ in range(9)}
    assert len(unkeyed) == 3  # round robin without a key
    ours = ptx.subscribe(topic, "ours", initial_position=pulsar_txn.InitialPosition.Earliest)
    theirs = client.subscribe(topic, "theirs", initial_position=pulsar.InitialPosition.Earliest)
    mine = sorted(m.data() for m in _drain(ours.receive))
    official = sorted(m.data() for m in _drain(theirs.receive))
    assert mine == official and len(mine) == 39
    assert ptx.get_topic_partitions(topic) == client.get_topic_partitions(topic)


def test_list_and_regex_subscriptions(ptx) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = [f"persistent://public/default/rx-{tag}-{i}" for i in range(3)]
    producers = [ptx.create_producer(t) for t in topics]
    listed = ptx.subscribe(topics[:2], "list", initial_position=pulsar_txn.InitialPosition.Earliest)
    pattern = ptx.subscribe(
        re.compile(f"persistent://public/default/rx-{tag}-.*"),
        "regex",
        initial_position=pulsar_txn.InitialPosition.Earliest,
    )
    for i, p in enumerate(producers):
        p.send(f"from-{i}".encode())
    assert sorted(m.data() for m in _drain(listed.receive)) == [b"from-0", b"from-1"]
    got = _drain(pattern.receive)
    assert sorted(m.data() for m in got) == [b"from-0", b"from-1", b"from-2"]
    assert {m.topic_name() for m in got} == set(topics)
    for msg in got:
        pattern.acknowledge(msg)


def test_regex_consumers_discover_new_topics(ptx) -> None:
    tag = uuid.uuid4().hex[:8]
    ptx.create_producer(f"persistent://public/default/disc-{tag}-0").send(b"old")
    consumer = ptx.subscribe(
        re.compile(f"persistent://public/default/disc-{tag}-.*"),
        "regex",
        initial_position=pulsar_txn.InitialPosition.Earliest,
        pattern_auto_discovery_period=1,
    )
    assert consumer.receive(5000).data() == b"old"
    ptx.create_producer(f"persistent://public/default/disc-{tag}-1").send(b"new")  # created after the subscribe
    msg = consumer.receive(10000)
    assert (msg.data(), msg.topic_name()) == (b"new", f"persistent://public/default/disc-{tag}-1")


@pytest.mark.parametrize("kind", ["Shared", "KeyShared", "Failover", "Exclusive"])
def test_subscription_types(ptx, kind) -> None:
    topic = _topic()
    consumer_type = getattr(pulsar_txn.ConsumerType, kind)
    first = ptx.subscribe(topic, "s", consumer_type=consumer_type, receiver_queue_size=10)
    if kind == "Exclusive":
        with pytest.raises(pulsar_txn.ConsumerBusy):
            ptx.subscribe(topic, "s", consumer_type=consumer_type)
        return
    second = ptx.subscribe(topic, "s", consumer_type=consumer_type, receiver_queue_size=10)
    producer = ptx.create_producer(topic)
    for i in range(40):
        producer.send(f"m{i}".encode(), partition_key=f"k{i % 8}")
    # Failover: Pulsar hands the topic to a new active consumer after activeConsumerFailoverDelayTimeMillis (1 s).
    wait = 2000 if kind == "Failover" else 300
    a, b = _drain(first.receive, wait), _drain(second.receive, wait)
    assert sorted(m.data() for m in a + b) == sorted(f"m{i}".encode() for i in range(40))
    if kind == "Failover":
        assert not a or not b  # one active consumer
    else:
        assert a and b
    if kind == "KeyShared":
        assert not {m.partition_key() for m in a} & {m.partition_key() for m in b}


def test_acks_nacks_redelivery_and_cumulative(ptx) -> None:
    topic = _topic()
    shared = ptx.subscribe(
        topic, "shared", consumer_type=pulsar_txn.ConsumerType.Shared, negative_ack_redelivery_delay_ms=100
    )
    consumer = ptx.subscribe(topic, "s")
    producer = ptx.create_producer(topic)
    for i in range(5):
        producer.send(f"m{i}".encode())
    for msg in [shared.receive(5000) for _ in range(5)]:
        if msg.data() == b"m1":
            shared.negative_acknowledge(msg)
        else:
            shared.acknowledge(msg)
    again = shared.receive(5000)
    assert again.data() == b"m1" and again.redelivery_count() == 1
    msgs = [consumer.receive(5000) for _ in range(5)]
    consumer.acknowledge_cumulative(msgs[3])
    consumer.redeliver_unacknowledged_messages()
    assert [m.data() for m in _drain(consumer.receive)] == [b"m4"]
    producer.send(b"x")
    with pytest.raises(pulsar_txn.CumulativeAcknowledgementNotAllowedError):
        shared.acknowledge_cumulative(shared.receive(5000))


def test_seek_unsubscribe_batch_receive(ptx) -> None:
    topic = _topic()
    consumer = ptx.subscribe(topic, "s", batch_receive_policy=pulsar_txn.BatchReceivePolicy(10, -1, 200))
    producer = ptx.create_producer(topic)
    ids = [producer.send(f"m{i}".encode()) for i in range(25)]
    batch = []
    deadline = time.monotonic() + 5
    while len(batch) < 25 and time.monotonic() < deadline:
        got = consumer.batch_receive()
        assert len(got) <= 10
        batch += got
    assert [m.data() for m in batch] == [f"m{i}".encode() for i in range(25)]
    for msg in batch:
        consumer.acknowledge(msg)
    consumer.seek(ids[20])
    assert [m.data() for m in _drain(consumer.receive)] == [f"m{i}".encode() for i in range(21, 25)]
    consumer.seek(pulsar_txn.MessageId.earliest)
    assert len(_drain(consumer.receive)) == 25
    consumer.unsubscribe()
    with pytest.raises(pulsar_txn.AlreadyClosed):
        consumer.receive(100)
    fresh = ptx.subscribe(topic, "s")  # the subscription was deleted: a new one starts at the end
    assert _drain(fresh.receive, 300) == []


def test_readers(ptx, client) -> None:
    topic = _topic()
    producer = ptx.create_producer(topic, batching_enabled=True)
    for i in range(10):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    ids = [m.message_id() for m in _drain(ptx.create_reader(topic, pulsar_txn.MessageId.earliest).read_next)]
    assert len(ids) == 10
    for start, inclusive in ((ids[4], False), (ids[4], True), (pulsar_txn.MessageId.earliest, False)):
        ours = ptx.create_reader(topic, start, start_message_id_inclusive=inclusive)
        official_start = pulsar.MessageId.deserialize(start.serialize())
        theirs = client.create_reader(topic, official_start, start_message_id_inclusive=inclusive)
        assert [m.data() for m in _drain(ours.read_next)] == [m.data() for m in _drain(theirs.read_next)]
    latest = ptx.create_reader(topic, pulsar_txn.MessageId.latest)
    assert not latest.has_message_available()
    producer.send(b"new")
    assert latest.has_message_available()
    assert latest.read_next(5000).data() == b"new"


def test_receive_timeout_and_closed_client(server) -> None:
    c = pulsar_txn.Client(server.url, operation_timeout_seconds=10)
    topic = _topic()
    consumer = c.subscribe(topic, "s")
    producer = c.create_producer(topic)
    with pytest.raises(pulsar_txn.Timeout):
        consumer.receive(100)
    c.close()
    # Defect of the old client: a send after close returned a MessageId.
    with pytest.raises(pulsar_txn.AlreadyClosed):
        producer.send(b"after close")
    with pytest.raises(pulsar_txn.AlreadyClosed):
        consumer.receive(100)
    with pytest.raises(pulsar_txn.AlreadyClosed):
        c.create_producer(topic)


def test_one_client_many_producing_threads(ptx) -> None:
    topic = _topic()
    consumer = ptx.subscribe(topic, "s")
    producer = ptx.create_producer(topic)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            own = ptx.create_producer(topic)
            for i in range(50):
                (producer if i % 2 else own).send(f"{n}-{i}".encode())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    got = sorted(m.data() for m in _drain(consumer.receive))
    assert got == sorted(f"{n}-{i}".encode() for n in range(4) for i in range(50))


def test_message_listener(ptx) -> None:
    topic = _topic()
    seen: list[bytes] = []
    done = threading.Event()

    def listener(consumer, msg) -> None:
        seen.append(msg.data())
        consumer.acknowledge(msg)
        if len(seen) == 5:
            done.set()

    ptx.subscribe(topic, "s", message_listener=listener)
    producer = ptx.create_producer(topic)
    for i in range(5):
        producer.send(f"m{i}".encode())
    assert done.wait(10)
    assert seen == [f"m{i}".encode() for i in range(5)]


# -- schemas ---------------------------------------------------------------------------------------


class _OurUser(pulsar_txn.schema.Record):
    name = pulsar_txn.schema.String()
    age = pulsar_txn.schema.Integer()
    tags = pulsar_txn.schema.Array(pulsar_txn.schema.String())


class _TheirUser(pulsar.schema.Record):
    name = pulsar.schema.String()
    age = pulsar.schema.Integer()
    tags = pulsar.schema.Array(pulsar.schema.String())


_OurUser.__name__ = _TheirUser.__name__ = "User"


@pytest.mark.parametrize("kind", ["JsonSchema", "AvroSchema"])
def test_record_schemas_interoperate_with_the_official_client(ptx, client, kind) -> None:
    assert _OurUser.schema() == _TheirUser.schema()
    topic = _topic()
    ours_schema = getattr(pulsar_txn.schema, kind)(_OurUser)
    theirs_schema = getattr(pulsar.schema, kind)(_TheirUser)
    theirs = client.subscribe(topic, "official", schema=theirs_schema)
    ours = ptx.subscribe(topic, "ours", schema=ours_schema)
    producer = ptx.create_producer(topic, schema=ours_schema)
    producer.send(_OurUser(name="ada", age=36, tags=["x", "y"]))
    official = client.create_producer(topic, schema=theirs_schema)  # the same schema: no new version
    official.send(_TheirUser(name="bob", age=7, tags=[]))
    got = [theirs.receive(5000).value() for _ in range(2)]
    assert [(u.name, u.age, u.tags) for u in got] == [("ada", 36, ["x", "y"]), ("bob", 7, [])]
    mine = [ours.receive(5000).value() for _ in range(2)]
    assert mine == [_OurUser(name="ada", age=36, tags=["x", "y"]), _OurUser(name="bob", age=7, tags=[])]
    with pytest.raises(TypeError):
        producer.send(b"not a record")


def test_string_schema(ptx, client) -> None:
    topic = _topic()
    theirs = client.subscribe(topic, "official", schema=pulsar.schema.StringSchema())
    producer = ptx.create_producer(topic, schema=pulsar_txn.schema.StringSchema())
    producer.send("héllo")
    assert theirs.receive(5000).value() == "héllo"
    ours = ptx.subscribe(
        topic, "ours", schema=pulsar_txn.schema.StringSchema(), initial_position=pulsar_txn.InitialPosition.Earliest
    )
    assert ours.receive(5000).value() == "héllo"
