"""Durability across crashes (SIGKILL) and clean shutdowns (SIGTERM), with the official client."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable

import pulsar
import pytest

from tests.conftest import make_client
from tests.helpers import drain
from tests.server_process import ServerProcess

Factory = Callable[..., ServerProcess]


def _topic() -> str:
    return f"persistent://public/default/d-{uuid.uuid4().hex[:12]}"


def _close_after_kill(client: pulsar.Client) -> None:
    """Close a client whose server is gone (the client may report NotConnected while doing so)."""
    with contextlib.suppress(pulsar.PulsarException):
        client.close()


def _key(message_id: pulsar.MessageId) -> tuple[int, int, int]:
    return message_id.ledger_id(), message_id.entry_id(), message_id.batch_index()


def _send_batched(producer: pulsar.Producer, payloads: list[bytes]) -> list[pulsar.MessageId]:
    """Send asynchronously (so the client batches) and return the receipts' ids in order."""
    results: list[tuple[pulsar.Result, pulsar.MessageId] | None] = [None] * len(payloads)
    done = threading.Event()
    remaining = [len(payloads)]
    lock = threading.Lock()

    def callback_for(index: int) -> Callable[[pulsar.Result, pulsar.MessageId], None]:
        def callback(result: pulsar.Result, msg_id: pulsar.MessageId) -> None:
            results[index] = (result, msg_id)
            with lock:
                remaining[0] -= 1
                if remaining[0] == 0:
                    done.set()

        return callback

    for i, payload in enumerate(payloads):
        producer.send_async(payload, callback_for(i))
    producer.flush()
    assert done.wait(10), "not every batched send completed"
    assert all(r is not None and r[0] == pulsar.Result.Ok for r in results), results
    return [r[1] for r in results if r is not None]


def test_acknowledged_sends_survive_kill(server_factory: Factory) -> None:
    """Every message with a receipt, batched or not, is there after SIGKILL, once and in order."""
    proc = server_factory()
    topic = _topic()
    client = make_client(proc.url)
    single = client.create_producer(topic, batching_enabled=False)
    batched = client.create_producer(topic, batching_enabled=True, batching_max_messages=50)
    sent: list[tuple[bytes, pulsar.MessageId]] = []
    for i in range(20):
        payload = f"single-{i}".encode()
        sent.append((payload, single.send(payload)))
    batch_payloads = [f"batch-{i}".encode() for i in range(200)]
    sent += zip(batch_payloads, _send_batched(batched, batch_payloads), strict=True)
    assert any(msg_id.batch_index() > 0 for _, msg_id in sent), "the batched producer did not batch"
    proc.kill()
    _close_after_kill(client)

    proc.start()
    client = make_client(proc.url)
    try:
        consumer = client.subscribe(topic, "after-kill", initial_position=pulsar.InitialPosition.Earliest)
        received = drain(consumer)
        assert [m.data() for m in received] == [payload for payload, _ in sent]
        assert [_key(m.message_id()) for m in received] == [_key(msg_id) for _, msg_id in sent]
    finally:
        client.close()


def test_kill_during_sends_keeps_every_receipted_message(server_factory: Factory) -> None:
    """SIGKILL while sends are in flight: receipted messages survive; nothing is duplicated or reordered."""
    proc = server_factory()
    topic = _topic()
    client = make_client(proc.url)
    producer = client.create_producer(topic, batching_enabled=False, max_pending_messages=10_000)
    succeeded: list[bytes] = []
    lock = threading.Lock()
    enough = threading.Event()

    def callback_for(payload: bytes) -> Callable[[pulsar.Result, pulsar.MessageId], None]:
        def callback(result: pulsar.Result, msg_id: pulsar.MessageId) -> None:
            if result == pulsar.Result.Ok:
                with lock:
                    succeeded.append(payload)
                    if len(succeeded) >= 500:
                        enough.set()

        return callback

    for i in range(5000):
        payload = f"m-{i:05d}".encode()
        producer.send_async(payload, callback_for(payload))
    assert enough.wait(10), "too few receipts"
    proc.kill()
    _close_after_kill(client)  # fails whatever is still pending, so nothing is re-sent after the restart
    with lock:
        receipted = list(succeeded)

    proc.start()
    client = make_client(proc.url)
    try:
        consumer = client.subscribe(topic, "after-kill", initial_position=pulsar.InitialPosition.Earliest)
        received = [m.data() for m in drain(consumer)]
        assert len(received) == len(set(received)), "a message was stored twice"
        assert received == sorted(received), "messages are out of order"
        assert set(receipted) <= set(received), sorted(set(receipted) - set(received))[:5]
    finally:
        client.close()


@pytest.mark.parametrize("close_consumer", [False, True], ids=["wait-for-ack-flush", "close-consumer"])
def test_acknowledgements_survive_kill(server_factory: Factory, close_consumer: bool) -> None:
    """After SIGKILL the subscription gets only what it had not acknowledged."""
    proc = server_factory()
    topic = _topic()
    client = make_client(proc.url)
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode()) for i in range(10)]
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    acked = {0, 1, 2, 3, 6, 8}
    for i in range(10):
        msg = consumer.receive(5000)
        assert msg.message_id() == ids[i]
        if i in acked:
            consumer.acknowledge(msg)
    if close_consumer:
        consumer.close()
    else:
        time.sleep(0.5)  # the client groups acknowledgements for 100 ms
    proc.kill()
    _close_after_kill(client)

    proc.start()
    client = make_client(proc.url)
    try:
        consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        received = [m.data() for m in drain(consumer)]
        assert received == [f"m{i}".encode() for i in range(10) if i not in acked]
    finally:
        client.close()


def test_batch_index_acknowledgements_survive_kill(server_factory: Factory) -> None:
    """With batch-index acks, the acknowledged half of a batch is not redelivered after SIGKILL."""
    proc = server_factory()
    topic = _topic()
    client = make_client(proc.url)
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=10, batching_max_publish_delay_ms=60_000
    )
    ids = _send_batched(producer, [f"b{i}".encode() for i in range(10)])
    assert {msg_id.entry_id() for msg_id in ids} == {ids[0].entry_id()}, "expected a single batch"
    consumer = client.subscribe(
        topic, "sub", initial_position=pulsar.InitialPosition.Earliest, batch_index_ack_enabled=True
    )
    for i in range(10):
        msg = consumer.receive(5000)
        if i % 2 == 0:
            consumer.acknowledge(msg)
    consumer.close()
    proc.kill()
    _close_after_kill(client)

    proc.start()
    client = make_client(proc.url)
    try:
        consumer = client.subscribe(
            topic, "sub", initial_position=pulsar.InitialPosition.Earliest, batch_index_ack_enabled=True
        )
        received = [m.data() for m in drain(consumer)]
        assert received == [f"b{i}".encode() for i in range(1, 10, 2)]
    finally:
        client.close()


def test_subscription_created_before_kill_survives(server_factory: Factory) -> None:
    """A durable subscription keeps its position through SIGKILL, even if it never acknowledged anything."""
    proc = server_factory()
    topic = _topic()
    client = make_client(proc.url)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"before-subscription")
    client.subscribe(topic, "kept").close()  # Latest: positioned after "before-subscription"
    producer.send(b"before-kill")
    proc.kill()
    _close_after_kill(client)

    proc.start()
    client = make_client(proc.url)
    try:
        client.create_producer(topic, batching_enabled=False).send(b"after-restart")
        # Latest would start after "after-restart" if the subscription had been lost.
        consumer = client.subscribe(topic, "kept")
        assert [m.data() for m in drain(consumer)] == [b"before-kill", b"after-restart"]
    finally:
        client.close()


def test_clean_shutdown_and_restart(server_factory: Factory) -> None:
    """SIGTERM exits 0 and logs the shutdown; the restarted server has the data and the cursor."""
    proc = server_factory()
    topic = _topic()
    client = make_client(proc.url)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"m{i}".encode())
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    consumer.acknowledge(consumer.receive(5000))
    time.sleep(0.5)  # let the grouped acknowledgement reach the server
    assert proc.stop() == 0
    assert "shutting down" in proc.log()
    client.close()

    proc.start()
    client = make_client(proc.url)
    try:
        consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        assert [m.data() for m in drain(consumer)] == [f"m{i}".encode() for i in range(1, 5)]
    finally:
        client.close()
    assert proc.stop() == 0


def test_restart_with_large_store(server_factory: Factory) -> None:
    """A store with 20,000 messages restarts, keeps them all, and continues the entry ids."""
    proc = server_factory()
    topic = _topic()
    count = 20_000
    client = make_client(proc.url)
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=100, max_pending_messages=count
    )
    ids = _send_batched(producer, [f"{i:05d}".encode() for i in range(count)])
    single = client.create_producer(topic, batching_enabled=False)
    last = single.send(b"last")
    proc.kill()
    _close_after_kill(client)

    proc.start()
    print(f"restart with {count + 1} messages took {proc.startup_seconds:.3f} s")
    client = make_client(proc.url)
    try:
        consumer = client.subscribe(
            topic, "all", initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=5000
        )
        received = [m.data() for m in drain(consumer)]
        assert received == [f"{i:05d}".encode() for i in range(count)] + [b"last"]
        after = client.create_producer(topic, batching_enabled=False).send(b"after")
        assert (after.ledger_id(), after.entry_id()) > (last.ledger_id(), last.entry_id())
        assert last.entry_id() > ids[-1].entry_id()
        msg = consumer.receive(5000)
        assert msg.data() == b"after"
        assert msg.message_id() == after
    finally:
        client.close()
