"""A producer on one topic partition (or non-partitioned topic), sans I/O: batching, sequence ids, entries in flight
and their receipts, send timeouts, and re-sending what was in flight when it registers on a new connection."""

from __future__ import annotations

import struct
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pulsar_txn.core.connection import SendDone
from pulsar_txn.exceptions import (
    AlreadyClosed,
    MessageTooBig,
    PulsarException,
    Timeout,
    from_server_error,
)
from wire.commands import make
from wire.compression import compress
from wire.framing import make_body
from wire.message_id import MessageId as WireMessageId
from wire.pulsar_api_pb2 import BaseCommand, CompressionType, MessageMetadata, SingleMessageMetadata

if TYPE_CHECKING:
    from pulsar_txn.core.connection import Connection
    from pulsar_txn.core.transaction import TransactionCore

T = BaseCommand
_U32 = struct.Struct(">I")


@dataclass(slots=True)
class ProducerConfig:
    """What ``create_producer`` takes that the core needs (names and defaults of ``pulsar-client``)."""

    producer_name: str | None = None
    initial_sequence_id: int | None = None
    send_timeout_millis: int = 30000
    compression_type: int = CompressionType.NONE
    batching_enabled: bool = False
    batching_max_messages: int = 1000
    batching_max_allowed_size_in_bytes: int = 128 * 1024
    batching_max_publish_delay_ms: int = 10
    properties: dict[str, str] = field(default_factory=dict)
    access_mode: int = 0
    schema: Any = None


@dataclass(slots=True)
class OutMessage:
    """One message to send. ``token`` comes back in its :class:`SendDone` event."""

    payload: bytes
    token: Any = None
    properties: dict[str, str] | None = None
    partition_key: str | None = None
    #: ``partition_key`` is the base64 form of a binary key (the Java client's ``keyBytes``).
    key_b64: bool = False
    ordering_key: bytes | None = None
    event_time: int | None = None
    sequence_id: int | None = None
    deliver_at: int | None = None
    replication_clusters: list[str] | None = None
    disable_replication: bool = False
    txn: TransactionCore | None = None
    schema_version: bytes | None = None


@dataclass(slots=True)
class _Entry:
    """An entry sent (or to be sent again after a reconnection) and not yet receipted."""

    sequence_id: int
    highest_sequence_id: int
    messages: list[OutMessage]
    body: bytes
    deadline: float
    txn: TransactionCore | None


class ProducerCore:
    """One partition's producer. ``partition`` (-1: not partitioned) goes into the message ids it reports."""

    def __init__(self, topic: str, partition: int, config: ProducerConfig, now: float) -> None:
        self.topic = topic
        self.partition = partition
        self.config = config
        self.conn: Connection | None = None
        self.producer_id = 0
        self.name = config.producer_name or ""
        self.schema_version: bytes | None = None
        self.closed = False
        self.last_sequence_id = -1 if config.initial_sequence_id is None else config.initial_sequence_id
        self._next_sequence = self.last_sequence_id + 1
        self._batch: list[OutMessage] = []
        self._batch_bytes = 0
        self._batch_deadline: float | None = None
        self._pending: deque[_Entry] = deque()
        #: Messages of the entries in ``_pending``.
        self._in_flight = 0
        self.max_message_size = 5 * 1024 * 1024

    # -- registration --------------------------------------------------------------------

    def producer_command(self, producer_id: int) -> dict[str, Any]:
        """The fields of the PRODUCER request that registers this producer as ``producer_id``."""
        fields: dict[str, Any] = {"topic": self.topic, "producer_id": producer_id}
        if self.name:
            fields.update(producer_name=self.name, user_provided_producer_name=bool(self.config.producer_name))
        if self.config.properties:
            fields["metadata"] = [{"key": k, "value": v} for k, v in self.config.properties.items()]
        if self.config.access_mode:
            fields["producer_access_mode"] = self.config.access_mode
        if self.config.schema is not None:
            fields["schema"] = self.config.schema
        return fields

    def attach(self, conn: Connection, producer_id: int, response: Any, now: float) -> None:
        """PRODUCER succeeded on ``conn``: entries still in flight are sent again, in order."""
        self.conn = conn
        self.producer_id = producer_id
        conn.producers[producer_id] = self
        self.max_message_size = conn.max_message_size
        self.name = response.producer_name or self.name
        if response.HasField("schema_version"):
            self.schema_version = response.schema_version
        if response.last_sequence_id >= 0 and self.config.initial_sequence_id is None and not self._pending:
            self.last_sequence_id = max(self.last_sequence_id, response.last_sequence_id)
            self._next_sequence = max(self._next_sequence, response.last_sequence_id + 1)
        for entry in self._pending:
            self._write(entry)
        self.flush(now)

    def detach(self, conn: Connection) -> None:
        """The connection closed (or the broker closed this producer): wait for :meth:`attach` again."""
        if self.conn is conn:
            self.conn = None

    @property
    def connected(self) -> bool:
        return self.conn is not None and self.conn.ready

    # -- sending -------------------------------------------------------------------------

    def send(self, message: OutMessage, now: float) -> None:
        """Queue ``message``: into the open batch, or as an entry of its own."""
        if self.closed:
            raise AlreadyClosed(f"producer on {self.topic} is closed")
        if len(message.payload) > self.max_message_size:
            raise MessageTooBig(f"message of {len(message.payload)} bytes exceeds {self.max_message_size}")
        if not self.config.batching_enabled or message.deliver_at is not None:
            self.flush(now)
            self._send_entry([message], now)
            return
        if self._batch and (
            message.txn is not self._batch[0].txn
            or len(self._batch) >= self.config.batching_max_messages
            or self._batch_bytes + len(message.payload) > self.config.batching_max_allowed_size_in_bytes
        ):
            self.flush(now)
        if not self._batch:
            self._batch_deadline = now + self.config.batching_max_publish_delay_ms / 1000
        self._batch.append(message)
        self._batch_bytes += len(message.payload)
        if len(self._batch) >= self.config.batching_max_messages:
            self.flush(now)

    def flush(self, now: float) -> None:
        """Send the open batch as one entry."""
        if self._batch:
            batch = self._batch
            self._batch, self._batch_bytes, self._batch_deadline = [], 0, None
            self._send_entry(batch, now)

    @property
    def pending_count(self) -> int:
        """Messages queued or in flight."""
        return len(self._batch) + self._in_flight

    def discard(self, txn: TransactionCore) -> list[OutMessage]:
        """Drop unsent batched messages of ``txn`` (it is being aborted); they are returned to be failed."""
        if self._batch and self._batch[0].txn is txn:
            dropped = self._batch
            self._batch, self._batch_bytes, self._batch_deadline = [], 0, None
            return dropped
        return []

    def _sequence(self, message: OutMessage) -> int:
        if message.sequence_id is not None:
            sequence = message.sequence_id
            self._next_sequence = max(self._next_sequence, sequence + 1)
        else:
            sequence = self._next_sequence
            self._next_sequence += 1
        return sequence

    def _send_entry(self, messages: list[OutMessage], now: float) -> None:
        first = messages[0]
        meta = MessageMetadata(producer_name=self.name, publish_time=int(time.time() * 1000))
        if (len(messages) == 1 and not self.config.batching_enabled) or first.deliver_at is not None:
            sequence = highest = self._sequence(first)
            _fill_metadata(meta, first)
            payload = first.payload
        else:
            sequences = [self._sequence(m) for m in messages]
            sequence, highest = sequences[0], sequences[-1]
            parts: list[bytes] = []
            for message, seq in zip(messages, sequences, strict=True):
                data = message.payload
                if (
                    message.properties
                    or message.partition_key is not None
                    or message.ordering_key is not None
                    or (message.event_time)
                ):
                    single = SingleMessageMetadata(payload_size=len(data), sequence_id=seq)
                    _fill_single(single, message)
                    encoded = single.SerializeToString()
                else:  # payload_size (field 3) and sequence_id (field 8), encoded here: the common case
                    encoded = b"\x18" + _varint(len(data)) + b"\x40" + _varint(seq)
                parts += (_U32.pack(len(encoded)), encoded, data)
            meta.num_messages_in_batch = len(messages)
            if first.partition_key is not None:
                meta.partition_key = first.partition_key
                meta.partition_key_b64_encoded = first.key_b64
            if first.ordering_key is not None:
                meta.ordering_key = first.ordering_key
            payload = b"".join(parts)
            if highest != sequence:
                meta.highest_sequence_id = highest
        meta.sequence_id = sequence
        if first.schema_version is not None:
            meta.schema_version = first.schema_version
        elif self.schema_version is not None:
            meta.schema_version = self.schema_version
        if first.txn is not None:
            meta.txnid_most_bits, meta.txnid_least_bits = first.txn.txn_id
        if first.replication_clusters:
            meta.replicate_to.extend(first.replication_clusters)
        elif first.disable_replication:
            meta.replicate_to.append("__local__")
        if self.config.compression_type != CompressionType.NONE:
            meta.compression = self.config.compression_type
            meta.uncompressed_size = len(payload)
            payload = compress(self.config.compression_type, payload)
        self.last_sequence_id = highest
        entry = _Entry(
            sequence,
            highest,
            messages,
            make_body(meta, payload),
            now + self.config.send_timeout_millis / 1000 if self.config.send_timeout_millis > 0 else float("inf"),
            first.txn,
        )
        if first.txn is not None:
            first.txn.ops += len(messages)
        self._pending.append(entry)
        self._in_flight += len(messages)
        if self.conn is not None and self.conn.ready:
            self._write(entry)

    def _write(self, entry: _Entry) -> None:
        assert self.conn is not None
        fields: dict[str, Any] = {
            "producer_id": self.producer_id,
            "sequence_id": entry.sequence_id,
            "num_messages": len(entry.messages),
        }
        if entry.highest_sequence_id != entry.sequence_id:
            fields["highest_sequence_id"] = entry.highest_sequence_id
        if entry.txn is not None:
            fields["txnid_most_bits"], fields["txnid_least_bits"] = entry.txn.txn_id
        self.conn.send(make(T.SEND, **fields), entry.body)

    # -- receipts and timers -------------------------------------------------------------

    def handle_receipt(self, command: BaseCommand) -> list[SendDone]:
        """A SEND_RECEIPT or SEND_ERROR for this producer."""
        if command.type == T.SEND_ERROR:
            error = command.send_error
            return self.fail_pending(from_server_error(error.error, error.message))
        receipt = command.send_receipt
        events: list[SendDone] = []
        while self._pending and self._pending[0].sequence_id <= receipt.sequence_id:
            entry = self._pending.popleft()
            count = len(entry.messages)
            self._in_flight -= count
            if entry.sequence_id < receipt.sequence_id:
                continue  # an older entry's receipt was lost with a connection; it was stored before this one
            base = WireMessageId.from_proto(receipt.message_id)
            batched = count > 1 or (self.config.batching_enabled and entry.messages[0].deliver_at is None)
            ledger, entry_id, partition = base.ledger, base.entry, self.partition
            for index, message in enumerate(entry.messages):
                if message.token is not None:  # nobody waits for the others
                    mid = (ledger, entry_id, partition, index if batched else -1, count)
                    events.append(SendDone(message.token, mid))
            if entry.txn is not None:
                entry.txn.ops -= len(entry.messages)
        return events

    def fail_pending(self, error: PulsarException) -> list[SendDone]:
        """Fail every queued and in-flight message with ``error``."""
        events = []
        for entry in self._pending:
            if entry.txn is not None:
                entry.txn.ops -= len(entry.messages)
                entry.txn.failed_ops += len(entry.messages)
            events += [SendDone(m.token, None, error) for m in entry.messages]
        self._pending.clear()
        self._in_flight = 0
        events += [SendDone(m.token, None, error) for m in self._batch]
        self._batch, self._batch_bytes, self._batch_deadline = [], 0, None
        return events

    def poll_timeout(self) -> float | None:
        times = []
        if self._batch_deadline is not None:
            times.append(self._batch_deadline)
        if self._pending and self._pending[0].deadline != float("inf"):
            times.append(self._pending[0].deadline)
        return min(times) if times else None

    def handle_timeout(self, now: float) -> None:
        if self._batch_deadline is not None and now >= self._batch_deadline:
            self.flush(now)
        if self._pending and now >= self._pending[0].deadline and self.conn is not None:
            for event in self.fail_pending(Timeout(f"send to {self.topic} timed out")):
                self.conn.emit(event)

    def expire(self, now: float) -> list[SendDone]:
        """Send timeouts while not attached to a connection (the shell calls it while reconnecting)."""
        if self._pending and now >= self._pending[0].deadline:
            return self.fail_pending(Timeout(f"send to {self.topic} timed out"))
        return []

    def close_command(self) -> dict[str, Any]:
        self.closed = True
        return {"producer_id": self.producer_id}


def _fill_metadata(meta: MessageMetadata, message: OutMessage) -> None:
    if message.properties:
        meta.properties.extend(_key_values(message.properties.items()))
    if message.partition_key is not None:
        meta.partition_key = message.partition_key
        if message.key_b64:
            meta.partition_key_b64_encoded = True
    if message.ordering_key is not None:
        meta.ordering_key = message.ordering_key
    if message.event_time:
        meta.event_time = message.event_time
    if message.deliver_at is not None:
        meta.deliver_at_time = message.deliver_at


def _fill_single(single: SingleMessageMetadata, message: OutMessage) -> None:
    if message.properties:
        single.properties.extend(_key_values(message.properties.items()))
    if message.partition_key is not None:
        single.partition_key = message.partition_key
        if message.key_b64:
            single.partition_key_b64_encoded = True
    if message.ordering_key is not None:
        single.ordering_key = message.ordering_key
    if message.event_time:
        single.event_time = message.event_time


def _key_values(items: Iterable[tuple[str, str]]) -> list[Any]:
    from wire.pulsar_api_pb2 import KeyValue

    return [KeyValue(key=k, value=v) for k, v in items]


def _varint(value: int) -> bytes:
    """A protobuf varint (``value`` >= 0)."""
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL = [bytes([i]) for i in range(0x80)]
