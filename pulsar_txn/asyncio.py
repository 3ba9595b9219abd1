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

A thin shell over the same core and I/O thread as the blocking client, as ``pulsar.asyncio`` is over the C++
client's callbacks: the per-message and per-transaction operations (``send``, ``flush``, ``receive``, the three
acknowledgements, ``new_transaction``, ``commit``, ``abort``) queue their work from the event loop and complete
through an asyncio future the client's I/O thread resolves with ``loop.call_soon_threadsafe``: no thread-pool hop,
and the loop is never blocked. Sends of several tasks on one producer are queued in the order of their ``send``
calls (one that must first add its partition to a transaction, or wait for room in a full queue, holds back those
after it). A cancelled ``await`` leaves the client consistent: a send, acknowledgement or commit already under way
completes (as it would have in a worker thread), a cancelled ``receive`` takes no message.

Still run in a worker thread (``asyncio.to_thread``), being rare and made of several blocking steps: creating
producers, consumers and readers, ``close``, ``unsubscribe``, ``seek``, ``get_last_message_id``,
``has_message_available``, ``get_topic_partitions``, and the lookup of a transaction coordinator's broker the first
time it is used (or after its connection was lost).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

from pulsar_txn import exceptions
from pulsar_txn._runtime import Backoff, Immediate, Runtime
from pulsar_txn.client import Client as _BlockingClient
from pulsar_txn.client import Consumer as _BlockingConsumer
from pulsar_txn.client import Producer as _BlockingProducer
from pulsar_txn.client import Reader as _BlockingReader
from pulsar_txn.client import Transaction as _BlockingTransaction
from pulsar_txn.client import _message_id
from pulsar_txn.core.producer import OutMessage, ProducerCore
from pulsar_txn.core.transaction import TxnId, TxnState
from pulsar_txn.enums import result_of
from pulsar_txn.exceptions import RETRYABLE, PulsarException
from pulsar_txn.message import Message, MessageId
from wire.pulsar_api_pb2 import BaseCommand

__all__ = ["Client", "Consumer", "Producer", "PulsarException", "Reader", "Transaction"]


# -- futures resolved from the client's threads ----------------------------------------------------


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if not future.done():  # (a cancelled await)
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)


class _Mailbox:
    """The outcomes the client's threads hand to one event loop, settled there in the order they came: one
    ``call_soon_threadsafe`` (a write to the loop's wake-up socket) for all that arrive before the loop runs, not
    one per message."""

    __slots__ = ("_items", "_loop", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: collections.deque[tuple[asyncio.Future[Any], Any, Any]] = collections.deque()
        self._scheduled = False

    def put(self, future: asyncio.Future[Any], value: Any, error: Any) -> None:
        """From any thread: settle ``future`` soon on the loop."""
        self._items.append((future, value, error))
        if not self._scheduled:
            self._scheduled = True
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        self._scheduled = False  # before taking: what comes after this line schedules a drain of its own
        items = self._items
        while items:
            _settle(*items.popleft())


_mailboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Mailbox] = weakref.WeakKeyDictionary()


def _mailbox(loop: asyncio.AbstractEventLoop) -> _Mailbox:
    box = _mailboxes.get(loop)
    if box is None:
        box = _mailboxes[loop] = _Mailbox(loop)
    return box


def _resolve(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], value: Any, error: Any) -> None:
    """Settle ``future`` on its loop, from any thread (the I/O thread under the client's lock: it returns at once)."""
    _mailbox(loop).put(future, value, error)


class _SendDone(Immediate):
    """A send's token: the I/O thread resolves the send's future with the raw message id, or with the error as the
    class of its ``Result`` (what ``pulsar.asyncio`` raises, as a subclass)."""

    __slots__ = ("box", "future", "topic")

    def __init__(self, box: _Mailbox, future: asyncio.Future[Any], topic: str) -> None:
        self.box = box
        self.future = future
        self.topic = topic

    def __call__(self, message_id: Any, error: PulsarException | None) -> None:
        if error is not None:
            name = result_of(error).name
            kind = getattr(exceptions, name, PulsarException)
            if type(error) is not kind:
                error = kind(f"send to {self.topic} failed: {name}: {error}")
        self.box.put(self.future, message_id, error)


async def _when(rt: Runtime, predicate: Callable[[], bool]) -> None:
    """Wait until ``predicate()`` holds (it is checked under the client's lock as the I/O thread changes state)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    rt.when(predicate, lambda error: _resolve(loop, future, None, error))
    await future


async def _detached(operation: Coroutine[Any, Any, Any]) -> Any:
    """Await ``operation`` run as a task of its own: cancelling the waiting task does not stop it halfway (a
    transaction half ended, a send dropped from the producer's order)."""
    return await asyncio.shield(operation)


# -- transaction coordinator requests ---------------------------------------------------------------


async def _tc_request(client: _BlockingClient, coordinator: int, kind: int, **fields: Any) -> Any:
    """A coordinator request answered through a callback, retried as the blocking client's (on a connection lost or
    a coordinator loading, up to the operation timeout). Only the lookup of the coordinator's broker, when its
    connection is not known, runs in a worker thread."""
    rt = client._rt
    backoff = Backoff(rt)
    loop = asyncio.get_running_loop()
    while True:
        try:
            link = client._tc_known_link(coordinator)
            if link is None:
                link = await asyncio.to_thread(client._tc_link, coordinator)
            future: asyncio.Future[Any] = loop.create_future()
            rt.request_async(link, kind, lambda answer, error, f=future: _resolve(loop, f, answer, error), **fields)
            return await future
        except RETRYABLE as exc:
            client._forget_tc_link(coordinator)
            await asyncio.sleep(backoff.pause(exc))


async def _add_partition(txn: _BlockingTransaction, topic: str) -> None:
    client = txn._client
    request = client._partition_request(txn, topic)
    if request is not None:
        coordinator, kind, fields = request
        await _tc_request(client, coordinator, kind, **fields)
        with client._rt.lock:
            txn._core.partitions.add(topic)


async def _add_subscription(txn: _BlockingTransaction, topic: str, subscription: str) -> None:
    client = txn._client
    request = client._subscription_request(txn, topic, subscription)
    if request is not None:
        coordinator, kind, fields = request
        await _tc_request(client, coordinator, kind, **fields)
        with client._rt.lock:
            txn._core.subscriptions.add((topic, subscription))


async def _end(txn: _BlockingTransaction, commit: bool) -> None:
    """:meth:`pulsar_txn.Transaction.commit` / ``abort`` without a thread: wait for the transaction's sends, then
    END_TXN."""
    client, rt, core = txn._client, txn._client._rt, txn._core
    rt.check_open()
    if commit:
        with rt.lock:
            client._flush_for(core)
        await _when(rt, lambda: core.ops == 0)
    commit, failed_ops = client._begin_end(core, commit)
    coordinator, kind, fields = client._end_request(core, commit)
    try:
        await _tc_request(client, coordinator, kind, **fields)
    except PulsarException:
        with rt.lock:
            core.ended(commit, ok=False)
        raise
    client._ended(core, commit, failed_ops)


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
        """Wait for every send made in the transaction, then commit it."""
        await _detached(_end(self._txn, commit=True))

    async def abort(self) -> None:
        """Abort: nothing sent in it becomes visible; what it acknowledged is delivered again."""
        await _detached(_end(self._txn, commit=False))

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
        #: Resolved once the last send that had to wait before it was queued (a partition to add to its
        #: transaction, room in a full queue) is queued: sends after it wait for it, to keep their order.
        self._queued: asyncio.Future[None] | None = None

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
        """Publish a message (in ``txn`` if given); returns its id once the broker stored it."""
        producer = self._producer
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        token = _SendDone(_mailbox(loop), future, producer._topic)
        options = (
            properties,
            partition_key,
            ordering_key,
            sequence_id,
            replication_clusters,
            bool(disable_replication),
            event_timestamp,
            deliver_at,
            deliver_after,
        )
        if txn is None and self._queued is None and not (producer._block and producer._full()):
            producer._queue(content, token, *options, None)
        else:
            blocking_txn = _blocking(txn)
            message = producer._message(producer._schema.encode(content), token, *options, blocking_txn)
            core = producer._route(message)
            previous, self._queued = self._queued, loop.create_future()
            await _detached(self._queue_after(previous, self._queued, message, core, blocking_txn))
        return _message_id(-1, await future)  # type: ignore[return-value]

    async def _queue_after(
        self,
        previous: asyncio.Future[None] | None,
        mine: asyncio.Future[None],
        message: OutMessage,
        core: ProducerCore,
        txn: _BlockingTransaction | None,
    ) -> None:
        """Queue ``message`` once its partition is in ``txn``, the sends before it are queued and ``core`` has room."""
        producer = self._producer
        try:
            if txn is not None:
                await _add_partition(txn, core.topic)
            if previous is not None and not previous.done():
                await asyncio.wait([previous])
            limit = producer._max_pending
            if producer._block and limit > 0 and core.pending_count >= limit:
                await _when(producer._rt, lambda: core.pending_count < limit)
            producer._put(message, core, message.token, txn)
        finally:
            if not mine.done():
                mine.set_result(None)
            if self._queued is mine:
                self._queued = None

    async def flush(self) -> None:
        """Send every batched message and wait until all messages sent so far are stored (or failed)."""
        if self._queued is not None:
            await asyncio.wait([self._queued])
        producer = self._producer
        rt = producer._rt
        with rt.lock:
            producer._flush_batches()
        await _when(rt, producer._drained)

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
            _resolve(loop, future, None, None)

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
            await _detached(self._ack_in(message, False, txn._txn))

    async def acknowledge_cumulative(self, message: Message | MessageId, txn: Transaction | None = None) -> None:
        if txn is None:
            self._consumer.acknowledge_cumulative(message)
        else:
            await _detached(self._ack_in(message, True, txn._txn))

    async def _ack_in(self, message: Message | MessageId, cumulative: bool, txn: _BlockingTransaction) -> None:
        """An acknowledgement in ``txn``: the subscription added to it, then the ACK and its answer."""
        consumer, rt = self._consumer, self._consumer._rt
        if cumulative:
            consumer._check_cumulative()
        mid, core = consumer._ack_target(message)
        await _add_subscription(txn, core.topic, consumer._config.subscription_name)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def answered(answer: Any, error: PulsarException | None) -> None:
            if error is not None:
                txn._core.failed_ops += 1
            _resolve(loop, future, None, error)

        with rt.lock:
            request_id = consumer._ack_id(mid, core, cumulative, txn)
            if request_id is None:
                future.set_result(None)
            else:
                link = rt.link_of(core)
                assert link is not None
                rt.on_response(link, request_id, answered)
        await future

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
        client = self._client
        rt = client._rt
        rt.check_open()
        if client._coordinators is None:  # the first one looks the coordinators up
            coordinator = await asyncio.to_thread(client._pick_coordinator)
        else:
            coordinator = client._pick_coordinator()
        opened_at = rt.now()
        answer = await _tc_request(
            client, coordinator, BaseCommand.NEW_TXN, txn_ttl_millis=timeout_ms, tc_id=coordinator
        )
        return Transaction(client._opened(answer, timeout_ms, opened_at))

    async def get_topic_partitions(self, topic: str) -> list[str]:
        return await asyncio.to_thread(self._client.get_topic_partitions, topic)

    async def close(self) -> None:
        await asyncio.to_thread(self._client.close)

    def shutdown(self) -> None:
        self._client.shutdown()
