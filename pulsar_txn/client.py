"""The blocking client: ``Client``, ``Producer``, ``Consumer``, ``Reader`` and ``Transaction``, with the arguments
(names, order, defaults) of ``pulsar-client`` 3.x, plus transactions shaped as the Java client's. Thread-safe: one
client (and its producers and consumers) may be used from many threads."""

from __future__ import annotations

import base64
import contextlib
import logging
import random
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from pulsar_txn import schema as _schema
from pulsar_txn._runtime import Link, Runtime, Waiter
from pulsar_txn.authentication import Authentication
from pulsar_txn.core.consumer import ConsumerConfig, ConsumerCore
from pulsar_txn.core.entries import EntryConsumerCore
from pulsar_txn.core.names import PARTITION_SUFFIX, full_topic_name, namespace_of, split_partition
from pulsar_txn.core.producer import OutMessage, ProducerConfig, ProducerCore
from pulsar_txn.core.transaction import TransactionCore, TxnId, TxnState
from pulsar_txn.entries import EntryReader
from pulsar_txn.enums import (
    BatchingType,
    CompressionType,
    ConsumerCryptoFailureAction,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    result_of,
)
from pulsar_txn.exceptions import (
    AlreadyClosed,
    CumulativeAcknowledgementNotAllowedError,
    InvalidConfiguration,
    InvalidTxnStatusError,
    ProducerQueueIsFull,
    PulsarException,
    Timeout,
    TopicNotFound,
    TransactionCoordinatorNotFoundError,
    TransactionHasOperationFailedError,
)
from pulsar_txn.message import Message, MessageId
from wire.message_id import MessageId as WireMessageId
from wire.pulsar_api_pb2 import BaseCommand, CommandGetTopicsOfNamespace, TxnAction

T = BaseCommand
log = logging.getLogger("pulsar_txn")
#: The system topic whose partitions stand for the transaction coordinators.
COORDINATOR_ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
#: A receiving thread reads its connection itself (:meth:`Runtime.pump`) once every this many messages (a power of two)
#: while the queue is below half full, the part the broker refills after the FLOW sent at half.
_PUMP_EVERY = 64
_PUMP_EVERY_MASK = _PUMP_EVERY - 1
#: Subscription types whose dispatcher redelivers single messages (no cursor rewind).
_SHARED = (ConsumerType.Shared, ConsumerType.KeyShared)
#: From this protocol version a client greets each coordinator with TC_CLIENT_CONNECT.
TC_CONNECT_PROTOCOL_VERSION = 19
#: The last hash of a Key_Shared sticky range (hashes are 0..65535).
HASH_RANGE_MAX = 65535


def java_string_hash(key: str) -> int:
    """Java's ``String.hashCode() & Integer.MAX_VALUE``: the Java client's default key routing."""
    h = 0
    data = key.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h & 0x7FFFFFFF


def _message_id(core_partition: int, raw: tuple[int, int, int, int, int] | None) -> MessageId | None:
    if raw is None:
        return None
    ledger, entry, partition, index, size = raw
    mid = MessageId(partition, ledger, entry, index)
    mid._batch_size = size if index >= 0 else 0
    return mid


def _send_callback(callback: Callable[[Any, MessageId | None], None]) -> Callable[[Any, PulsarException | None], None]:
    """The token of a ``send_async``: calls ``callback(result, message_id)`` with what the I/O thread reports."""

    def done(raw: Any, error: PulsarException | None) -> None:
        callback(result_of(error), _message_id(-1, raw))

    return done


class Transaction:
    """A transaction (``client.new_transaction()``): send with ``producer.send(..., txn=txn)``, acknowledge with
    ``consumer.acknowledge(msg, txn=txn)``, then :meth:`commit` or :meth:`abort`. As a context manager it commits at
    the end of the block and aborts on an exception. After its timeout every operation on it raises
    :class:`InvalidTxnStatusError`."""

    def __init__(self, client: Client, core: TransactionCore) -> None:
        self._client = client
        self._core = core

    @property
    def id(self) -> TxnId:
        """``TxnId(most, least)``."""
        return self._core.txn_id

    @property
    def state(self) -> TxnState:
        with self._client._rt.lock:
            return self._core.state(time.monotonic())

    def __repr__(self) -> str:
        return f"Transaction({self.id}, {self.state.value})"

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if kind is None:
            self.commit()
        elif self.state in (TxnState.OPEN, TxnState.TIME_OUT, TxnState.ERROR):
            self.abort()

    def commit(self) -> None:
        """Wait for every send made in the transaction, then commit it."""
        self._client._end(self, commit=True)

    def abort(self) -> None:
        """Abort: nothing sent in it becomes visible; what it acknowledged is delivered again."""
        self._client._end(self, commit=False)


class RoutedMessage:
    """The message a ``message_router`` is asked to place, with the accessors of a received one (``data()``,
    ``properties()``, ``partition_key()``, ``ordering_key()``, ``event_timestamp()``)."""

    __slots__ = ("_message",)

    def __init__(self, message: OutMessage) -> None:
        self._message = message

    def data(self) -> bytes:
        return self._message.payload

    def properties(self) -> dict[str, str]:
        return dict(self._message.properties or {})

    def partition_key(self) -> str:
        return self._message.partition_key or ""

    def ordering_key(self) -> str:
        key = self._message.ordering_key
        return key.decode("utf-8", "replace") if key else ""

    def event_timestamp(self) -> int:
        return self._message.event_time or 0


class Producer:
    """A producer on a topic; a partitioned topic's messages go to partitions by key (Java's ``String.hashCode``)
    or, without a key, as ``message_routing_mode`` says."""

    def __init__(
        self,
        client: Client,
        topic: str,
        cores: list[ProducerCore],
        schema: Any,
        routing_mode: PartitionsRoutingMode,
        message_router: Callable[[Any, int], int] | None,
        max_pending: int,
        block_if_queue_full: bool,
    ) -> None:
        self._client = client
        self._rt = client._rt
        self._topic = topic
        self._cores = cores
        self._schema = schema
        self._routing_mode = routing_mode
        self._router = message_router
        self._max_pending = max_pending
        self._block = block_if_queue_full
        self._next = random.randrange(len(cores))
        self._single = self._next
        #: Whether messages without a key are routed without the ``message_router`` (one partition, or none given).
        self._keyless_routing = message_router is None or len(cores) == 1
        #: The core of a topic of one partition (or none).
        self._only = cores[0] if len(cores) == 1 else None
        self._closed = False

    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._cores[0].name

    def last_sequence_id(self) -> int:
        return max(core.last_sequence_id for core in self._cores)

    def is_connected(self) -> bool:
        return not self._closed and all(core.connected for core in self._cores)

    def _route(self, message: OutMessage) -> ProducerCore:
        count = len(self._cores)
        if count == 1:
            return self._cores[0]
        if self._router is not None:  # as the official client: a router given routes every message
            return self._cores[self._router(RoutedMessage(message), count) % count]
        if message.partition_key:
            return self._cores[java_string_hash(message.partition_key) % count]
        return self._route_keyless()

    def _route_keyless(self) -> ProducerCore:
        """The partition of a message without a key when no ``message_router`` is given."""
        count = len(self._cores)
        if count == 1:
            return self._cores[0]
        if self._routing_mode == PartitionsRoutingMode.UseSinglePartition:
            return self._cores[self._single]
        self._next = (self._next + 1) % count
        return self._cores[self._next]

    def _queue(
        self,
        content: Any,
        token: Any,
        properties: dict[str, str] | None,
        partition_key: str | None,
        ordering_key: str | None,
        sequence_id: int | None,
        replication_clusters: list[str] | None,
        disable_replication: bool,
        event_timestamp: int | None,
        deliver_at: int | None,
        deliver_after: Any,
        txn: Transaction | None,
    ) -> None:
        payload = self._schema.encode(content)
        if (
            not properties
            and partition_key is None
            and ordering_key is None
            and sequence_id is None
            and not replication_clusters
            and not disable_replication
            and not event_timestamp
            and deliver_at is None
            and deliver_after is None
            and txn is None
            and self._keyless_routing
        ):
            self._queue_payload(payload, token)
            return
        message = self._message(
            payload,
            token,
            properties,
            partition_key,
            ordering_key,
            sequence_id,
            replication_clusters,
            disable_replication,
            event_timestamp,
            deliver_at,
            deliver_after,
            txn,
        )
        core = self._route(message)
        if txn is not None:
            self._client._add_partition(txn, core.topic)
        self._put(message, core, token, txn)

    def _message(
        self,
        payload: bytes,
        token: Any,
        properties: dict[str, str] | None,
        partition_key: str | None,
        ordering_key: str | None,
        sequence_id: int | None,
        replication_clusters: list[str] | None,
        disable_replication: bool,
        event_timestamp: int | None,
        deliver_at: int | None,
        deliver_after: Any,
        txn: Transaction | None,
    ) -> OutMessage:
        """The message to queue for ``payload`` and the options of a send."""
        key_b64 = partition_key is not None and type(partition_key) is not str
        if key_b64:  # a binary key travels base64-encoded, as the Java client's keyBytes
            partition_key = base64.b64encode(partition_key).decode()
        if deliver_after is not None:
            seconds = deliver_after.total_seconds() if hasattr(deliver_after, "total_seconds") else deliver_after
            deliver_at = int(time.time() * 1000 + seconds * 1000)
        return OutMessage(
            payload,
            token,
            dict(properties) if properties else None,
            partition_key,
            key_b64,
            ordering_key.encode() if isinstance(ordering_key, str) else ordering_key,
            event_timestamp,
            sequence_id,
            deliver_at,
            replication_clusters,
            disable_replication,
            txn._core if txn is not None else None,
        )

    def _put(self, message: OutMessage, core: ProducerCore, token: Any, txn: Transaction | None) -> None:
        """Queue ``message`` on ``core`` (routed, its partition added to ``txn`` if given)."""
        rt = self._rt
        with rt.lock:
            self._check_open()
            now = rt.now()
            if txn is not None:
                txn._core.check_open(now)
                txn._core.used_by_producer(self)
            if core.pending_count >= self._max_pending > 0 and not self._make_room(core, token):
                return
            if core.send(message, now):  # a new batch timer, or an entry to write
                rt.kick(core)

    def _queue_payload(self, payload: bytes, token: Any) -> None:
        """:meth:`_queue` of a message that is a payload alone (no properties, keys, event time, sequence id,
        replication settings, delivery time or transaction), routed without a ``message_router``: the producer core
        takes it into its batch without an OutMessage (the cost of a batched send is mostly Python per message)."""
        rt = self._rt
        core = self._only or self._route_keyless()
        lock = rt.lock
        lock.acquire()  # not ``with``: its __exit__ costs as much again, on every message
        try:
            if self._closed or rt.closed:
                self._check_open()
            if core.pending_count >= self._max_pending > 0 and not self._make_room(core, token):
                return
            if core.send_payload(payload, token, rt.now()):  # a new batch timer, or an entry to write
                rt.kick(core)
        finally:
            lock.release()

    def _full(self) -> bool:
        """Whether a partition's queue is full (a send may have to wait for room)."""
        return self._max_pending > 0 and any(core.pending_count >= self._max_pending for core in self._cores)

    def _check_open(self) -> None:
        """Raise AlreadyClosed if this producer or its client is closed (the lock held)."""
        if self._closed:
            raise AlreadyClosed(f"producer on {self._topic} is closed")
        self._rt.check_open()

    def _make_room(self, core: ProducerCore, token: Any) -> bool:
        """``core``'s queue is full (the lock held): wait for room if ``block_if_queue_full`` (True), else fail the
        send: raised for a waiting ``send``, through the callback for ``send_async`` (False), as the official
        client."""
        if not self._block:
            error = ProducerQueueIsFull(f"{self._max_pending} messages pending on {core.topic}")
            if isinstance(token, Waiter):
                raise error
            self._rt.call_back(lambda: token(None, error))
            return False
        self._rt.wait_for(lambda: core.pending_count < self._max_pending, None)
        return True

    def send(
        self,
        content: Any,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: Any = None,
        txn: Transaction | None = None,
    ) -> MessageId:
        """Publish a message (in ``txn`` if given) and wait until the broker stored it; returns its id."""
        waiter = Waiter()
        self._queue(
            content,
            waiter,
            properties,
            partition_key,
            ordering_key,
            sequence_id,
            replication_clusters,
            disable_replication,
            event_timestamp,
            deliver_at,
            deliver_after,
            txn,
        )
        rt = self._rt
        with rt.lock:
            for core in self._cores:  # a synchronous send does not wait for the batch delay
                core.flush(rt.now())
            rt.kick(*self._cores)
            rt.wait_for(lambda: waiter.done, None)
        if waiter.error is not None:
            raise waiter.error
        mid = _message_id(-1, waiter.message_id)
        assert mid is not None
        return mid

    def send_async(
        self,
        content: Any,
        callback: Callable[[Any, MessageId | None], None] | None,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: Any = None,
        txn: Transaction | None = None,
    ) -> None:
        """Queue a message; ``callback(result, message_id)`` runs once the broker stored it (``result`` is
        ``Result.Ok``) or it failed (the error's ``Result``, ``message_id`` None)."""

        token = None if callback is None else _send_callback(callback)
        if (
            not properties
            and partition_key is None
            and ordering_key is None
            and sequence_id is None
            and not replication_clusters
            and not disable_replication
            and not event_timestamp
            and deliver_at is None
            and deliver_after is None
            and txn is None
            and self._keyless_routing
        ):  # what _queue checks, here for the common send without options: one call less
            self._queue_payload(self._schema.encode(content), token)
            return
        self._queue(
            content,
            token,
            properties,
            partition_key,
            ordering_key,
            sequence_id,
            replication_clusters,
            disable_replication,
            event_timestamp,
            deliver_at,
            deliver_after,
            txn,
        )

    def flush(self) -> None:
        """Send every batched message and wait until all messages sent so far are stored (or failed)."""
        rt = self._rt
        with rt.lock:
            self._flush_batches()
            rt.wait_for(self._drained, None)
        rt.callbacks_done()

    def _flush_batches(self) -> None:
        """Send what the cores batched (the lock held)."""
        rt = self._rt
        now = rt.now()
        for core in self._cores:
            core.flush(now)
        rt.kick(*self._cores)

    def _drained(self) -> bool:
        """Whether no message sent so far waits for its receipt (the lock held)."""
        return all(core.pending_count == 0 for core in self._cores)

    def _discard(self, txn: TransactionCore) -> None:
        for core in self._cores:
            for token in core.discard(txn):
                if isinstance(token, Waiter):
                    token.done, token.error = True, InvalidTxnStatusError("transaction aborted")
                elif token is not None:
                    token(None, InvalidTxnStatusError("transaction aborted"))

    def close(self) -> None:
        """Flush, then close the producer."""
        if self._closed:
            return
        try:
            if not self._rt.closed:
                self.flush()
        finally:
            self._closed = True
            self._client._forget(self)
            for core in self._cores:
                with self._rt.lock:
                    link = self._rt.link_of(core)
                    fields = core.close_command()
                if link is not None and not self._rt.closed:
                    with contextlib.suppress(PulsarException):
                        self._rt.request(link, T.CLOSE_PRODUCER, timeout=5.0, **fields)
                    with self._rt.lock:
                        link.core.producers.pop(core.producer_id, None)


class Consumer:
    """A consumer of one or more topics (a partitioned topic, a list, or a regex) on one subscription."""

    def __init__(self, client: Client, topic: str, cores: list[ConsumerCore], schema: Any, config: ConsumerConfig):
        self._client = client
        self._rt = client._rt
        self._topic = topic
        self._cores = cores
        self._schema = schema
        self._config = config
        self._closed = False
        self._next = 0
        self._listener_thread: threading.Thread | None = None
        self._own(cores)

    def _own(self, cores: list[ConsumerCore]) -> None:
        """The cores queue :class:`Message` objects whose ``value()`` decodes with this consumer's schema."""
        for core in cores:
            core.owner = self
            if type(core) is ConsumerCore:
                core.message_type = Message

    def topic(self) -> str:
        return self._topic

    def subscription_name(self) -> str:
        return self._config.subscription_name

    def consumer_name(self) -> str:
        return self._cores[0].consumer_name if self._cores else ""

    def is_connected(self) -> bool:
        return not self._closed and all(core.connected for core in self._cores)

    def _take(self) -> Message | None:
        """The next queued message (round robin over the cores), its permits given back; None when none is queued."""
        cores = self._cores
        count = len(cores)
        for offset in range(count):
            core = cores[(self._next + offset) % count]
            message = core.take()
            if message is not None:
                self._next = (self._next + offset + 1) % count
                if core.conn is not None and core.conn.has_output:  # permits to give back
                    self._rt.kick(core)
                return message  # type: ignore[return-value]
        return None

    def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; waits for one (raises :class:`Timeout` after ``timeout_millis``)."""
        rt = self._rt
        with rt.lock:
            if self._closed or rt.closed:
                self._check()
            if len(self._cores) == 1:  # the common case, without _take's round robin
                core = self._cores[0]
                message = core.take()
                if message is not None:
                    conn = core.conn
                    if conn is not None and conn._out:  # permits to give back
                        rt.kick(core)
                    left = len(core.incoming)
                    if left & _PUMP_EVERY_MASK == 0 and left < core.flow_at:  # the queue runs low: refill it
                        rt.pump(core)
                    return message  # type: ignore[return-value]  # the core's message_type is Message
            else:
                message = self._take()
                if message is not None:
                    return message
            found: list[Message] = []

            def ready() -> bool:
                self._check()
                message = self._take()
                if message is not None:
                    found.append(message)
                return bool(found)

            if not rt.wait_for(ready, None if timeout_millis is None else timeout_millis / 1000):
                raise Timeout(f"no message on {self._topic} within {timeout_millis} ms")
            return found[0]

    def batch_receive(self) -> list[Message]:
        """The messages queued now, up to the batch receive policy's count (waits up to its timeout, default 100 ms,
        for a first one)."""
        policy = self._config.batch_receive_policy or (-1, 10 * 1024 * 1024, 100)
        max_count, _, timeout_ms = policy
        rt = self._rt
        messages: list[Message] = []
        with rt.lock:
            self._check()
            rt.wait_for(lambda: any(core.incoming for core in self._cores), timeout_ms / 1000)
            while max_count <= 0 or len(messages) < max_count:
                message = self._take()
                if message is None:
                    break
                messages.append(message)
        return messages

    def _check(self) -> None:
        if self._closed:
            raise AlreadyClosed(f"consumer on {self._topic} is closed")
        self._rt.check_open()

    def _core_of(self, mid: MessageId) -> ConsumerCore:
        if mid._consumer is not None and any(mid._consumer is core for core in self._cores):
            return mid._consumer
        topic = mid._topic
        for core in self._cores:
            if (topic is not None and core.topic == topic) or (topic is None and core.partition == mid.partition()):
                return core
        return self._cores[0]

    def _check_cumulative(self) -> None:
        if self._config.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise CumulativeAcknowledgementNotAllowedError("cumulative ack on a Shared or Key_Shared subscription")

    def _ack_target(self, message: Message | MessageId) -> tuple[MessageId, ConsumerCore]:
        """The id to acknowledge for ``message`` and the core it came through."""
        mid = message.message_id() if isinstance(message, Message) else message
        return mid, self._core_of(mid)

    def _ack(self, message: Message | MessageId, cumulative: bool, txn: Transaction | None) -> None:
        if cumulative:
            self._check_cumulative()
        rt = self._rt
        if cumulative and txn is None and type(message) is Message and message.info.consumer.owner is self:
            info = message.info  # a message this consumer handed out, without building a MessageId
            core = info.consumer
            with rt.lock:
                if self._closed or rt.closed:
                    self._check()
                core.ack((info.ledger, info.entry, message.batch_index), info.batch_size, info.batch, True, rt.now())
                rt.kick(core)
            return
        mid, core = self._ack_target(message)
        if txn is not None:
            self._client._add_subscription(txn, core.topic, self._config.subscription_name)
        with rt.lock:
            request_id = self._ack_id(mid, core, cumulative, txn)
            if request_id is not None:
                link = rt.link_of(core)
                assert link is not None
                try:
                    rt.wait_request(link, request_id)
                except PulsarException:
                    if txn is not None:
                        txn._core.failed_ops += 1
                    raise

    def _ack_id(self, mid: MessageId, core: ConsumerCore, cumulative: bool, txn: Transaction | None) -> int | None:
        """Acknowledge ``mid`` on ``core`` (the lock held; the subscription added to ``txn`` if given): the request
        id of the ACK to wait for (in a transaction), else None."""
        rt = self._rt
        self._check()
        now = rt.now()
        if txn is not None:
            txn._core.check_open(now)
            txn._core.used_by_consumer(self)
        wire = mid.wire
        request_id = core.ack(
            (wire.ledger, wire.entry, wire.batch_index),
            mid._batch_size,
            mid._batch,
            cumulative,
            now,
            txn._core if txn is not None else None,
            mid._generation if mid._consumer is core else None,
        )
        rt.kick(core)
        return request_id

    def acknowledge(self, message: Message | MessageId, txn: Transaction | None = None) -> None:
        """Acknowledge one message (or message id); in ``txn``, it counts only once the transaction commits."""
        if txn is None and type(message) is Message:
            core = message.info.consumer
            if core.owner is self:  # the common case (a message this consumer handed out), without a MessageId
                rt = self._rt
                with rt.lock:
                    if self._closed or rt.closed:
                        self._check()
                    if core.ack_message(message, rt.now()):
                        rt.kick(core)
                return
        self._ack(message, False, txn)

    def acknowledge_cumulative(self, message: Message | MessageId, txn: Transaction | None = None) -> None:
        """Acknowledge this message and every one before it (Exclusive and Failover subscriptions)."""
        self._ack(message, True, txn)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Have the message delivered again after ``negative_ack_redelivery_delay_ms``."""
        mid = message.message_id() if isinstance(message, Message) else message
        core = self._core_of(mid)
        with self._rt.lock:
            self._check()
            core.negative_ack(mid.ledger_id(), mid.entry_id(), self._rt.now())
            self._rt.kick(core)

    def redeliver_unacknowledged_messages(self) -> None:
        """Drop what is queued and have the broker deliver every unacknowledged message again."""
        with self._rt.lock:
            self._check()
            for core in self._cores:
                core.redeliver_all()
            self._rt.kick(*self._cores)

    def seek(self, messageid: MessageId | int) -> None:
        """Move the subscription to a message id, or to a publish time (ms since the epoch)."""
        rt = self._rt
        for core in self._cores:
            with rt.lock:
                self._check()
                core.flush_acks()
                link = rt.link_of(core)
            if link is None:
                from pulsar_txn.exceptions import NotConnected

                raise NotConnected(f"consumer on {core.topic} is not connected")
            fields: dict[str, Any] = {"consumer_id": core.consumer_id}
            start: WireMessageId | None = None
            if isinstance(messageid, MessageId):
                start = messageid.wire
                fields["message_id"] = start._replace(partition=-1, batch_size=0, ack_set=()).to_proto()
            else:
                fields["message_publish_time"] = int(messageid)
            # The queue is dropped as the answer is read, before the messages the broker sends after the seek (it
            # closes the consumer, which subscribes again): dropped later, they would be lost with their permits.
            rt.request(link, T.SEEK, on_success=lambda core=core, start=start: core.seeked(start), **fields)

    def get_last_message_id(self) -> MessageId:
        """The id of the last message stored in the (first) topic."""
        core = self._cores[0]
        with self._rt.lock:
            link = self._rt.link_of(core)
        if link is None:
            from pulsar_txn.exceptions import NotConnected

            raise NotConnected(f"consumer on {core.topic} is not connected")
        response = self._rt.request(link, T.GET_LAST_MESSAGE_ID, consumer_id=core.consumer_id)
        wire = WireMessageId.from_proto(response.last_message_id)
        return MessageId(core.partition, wire.ledger, wire.entry, wire.batch_index)

    def unsubscribe(self) -> None:
        """Delete the subscription (this must be its only consumer); the consumer is closed."""
        for core in self._cores:
            with self._rt.lock:
                self._check()
                link = self._rt.link_of(core)
            if link is not None:
                self._rt.request(link, T.UNSUBSCRIBE, consumer_id=core.consumer_id)
        self._shut(send_close=False)

    def close(self) -> None:
        """Close the consumer (its unacknowledged messages go back to the subscription)."""
        if not self._closed:
            self._shut(send_close=True)

    def _shut(self, send_close: bool) -> None:
        self._closed = True
        self._client._forget(self)
        rt = self._rt
        for core in self._cores:
            with rt.lock:
                core.flush_acks()
                rt.kick(core)
                core.closed = True
                link = rt.link_of(core)
            if link is not None and send_close and not rt.closed:
                with contextlib.suppress(PulsarException):
                    rt.request(link, T.CLOSE_CONSUMER, timeout=5.0, consumer_id=core.consumer_id)
            if link is not None:
                with rt.lock:
                    link.core.consumers.pop(core.consumer_id, None)

    def _start_discovery(self, pattern: str, mode: RegexSubscriptionMode, period: float) -> None:
        """Every ``period`` seconds, subscribe to the topics that match ``pattern`` and were not there before (the
        official clients' ``pattern_auto_discovery_period``)."""

        def run() -> None:
            while not self._closed and not self._rt.closed:
                time.sleep(period)
                try:
                    self._discover(pattern, mode)
                except PulsarException as exc:
                    log.info("topic discovery for %s failed: %s", pattern, exc)

        threading.Thread(target=run, name=f"pulsar-txn-discovery-{pattern}", daemon=True).start()

    def _discover(self, pattern: str, mode: RegexSubscriptionMode) -> None:
        known = {split_partition(core.topic)[0] for core in self._cores}
        new = [t for t in self._client._topics_matching(pattern, mode) if t not in known]
        if not new or self._closed:
            return
        cores = self._client._cores_of(new, self._config)
        self._own(cores)
        for core in cores:
            self._rt.retrying(lambda core=core: self._rt.register_consumer(core))
        with self._rt.lock:
            if self._closed:
                return
            self._cores = [*self._cores, *cores]
            hook = self._rt.ready_hooks.get(id(self._cores[0]))
            if hook is not None:
                for core in cores:
                    self._rt.ready_hooks[id(core)] = hook

    def _start_listener(self, listener: Callable[[Any, Message], None], owner: Any) -> None:
        def run() -> None:
            while not self._closed and not self._rt.closed:
                try:
                    message = self.receive(200)
                except Timeout:
                    continue
                except AlreadyClosed:
                    return
                listener(owner, message)

        self._listener_thread = threading.Thread(target=run, name=f"pulsar-txn-listener-{self._topic}", daemon=True)
        self._listener_thread.start()


class Reader:
    """A reader: a consumer on a non-durable subscription, from ``start_message_id``."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer

    def topic(self) -> str:
        return self._consumer.topic()

    def read_next(self, timeout_millis: int | None = None) -> Message:
        """The next message (raises :class:`Timeout` after ``timeout_millis``)."""
        return self._consumer.receive(timeout_millis)

    def has_message_available(self) -> bool:
        """Whether a message after the last one read is stored."""
        consumer = self._consumer
        with consumer._rt.lock:
            if any(core.incoming for core in consumer._cores):
                return True
        for core in consumer._cores:
            with consumer._rt.lock:
                link = consumer._rt.link_of(core)
                last_read = core.last_dequeued
            if link is None:
                continue
            response = consumer._rt.request(link, T.GET_LAST_MESSAGE_ID, consumer_id=core.consumer_id)
            wire = WireMessageId.from_proto(response.last_message_id)
            if wire.entry < 0:
                continue
            last = (wire.ledger, wire.entry, wire.batch_index)
            if last_read is None:
                start = core.config.start_message_id
                if start is None or start.is_earliest:
                    return True
                if start.is_latest:
                    if core.latest_at_start is not None and last > core.latest_at_start:
                        return True
                    continue
                begin = (start.ledger, start.entry, start.batch_index)
                if last > begin or (last == begin and core.config.start_message_id_inclusive):
                    return True
            elif last[:2] > last_read[:2] or (last[:2] == last_read[:2] and last[2] > last_read[2]):
                return True
        return False

    def seek(self, messageid: MessageId | int) -> None:
        self._consumer.seek(messageid)

    def close(self) -> None:
        self._consumer.close()

    def is_connected(self) -> bool:
        return self._consumer.is_connected()


class Client:
    """A Pulsar client: connections shared by its producers, consumers, readers and transactions.

    Arguments as ``pulsar.Client``; those that tune the official client's C++ internals (``io_threads``,
    ``message_listener_threads``, ``concurrent_lookup_requests``, ``log_conf_file_path``, ``stats_interval_in_seconds``,
    ``use_tls``) are accepted and have no effect. ``logger``: a ``logging.Logger`` for this client's messages.
    """

    def __init__(
        self,
        service_url: str,
        authentication: Authentication | None = None,
        operation_timeout_seconds: int = 30,
        io_threads: int = 1,
        message_listener_threads: int = 1,
        concurrent_lookup_requests: int = 50000,
        log_conf_file_path: str | None = None,
        stats_interval_in_seconds: int = 600,
        use_tls: bool = False,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = False,
        logger: Any = None,
        connection_timeout_ms: int = 10000,
        listener_name: str | None = None,
        tls_private_key_file_path: str | None = None,
        tls_certificate_file_path: str | None = None,
    ) -> None:
        if not isinstance(service_url, str):
            raise ValueError("Argument service_url is expected to be of type 'str'")
        if authentication is not None and not isinstance(authentication, Authentication):
            raise ValueError("Argument authentication is expected to be of type 'Authentication'")
        certificate = None
        if tls_certificate_file_path and tls_private_key_file_path:
            certificate = (tls_certificate_file_path, tls_private_key_file_path)
        self._rt = Runtime(
            service_url,
            authentication,
            float(operation_timeout_seconds),
            connection_timeout_ms / 1000,
            tls_trust_certs_file_path,
            tls_allow_insecure_connection,
            tls_validate_hostname,
            certificate,
            listener_name,
        )
        self._handles: list[Any] = []
        self._coordinators: int | None = None
        self._next_tc = -1
        self._txn_lock = threading.Lock()
        #: The connection to each transaction coordinator (by id) last looked up.
        self._tc_links: dict[int, Link] = {}

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- topics ------------------------------------------------------------------------------

    def get_topic_partitions(self, topic: str) -> list[str]:
        """The partitions of ``topic``, or ``[topic]`` if it is not partitioned."""
        topic = full_topic_name(topic)
        if split_partition(topic)[1] >= 0:
            return [topic]
        count = self._rt.partitions(topic)
        return [f"{topic}{PARTITION_SUFFIX}{i}" for i in range(count)] if count else [topic]

    def get_topics_matching(
        self, pattern: str, regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly
    ) -> list[str]:
        """The topics a regex subscription on ``pattern`` reads now (a partitioned topic by its name; system topics
        left out), sorted. Not in ``pulsar-client``."""
        return self._topics_matching(pattern, regex_subscription_mode)

    def _topics_matching(self, pattern: str, mode: RegexSubscriptionMode) -> list[str]:
        pattern = full_topic_name(pattern)
        modes = {
            RegexSubscriptionMode.PersistentOnly: CommandGetTopicsOfNamespace.PERSISTENT,
            RegexSubscriptionMode.NonPersistentOnly: CommandGetTopicsOfNamespace.NON_PERSISTENT,
            RegexSubscriptionMode.AllTopics: CommandGetTopicsOfNamespace.ALL,
        }
        rt = self._rt
        response = rt.retrying(
            lambda: rt.request(
                rt.connection(), T.GET_TOPICS_OF_NAMESPACE, namespace=namespace_of(pattern), mode=modes[mode]
            )
        )
        regex = re.compile(pattern.partition("://")[2])
        found = set()
        for name in response.topics:
            parent = split_partition(name)[0]
            if parent.rsplit("/", 1)[-1].startswith("__"):
                continue
            if regex.fullmatch(parent.partition("://")[2]):
                found.add(parent)
        return sorted(found)

    # -- producers ---------------------------------------------------------------------------

    def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        schema: Any = None,
        initial_sequence_id: int | None = None,
        send_timeout_millis: int = 30000,
        compression_type: CompressionType = CompressionType.NONE,
        max_pending_messages: int = 1000,
        max_pending_messages_across_partitions: int = 50000,
        block_if_queue_full: bool = False,
        batching_enabled: bool = False,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = 10,
        chunking_enabled: bool = False,
        message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
        lazy_start_partitioned_producers: bool = False,
        properties: dict[str, str] | None = None,
        batching_type: BatchingType = BatchingType.Default,
        encryption_key: Any = None,
        crypto_key_reader: Any = None,
        access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
        message_router: Callable[[Any, int], int] | None = None,
    ) -> Producer:
        """A producer on ``topic`` (partitioned or not), registered on every partition before it returns."""
        if encryption_key is not None or crypto_key_reader is not None:
            raise InvalidConfiguration("end-to-end encryption is not supported by pulsar_txn")
        schema = schema or _schema.BytesSchema()
        self._rt.check_open()
        topic = full_topic_name(topic)
        partitions = self.get_topic_partitions(topic)
        partitioned = partitions != [topic]
        cores = []
        for index, name in enumerate(partitions):
            config = ProducerConfig(
                producer_name=producer_name,
                initial_sequence_id=initial_sequence_id,
                send_timeout_millis=send_timeout_millis,
                compression_type=int(compression_type),
                batching_enabled=batching_enabled,
                batching_max_messages=batching_max_messages,
                batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
                batching_max_publish_delay_ms=batching_max_publish_delay_ms,
                properties=dict(properties or {}),
                access_mode=int(access_mode),
                schema=schema.schema_info(),
            )
            cores.append(ProducerCore(name, index if partitioned else -1, config, self._rt.now()))
        for core in cores:
            self._rt.retrying(lambda core=core: self._rt.register_producer(core))
        producer = Producer(
            self,
            topic,
            cores,
            schema,
            message_routing_mode,
            message_router,
            max_pending_messages,
            block_if_queue_full,
        )
        with self._rt.lock:
            self._handles.append(producer)
        return producer

    # -- consumers ---------------------------------------------------------------------------

    def subscribe(
        self,
        topic: str | list[str] | re.Pattern[str],
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        schema: Any = None,
        message_listener: Callable[[Consumer, Message], None] | None = None,
        receiver_queue_size: int = 1000,
        max_total_receiver_queue_size_across_partitions: int = 50000,
        consumer_name: str | None = None,
        unacked_messages_timeout_ms: int | None = None,
        broker_consumer_stats_cache_time_ms: int = 30000,
        negative_ack_redelivery_delay_ms: int = 60000,
        is_read_compacted: bool = False,
        properties: dict[str, str] | None = None,
        pattern_auto_discovery_period: int = 60,
        initial_position: InitialPosition = InitialPosition.Latest,
        crypto_key_reader: Any = None,
        replicate_subscription_state_enabled: bool = False,
        max_pending_chunked_message: int = 10,
        auto_ack_oldest_chunked_message_on_queue_full: bool = False,
        start_message_id_inclusive: bool = False,
        batch_receive_policy: Any = None,
        key_shared_policy: Any = None,
        batch_index_ack_enabled: bool = False,
        regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly,
        dead_letter_policy: Any = None,
        crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL,
    ) -> Consumer:
        """A consumer on ``subscription_name`` of a topic, a list of topics, or the topics a regex matches (a
        compiled pattern; partitioned topics are read on every partition)."""
        if crypto_key_reader is not None:
            raise InvalidConfiguration("end-to-end encryption is not supported by pulsar_txn")
        schema = schema or _schema.BytesSchema()
        self._rt.check_open()
        if isinstance(topic, re.Pattern):
            topics = self._topics_matching(topic.pattern, regex_subscription_mode)
            shown = topic.pattern
        elif isinstance(topic, list | tuple):
            topics = [full_topic_name(t) for t in topic]
            shown = ",".join(topics)
        else:
            topics = [full_topic_name(topic)]
            shown = topics[0]
        config = ConsumerConfig(
            subscription_name=subscription_name,
            consumer_type=int(consumer_type),
            receiver_queue_size=receiver_queue_size,
            consumer_name=consumer_name or uuid.uuid4().hex[:10],
            negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
            is_read_compacted=is_read_compacted,
            properties=dict(properties or {}),
            initial_position=int(initial_position),
            start_message_id_inclusive=start_message_id_inclusive,
            replicate_subscription_state_enabled=replicate_subscription_state_enabled,
            schema=schema.schema_info(),
            batch_index_ack_enabled=batch_index_ack_enabled,
        )
        if batch_receive_policy is not None:
            config.batch_receive_policy = batch_receive_policy.policy()
        if key_shared_policy is not None and consumer_type == ConsumerType.KeyShared:
            config.key_shared_meta = key_shared_policy.meta()
        consumer = self._consumer(shown, topics, schema, config)
        if isinstance(topic, re.Pattern) and pattern_auto_discovery_period > 0:
            consumer._start_discovery(topic.pattern, regex_subscription_mode, pattern_auto_discovery_period)
        if message_listener is not None:
            consumer._start_listener(message_listener, consumer)
        return consumer

    def _cores_of(self, topics: list[str], config: ConsumerConfig) -> list[ConsumerCore]:
        cores = []
        for topic in topics:
            partitions = self.get_topic_partitions(topic)
            partitioned = partitions != [topic]
            for index, name in enumerate(partitions):
                own = ConsumerConfig(**{f: getattr(config, f) for f in config.__dataclass_fields__})
                cores.append(ConsumerCore(name, index if partitioned else split_partition(name)[1], own))
        return cores

    def _consumer(self, shown: str, topics: list[str], schema: Any, config: ConsumerConfig) -> Consumer:
        cores = self._cores_of(topics, config)
        consumer = Consumer(self, shown, cores, schema, config)
        try:
            for core in cores:
                self._rt.retrying(lambda core=core: self._rt.register_consumer(core))
        except BaseException:
            consumer.close()
            raise
        with self._rt.lock:
            self._handles.append(consumer)
        return consumer

    def create_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        schema: Any = None,
        reader_listener: Callable[[Reader, Message], None] | None = None,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        subscription_role_prefix: str | None = None,
        is_read_compacted: bool = False,
        crypto_key_reader: Any = None,
        start_message_id_inclusive: bool = False,
        crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL,
    ) -> Reader:
        """A reader of ``topic`` from ``start_message_id`` (``MessageId.earliest``, ``MessageId.latest`` or an id)."""
        if not isinstance(start_message_id, MessageId):
            raise ValueError("start_message_id must be a MessageId")
        schema = schema or _schema.BytesSchema()
        self._rt.check_open()
        topic = full_topic_name(topic)
        prefix = subscription_role_prefix or "reader"
        config = ConsumerConfig(
            subscription_name=f"{prefix}-{uuid.uuid4().hex[:10]}",
            receiver_queue_size=receiver_queue_size,
            consumer_name=reader_name or uuid.uuid4().hex[:10],
            is_read_compacted=is_read_compacted,
            durable=False,
            initial_position=InitialPosition.Earliest
            if start_message_id == MessageId.earliest
            else InitialPosition.Latest,
            start_message_id=start_message_id.wire,
            start_message_id_inclusive=start_message_id_inclusive,
            schema=schema.schema_info(),
        )
        reader = Reader(self._consumer(topic, [topic], schema, config))
        if start_message_id == MessageId.latest:
            # What "latest" was when the reader started: has_message_available compares the broker's last id with it.
            for core in reader._consumer._cores:
                with self._rt.lock:
                    link = self._rt.link_of(core)
                if link is not None:
                    response = self._rt.request(link, T.GET_LAST_MESSAGE_ID, consumer_id=core.consumer_id)
                    last = WireMessageId.from_proto(response.last_message_id)
                    core.latest_at_start = (last.ledger, last.entry, last.batch_index)
        if reader_listener is not None:
            reader._consumer._start_listener(reader_listener, reader)
        return reader

    def create_entry_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        receiver_queue_size: int = 1000,
        force_topic_creation: bool = True,
    ) -> EntryReader:
        """An :class:`~pulsar_txn.entries.EntryReader` of one topic partition (or non-partitioned topic), from the
        entry holding ``start_message_id`` (or ``MessageId.earliest`` / ``MessageId.latest``). Not in
        ``pulsar-client``: for code that decodes stored entries itself. ``receiver_queue_size`` counts messages; 0
        receives nothing (the reader then only answers :meth:`~pulsar_txn.entries.EntryReader.get_last_message_id`).
        ``force_topic_creation=False``: a missing topic raises :class:`TopicNotFound` instead of being created."""
        if not isinstance(start_message_id, MessageId):
            raise ValueError("start_message_id must be a MessageId")
        self._rt.check_open()
        topic = full_topic_name(topic)
        config = ConsumerConfig(
            subscription_name=f"entry-reader-{uuid.uuid4().hex[:10]}",
            receiver_queue_size=receiver_queue_size,
            consumer_name=uuid.uuid4().hex[:10],
            durable=False,
            initial_position=InitialPosition.Earliest
            if start_message_id == MessageId.earliest
            else InitialPosition.Latest,
            start_message_id=start_message_id.wire,
            force_topic_creation=force_topic_creation,
        )
        core = EntryConsumerCore(topic, split_partition(topic)[1], config)
        consumer = Consumer(self, topic, [core], None, config)
        try:
            self._rt.retrying(lambda: self._rt.register_consumer(core))
        except BaseException:
            consumer.close()
            raise
        with self._rt.lock:
            self._handles.append(consumer)
        return EntryReader(consumer, core)

    def get_schema(self, topic: str, version: int | None = None) -> tuple[Any, int] | None:
        """The topic's schema as the broker stores it: ``(Schema, version)`` with the protocol's ``Schema`` message,
        the latest or ``version``; None when the topic has none. Not in ``pulsar-client`` (the Java client's
        ``getSchema`` lookup)."""
        fields: dict[str, Any] = {"topic": split_partition(full_topic_name(topic))[0]}
        if version is not None and version >= 0:
            fields["schema_version"] = version.to_bytes(8, "big", signed=True)
        rt = self._rt
        try:
            response = rt.retrying(lambda: rt.request(rt.connection(), T.GET_SCHEMA, **fields))
        except TopicNotFound:
            return None
        raw = response.schema_version
        return response.schema, int.from_bytes(raw, "big", signed=True) if len(raw) == 8 else -1

    def _forget(self, handle: Any) -> None:
        with self._rt.lock:
            if handle in self._handles:
                self._handles.remove(handle)

    # -- transactions ------------------------------------------------------------------------

    @property
    def _coordinator_count(self) -> int:
        if self._coordinators is None:
            count = self._rt.partitions(COORDINATOR_ASSIGN_TOPIC)
            if count <= 0:
                raise TransactionCoordinatorNotFoundError(
                    "the broker has no transaction coordinator (transactionCoordinatorEnabled is off?)", 20
                )
            self._coordinators = count
            self._next_tc = random.randrange(count)
        return self._coordinators

    def _tc_request(self, coordinator: int, kind: int, **fields: Any) -> Any:
        """A coordinator request, retried while the coordinator loads or its connection is lost."""
        rt = self._rt
        return rt.retrying(lambda: rt.request(self._tc_link(coordinator), kind, **fields))

    def _tc_link(self, coordinator: int) -> Link:
        """The connection to ``coordinator``, looked up and greeted (TC_CLIENT_CONNECT), remembered for
        :meth:`_tc_known_link`."""
        rt = self._rt
        link = rt.lookup(f"{COORDINATOR_ASSIGN_TOPIC}{PARTITION_SUFFIX}{coordinator}")
        if coordinator not in link.greeted and link.core.protocol_version >= TC_CONNECT_PROTOCOL_VERSION:
            rt.request(link, T.TC_CLIENT_CONNECT_REQUEST, tc_id=coordinator)
            link.greeted.add(coordinator)
        self._tc_links[coordinator] = link
        return link

    def _tc_known_link(self, coordinator: int) -> Link | None:
        """The connection :meth:`_tc_link` last found for ``coordinator`` while it is still open, else None: a
        request on it needs no lookup (the asyncio shell's; a retryable error answered on it forgets it)."""
        link = self._tc_links.get(coordinator)
        return link if link is not None and link.core.ready else None

    def _forget_tc_link(self, coordinator: int) -> None:
        self._tc_links.pop(coordinator, None)

    def new_transaction(self, timeout_ms: int = 60000) -> Transaction:
        """Open a transaction; if it has not ended within ``timeout_ms`` the coordinator aborts it, and operations on
        it here raise :class:`InvalidTxnStatusError`."""
        self._rt.check_open()
        tc_id = self._pick_coordinator()
        opened_at = self._rt.now()
        response = self._tc_request(tc_id, T.NEW_TXN, txn_ttl_millis=timeout_ms, tc_id=tc_id)
        return self._opened(response, timeout_ms, opened_at)

    def _pick_coordinator(self) -> int:
        """The coordinator of the next transaction (round robin; the first call looks their number up)."""
        with self._txn_lock:
            count = self._coordinator_count
            self._next_tc = (self._next_tc + 1) % count
            return self._next_tc

    def _opened(self, response: Any, timeout_ms: int, opened_at: float) -> Transaction:
        """The transaction a NEW_TXN answer opened."""
        core = TransactionCore(TxnId(response.txnid_most_bits, response.txnid_least_bits), timeout_ms, opened_at)
        return Transaction(self, core)

    def resume_transaction(self, txn_id: TxnId | tuple[int, int], timeout_ms: int = 60000) -> Transaction:
        """A :class:`Transaction` for a transaction another client opened (its id handed over, as Spark tasks hand
        theirs to the driver): send and acknowledge in it, commit or abort it. Its client-side timeout counts from
        now; the coordinator keeps the one it was opened with. Not in the Java client's API."""
        self._rt.check_open()
        return Transaction(self, TransactionCore(TxnId(*txn_id), timeout_ms, self._rt.now()))

    def _add_partition(self, txn: Transaction, topic: str) -> None:
        request = self._partition_request(txn, topic)
        if request is not None:
            coordinator, kind, fields = request
            self._tc_request(coordinator, kind, **fields)
            with self._rt.lock:
                txn._core.partitions.add(topic)

    def _partition_request(self, txn: Transaction, topic: str) -> tuple[int, int, dict[str, Any]] | None:
        """``(coordinator, kind, fields)`` of the request that adds ``topic`` to ``txn``, None if it is in it
        (raises if ``txn`` is no longer open)."""
        core = txn._core
        with self._rt.lock:
            core.check_open(self._rt.now())
            if topic in core.partitions:
                return None
        most, least = core.txn_id
        return most, T.ADD_PARTITION_TO_TXN, {"txnid_most_bits": most, "txnid_least_bits": least, "partitions": [topic]}

    def _add_subscription(self, txn: Transaction, topic: str, subscription: str) -> None:
        request = self._subscription_request(txn, topic, subscription)
        if request is not None:
            coordinator, kind, fields = request
            self._tc_request(coordinator, kind, **fields)
            with self._rt.lock:
                txn._core.subscriptions.add((topic, subscription))

    def _subscription_request(
        self, txn: Transaction, topic: str, subscription: str
    ) -> tuple[int, int, dict[str, Any]] | None:
        """``(coordinator, kind, fields)`` of the request that adds ``subscription`` on ``topic`` to ``txn``, None if
        it is in it (raises if ``txn`` is no longer open)."""
        core = txn._core
        with self._rt.lock:
            core.check_open(self._rt.now())
            if (topic, subscription) in core.subscriptions:
                return None
        most, least = core.txn_id
        fields = {
            "txnid_most_bits": most,
            "txnid_least_bits": least,
            "subscription": [{"topic": topic, "subscription": subscription}],
        }
        return most, T.ADD_SUBSCRIPTION_TO_TXN, fields

    def _end(self, txn: Transaction, commit: bool) -> None:
        core = txn._core
        rt = self._rt
        rt.check_open()
        if commit:
            with rt.lock:
                self._flush_for(core)
                rt.wait_for(lambda: core.ops == 0, None)
        commit, failed_ops = self._begin_end(core, commit)
        coordinator, kind, fields = self._end_request(core, commit)
        try:
            self._tc_request(coordinator, kind, **fields)
        except PulsarException:
            with rt.lock:
                core.ended(commit, ok=False)
            raise
        self._ended(core, commit, failed_ops)

    def _flush_for(self, core: TransactionCore) -> None:
        """Send what the producers that sent in ``core`` batched (the lock held)."""
        for producer in list(core.producers):
            producer._flush_batches()

    def _begin_end(self, core: TransactionCore, commit: bool) -> tuple[bool, int]:
        """Mark ``core`` as ending (its sends done): ``(commit, failed operations)``, a commit turned into an abort
        when an operation in it failed."""
        rt = self._rt
        with rt.lock:
            core.begin_end(commit, rt.now())
            failed_ops = core.failed_ops if commit else 0
            if failed_ops:
                # As the Java client: a transaction in which an operation failed is aborted instead.
                core.begin_end(False, rt.now())
                commit = False
            if not commit:
                for producer in core.producers:
                    producer._discard(core)
        return commit, failed_ops

    def _end_request(self, core: TransactionCore, commit: bool) -> tuple[int, int, dict[str, Any]]:
        """``(coordinator, kind, fields)`` of the END_TXN request."""
        most, least = core.txn_id
        action = TxnAction.COMMIT if commit else TxnAction.ABORT
        return most, T.END_TXN, {"txnid_most_bits": most, "txnid_least_bits": least, "txn_action": action}

    def _ended(self, core: TransactionCore, commit: bool, failed_ops: int) -> None:
        """END_TXN succeeded: an abort has what the transaction acknowledged delivered again."""
        rt = self._rt
        with rt.lock:
            core.ended(commit, ok=True)
            if not commit:
                # What the transaction acknowledged comes back, and nothing queued before the abort is handed out
                # again after it. On a Shared or Key_Shared subscription the broker redelivers the aborted
                # acknowledgements itself and sends nothing else again, so the consumer's queue stays (as the
                # Java client's: asking for a redelivery there would count every message delivered twice).
                for consumer in core.ack_consumers:
                    if not consumer._closed and consumer._config.consumer_type not in _SHARED:
                        for ccore in consumer._cores:
                            ccore.redeliver_all()
                        rt.kick(*consumer._cores)
        if failed_ops:
            raise TransactionHasOperationFailedError(
                f"transaction {core.txn_id}: {failed_ops} operation(s) in it failed, so it was aborted"
            )

    # -- closing -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close every producer (after flushing), consumer and connection; the client cannot be used after."""
        if self._rt.closed:
            return
        with self._rt.lock:
            handles = list(self._handles)
        for handle in handles:
            with contextlib.suppress(PulsarException):
                handle.close()
        self._rt.close()

    def shutdown(self) -> None:
        """Close every connection at once (nothing is flushed)."""
        self._rt.close()


class ConsumerBatchReceivePolicy:
    """``batch_receive`` limits: at most ``max_num_message`` messages (-1: no limit), waiting up to ``timeout_ms``."""

    def __init__(self, max_num_message: int, max_num_bytes: int, timeout_ms: int) -> None:
        self._policy = (max_num_message, max_num_bytes, timeout_ms)

    def policy(self) -> tuple[int, int, int]:
        return self._policy


#: The name this client had before it took the official one.
BatchReceivePolicy = ConsumerBatchReceivePolicy


class ConsumerKeySharedPolicy:
    """Key_Shared options: ``key_shared_mode`` (AutoSplit, or Sticky with ``sticky_ranges``: inclusive hash ranges
    in 0..65535 this consumer owns) and ``allow_out_of_order_delivery``. As the official client's, Sticky without
    ranges, an empty list of ranges, a range outside 0..65535 and overlapping ranges raise ``ValueError``."""

    def __init__(
        self,
        key_shared_mode: Any = None,
        allow_out_of_order_delivery: bool = False,
        sticky_ranges: list[tuple[int, int]] | None = None,
    ) -> None:
        from pulsar_txn.enums import KeySharedMode

        mode = KeySharedMode.AutoSplit if key_shared_mode is None else key_shared_mode
        if mode == KeySharedMode.Sticky and sticky_ranges is None:
            raise ValueError("When using key_shared_mode = KeySharedMode.Sticky you must also provide sticky_ranges")
        ranges = [(int(start), int(end)) for start, end in sticky_ranges or ()]
        if sticky_ranges is not None:
            if not ranges:
                raise ValueError("Ranges for KeyShared policy must not be empty.")
            if any(start < 0 or end > HASH_RANGE_MAX for start, end in ranges):
                raise ValueError(f"KeySharedPolicy Exception: Ranges must be [0, {HASH_RANGE_MAX}].")
            for i, (start, end) in enumerate(ranges):
                if any(start <= other_end and other_start <= end for other_start, other_end in ranges[i + 1 :]):
                    raise ValueError("Ranges for KeyShared policy with overlap.")
        self._mode = mode
        self._out_of_order = allow_out_of_order_delivery
        self._ranges = ranges

    @property
    def key_shared_mode(self) -> Any:
        return self._mode

    @property
    def allow_out_of_order_delivery(self) -> bool:
        return self._out_of_order

    @property
    def sticky_ranges(self) -> list[tuple[int, int]]:
        return list(self._ranges)

    def meta(self) -> dict[str, Any]:
        """The SUBSCRIBE command's ``keySharedMeta``: the ranges travel in Sticky mode only."""
        from pulsar_txn.enums import KeySharedMode

        meta: dict[str, Any] = {"keySharedMode": int(self._mode), "allowOutOfOrderDelivery": self._out_of_order}
        if self._mode == KeySharedMode.Sticky:
            meta["hashRanges"] = [{"start": start, "end": end} for start, end in self._ranges]
        return meta
