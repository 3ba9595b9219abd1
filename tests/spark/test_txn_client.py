"""Transactions of the connector's client (pulsar_txn) against the endpoint, checked with the official client:
what the sink's tasks and driver rely on (a transaction committed by id from another client included)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from spark_helpers import name, partitioned, read_committed, values

import pulsar_txn
from pulsar_txn import (
    InvalidTxnStatusError,
    PulsarException,
    TransactionCoordinatorNotFoundError,
    TransactionNotFound,
    TxnId,
    TxnState,
)
from pulsar_txn.client import java_string_hash
from wire.pulsar_api_pb2 import ServerError


def test_committed_messages_become_visible_at_once_with_keys_and_properties(server: Any) -> None:
    topic = name("txn-commit")
    with pulsar_txn.Client(server.url) as client:
        producer = client.create_producer(topic, batching_enabled=True)
        txn = client.new_transaction()
        for i in range(5):
            producer.send_async(
                f"m{i}".encode(), None, {"i": str(i)}, partition_key=f"k{i}", event_timestamp=1000 + i, txn=txn
            )
        producer.flush()
        assert read_committed(server.url, topic, 300) == []
        txn.commit()
        assert txn.state is TxnState.COMMITTED
    messages = read_committed(server.url, topic, 800)
    assert values(messages) == [f"m{i}" for i in range(5)]
    assert [m.partition_key() for m in messages] == [f"k{i}" for i in range(5)]
    assert [m.properties() for m in messages] == [{"i": str(i)} for i in range(5)]
    assert [m.event_timestamp() for m in messages] == [1000 + i for i in range(5)]


def test_aborted_messages_are_never_delivered(server: Any) -> None:
    topic = name("txn-abort")
    with pulsar_txn.Client(server.url) as client:
        producer = client.create_producer(topic, batching_enabled=True)
        aborted, committed = client.new_transaction(), client.new_transaction()
        producer.send_async(b"lost", None, txn=aborted)
        producer.send_async(b"kept", None, txn=committed)
        producer.flush()
        aborted.abort()
        committed.commit()
        producer.send_async(b"plain", None)
        producer.flush()
    assert values(read_committed(server.url, topic, 800)) == ["kept", "plain"]


def test_an_open_transaction_holds_back_later_messages(server: Any) -> None:
    topic = name("txn-hold")
    with pulsar_txn.Client(server.url) as client:
        producer = client.create_producer(topic, batching_enabled=True)
        producer.send(b"before")
        txn = client.new_transaction()
        producer.send_async(b"inside", None, txn=txn)
        producer.flush()
        producer.send(b"after")
        assert values(read_committed(server.url, topic, 500)) == ["before"]
        txn.commit()
    assert values(read_committed(server.url, topic, 800)) == ["before", "inside", "after"]


def test_a_transaction_is_committed_by_id_from_another_client(server: Any) -> None:
    topic = name("txn-by-id")
    with pulsar_txn.Client(server.url) as writer, pulsar_txn.Client(server.url) as committer:
        txn = writer.new_transaction()
        writer.create_producer(topic).send(b"handed over", txn=txn)
        committer.resume_transaction(TxnId(*txn.id)).commit()
    assert values(read_committed(server.url, topic, 800)) == ["handed over"]


def test_ended_and_unknown_transactions_raise_pulsar_errors(server: Any) -> None:
    with pulsar_txn.Client(server.url) as client:
        txn = client.new_transaction()
        txn.commit()
        with pytest.raises(TransactionNotFound):
            client.resume_transaction(txn.id).commit()
        with pytest.raises(TransactionNotFound):
            client.resume_transaction(txn.id).abort()
        with pytest.raises(TransactionNotFound):
            client.create_producer(name("late")).send(b"x", txn=client.resume_transaction(txn.id))
        with pytest.raises(TransactionNotFound):
            client.resume_transaction(TxnId(0, 1 << 40)).commit()
    with (
        pulsar_txn.Client(server.url, operation_timeout_seconds=3) as client,
        pytest.raises(TransactionCoordinatorNotFoundError),
    ):
        client.resume_transaction(TxnId(client._coordinator_count + 5, 1)).commit()


def test_a_send_in_an_aborted_transaction_is_stored_as_aborted(server: Any) -> None:
    """As Pulsar 4.2.4 (``--against-pulsar``), the partition appends it until the coordinator's low-water mark has
    passed the transaction; it is never delivered."""
    topic = name("txn-ended")
    with pulsar_txn.Client(server.url) as client:
        producer = client.create_producer(topic)
        txn = client.new_transaction()
        producer.send(b"first", txn=txn)
        client.resume_transaction(txn.id).abort()  # ``txn`` itself does not know
        producer.send(b"second", txn=txn)
    assert read_committed(server.url, topic, 300) == []


def test_a_timed_out_transaction_is_aborted(server: Any) -> None:
    topic = name("txn-timeout")
    with pulsar_txn.Client(server.url) as client:
        txn = client.new_transaction(timeout_ms=300)
        client.create_producer(topic).send(b"too slow", txn=txn)
        time.sleep(1.0)
        with pytest.raises(TransactionNotFound):
            client.resume_transaction(txn.id).commit()  # ``txn.commit()`` fails client-side: it timed out
    assert read_committed(server.url, topic, 300) == []


def test_commit_while_the_abort_is_in_progress_is_an_invalid_status(server_factory: Any) -> None:
    server = server_factory("--txn-end-delay-ms", "800")
    with pulsar_txn.Client(server.url) as client, pulsar_txn.Client(server.url) as other:
        txn = client.new_transaction()
        client.create_producer(name("txn-race")).send(b"x", txn=txn)
        aborting = threading.Thread(target=txn.abort)
        aborting.start()
        time.sleep(0.3)
        with pytest.raises(InvalidTxnStatusError):
            other.resume_transaction(txn.id).commit()
        aborting.join()


def test_without_coordinators_transactions_are_refused(server_factory: Any) -> None:
    server = server_factory("--transaction-coordinators", "0")
    with pulsar_txn.Client(server.url) as client, pytest.raises(TransactionCoordinatorNotFoundError):
        client.new_transaction()
    # Plain sends still work.
    with pulsar_txn.Client(server.url) as client:
        client.create_producer(name("plain")).send(b"ok")


def test_keys_are_routed_to_partitions_like_the_java_client(server: Any) -> None:
    assert java_string_hash("hello") == 99162322  # "hello".hashCode() in Java
    assert java_string_hash("polygenelubricants") == 0  # hashCode() is Integer.MIN_VALUE
    topic = partitioned(server, "txn-parts", 3)
    with pulsar_txn.Client(server.url) as client:
        producer = client.create_producer(topic, batching_enabled=True)
        txn = client.new_transaction()
        for i in range(30):
            producer.send_async(f"v{i}".encode(), None, partition_key=f"key-{i % 6}", txn=txn)
        txn.commit()
    for partition in range(3):
        messages = read_committed(server.url, f"{topic}-partition-{partition}", 500)
        assert all(java_string_hash(m.partition_key()) % 3 == partition for m in messages)
    assert len(read_committed(server.url, topic, 800)) == 30


def test_errors_carry_the_pulsar_code(server: Any) -> None:
    with pulsar_txn.Client(server.url) as client:
        txn = client.new_transaction()
        txn.abort()
        with pytest.raises(PulsarException) as raised:
            client.resume_transaction(txn.id).commit()
    assert raised.value.code == ServerError.TransactionNotFound
    assert "TransactionNotFound" in str(raised.value)
