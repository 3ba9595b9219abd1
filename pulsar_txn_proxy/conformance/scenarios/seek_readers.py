"""Readers and seeks through the official Python client."""

from __future__ import annotations

import time

import pulsar

from pulsar_txn_proxy.conformance.framework import Outcome, Run, drain, receive_n, scenario, send_all, texts

Earliest = pulsar.InitialPosition.Earliest


def _fill(run: Run, client: pulsar.Client, topic: str, count: int = 5) -> list[pulsar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = send_all(producer, [f"m{i}" for i in range(count)])
    producer.close()
    return ids


@scenario
def test_reader_start_positions(run: Run) -> Outcome:
    """Readers from earliest, latest, and a message id (exclusive and inclusive)."""
    client = run.client()
    topic = run.topic("t")
    ids = _fill(run, client, topic)
    earliest = client.create_reader(topic, pulsar.MessageId.earliest)
    latest = client.create_reader(topic, pulsar.MessageId.latest)
    from_id = client.create_reader(topic, ids[2])
    from_id_inclusive = client.create_reader(topic, ids[2], start_message_id_inclusive=True)
    latest_inclusive = client.create_reader(topic, pulsar.MessageId.latest, start_message_id_inclusive=True)
    outcome = {
        "earliest": [run.msg(m) for m in drain(earliest, expect=5)],
        "latest": texts(drain(latest)),
        "from_id": texts(drain(from_id, expect=2)),
        "from_id_inclusive": texts(drain(from_id_inclusive, expect=3)),
        "latest_inclusive": texts(drain(latest_inclusive)),
    }
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"new")
    outcome["latest_after_send"] = texts(drain(latest, expect=1))
    return outcome


@scenario
def test_reader_inside_a_batch(run: Run) -> Outcome:
    """A reader started at a message inside a batch skips the batch's earlier messages."""
    client = run.client()
    topic = run.topic("t")
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=5, batching_max_publish_delay_ms=60_000
    )
    for i in range(5):
        producer.send_async(f"b{i}".encode(), None)
    producer.flush()
    everything = drain(client.create_reader(topic, pulsar.MessageId.earliest), expect=5)
    middle = everything[2].message_id()
    return {
        "all": [run.msg(m) for m in everything],
        "after_middle": texts(drain(client.create_reader(topic, middle), expect=2)),
        "from_middle_inclusive": texts(
            drain(client.create_reader(topic, middle, start_message_id_inclusive=True), expect=3)
        ),
    }


@scenario
def test_has_message_available(run: Run) -> Outcome:
    """hasMessageAvailable before, while and after reading, also for a reader started at latest."""
    client = run.client()
    topic = run.topic("t")
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    latest = client.create_reader(topic, pulsar.MessageId.latest)
    states = [reader.has_message_available()]
    _fill(run, client, topic, 3)
    states.append(reader.has_message_available())
    first = reader.read_next(3000)
    states.append(reader.has_message_available())
    rest = drain(reader, expect=2)
    states.append(reader.has_message_available())
    return {
        "states": states,
        "read": texts([first, *rest]),
        "latest_available": latest.has_message_available(),
        "latest_inclusive_available": client.create_reader(
            topic, pulsar.MessageId.latest, start_message_id_inclusive=True
        ).has_message_available(),
    }


@scenario
def test_consumer_seek_to_message_id(run: Run) -> Outcome:
    """A consumer seeks back to a message id, to earliest and to latest."""
    client = run.client()
    topic = run.topic("t")
    ids = _fill(run, client, topic)
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    first = texts(receive_n(consumer, 5))
    consumer.seek(ids[1])
    after_seek = texts(drain(consumer, expect=3))
    consumer.seek(pulsar.MessageId.earliest)
    after_earliest = texts(drain(consumer, expect=5))
    consumer.seek(pulsar.MessageId.latest)
    after_latest = texts(drain(consumer))
    inclusive = client.subscribe(topic, "inclusive-sub", initial_position=Earliest, start_message_id_inclusive=True)
    receive_n(inclusive, 5)
    inclusive.seek(ids[3])
    return {
        "first": first,
        "after_seek": after_seek,
        "after_earliest": after_earliest,
        "after_latest": after_latest,
        "inclusive_after_seek": texts(drain(inclusive, expect=2)),
    }


@scenario
def test_consumer_seek_by_time(run: Run) -> Outcome:
    """A seek to a publish time delivers the messages published from then on."""
    client = run.client()
    topic = run.topic("t")
    producer = client.create_producer(topic, batching_enabled=False)
    send_all(producer, ["old0", "old1"])
    time.sleep(0.3)
    boundary = int(time.time() * 1000)
    time.sleep(0.3)
    send_all(producer, ["new0", "new1"])
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    everything = receive_n(consumer, 4)
    for msg in everything:
        consumer.acknowledge(msg)
    consumer.seek(boundary)
    after = texts(drain(consumer, expect=2))
    consumer.seek(0)
    from_zero = texts(drain(consumer, expect=4))
    return {"everything": texts(everything), "after_time_seek": after, "after_seek_to_0": from_zero}


@scenario
def test_seek_resets_acknowledgements(run: Run) -> Outcome:
    """After a seek back, acknowledged messages are delivered again; a new consumer resumes from the seek."""
    client = run.client()
    topic = run.topic("t")
    ids = _fill(run, client, topic, 4)
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    for msg in receive_n(consumer, 4):
        consumer.acknowledge(msg)
    consumer.seek(ids[0])
    again = texts(drain(consumer, expect=3))
    consumer.close()
    later = client.subscribe(topic, "sub")
    return {"after_seek": again, "new_consumer": texts(drain(later, expect=4))}


@scenario
def test_reader_on_partitioned_topic(run: Run) -> Outcome:
    """A reader over a 3-partition topic reads every partition."""
    client = run.client()
    topic = run.partitioned_topic("pt", 3)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(6):
        producer.send(f"m{i}".encode(), partition_key=f"key{i}")
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    got = drain(reader, 1000, expect=6)
    return {"read": sorted(texts(got)), "partitions": sorted({m.topic_name().rsplit("-", 1)[-1] for m in got})}
