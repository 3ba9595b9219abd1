"""The asyncio API, shaped like ``pulsar.asyncio`` of ``pulsar-client`` 3.x, plus transactions::

    import pulsar_txn.asyncio as pulsar_asyncio

    client = pulsar_asyncio.Client("pulsar://localhost:6650")
    producer = await client.create_producer("out")
    consumer = await client.subscribe("in", "sub")
    msg = await consumer.receive()
    async with await client.new_transaction() as txn:
        await producer.send(msg.data(), txn=txn)
        await consumer.acknowledge(msg, txn=txn)
    await client.close()

A thin shell over the same core and I/O thread as the blocking client: sends and non-transactional
acknowledgements complete through callbacks resolved on the event loop, ``receive`` waits for the consumer's
"messages queued" event (cancelling it loses no message), and the calls that wait for the broker in several steps
(creating producers and consumers, lookups, transaction coordinator requests) run the blocking client's code in a
worker thread. The loop is never blocked.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from pulsar_txn import exceptions
from pulsar_txn.client import Client as _BlockingClient
from pulsar_txn.client import Consumer as _BlockingConsumer
from pulsar_txn.client import Producer as _BlockingProducer
from pulsar_txn.client import Reader as _BlockingReader
from pulsar_txn.client import Transaction as _BlockingTransaction
from pulsar_txn.core.transaction import TxnId, TxnState
from pulsar_txn.exceptions import PulsarException
from pulsar_txn.message import Message, MessageId

__all__ = ["Client", "Consumer", "Producer", "PulsarException", "Reader", "Transaction"]


class Transaction:
    """A transaction; ``async with`` commits at the end of the block and aborts on an exception."""

    def __init__(self, txn: _BlockingTransaction) -> None:
        self._txn = txn

    @property
    def id(self) -> TxnId:
        return self._txn.id

    @property
    def state(self) -> TxnState:
        return self._txn.state

    async def commit(self) -> None:
        await asyncio.to_thread(self._txn.commit)

    async def abort(self) -> None:
        await asyncio.to_thread(self._txn.abort)

    async def __aenter__(self) -> Transaction:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if kind is None:
            await self.commit()
        elif self.state in (TxnState.OPEN, TxnState.TIME_OUT, TxnState.ERROR):
            await self.abort()


def _blocking(txn: Transaction | None) -> _BlockingTransaction | None:
    return None if txn is None else txn._txn


class Producer:
    """The asyncio producer: ``await producer.send(...)`` returns the message id once the broker stored it."""

    def __init__(self, producer: _BlockingProducer) -> None:
        self._producer = producer

    def topic(self) -> str:
        return self._producer.topic()

    def producer_name(self) -> str:
        return self._producer.producer_name()

    def last_sequence_id(self) -> int:
        return self._producer.last_sequence_id()

    def is_connected(self) -> bool:
        return self._producer.is_connected()

    async def send(
        self,
        content: Any,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool | None = None,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: Any = None,
        txn: Transaction | None = None,
    ) -> MessageId:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[MessageId] = loop.create_future()

        def done(result: Any, message_id: MessageId | None) -> None:
            def settle() -> None:
                if future.done():
                    return
                if message_id is None:
                    error = getattr(exceptions, result.name, PulsarException)
                    future.set_exception(error(f"send to {self.topic()} failed: {result.name}"))
                else:
                    future.set_result(message_id)

            loop.call_soon_threadsafe(settle)

        args = (
            properties,
            partition_key,
            ordering_key,
            sequence_id,
            replication_clusters,
            bool(disable_replication),
            event_timestamp,
            deliver_at,
            deliver_after,
            _blocking(txn),
        )
        if txn is None and not self._producer._block:
            self._producer.send_async(content, done, *args)
        else:  # registering a partition with the coordinator, or waiting for room in the queue, blocks
            await asyncio.to_thread(self._producer.send_async, content, done, *args)
        return await future

    async def flush(self) -> None:
        await asyncio.to_thread(self._producer.flush)

    async def close(self) -> None:
        await asyncio.to_thread(self._producer.close)


class Consumer:
    """The asyncio consumer: ``await consumer.receive()`` waits without blocking the loop."""

    def __init__(self, consumer: _BlockingConsumer) -> None:
        self._consumer = consumer
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        rt = consumer._rt
        with rt.lock:
            for core in consumer._cores:
                rt.ready_hooks[id(core)] = self._ready

    def _ready(self) -> None:
        waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            loop.call_soon_threadsafe(lambda f=future: f.done() or f.set_result(None))

    def topic(self) -> str:
        return self._consumer.topic()

    def subscription_name(self) -> str:
        return self._consumer.subscription_name()

    def consumer_name(self) -> str:
        return self._consumer.consumer_name()

    async def receive(self) -> Message:
        """The next message."""
        consumer, rt = self._consumer, self._consumer._rt
        loop = asyncio.get_running_loop()
        while True:
            with rt.lock:
                consumer._check()
                message = consumer._take()
                if message is not None:
                    return message
                future: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, future))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(future, 1.0)  # wakes up now and then to notice a closed consumer

    async def acknowledge(self, message: Message | MessageId, txn: Transaction | None = None) -> None:
        if txn is None:
            self._consumer.acknowledge(message)
        else:
            await asyncio.to_thread(self._consumer.acknowledge, message, _blocking(txn))

    async def acknowledge_cumulative(self, message: Message | MessageId, txn: Transaction | None = None) -> None:
        if txn is None:
            self._consumer.acknowledge_cumulative(message)
        else:
            await asyncio.to_thread(self._consumer.acknowledge_cumulative, message, _blocking(txn))

    async def negative_acknowledge(self, message: Message | MessageId) -> None:
        self._consumer.negative_acknowledge(message)

    def redeliver_unacknowledged_messages(self) -> None:
        self._consumer.redeliver_unacknowledged_messages()

    async def unsubscribe(self) -> None:
        await asyncio.to_thread(self._consumer.unsubscribe)

    async def seek(self, messageid: MessageId | int) -> None:
        await asyncio.to_thread(self._consumer.seek, messageid)

    async def get_last_message_id(self) -> MessageId:
        return await asyncio.to_thread(self._consumer.get_last_message_id)

    async def close(self) -> None:
        await asyncio.to_thread(self._consumer.close)


class Reader:
    """The asyncio reader."""

    def __init__(self, reader: _BlockingReader) -> None:
        self._reader = reader
        self._consumer = Consumer(reader._consumer)

    def topic(self) -> str:
        return self._reader.topic()

    def is_connected(self) -> bool:
        return self._reader.is_connected()

    async def read_next(self) -> Message:
        return await self._consumer.receive()

    async def has_message_available(self) -> bool:
        return await asyncio.to_thread(self._reader.has_message_available)

    async def seek(self, messageid: MessageId | int) -> None:
        await asyncio.to_thread(self._reader.seek, messageid)

    async def close(self) -> None:
        await asyncio.to_thread(self._reader.close)


class Client:
    """The asyncio client: ``Client(service_url, **kwargs)`` takes the keyword arguments of
    :class:`pulsar_txn.Client`."""

    def __init__(self, service_url: str, **kwargs: Any) -> None:
        self._client = _BlockingClient(service_url, **kwargs)

    async def create_producer(self, topic: str, **kwargs: Any) -> Producer:
        """See :meth:`pulsar_txn.Client.create_producer`; as in ``pulsar.asyncio``, batching is on unless
        ``batching_enabled=False``."""
        kwargs.setdefault("batching_enabled", True)
        return Producer(await asyncio.to_thread(self._client.create_producer, topic, **kwargs))

    async def subscribe(self, topic: Any, subscription_name: str, **kwargs: Any) -> Consumer:
        """See :meth:`pulsar_txn.Client.subscribe` (``message_listener`` is not taken here)."""
        return Consumer(await asyncio.to_thread(self._client.subscribe, topic, subscription_name, **kwargs))

    async def create_reader(self, topic: str, start_message_id: MessageId, **kwargs: Any) -> Reader:
        """See :meth:`pulsar_txn.Client.create_reader`."""
        return Reader(await asyncio.to_thread(self._client.create_reader, topic, start_message_id, **kwargs))

    async def new_transaction(self, timeout_ms: int = 60000) -> Transaction:
        """See :meth:`pulsar_txn.Client.new_transaction`."""
        return Transaction(await asyncio.to_thread(self._client.new_transaction, timeout_ms))

    async def get_topic_partitions(self, topic: str) -> list[str]:
        return await asyncio.to_thread(self._client.get_topic_partitions, topic)

    async def close(self) -> None:
        await asyncio.to_thread(self._client.close)

    def shutdown(self) -> None:
        self._client.shutdown()
