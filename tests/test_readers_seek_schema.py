"""Readers, seeks, last message ids, pattern subscriptions, schemas, producer rules and deduplication.

Expected behaviour is what a Pulsar broker gives the official Python client (C++ client 4.2.0): a
non-durable subscription delivers from the entry of its start message id and the client drops what
lies before the start (or at it, unless the start is inclusive); a seek resets the cursor to the
target entry and the client again drops the target itself unless the start is inclusive.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator

import _pulsar
import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, String, StringSchema

from tests.conftest import make_client
from tests.helpers import drain
from tests.server_process import ServerProcess

WAIT_MS = 3000
QUIET_MS = 300


class User(Record):
    """A record for the JSON and Avro schema tests."""

    name = String()
    age = Integer()


def _produce(client: pulsar.Client, topic: str, count: int, prefix: str = "m") -> list[pulsar.MessageId]:
    """Send ``count`` unbatched messages; their ids."""
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"{prefix}{i}".encode()) for i in range(count)]
    producer.close()
    return ids


def _produce_batch(client: pulsar.Client, topic: str, count: int, prefix: str = "b") -> None:
    """Send ``count`` messages as one batch (one entry)."""
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=count, batching_max_publish_delay_ms=60_000
    )
    for i in range(count):
        producer.send_async(f"{prefix}{i}".encode(), None)
    producer.flush()
    producer.close()


def _receive_all(
    consumer: pulsar.Consumer, quiet_ms: int = QUIET_MS, ack: bool = False
) -> list[pulsar.Message]:
    """Receive until nothing arrives for ``quiet_ms``, optionally acknowledging each message."""
    out = []
    while True:
        try:
            msg = consumer.receive(quiet_ms)
        except pulsar.Timeout:
            return out
        if ack:
            consumer.acknowledge(msg)
        out.append(msg)


def _data(messages: list[pulsar.Message]) -> list[bytes]:
    """The payloads."""
    return [m.data() for m in messages]


def _ids(messages: list[pulsar.Message]) -> list[tuple[int, int, int]]:
    """(ledger, entry, batch index) of each message."""
    return [
        (m.message_id().ledger_id(), m.message_id().entry_id(), m.message_id().batch_index())
        for m in messages
    ]


@pytest.fixture
def readers(client: pulsar.Client) -> Iterator[Callable[..., pulsar.Reader]]:
    """Create readers with the test's client; all are closed afterwards."""
    made: list[pulsar.Reader] = []

    def make(topic: str, start: pulsar.MessageId, **kwargs: object) -> pulsar.Reader:
        reader = client.create_reader(topic, start, **kwargs)
        made.append(reader)
        return reader

    yield make
    for reader in made:
        reader.close()


# -- 1. readers -------------------------------------------------------------------------------------


def test_reader_from_earliest_reads_everything(
    client: pulsar.Client, topic: str, readers: Callable[..., pulsar.Reader]
) -> None:
    sent = _produce(client, topic, 5)
    reader = readers(topic, pulsar.MessageId.earliest)
    got = drain(reader)
    assert _data(got) == [f"m{i}".encode() for i in range(5)]
    assert [m.message_id() for m in got] == sent


def test_reader_from_latest_reads_only_new_messages(
    client: pulsar.Client, topic: str, readers: Callable[..., pulsar.Reader]
) -> None:
    _produce(client, topic, 3, prefix="old")
    reader = readers(topic, pulsar.MessageId.latest)
    assert drain(reader) == []
    _produce(client, topic, 2, prefix="new")
    assert _data(drain(reader)) == [b"new0", b"new1"]


@pytest.mark.parametrize(("inclusive", "first"), [(False, 3), (True, 2)])
def test_reader_from_unbatched_message_id(
    client: pulsar.Client, topic: str, readers: Callable[..., pulsar.Reader], inclusive: bool, first: int
) -> None:
    """Exclusive starts after the given message, inclusive starts at it."""
    sent = _produce(client, topic, 5)
    reader = readers(topic, sent[2], start_message_id_inclusive=inclusive)
    got = drain(reader)
    assert _data(got) == [f"m{i}".encode() for i in range(first, 5)]
    assert [m.message_id() for m in got] == sent[first:]


@pytest.mark.parametrize(("inclusive", "first"), [(False, 3), (True, 2)])
def test_reader_from_message_id_inside_a_batch(
    client: pulsar.Client, topic: str, readers: Callable[..., pulsar.Reader], inclusive: bool, first: int
) -> None:
    """A start inside a batch skips the batch's earlier messages (and the start itself unless inclusive)."""
    _produce(client, topic, 1, prefix="before")
    _produce_batch(client, topic, 5)
    _produce(client, topic, 1, prefix="after")
    everything = drain(readers(topic, pulsar.MessageId.earliest))
    assert _data(everything) == [b"before0", *(f"b{i}".encode() for i in range(5)), b"after0"]
    batch = everything[1:6]
    assert len({m.message_id().entry_id() for m in batch}) == 1
    assert [m.message_id().batch_index() for m in batch] == list(range(5))

    reader = readers(topic, batch[2].message_id(), start_message_id_inclusive=inclusive)
    got = drain(reader)
    assert _data(got) == [*(f"b{i}".encode() for i in range(first, 5)), b"after0"]
    assert _ids(got) == _ids(everything[1 + first :])


def test_reader_has_message_available_transitions(
    client: pulsar.Client, topic: str, readers: Callable[..., pulsar.Reader]
) -> None:
    empty_reader = readers(topic, pulsar.MessageId.earliest)
    assert empty_reader.has_message_available() is False

    _produce(client, topic, 2)
    reader = readers(topic, pulsar.MessageId.earliest)
    assert reader.has_message_available() is True
    assert reader.read_next(WAIT_MS).data() == b"m0"
    assert reader.has_message_available() is True
    assert reader.read_next(WAIT_MS).data() == b"m1"
    assert reader.has_message_available() is False

    _produce(client, topic, 1, prefix="late")
    assert reader.has_message_available() is True
    assert reader.read_next(WAIT_MS).data() == b"late0"
    assert reader.has_message_available() is False


def test_reader_from_latest_has_message_available(
    client: pulsar.Client, topic: str, readers: Callable[..., pulsar.Reader]
) -> None:
    _produce(client, topic, 2)
    reader = readers(topic, pulsar.MessageId.latest)
    assert reader.has_message_available() is False
    _produce(client, topic, 1, prefix="new")
    assert reader.has_message_available() is True
    assert reader.read_next(WAIT_MS).data() == b"new0"
    assert reader.has_message_available() is False


def test_reader_seek_to_earlier_message_id(
    client: pulsar.Client, topic: str, readers: Callable[..., pulsar.Reader]
) -> None:
    """After reading everything, a seek goes back; the sought message itself is not re-read (exclusive)."""
    sent = _produce(client, topic, 5)
    reader = readers(topic, pulsar.MessageId.earliest)
    assert len(drain(reader)) == 5
    reader.seek(sent[1])
    got = drain(reader)
    assert [m.message_id() for m in got] == sent[2:]
    reader.seek(pulsar.MessageId.earliest)
    assert [m.message_id() for m in drain(reader)] == sent


def test_inclusive_reader_seek_rereads_the_sought_message(
    client: pulsar.Client, topic: str, readers: Callable[..., pulsar.Reader]
) -> None:
    sent = _produce(client, topic, 4)
    reader = readers(topic, pulsar.MessageId.earliest, start_message_id_inclusive=True)
    assert len(drain(reader)) == 4
    reader.seek(sent[1])
    assert [m.message_id() for m in drain(reader)] == sent[1:]


def test_reader_seek_to_timestamp(
    client: pulsar.Client, topic: str, readers: Callable[..., pulsar.Reader]
) -> None:
    """A seek by time restarts at the first message published at or after it."""
    _produce(client, topic, 3, prefix="early")
    time.sleep(0.05)
    _produce(client, topic, 3, prefix="late")
    reader = readers(topic, pulsar.MessageId.earliest)
    everything = drain(reader)
    assert len(everything) == 6
    boundary = everything[3].publish_timestamp()
    assert everything[2].publish_timestamp() < boundary
    reader.seek(boundary)
    assert _data(drain(reader)) == [b"late0", b"late1", b"late2"]
    reader.seek(boundary + 60_000)
    assert drain(reader) == []


# -- 2. consumer seek ---------------------------------------------------------------------------------


def test_consumer_seek_to_message_id_replays_after_it(client: pulsar.Client, topic: str) -> None:
    sent = _produce(client, topic, 5)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    assert len(_receive_all(consumer, ack=True)) == 5
    consumer.seek(sent[1])
    got = _receive_all(consumer, ack=True)
    assert [m.message_id() for m in got] == sent[2:]
    consumer.close()
    # The broker reset the cursor to the sought entry; only the client skipped it, so it is still unacked.
    again = client.subscribe(topic, "sub")
    assert [m.message_id() for m in _receive_all(again)] == [sent[1]]
    again.close()


def test_inclusive_consumer_seek_replays_from_the_message(client: pulsar.Client, topic: str) -> None:
    sent = _produce(client, topic, 5)
    consumer = client.subscribe(
        topic, "sub", initial_position=pulsar.InitialPosition.Earliest, start_message_id_inclusive=True
    )
    assert len(_receive_all(consumer, ack=True)) == 5
    consumer.seek(sent[1])
    assert [m.message_id() for m in _receive_all(consumer)] == sent[1:]
    consumer.close()


def test_consumer_seek_to_earliest(client: pulsar.Client, topic: str) -> None:
    sent = _produce(client, topic, 4)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    assert len(_receive_all(consumer, ack=True)) == 4
    consumer.seek(pulsar.MessageId.earliest)
    assert [m.message_id() for m in _receive_all(consumer)] == sent
    consumer.close()


def test_consumer_seek_to_timestamp(client: pulsar.Client, topic: str) -> None:
    _produce(client, topic, 2, prefix="early")
    time.sleep(0.05)
    _produce(client, topic, 2, prefix="late")
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    everything = _receive_all(consumer, ack=True)
    assert len(everything) == 4
    consumer.seek(everything[2].publish_timestamp())
    assert _data(_receive_all(consumer)) == [b"late0", b"late1"]
    consumer.close()


def test_seek_forgets_acknowledgements_after_the_seek_point(client: pulsar.Client, topic: str) -> None:
    """Acks after the target are dropped by a seek, and the reset survives a new consumer."""
    _produce(client, topic, 5)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    assert len(_receive_all(consumer, ack=True)) == 5
    consumer.seek(pulsar.MessageId.earliest)
    assert _data(_receive_all(consumer)) == [f"m{i}".encode() for i in range(5)]
    consumer.close()

    again = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    replay = _receive_all(again, ack=True)
    assert _data(replay) == [f"m{i}".encode() for i in range(5)]
    again.close()

    last = client.subscribe(topic, "sub")
    assert _receive_all(last) == []
    last.close()


def test_seek_with_a_second_subscription_untouched(client: pulsar.Client, topic: str) -> None:
    _produce(client, topic, 3)
    first = client.subscribe(topic, "a", initial_position=pulsar.InitialPosition.Earliest)
    second = client.subscribe(topic, "b", initial_position=pulsar.InitialPosition.Earliest)
    assert len(_receive_all(first, ack=True)) == 3
    assert len(_receive_all(second, ack=True)) == 3
    first.seek(pulsar.MessageId.earliest)
    assert len(_receive_all(first)) == 3
    assert _receive_all(second) == []
    first.close()
    second.close()


# -- 3. last message id --------------------------------------------------------------------------------


def test_get_last_message_id(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    empty = consumer.get_last_message_id()
    assert empty.entry_id() == -1

    sent = _produce(client, topic, 2)
    last = consumer.get_last_message_id()
    assert (last.ledger_id(), last.entry_id(), last.batch_index()) == (
        sent[1].ledger_id(),
        sent[1].entry_id(),
        -1,
    )

    _produce_batch(client, topic, 3)
    batch = _receive_all(consumer)[2:]
    assert _data(batch) == [b"b0", b"b1", b"b2"]
    last = consumer.get_last_message_id()
    assert (last.ledger_id(), last.entry_id(), last.batch_index()) == (
        batch[2].message_id().ledger_id(),
        batch[2].message_id().entry_id(),
        2,
    )
    consumer.close()


# -- 4. pattern subscription ----------------------------------------------------------------------


def test_pattern_subscription_picks_up_existing_and_new_topics(client: pulsar.Client) -> None:
    """Existing matching topics are consumed at once, a matching topic created later after discovery.

    The 3.13.0 wrapper type-checks ``pattern_auto_discovery_period`` but never applies it (discovery
    stays at 60 s), so the discovery part sets the period on the client's own consumer configuration.
    """
    tag = uuid.uuid4().hex[:10]
    base = "persistent://public/default"
    _produce(client, f"{base}/pat-{tag}-a", 2, prefix="a")
    _produce(client, f"{base}/pat-{tag}-b", 2, prefix="b")
    _produce(client, f"{base}/other-{tag}-c", 2, prefix="x")
    consumer = client.subscribe(
        re.compile(f"{base}/pat-{tag}-.*"),
        "sub",
        pattern_auto_discovery_period=1,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    got = _receive_all(consumer, ack=True)
    assert sorted(_data(got)) == [b"a0", b"a1", b"b0", b"b1"]
    assert {m.topic_name() for m in got} == {f"{base}/pat-{tag}-a", f"{base}/pat-{tag}-b"}
    consumer.close()

    conf = _pulsar.ConsumerConfiguration()
    conf.pattern_auto_discovery_period(1)
    conf.subscription_initial_position(pulsar.InitialPosition.Earliest)
    discovering = client._client.subscribe_pattern(f"{base}/pat-{tag}-.*", "sub2", conf)
    first = [discovering.receive(WAIT_MS) for _ in range(4)]
    assert sorted(m.data() for m in first) == [b"a0", b"a1", b"b0", b"b1"]
    _produce(client, f"{base}/pat-{tag}-late", 2, prefix="late")
    later = [discovering.receive(5000) for _ in range(2)]
    assert [m.data() for m in later] == [b"late0", b"late1"]
    assert {m.topic_name() for m in later} == {f"{base}/pat-{tag}-late"}
    discovering.close()


# -- 5. schemas -----------------------------------------------------------------------------------------


def _schema_info(client: pulsar.Client, topic: str) -> _pulsar.SchemaInfo:
    """The topic's latest schema, fetched with GET_SCHEMA."""
    return client._client.get_schema_info(topic, -1)


def test_string_schema_round_trip(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic, schema=StringSchema())
    consumer = client.subscribe(topic, "sub", schema=StringSchema())
    producer.send("héllo")
    msg = consumer.receive(WAIT_MS)
    assert msg.value() == "héllo"
    assert msg.data() == "héllo".encode()
    assert _schema_info(client, topic).schema_type() == _pulsar.SchemaType.STRING
    producer.close()
    consumer.close()


@pytest.mark.parametrize(
    ("schema_class", "schema_type"),
    [(JsonSchema, _pulsar.SchemaType.JSON), (AvroSchema, _pulsar.SchemaType.AVRO)],
)
def test_record_schema_round_trip(
    client: pulsar.Client, topic: str, schema_class: type, schema_type: _pulsar.SchemaType
) -> None:
    producer = client.create_producer(topic, schema=schema_class(User))
    consumer = client.subscribe(topic, "sub", schema=schema_class(User))
    producer.send(User(name="ada", age=36))
    producer.send(User(name="alan", age=41))
    values = [consumer.receive(WAIT_MS).value() for _ in range(2)]
    assert [(v.name, v.age) for v in values] == [("ada", 36), ("alan", 41)]
    info = _schema_info(client, topic)
    assert info.schema_type() == schema_type
    assert '"name"' in info.schema() and "User" in info.schema()
    producer.close()
    consumer.close()


def test_schema_info_of_topic_without_schema(client: pulsar.Client, topic: str) -> None:
    _produce(client, topic, 1)
    with pytest.raises(pulsar.TopicNotFound):
        _schema_info(client, topic)


def test_incompatible_schema_type_is_rejected(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic, schema=StringSchema())
    producer.send("first")
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=JsonSchema(User))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(User))
    assert _schema_info(client, topic).schema_type() == _pulsar.SchemaType.STRING
    producer.close()


def test_bytes_producer_allowed_on_topic_with_schema(client: pulsar.Client, topic: str) -> None:
    """A producer without a schema may publish to a topic that has one (schema validation is off)."""
    typed = client.create_producer(topic, schema=StringSchema())
    raw = client.create_producer(topic)
    raw.send(b"raw")
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    assert consumer.receive(WAIT_MS).data() == b"raw"
    typed.close()
    raw.close()
    consumer.close()


# -- 6. producers -------------------------------------------------------------------------------------


def test_producer_name_already_connected_is_busy(client: pulsar.Client, topic: str) -> None:
    first = client.create_producer(topic, producer_name="fixed")
    assert first.producer_name() == "fixed"
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic, producer_name="fixed")
    first.close()
    again = client.create_producer(topic, producer_name="fixed")
    assert again.producer_name() == "fixed"
    again.close()


def test_exclusive_producer_while_shared_producer_exists_is_fenced(client: pulsar.Client, topic: str) -> None:
    """Pulsar answers ProducerFenced to an Exclusive producer on a topic that already has producers."""
    shared = client.create_producer(topic)
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    shared.close()
    exclusive = client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    exclusive.close()


def test_generated_producer_names_are_unique(client: pulsar.Client, topic: str) -> None:
    producers = [client.create_producer(topic) for _ in range(3)]
    other = client.create_producer(f"{topic}-other")
    names = [p.producer_name() for p in [*producers, other]]
    assert all(names)
    assert len(set(names)) == 4
    for p in [*producers, other]:
        p.close()


def test_last_sequence_id(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    assert producer.last_sequence_id() == -1
    for i in range(3):
        producer.send(f"m{i}".encode())
    assert producer.last_sequence_id() == 2
    producer.send(b"explicit", sequence_id=10)
    assert producer.last_sequence_id() == 10
    producer.close()


# -- 7. deduplication ------------------------------------------------------------------------------------


def _send_with_sequence_ids(
    url: str, topic: str, sequence_ids: list[int]
) -> tuple[int, list[pulsar.MessageId]]:
    """Send ``m<seq>`` per sequence id as producer "dedup": its initial last sequence id, and the ids."""
    c = make_client(url)
    producer = c.create_producer(topic, producer_name="dedup", batching_enabled=False)
    before = producer.last_sequence_id()
    ids = [producer.send(f"m{seq}".encode(), sequence_id=seq) for seq in sequence_ids]
    producer.close()
    c.close()
    return before, ids


def _dropped(ids: list[pulsar.MessageId]) -> list[bool]:
    """Which sends the broker answered as duplicates (receipt id -1:-1)."""
    return [(i.ledger_id(), i.entry_id()) == (-1, -1) for i in ids]


def _stored(url: str, topic: str) -> list[bytes]:
    """Every stored payload, read from the start by a fresh client."""
    c = make_client(url)
    reader = c.create_reader(topic, pulsar.MessageId.earliest)
    data = _data(drain(reader))
    reader.close()
    c.close()
    return data


def test_deduplication_drops_resent_sequence_ids(server_factory: Callable[..., ServerProcess]) -> None:
    proc = server_factory("--deduplication")
    topic = f"persistent://public/default/dedup-{uuid.uuid4().hex[:10]}"
    before, ids = _send_with_sequence_ids(proc.url, topic, [0, 1, 2, 3, 4, 2, 4, 5])
    assert before == -1
    assert _dropped(ids) == [False] * 5 + [True, True, False]
    assert _stored(proc.url, topic) == [b"m0", b"m1", b"m2", b"m3", b"m4", b"m5"]

    before, ids = _send_with_sequence_ids(proc.url, topic, [3, 5, 6])
    assert before == 5
    assert _dropped(ids) == [True, True, False]
    assert _stored(proc.url, topic) == [b"m0", b"m1", b"m2", b"m3", b"m4", b"m5", b"m6"]

    proc.restart()
    before, ids = _send_with_sequence_ids(proc.url, topic, [6, 7])
    assert before == 6
    assert _dropped(ids) == [True, False]
    assert _stored(proc.url, topic) == [b"m0", b"m1", b"m2", b"m3", b"m4", b"m5", b"m6", b"m7"]


def test_without_deduplication_duplicates_are_stored(server: ServerProcess) -> None:
    topic = f"persistent://public/default/nodedup-{uuid.uuid4().hex[:10]}"
    _, ids = _send_with_sequence_ids(server.url, topic, [0, 1, 2, 1])
    assert _dropped(ids) == [False] * 4
    before, _ = _send_with_sequence_ids(server.url, topic, [2])
    assert before == -1
    assert _stored(server.url, topic) == [b"m0", b"m1", b"m2", b"m1", b"m2"]
