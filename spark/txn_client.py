"""A transactional Pulsar producer for Python, on the project's ``wire`` codec.

The official Python client (``pulsar-client`` 3.x) has no transaction API. This module speaks the
transaction part of the Pulsar binary protocol itself, with blocking sockets, and works against this
project's endpoint and against an Apache Pulsar broker with ``transactionCoordinatorEnabled=true``::

    from spark.txn_client import TransactionClient

    with TransactionClient("pulsar://localhost:6650") as client:
        producer = client.create_producer("persistent://public/default/out")
        txn = client.new_transaction(timeout_ms=60_000)
        producer.send(b"hello", key="k1", properties={"a": "1"}, txn=txn)
        producer.flush()
        txn.commit()          # or txn.abort(); consumers see the message only after the commit

A transaction can be ended from another process by its id (``client.commit(TxnId(most, least))``), which
is how the Spark sink commits on the driver what its tasks wrote.

Wire sequence: coordinators are discovered through the partitioned metadata of
``persistent://pulsar/system/transaction_coordinator_assign`` (one partition per coordinator); the
coordinator ``i`` is looked up as partition ``i`` and greeted with TC_CLIENT_CONNECT; then NEW_TXN,
ADD_PARTITION_TO_TXN before the first send to a partition, SEND carrying the transaction id, and END_TXN.
Errors come back as the :class:`~spark.protocol.PulsarError` subclasses named after Pulsar's codes
(:class:`TransactionNotFoundError`, :class:`InvalidTxnStatusError`, :class:`TransactionCoordinatorNotFoundError`,
:class:`TransactionConflictError`, :class:`NotAllowedError`, ...).
"""

from __future__ import annotations

import base64
import contextlib
import random
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NamedTuple

from spark.protocol import (
    Client,
    Connection,
    ConnectionLostError,
    InvalidTxnStatusError,
    NotAllowedError,
    OperationTimeoutError,
    ProducerBusyError,
    PulsarError,
    ServiceNotReadyError,
    TopicNotFoundError,
    TransactionConflictError,
    TransactionCoordinatorNotFoundError,
    TransactionNotFoundError,
    error_for,
    full_topic_name,
)
from spark.security import Security
from wire.batch import build_batch, split_batch
from wire.commands import make
from wire.framing import make_body, parse_body
from wire.message_id import MessageId
from wire.pulsar_api_pb2 import (
    BaseCommand,
    CommandAck,
    CommandSubscribe,
    MessageMetadata,
    SingleMessageMetadata,
    TxnAction,
)

__all__ = [
    "ConnectionLostError",
    "Consumer",
    "InvalidTxnStatusError",
    "MessageId",
    "NotAllowedError",
    "OperationTimeoutError",
    "Producer",
    "ProducerBusyError",
    "PulsarError",
    "ReceivedMessage",
    "ServiceNotReadyError",
    "TopicNotFoundError",
    "Transaction",
    "TransactionClient",
    "TransactionConflictError",
    "TransactionCoordinatorNotFoundError",
    "TransactionNotFoundError",
    "TxnId",
    "TxnState",
    "error_for",
]

T = BaseCommand
#: The system topic whose partitions stand for the transaction coordinators.
COORDINATOR_ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
#: Protocol version from which a client greets each coordinator with TC_CLIENT_CONNECT.
TC_CONNECT_PROTOCOL_VERSION = 19
#: Pulsar's producer batching defaults.
BATCH_MAX_MESSAGES = 1000
BATCH_MAX_BYTES = 128 * 1024
#: Entries a producer may have in flight before it waits for receipts.
MAX_PENDING_ENTRIES = 500


class TxnId(NamedTuple):
    """A transaction id: the coordinator id in ``most``, that coordinator's sequence in ``least``."""

    most: int
    least: int

    def __str__(self) -> str:
        return f"({self.most},{self.least})"


@dataclass(frozen=True, slots=True)
class ReceivedMessage:
    """A message a :class:`Consumer` received; ``batch_size`` is 0 for a message stored alone.

    ``key`` is the partition key as sent (None without one); times are in ms since the epoch (event time 0: unset).
    """

    value: bytes
    ledger: int
    entry: int
    batch_index: int
    batch_size: int
    redelivery_count: int
    key: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    publish_time: int = 0
    event_time: int = 0
    topic: str = ""


class TxnState(Enum):
    """What this client knows of a transaction it created."""

    OPEN = "OPEN"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"


class Transaction:
    """An open transaction; send with ``producer.send(..., txn=txn)``, then :meth:`commit` or :meth:`abort`."""

    def __init__(self, client: TransactionClient, txn_id: TxnId, timeout_ms: int) -> None:
        self.client = client
        self.id = txn_id
        self.timeout_ms = timeout_ms
        self.state = TxnState.OPEN
        self.partitions: set[str] = set()
        self._producers: list[Producer] = []

    def __repr__(self) -> str:
        return f"Transaction({self.id}, {self.state.value})"

    def add_partition(self, topic: str) -> None:
        """Register a topic partition before the first send to it (done by the producer on its own)."""
        if self.state is not TxnState.OPEN:
            raise InvalidTxnStatusError(f"transaction {self.id} is {self.state.value}")
        topic = full_topic_name(topic)
        if topic not in self.partitions:
            self.client.add_partitions(self.id, [topic])
            self.partitions.add(topic)

    def _used_by(self, producer: Producer) -> None:
        if producer not in self._producers:
            self._producers.append(producer)

    def commit(self) -> None:
        """Wait for every send made in the transaction, then commit it."""
        for producer in self._producers:
            producer.flush()
        self.client.commit(self.id)
        self.state = TxnState.COMMITTED

    def abort(self) -> None:
        """Abort: nothing sent in the transaction ever becomes visible."""
        for producer in self._producers:
            producer.discard(self)
        self.client.abort(self.id)
        self.state = TxnState.ABORTED


@dataclass(slots=True)
class _Message:
    payload: bytes
    meta: SingleMessageMetadata


@dataclass(slots=True)
class _Pending:
    sequence_id: int
    count: int
    message_id: MessageId | None = None


class _PartitionProducer:
    """A producer on one topic partition (or non-partitioned topic), batching into entries."""

    def __init__(self, client: TransactionClient, topic: str, partition: int, name: str | None) -> None:
        self.client = client
        self.topic = topic
        self.partition = partition
        self.requested_name = name
        self.conn: Connection | None = None
        self.producer_id = 0
        self.name = ""
        self.next_sequence = 0
        self.batch: list[_Message] = []
        self.batch_bytes = 0
        self.batch_txn: Transaction | None = None
        self.pending: deque[_Pending] = deque()
        self.error: PulsarError | None = None
        self.sent_messages = 0

    def connect(self) -> None:
        """Look the partition up and register the producer (again after a lost connection)."""
        conn = self.client.lookup(self.topic)
        self.producer_id = self.client.next_id()
        conn.receipts[self.producer_id] = deque()
        fields: dict[str, Any] = {"topic": self.topic, "producer_id": self.producer_id}
        if self.requested_name:
            fields.update(producer_name=self.requested_name, user_provided_producer_name=True)
        else:
            fields.update(user_provided_producer_name=False)
        response = conn.request(T.PRODUCER, **fields)
        self.conn = conn
        self.name = response.producer_name
        self.next_sequence = max(self.next_sequence, response.last_sequence_id + 1)

    def add(self, message: _Message, txn: Transaction | None) -> None:
        if self.error is not None:
            raise self.error
        if self.batch and (
            txn is not self.batch_txn
            or len(self.batch) >= self.client.batch_max_messages
            or self.batch_bytes + len(message.payload) > self.client.batch_max_bytes
        ):
            self.send_batch()
        if txn is not None and self.topic not in txn.partitions:
            txn.add_partition(self.topic)
        self.batch.append(message)
        self.batch_bytes += len(message.payload)
        self.batch_txn = txn

    def send_batch(self) -> None:
        """Send what is batched as one entry."""
        if not self.batch:
            return
        if self.conn is None or self.conn.closed:
            self.connect()
        assert self.conn is not None
        batch, txn = self.batch, self.batch_txn
        self.batch, self.batch_bytes, self.batch_txn = [], 0, None
        first = self.next_sequence
        self.next_sequence += len(batch)
        for offset, message in enumerate(batch):
            message.meta.sequence_id = first + offset
        meta = MessageMetadata(
            producer_name=self.name,
            sequence_id=first,
            publish_time=int(time.time() * 1000),
            num_messages_in_batch=len(batch),
        )
        head = batch[0].meta
        if head.HasField("partition_key"):
            meta.partition_key = head.partition_key
            meta.partition_key_b64_encoded = head.partition_key_b64_encoded
        send: dict[str, Any] = {"producer_id": self.producer_id, "sequence_id": first, "num_messages": len(batch)}
        if len(batch) > 1:
            send["highest_sequence_id"] = first + len(batch) - 1
        if txn is not None:
            meta.txnid_most_bits, meta.txnid_least_bits = txn.id
            send.update(txnid_most_bits=txn.id.most, txnid_least_bits=txn.id.least)
        payload = build_batch((m.meta, m.payload) for m in batch)
        self.conn.send_command(make(T.SEND, **send), make_body(meta, payload))
        self.pending.append(_Pending(first, len(batch)))
        self.sent_messages += len(batch)
        if len(self.pending) > MAX_PENDING_ENTRIES:
            self.wait(MAX_PENDING_ENTRIES // 2)

    def send_single(self, message: _Message, txn: Transaction | None) -> MessageId:
        """Send one message as its own (non-batched) entry and wait for its receipt."""
        self.flush()
        if txn is not None:
            txn.add_partition(self.topic)
        if self.conn is None or self.conn.closed:
            self.connect()
        assert self.conn is not None
        sequence = self.next_sequence
        self.next_sequence += 1
        single = message.meta
        meta = MessageMetadata(
            producer_name=self.name, sequence_id=sequence, publish_time=int(time.time() * 1000)
        )
        meta.properties.extend(single.properties)
        if single.HasField("partition_key"):
            meta.partition_key = single.partition_key
            meta.partition_key_b64_encoded = single.partition_key_b64_encoded
        if single.event_time:
            meta.event_time = single.event_time
        send: dict[str, Any] = {"producer_id": self.producer_id, "sequence_id": sequence}
        if txn is not None:
            meta.txnid_most_bits, meta.txnid_least_bits = txn.id
            send.update(txnid_most_bits=txn.id.most, txnid_least_bits=txn.id.least)
        self.conn.send_command(make(T.SEND, **send), make_body(meta, message.payload))
        pending = _Pending(sequence, 1)
        self.pending.append(pending)
        self.wait(0)
        assert pending.message_id is not None
        return pending.message_id

    def wait(self, outstanding: int) -> None:
        """Read receipts until at most ``outstanding`` entries are unconfirmed."""
        assert self.conn is not None
        receipts = self.conn.receipts[self.producer_id]
        deadline = time.monotonic() + self.client.operation_timeout
        while len(self.pending) > outstanding:
            while receipts and self.pending:
                self._receipt(receipts.popleft())
            if len(self.pending) > outstanding:
                if self.producer_id in self.conn.closed_producers:
                    raise ConnectionLostError(f"the broker closed the producer on {self.topic}")
                if time.monotonic() >= deadline:
                    raise OperationTimeoutError(f"no receipts from {self.conn.url} for {self.topic} in time")
                self.conn.pump(deadline)
        if self.error is not None:
            raise self.error

    def _receipt(self, command: BaseCommand) -> None:
        if command.type == T.SEND_ERROR:
            error = command.send_error
            self.error = error_for(error.error, f"send to {self.topic} failed: {error.message}")
            self.pending.clear()
            return
        receipt = command.send_receipt
        head = self.pending[0]
        if receipt.sequence_id < head.sequence_id:
            return
        self.pending.popleft()
        mid = receipt.message_id
        head.message_id = MessageId.from_proto(mid)._replace(partition=self.partition)

    def flush(self) -> None:
        """Send the open batch and wait for every receipt."""
        self.send_batch()
        if self.pending:
            self.wait(0)

    def discard(self, txn: Transaction) -> None:
        """Drop batched, unsent messages of ``txn`` (it is being aborted)."""
        if self.batch_txn is txn:
            self.batch, self.batch_bytes, self.batch_txn = [], 0, None

    def close(self) -> None:
        if self.conn is not None and not self.conn.closed:
            with contextlib.suppress(PulsarError):
                self.conn.request(T.CLOSE_PRODUCER, producer_id=self.producer_id)
            self.conn.receipts.pop(self.producer_id, None)


def java_string_hash(key: str) -> int:
    """Java's ``String.hashCode() & Integer.MAX_VALUE``: the Java client's default key routing."""
    h = 0
    data = key.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h & 0x7FFFFFFF


class Producer:
    """A producer on a topic; a partitioned topic's messages go to partitions by key (round robin without).

    Keyed messages are routed like the Java client's default (``JavaStringHash``), so keys keep their
    partition whichever client writes them. Messages are batched into entries (up to
    ``batch_max_messages`` / ``batch_max_bytes``); :meth:`flush` sends the open batches and waits for
    every receipt, and raises the first send error.
    """

    def __init__(self, client: TransactionClient, topic: str, name: str | None = None) -> None:
        self.client = client
        self.topic = full_topic_name(topic)
        names = client.partition_names(self.topic)
        self.partitioned = len(names) > 1 or names[0] != self.topic
        self._partitions = [
            _PartitionProducer(client, partition, index if self.partitioned else -1, name)
            for index, partition in enumerate(names)
        ]
        self._round_robin = random.randrange(len(self._partitions))
        self._unkeyed = 0

    def _route(self, key: str | None) -> _PartitionProducer:
        if len(self._partitions) == 1:
            return self._partitions[0]
        if key is not None:
            return self._partitions[java_string_hash(key) % len(self._partitions)]
        # Unkeyed messages stay on one partition for a whole batch, as Pulsar's round-robin router does.
        self._unkeyed += 1
        if self._unkeyed >= self.client.batch_max_messages:
            self._unkeyed = 0
            self._round_robin = (self._round_robin + 1) % len(self._partitions)
        return self._partitions[self._round_robin]

    @staticmethod
    def _message(
        value: bytes,
        key: str | bytes | None,
        properties: Mapping[str, str] | None,
        event_time: int | None,
    ) -> tuple[_Message, str | None]:
        meta = SingleMessageMetadata(payload_size=len(value))
        routing = None
        if key is not None:
            if isinstance(key, bytes):
                routing = base64.b64encode(key).decode()
                meta.partition_key = routing
                meta.partition_key_b64_encoded = True
            else:
                routing = key
                meta.partition_key = key
        if properties:
            for k, v in properties.items():
                meta.properties.add(key=k, value=v)
        if event_time:
            meta.event_time = event_time
        return _Message(value, meta), routing

    def send(
        self,
        value: bytes,
        *,
        key: str | bytes | None = None,
        properties: Mapping[str, str] | None = None,
        event_time: int | None = None,
        txn: Transaction | None = None,
    ) -> None:
        """Queue a message (in ``txn`` if given); it is sent with its batch, confirmed by :meth:`flush`.

        ``event_time`` is in milliseconds since the epoch; a ``bytes`` key travels base64-encoded, as the
        Java client's ``keyBytes`` does.
        """
        message, routing = self._message(value, key, properties, event_time)
        target = self._route(routing)
        if txn is not None:
            txn._used_by(self)
        target.add(message, txn)

    def send_and_wait(
        self,
        value: bytes,
        *,
        key: str | bytes | None = None,
        properties: Mapping[str, str] | None = None,
        event_time: int | None = None,
        txn: Transaction | None = None,
    ) -> MessageId:
        """Send one message on its own and return its id once the broker stored it."""
        message, routing = self._message(value, key, properties, event_time)
        if txn is not None:
            txn._used_by(self)
        return self._route(routing).send_single(message, txn)

    def flush(self) -> None:
        """Send every open batch and wait for all receipts."""
        for producer in self._partitions:
            producer.send_batch()
        for producer in self._partitions:
            producer.flush()

    def discard(self, txn: Transaction) -> None:
        """Forget unsent messages of ``txn``."""
        for producer in self._partitions:
            producer.discard(txn)

    @property
    def sent_messages(self) -> int:
        """Messages handed to the broker so far."""
        return sum(p.sent_messages for p in self._partitions)

    def close(self) -> None:
        """Flush, then close the producer on every partition."""
        try:
            self.flush()
        finally:
            for producer in self._partitions:
                producer.close()


class TransactionClient(Client):
    """A Pulsar client with transactions: coordinator discovery, NEW_TXN, ADD_PARTITION_TO_TXN, END_TXN."""

    def __init__(
        self,
        service_url: str,
        operation_timeout: float = 30.0,
        batch_max_messages: int = BATCH_MAX_MESSAGES,
        batch_max_bytes: int = BATCH_MAX_BYTES,
        security: Security | None = None,
    ) -> None:
        super().__init__(service_url, operation_timeout, security)
        self.batch_max_messages = batch_max_messages
        self.batch_max_bytes = batch_max_bytes
        self._coordinators: int | None = None
        self._greeted: dict[int, Connection] = {}
        self._next_tc = -1

    def __enter__(self) -> TransactionClient:
        return self

    # -- coordinators ---------------------------------------------------------------------------

    @property
    def coordinators(self) -> int:
        """How many transaction coordinators the cluster has (0 raises: transactions are off)."""
        if self._coordinators is None:
            count = self.partitions(COORDINATOR_ASSIGN_TOPIC)
            if count <= 0:
                raise TransactionCoordinatorNotFoundError(
                    "The broker doesn't enable the transaction coordinator, "
                    "or the transaction coordinator has not initialized",
                    20,
                )
            self._coordinators = count
            self._next_tc = random.randrange(count)
        return self._coordinators

    def _coordinator(self, tc_id: int) -> Connection:
        """The connection to coordinator ``tc_id``, greeted with TC_CLIENT_CONNECT."""
        if not 0 <= tc_id < self.coordinators:
            raise TransactionCoordinatorNotFoundError(f"Transaction coordinator with id {tc_id} not found", 20)
        conn = self._greeted.get(tc_id)
        if conn is not None and not conn.closed:
            return conn
        conn = self.lookup(f"{COORDINATOR_ASSIGN_TOPIC}-partition-{tc_id}")
        if conn.protocol_version >= TC_CONNECT_PROTOCOL_VERSION:
            conn.request(T.TC_CLIENT_CONNECT_REQUEST, tc_id=tc_id)
        self._greeted[tc_id] = conn
        return conn

    def _tc_request(self, coordinator: int, kind: int, **fields: Any) -> Any:
        """A coordinator request, retried while the coordinator is not found/ready or the link drops."""
        delay = 0.1
        for attempt in range(5):
            try:
                return self._coordinator(coordinator).request(kind, **fields)
            except (ConnectionLostError, ServiceNotReadyError, TransactionCoordinatorNotFoundError):
                if attempt == 4 or not 0 <= coordinator < self.coordinators:
                    raise
                self._greeted.pop(coordinator, None)
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    # -- transactions ---------------------------------------------------------------------------

    def new_transaction(self, timeout_ms: int = 60_000) -> Transaction:
        """Open a transaction that the coordinator aborts if it has not ended after ``timeout_ms``."""
        count = self.coordinators
        self._next_tc = (self._next_tc + 1) % count
        tc_id = self._next_tc
        response = self._tc_request(tc_id, T.NEW_TXN, txn_ttl_millis=timeout_ms, tc_id=tc_id)
        return Transaction(self, TxnId(response.txnid_most_bits, response.txnid_least_bits), timeout_ms)

    def add_partitions(self, txn_id: TxnId, partitions: list[str]) -> None:
        """ADD_PARTITION_TO_TXN."""
        self._tc_request(
            txn_id.most,
            T.ADD_PARTITION_TO_TXN,
            txnid_most_bits=txn_id.most,
            txnid_least_bits=txn_id.least,
            partitions=[full_topic_name(p) for p in partitions],
        )

    def end_transaction(self, txn_id: TxnId, commit: bool) -> None:
        """END_TXN by id: works for a transaction created by any client (e.g. in another process)."""
        self._tc_request(
            txn_id.most,
            T.END_TXN,
            txnid_most_bits=txn_id.most,
            txnid_least_bits=txn_id.least,
            txn_action=TxnAction.COMMIT if commit else TxnAction.ABORT,
        )

    def commit(self, txn_id: TxnId) -> None:
        """Commit a transaction by id."""
        self.end_transaction(txn_id, commit=True)

    def abort(self, txn_id: TxnId) -> None:
        """Abort a transaction by id."""
        self.end_transaction(txn_id, commit=False)

    def add_subscription(self, txn_id: TxnId, topic: str, subscription: str) -> None:
        """ADD_SUBSCRIPTION_TO_TXN: register a subscription before acknowledging on it in the transaction."""
        self._tc_request(
            txn_id.most,
            T.ADD_SUBSCRIPTION_TO_TXN,
            txnid_most_bits=txn_id.most,
            txnid_least_bits=txn_id.least,
            subscription=[{"topic": full_topic_name(topic), "subscription": subscription}],
        )

    # -- producers and consumers ----------------------------------------------------------------

    def subscribe(self, topic: str, subscription: str) -> Consumer:
        """A consumer on an Exclusive durable subscription of a non-partitioned ``topic`` (created at Earliest)."""
        return Consumer(self, topic, subscription)

    def create_producer(self, topic: str, name: str | None = None) -> Producer:
        """A producer on ``topic`` (partitioned or not); it connects lazily on the first send."""
        return Producer(self, topic, name)


def _ack_set(batch_size: int, acked: range) -> list[int]:
    """A batch's ack set as Java's ``BitSet.toLongArray``: a bit set for each index still unacknowledged.

    As there, trailing zero words are left out: a whole batch acknowledged is an empty ack set (the entry itself).
    """
    bits = sum(1 << i for i in range(batch_size) if i not in acked)
    words = []
    while bits:
        word = bits & 0xFFFFFFFFFFFFFFFF
        words.append(word - (1 << 64) if word >= 1 << 63 else word)
        bits >>= 64
    return words


class Consumer:
    """A consumer that acknowledges in transactions, as the Java client's ``acknowledgeAsync(id, txn)`` does.

    Exclusive, durable, on one non-partitioned topic. Batches are split; indexes the broker reports as already
    acknowledged (the MESSAGE's ack set) are skipped. A transactional acknowledgement of a batch message carries
    the ack set of what it acknowledges (that index, or indexes up to it for a cumulative one).
    """

    def __init__(
        self,
        client: TransactionClient,
        topic: str,
        subscription: str,
        receiver_queue: int = 1000,
        sub_type: CommandSubscribe.SubType = CommandSubscribe.Exclusive,
        initial_position: CommandSubscribe.InitialPosition = CommandSubscribe.Earliest,
    ) -> None:
        self.client = client
        self.topic = full_topic_name(topic)
        self.subscription = subscription
        self.receiver_queue = receiver_queue
        self.conn = client.lookup(self.topic)
        self.consumer_id = client.next_id()
        self.conn.messages[self.consumer_id] = self._frames = deque()
        self._ready: deque[ReceivedMessage] = deque()
        self._txns: set[TxnId] = set()
        self.conn.request(
            T.SUBSCRIBE,
            topic=self.topic,
            subscription=subscription,
            subType=sub_type,
            consumer_id=self.consumer_id,
            consumer_name="",
            durable=True,
            initialPosition=initial_position,
        )
        self._permits = receiver_queue
        self.conn.send_command(make(T.FLOW, consumer_id=self.consumer_id, messagePermits=receiver_queue))

    def _split(self, command: Any, body: bytes) -> None:
        mid = command.message_id
        parsed = parse_body(body)
        meta = parsed.metadata
        redeliveries = command.redelivery_count
        if not meta.HasField("num_messages_in_batch"):
            self._ready.append(
                ReceivedMessage(
                    parsed.payload, mid.ledgerId, mid.entryId, -1, 0, redeliveries,
                    meta.partition_key if meta.HasField("partition_key") else None,
                    {kv.key: kv.value for kv in meta.properties}, meta.publish_time, meta.event_time, self.topic,
                )
            )
            return
        count = meta.num_messages_in_batch
        unacked = (1 << count) - 1
        if command.ack_set:
            unacked = sum((w & 0xFFFFFFFFFFFFFFFF) << (64 * i) for i, w in enumerate(command.ack_set))
        for index, (single, value) in enumerate(split_batch(parsed.payload, count)):
            if unacked >> index & 1:
                self._ready.append(
                    ReceivedMessage(
                        value, mid.ledgerId, mid.entryId, index, count, redeliveries,
                        single.partition_key if single.HasField("partition_key") else None,
                        {kv.key: kv.value for kv in single.properties}, meta.publish_time, single.event_time,
                        self.topic,
                    )
                )

    def receive(self, timeout: float) -> ReceivedMessage | None:
        """The next message, or None if none came within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self._ready:
            while self._frames:
                self._split(*self._frames.popleft())
            if self._ready:
                break
            if self.consumer_id in self.conn.closed_consumers:
                raise ConnectionLostError(f"the broker closed the consumer on {self.topic}")
            if time.monotonic() >= deadline:
                return None
            self.conn.pump(deadline)
        self._permits -= 1
        if self._permits <= self.receiver_queue // 2:
            self.conn.send_command(
                make(T.FLOW, consumer_id=self.consumer_id, messagePermits=self.receiver_queue - self._permits)
            )
            self._permits = self.receiver_queue
        return self._ready.popleft()

    def acknowledge(self, message: ReceivedMessage, txn: Transaction | None, cumulative: bool = False) -> None:
        """Acknowledge ``message`` (and those before it if ``cumulative``), in ``txn`` if given; waits for the
        broker's answer."""
        if txn is not None:
            if txn.state is not TxnState.OPEN:
                raise InvalidTxnStatusError(f"transaction {txn.id} is {txn.state.value}")
            if txn.id not in self._txns:
                self.client.add_subscription(txn.id, self.topic, self.subscription)
                self._txns.add(txn.id)
        mid: dict[str, Any] = {"ledgerId": message.ledger, "entryId": message.entry}
        if message.batch_size:
            index = message.batch_index
            acked = range(index + 1) if cumulative else range(index, index + 1)
            mid.update(
                batch_index=message.batch_index,
                batch_size=message.batch_size,
                ack_set=_ack_set(message.batch_size, acked),
            )
        fields: dict[str, Any] = {}
        if txn is not None:
            fields.update(txnid_most_bits=txn.id.most, txnid_least_bits=txn.id.least)
        self.conn.request(
            T.ACK,
            consumer_id=self.consumer_id,
            ack_type=CommandAck.Cumulative if cumulative else CommandAck.Individual,
            message_id=[mid],
            **fields,
        )

    def unsubscribe(self) -> None:
        """Delete the subscription (this consumer must be its only one); the consumer is closed."""
        self.conn.request(T.UNSUBSCRIBE, consumer_id=self.consumer_id)
        self.conn.messages.pop(self.consumer_id, None)

    def close(self) -> None:
        """Close the consumer (its unacknowledged messages go back to the subscription)."""
        self.conn.close_consumer(self.consumer_id)
