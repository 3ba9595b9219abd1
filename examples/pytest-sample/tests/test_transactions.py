"""Transactions: what a transaction sends is seen by consumers only once it commits, and never if it aborts.

The official Python client has no transaction API; pulsar-txn-proxy ships one with its API (``pulsar_txn``), which
works against this endpoint and against Apache Pulsar with transactions enabled.
"""

import pulsar
import pytest

from pulsar_txn import Client as TransactionalClient


@pytest.fixture
def txn_client(pulsar_endpoint):
    client = TransactionalClient(pulsar_endpoint.service_url)
    yield client
    client.close()


def test_commit_makes_sends_visible(pulsar_client, txn_client, pulsar_namespace):
    topic = pulsar_namespace.topic("transfers")
    consumer = pulsar_client.subscribe(topic, "reader")
    producer = txn_client.create_producer(topic)

    txn = txn_client.new_transaction(timeout_ms=30_000)
    producer.send(b"debit", txn=txn)
    producer.send(b"credit", txn=txn)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)  # nothing before the commit
    txn.commit()

    assert [consumer.receive(timeout_millis=5000).data() for _ in range(2)] == [b"debit", b"credit"]


def test_abort_drops_sends(pulsar_client, txn_client, pulsar_namespace):
    topic = pulsar_namespace.topic("transfers")
    consumer = pulsar_client.subscribe(topic, "reader")
    producer = txn_client.create_producer(topic)

    txn = txn_client.new_transaction(timeout_ms=30_000)
    producer.send(b"never", txn=txn)
    txn.abort()
    producer.send(b"after")

    assert consumer.receive(timeout_millis=5000).data() == b"after"
