"""pulsar_txn's transactions (shaped as the Java client's) through the real path, with an official Python client
as the independent observer of what becomes visible.

The defects the old client (``spark.client``) had are tested here: one abort flooding the consumer with messages
already committed (and TransactionConflict on their acks), sends into a timed-out transaction that looked successful,
and a closed client that kept sending (tests/test_pulsar_txn_client.py). Every test uses ``server`` only, so
``pytest --against-pulsar`` runs them against Apache Pulsar 4.2.4 too.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pulsar
import pytest

import pulsar_txn


@pytest.fixture
def ptx(server) -> Iterator[pulsar_txn.Client]:
    c = pulsar_txn.Client(server.url, operation_timeout_seconds=10)
    yield c
    c.close()


def _topic(tag: str = "t") -> str:
    return f"persistent://public/default/ptxn-{tag}-{uuid.uuid4().hex[:10]}"


def _drain(receive, timeout_ms: int = 500) -> list:
    out = []
    while True:
        try:
            out.append(receive(timeout_ms))
        except (pulsar.Timeout, pulsar_txn.Timeout):
            return out


def test_commit_publishes_abort_discards(ptx, client) -> None:
    topic = _topic()
    observer = client.subscribe(topic, "observer")
    producer = ptx.create_producer(topic, batching_enabled=True)
    committed = ptx.new_transaction()
    aborted = ptx.new_transaction()
    for i in range(20):
        producer.send_async(f"c{i}".encode(), None, txn=committed)
        producer.send_async(f"a{i}".encode(), None, txn=aborted)
    mid = producer.send(b"c-sync", txn=committed)
    assert mid.ledger_id() >= 0
    assert _drain(observer.receive, 300) == []
    aborted.abort()
    committed.commit()
    assert committed.state is pulsar_txn.TxnState.COMMITTED
    assert aborted.state is pulsar_txn.TxnState.ABORTED
    got = sorted(m.data() for m in _drain(observer.receive))
    assert got == sorted([f"c{i}".encode() for i in range(20)] + [b"c-sync"])
    with pytest.raises(pulsar_txn.InvalidTxnStatusError):
        producer.send(b"late", txn=committed)


def test_context_manager_commits_or_aborts(ptx, client) -> None:
    topic = _topic()
    observer = client.subscribe(topic, "observer")
    producer = ptx.create_producer(topic)
    with ptx.new_transaction() as txn:
        producer.send(b"kept", txn=txn)
    assert txn.state is pulsar_txn.TxnState.COMMITTED
    with pytest.raises(RuntimeError), ptx.new_transaction() as failed:
        producer.send(b"dropped", txn=failed)
        raise RuntimeError("boom")
    assert failed.state is pulsar_txn.TxnState.ABORTED
    assert [m.data() for m in _drain(observer.receive)] == [b"kept"]


def test_acknowledgements_count_only_on_commit(ptx) -> None:
    topic = _topic()
    producer = ptx.create_producer(topic, batching_enabled=True)
    consumer = ptx.subscribe(topic, "s", initial_position=pulsar_txn.InitialPosition.Earliest)
    for i in range(4):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    msgs = [consumer.receive(5000) for _ in range(4)]
    txn = ptx.new_transaction()
    consumer.acknowledge(msgs[0], txn=txn)
    consumer.acknowledge(msgs[1].message_id(), txn=txn)
    txn.abort()  # both come back, before anything queued after them
    again = [consumer.receive(5000) for _ in range(4)]
    assert [m.data() for m in again] == [b"m0", b"m1", b"m2", b"m3"]
    with ptx.new_transaction() as txn:
        for msg in again:
            consumer.acknowledge(msg, txn=txn)
    consumer.close()
    assert _drain(ptx.subscribe(topic, "s").receive, 300) == []


def test_conflicting_acknowledgement_raises_transaction_conflict(ptx) -> None:
    topic = _topic()
    producer = ptx.create_producer(topic)
    first = ptx.subscribe(topic, "s", consumer_type=pulsar_txn.ConsumerType.Shared)
    producer.send(b"x")
    msg = first.receive(5000)
    one, two = ptx.new_transaction(), ptx.new_transaction()
    first.acknowledge(msg, txn=one)
    with pytest.raises(pulsar_txn.TransactionConflict):
        first.acknowledge(msg, txn=two)
    one.commit()
    two.abort()


def test_a_commit_after_a_failed_operation_aborts_as_the_java_client(ptx, client) -> None:
    """As Java's ``TransactionImpl.commit``: a transaction in which an acknowledgement failed is aborted by its commit,
    which raises TransactionHasOperationFailedError; what it sent never shows."""
    topic, out = _topic(), _topic("out")
    observer = client.subscribe(out, "observer")
    producer, sink = ptx.create_producer(topic), ptx.create_producer(out)
    consumer = ptx.subscribe(topic, "s", consumer_type=pulsar_txn.ConsumerType.Shared)
    producer.send(b"x")
    msg = consumer.receive(5000)
    holder, loser = ptx.new_transaction(), ptx.new_transaction()
    consumer.acknowledge(msg, txn=holder)
    sink.send(b"from-loser", txn=loser)
    with pytest.raises(pulsar_txn.TransactionConflict):
        consumer.acknowledge(msg, txn=loser)
    with pytest.raises(pulsar_txn.TransactionHasOperationFailedError):
        loser.commit()
    assert loser.state is pulsar_txn.TxnState.ABORTED
    holder.commit()
    assert _drain(observer.receive) == []


def test_operations_on_a_timed_out_transaction_raise(ptx, client) -> None:
    """Defect of the old client: a send after the timeout returned a MessageId, the data was dropped and the
    transaction still said OPEN."""
    topic = _topic()
    observer = client.subscribe(topic, "observer")
    producer = ptx.create_producer(topic)
    consumer = ptx.subscribe(topic, "s")
    producer.send(b"plain")
    msg = consumer.receive(5000)
    txn = ptx.new_transaction(timeout_ms=300)
    time.sleep(0.5)
    assert txn.state is pulsar_txn.TxnState.TIME_OUT
    with pytest.raises(pulsar_txn.InvalidTxnStatusError):
        producer.send(b"late", txn=txn)
    with pytest.raises(pulsar_txn.InvalidTxnStatusError):
        producer.send_async(b"late", None, txn=txn)
    with pytest.raises(pulsar_txn.InvalidTxnStatusError):
        consumer.acknowledge(msg, txn=txn)
    with pytest.raises(pulsar_txn.InvalidTxnStatusError):
        txn.commit()
    assert [m.data() for m in _drain(observer.receive)] == [b"plain"]


@pytest.mark.parametrize("batched", [False, True], ids=["unbatched", "batched"])
def test_an_abort_does_not_deliver_committed_messages_again(ptx, client, batched) -> None:
    """Defect of the old client: after an abort in a consume-transform-produce loop, the messages the consumer had
    prefetched were processed and committed, then delivered a second time (the broker rewinds an Exclusive
    subscription on abort), and each transactional ack of them raised TransactionConflict."""
    source, sink = _topic("in"), _topic("out")
    inputs = [f"m{i:03d}".encode() for i in range(120)]
    official = client.create_producer(source, batching_enabled=batched, batching_max_publish_delay_ms=20)
    for payload in inputs:
        official.send_async(payload, None)
    official.flush()
    observer = client.subscribe(sink, "observer")
    consumer = ptx.subscribe(source, "loop", initial_position=pulsar_txn.InitialPosition.Earliest)
    producer = ptx.create_producer(sink)
    committed: list[bytes] = []
    transactions = 0
    while True:
        try:
            msg = consumer.receive(2000)
        except pulsar_txn.Timeout:
            break
        transactions += 1
        txn = ptx.new_transaction()
        producer.send(msg.data().upper(), txn=txn)
        consumer.acknowledge(msg, txn=txn)
        if transactions % 20 == 0:
            txn.abort()
        else:
            txn.commit()
            committed.append(msg.data())
    assert sorted(committed) == inputs  # each exactly once: nothing committed came again
    assert transactions == len(inputs) + len(inputs) // 19
    assert sorted(m.data() for m in _drain(observer.receive)) == [p.upper() for p in inputs]


def test_a_send_into_an_ended_transaction_fails_alone_as_the_java_client(ptx, client) -> None:
    """A transaction aborted behind this client's back, then passed by the coordinator's low-water mark: the broker
    answers its next send with NotAllowedError ("has been ended"). As the Java client, that send raises and the plain
    sends in flight behind it on the same producer are stored, once each (they failed with it before)."""
    topic = _topic("ended")
    producer = ptx.create_producer(topic, batching_enabled=False)
    ended = ptx.new_transaction()
    producer.send(b"in-ended", txn=ended)
    ptx.resume_transaction(ended.id).abort()  # ``ended`` itself does not know
    later = ptx.new_transaction()
    while later.id[0] != ended.id[0]:  # the same coordinator, whose low-water mark then passes ``ended``
        later.abort()
        later = ptx.new_transaction()
    producer.send(b"committed", txn=later)
    later.commit()
    results: list[tuple[str, object]] = []
    producer.send_async(b"too-late", lambda res, mid: results.append(("too-late", res)), txn=ended)
    for i in range(3):
        producer.send_async(f"plain-{i}".encode(), lambda res, mid, i=i: results.append((f"plain-{i}", res)))
    producer.flush()
    assert [(name, str(res).rsplit(".", 1)[-1]) for name, res in results] == [
        ("too-late", "NotAllowedError"),
        ("plain-0", "Ok"),
        ("plain-1", "Ok"),
        ("plain-2", "Ok"),
    ]
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    assert [m.data() for m in _drain(consumer.receive)] == [b"committed", b"plain-0", b"plain-1", b"plain-2"]
