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
from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario

CLIENTS: dict[str, ModuleType] = {"official": pulsar, "pulsar_txn": pulsar_txn}


def _client(run: Run, module: ModuleType) -> Any:
    if module is pulsar:
        return run.client()
    client = pulsar_txn.Client(run.target.service_url, operation_timeout_seconds=20)
    run._clients.append(client)  # type: ignore[arg-type]  # closed with the run's clients
    return client


def _drain(module: ModuleType, source: Any, quiet_ms: int = 700) -> list[Any]:
    receive = source.read_next if hasattr(source, "read_next") else source.receive
    got = []
    while True:
        try:
            got.append(receive(quiet_ms))
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
    back = _drain(pulsar, again)
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
    back = _drain(pulsar, consumer, 1500)  # the whole batch: none of it was acknowledged on the broker
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
        "all": sorted(_texts(_drain(pulsar, consumer))),
        "regex": sorted(_texts(_drain(pulsar, pattern))),
        "listed_count": len(_drain(pulsar, listed)) < 30,
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
    first = _texts(_drain(pulsar, consumer))
    consumer.seek(ids[3])
    after_seek = _texts(_drain(pulsar, consumer))
    consumer.seek(pulsar.MessageId.earliest)
    after_earliest = _texts(_drain(pulsar, consumer))
    readers = {}
    for name, start, inclusive in (("exclusive", ids[2], False), ("inclusive", ids[2], True),
                                   ("earliest", pulsar.MessageId.earliest, False)):
        reader = client.create_reader(topic, start, start_message_id_inclusive=inclusive)
        readers[name] = _texts(_drain(pulsar, reader))
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
        "latest_reads": _texts(_drain(pulsar, latest)),
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
    back = _texts(_drain(pulsar_txn, consumer))
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
    outcome["seen"] = _texts(_drain(pulsar_txn, observer))
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
    outputs = _texts(_drain(pulsar_txn, observer))
    return {
        "committed_once": sorted(committed) == [f"m{i:02d}" for i in range(60)],
        "outputs_once": sorted(outputs) == [f"m{i:02d}" for i in range(60)],
        "errors": errors,
    }
