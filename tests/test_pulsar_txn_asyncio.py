"""pulsar_txn.asyncio (shaped like pulsar.asyncio) through the real path; an official client observes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
import uuid
from collections import Counter

import pulsar
import pytest

import pulsar_txn
import pulsar_txn.asyncio as pulsar_asyncio


def _topic() -> str:
    return f"persistent://public/default/ptx-async-{uuid.uuid4().hex[:10]}"


def test_produce_consume_and_transactions(server, client) -> None:
    topic, out = _topic(), _topic()
    observer = client.subscribe(out, "observer")

    async def main() -> list[bytes]:
        aclient = pulsar_asyncio.Client(server.url, operation_timeout_seconds=10)
        consumer = await aclient.subscribe(topic, "s", initial_position=pulsar_txn.InitialPosition.Earliest)
        producer = await aclient.create_producer(topic, batching_enabled=True)
        ids = await asyncio.gather(*(producer.send(f"m{i}".encode(), partition_key="k") for i in range(20)))
        assert len({str(i) for i in ids}) == 20
        sink = await aclient.create_producer(out)
        seen = []
        for i in range(20):
            msg = await consumer.receive()
            seen.append(msg.data())
            async with await aclient.new_transaction() as txn:
                await sink.send(msg.data().upper(), txn=txn)
                await consumer.acknowledge(msg, txn=txn)
            if i == 0:
                with pytest.raises(RuntimeError):
                    async with await aclient.new_transaction() as failed:
                        await sink.send(b"dropped", txn=failed)
                        raise RuntimeError("boom")
                assert failed.state is pulsar_txn.TxnState.ABORTED
        waiting = asyncio.ensure_future(consumer.receive())
        await asyncio.sleep(0.2)
        waiting.cancel()  # a cancelled receive takes nothing
        await (await aclient.create_producer(topic)).send(b"after-cancel")
        assert (await consumer.receive()).data() == b"after-cancel"
        await aclient.close()
        return seen

    seen = asyncio.run(main())
    assert seen == [f"m{i}".encode() for i in range(20)]
    got = []
    while True:
        try:
            got.append(observer.receive(1000).data())
        except pulsar.Timeout:
            break
    assert got == [f"M{i}".encode() for i in range(20)]


def test_errors_are_pulsar_exceptions_with_results(server) -> None:
    async def main() -> None:
        aclient = pulsar_asyncio.Client(server.url, operation_timeout_seconds=10)
        topic = _topic()
        await aclient.subscribe(topic, "s")
        with pytest.raises(pulsar_asyncio.PulsarException) as caught:
            await aclient.subscribe(topic, "s")
        assert caught.value.error() == pulsar_txn.Result.ConsumerBusy
        await aclient.close()

    asyncio.run(main())


class _NoPool(concurrent.futures.ThreadPoolExecutor):
    """A default executor that refuses work: what runs through ``asyncio.to_thread`` fails."""

    def submit(self, *args: object, **kwargs: object) -> concurrent.futures.Future:
        raise AssertionError("the thread pool was used")


def _drain(consumer) -> list[bytes]:
    got = []
    while True:
        try:
            got.append(consumer.receive(1000).data())
        except pulsar.Timeout:
            return got


def test_messages_and_transactions_use_no_thread_pool(server, client) -> None:
    """Sends (with and without a transaction), flush, receive, the acknowledgements, new_transaction, commit and
    abort complete through the I/O thread's callbacks: the loop's default executor is never used (it raises)."""
    topic, out = _topic(), _topic()
    observer = client.subscribe(out, "observer")

    async def main() -> None:
        aclient = pulsar_asyncio.Client(server.url, operation_timeout_seconds=10)
        consumer = await aclient.subscribe(topic, "s", initial_position=pulsar_txn.InitialPosition.Earliest)
        producer = await aclient.create_producer(topic)
        sink = await aclient.create_producer(out, batching_enabled=False)
        # Every coordinator's broker looked up once (that lookup alone may run in a worker thread).
        coordinators = await aclient.get_topic_partitions("persistent://pulsar/system/transaction_coordinator_assign")
        for _ in coordinators:
            await (await aclient.new_transaction()).abort()
        asyncio.get_running_loop().set_default_executor(_NoPool(max_workers=1))

        await asyncio.gather(*(producer.send(f"m{i}".encode()) for i in range(10)))
        await producer.flush()
        for i in range(10):
            msg = await consumer.receive()
            assert msg.data() == f"m{i}".encode()
            txn = await aclient.new_transaction()
            await sink.send(msg.data().upper(), txn=txn)
            if i % 3 == 2:
                await consumer.acknowledge_cumulative(msg, txn=txn)
            else:
                await consumer.acknowledge(msg, txn=txn)
            if i == 4:
                await txn.abort()  # m4 comes back
                again = await consumer.receive()
                assert again.data() == b"m4"
                async with await aclient.new_transaction() as txn2:
                    await sink.send(b"M4", txn=txn2)
                    await consumer.acknowledge(again, txn=txn2)
            else:
                await txn.commit()
        await producer.send(b"plain")
        plain = await consumer.receive()
        await consumer.negative_acknowledge(plain)
        await sink.flush()
        asyncio.get_running_loop().set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=2))
        await aclient.close()

    asyncio.run(main())
    assert sorted(_drain(observer)) == sorted(f"M{i}".encode() for i in range(10))


def test_tasks_sending_on_one_producer_keep_their_order(server, client) -> None:
    """Sends whose transaction must first take the partition in (a coordinator request) do not fall behind the
    sends started after them: every task's message is stored in the order of the send calls."""
    topic = _topic()
    observer = client.subscribe(topic, "observer")

    async def main() -> None:
        aclient = pulsar_asyncio.Client(server.url, operation_timeout_seconds=10)
        producer = await aclient.create_producer(topic)
        txns = [await aclient.new_transaction() for _ in range(3)]
        sends = []
        for i in range(30):
            txn = txns[i // 10] if i % 10 in (0, 5) else None
            sends.append(producer.send(f"{i}".encode(), txn=txn))
        ids = await asyncio.gather(*sends)
        for txn in txns:
            await txn.commit()
        assert ids == sorted(ids, key=lambda m: (m.ledger_id(), m.entry_id(), m.batch_index()))
        await aclient.close()

    asyncio.run(main())
    assert _drain(observer) == [f"{i}".encode() for i in range(30)]


def test_expired_transactions_and_cancelled_awaits(server, client) -> None:
    """A send or acknowledgement in a transaction past its client-side timeout raises InvalidTxnStatusError; a
    commit whose awaiting task is cancelled still commits, and the client goes on working."""
    topic, out = _topic(), _topic()
    observer = client.subscribe(out, "observer")

    async def main() -> None:
        aclient = pulsar_asyncio.Client(server.url, operation_timeout_seconds=10)
        consumer = await aclient.subscribe(topic, "s", initial_position=pulsar_txn.InitialPosition.Earliest)
        producer = await aclient.create_producer(topic)
        await producer.send(b"in")
        msg = await consumer.receive()
        expired = await aclient.new_transaction(timeout_ms=200)
        await asyncio.sleep(0.4)
        with pytest.raises(pulsar_txn.InvalidTxnStatusError):
            await producer.send(b"late", txn=expired)
        with pytest.raises(pulsar_txn.InvalidTxnStatusError):
            await consumer.acknowledge(msg, txn=expired)
        txn = await aclient.new_transaction()
        await producer.send(b"kept", txn=txn)
        sink = await aclient.create_producer(out)
        await sink.send(b"committed", txn=txn)
        committing = asyncio.ensure_future(txn.commit())
        await asyncio.sleep(0)
        committing.cancel()
        for _ in range(100):
            if txn.state is pulsar_txn.TxnState.COMMITTED:
                break
            await asyncio.sleep(0.05)
        assert txn.state is pulsar_txn.TxnState.COMMITTED
        await sink.send(b"after")
        await aclient.close()

    asyncio.run(main())
    assert _drain(observer) == [b"committed", b"after"]


def test_a_full_queue_waits_on_the_loop_in_order(server, client) -> None:
    """block_if_queue_full: sends beyond max_pending_messages wait for room without a worker thread and keep the
    order of their send calls."""
    topic = _topic()
    observer = client.subscribe(topic, "observer")

    async def main() -> None:
        aclient = pulsar_asyncio.Client(server.url, operation_timeout_seconds=10)
        producer = await aclient.create_producer(
            topic, batching_enabled=False, max_pending_messages=5, block_if_queue_full=True
        )
        asyncio.get_running_loop().set_default_executor(_NoPool(max_workers=1))
        await asyncio.gather(*(producer.send(f"{i}".encode()) for i in range(60)))
        asyncio.get_running_loop().set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=2))
        await aclient.close()

    asyncio.run(main())
    assert _drain(observer) == [f"{i}".encode() for i in range(60)]


def test_a_closed_event_loop_does_not_stop_the_client(server, client) -> None:
    """A receive left waiting when its event loop ended: the message that arrives later is not lost to an error in
    the client's I/O thread (settling a future of a closed loop), and the client goes on serving the next loop."""
    topic = _topic()
    aclient = pulsar_asyncio.Client(server.url, operation_timeout_seconds=10)

    async def first() -> pulsar_asyncio.Consumer:
        consumer = await aclient.subscribe(topic, "s")
        waiting = asyncio.ensure_future(consumer.receive())  # still waiting when asyncio.run ends
        await asyncio.sleep(0.1)
        assert not waiting.done()
        return consumer

    consumer = asyncio.run(first())
    producer = client.create_producer(topic)
    producer.send(b"later")

    async def second() -> bytes:
        msg = await asyncio.wait_for(consumer.receive(), 10)
        sent = await (await aclient.create_producer(topic)).send(b"more")
        assert sent is not None
        await aclient.close()
        return msg.data()

    got: list[bytes] = []
    runner = threading.Thread(target=lambda: got.append(asyncio.run(second())), daemon=True)
    runner.start()
    runner.join(30)  # (a client whose I/O thread died would hang here)
    assert got == [b"later"]


def test_transaction_loop_through_a_broker_sigkill(server_factory, client) -> None:
    """The consume-transform-produce loop of tests/test_pulsar_txn_crash.py on the asyncio shell (an abort every
    10th transaction, the broker SIGKILLed and restarted halfway): the coordinator requests are retried through the
    lost connection, and every output is there exactly once."""
    from tests.conftest import make_client

    server = server_factory()
    messages = 60
    official = make_client(server.url)
    source, sink = _topic(), _topic()
    filler = official.create_producer(source)
    for i in range(messages):
        filler.send(f"m{i:03d}".encode())
    observer = official.subscribe(sink, "observer")
    errors: list[str] = []

    async def main() -> set[bytes]:
        aclient = pulsar_asyncio.Client(server.url, operation_timeout_seconds=10)
        consumer = await aclient.subscribe(source, "loop", initial_position=pulsar_txn.InitialPosition.Earliest)
        out = await aclient.create_producer(sink, batching_enabled=False)
        committed: set[bytes] = set()
        in_doubt: set[bytes] = set()
        transactions, killed, idle_since = 0, False, time.monotonic()
        while len(committed) < messages:
            try:
                msg = await asyncio.wait_for(consumer.receive(), 1.0)
            except TimeoutError:
                idle = time.monotonic() - idle_since
                if (len(committed | in_doubt) == messages and idle > 15) or idle > 120:
                    break
                continue
            idle_since = time.monotonic()
            transactions += 1
            txn = None
            try:
                txn = await aclient.new_transaction(timeout_ms=5000)
                await out.send(msg.data().upper(), txn=txn)
                await consumer.acknowledge(msg, txn=txn)
                if transactions % 10 == 0:
                    await txn.abort()
                    continue
            except pulsar_txn.PulsarException as exc:
                errors.append(type(exc).__name__)
                if txn is not None and txn.state in (pulsar_txn.TxnState.OPEN, pulsar_txn.TxnState.TIME_OUT):
                    with contextlib.suppress(pulsar_txn.PulsarException):
                        await txn.abort()
                continue
            try:
                await txn.commit()
                committed.add(msg.data())
                in_doubt.discard(msg.data())
            except pulsar_txn.PulsarException as exc:
                errors.append(type(exc).__name__)
                in_doubt.add(msg.data())
            if len(committed) >= messages // 2 and not killed:
                killed = True
                server.kill()
                server.start(timeout=240)
        await aclient.close()
        assert killed
        print(f"{transactions} transactions, {len(committed)} committed, errors: {Counter(errors)}")
        return committed

    asyncio.run(main())
    outputs = Counter()
    while True:
        try:
            outputs[observer.receive(2000).data()] += 1
        except pulsar.Timeout:
            break
    official.close()
    assert "TransactionConflict" not in errors, errors
    assert {k: v for k, v in outputs.items() if v > 1} == {}
    assert set(outputs) == {f"M{i:03d}".encode() for i in range(messages)}
