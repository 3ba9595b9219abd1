"""A producer on one topic partition (or non-partitioned topic), sans I/O: batching, sequence ids, entries in flight
and their receipts, send timeouts, and re-sending what was in flight when it registers on a new connection."""

from __future__ import annotations

import functools
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pulsar_txn.core.connection import SendDone
from pulsar_txn.exceptions import (
    AlreadyClosed,
    ConnectError,
    MessageTooBig,
    PulsarException,
    Timeout,
    TopicTerminated,
    from_server_error,
)
from wire.commands import make
from wire.compression import compress
from wire.framing import make_body, parse_body
from wire.message_id import MessageId as WireMessageId
from wire.pulsar_api_pb2 import BaseCommand, CompressionType, MessageMetadata, ServerError, SingleMessageMetadata

if TYPE_CHECKING:
    from pulsar_txn.core.connection import Connection
    from pulsar_txn.core.transaction import TransactionCore

T = BaseCommand
_U32 = struct.Struct(">I")
#: Read once: an attribute of a protobuf enum wrapper is a Python-level lookup on every entry.
_NO_COMPRESSION = CompressionType.NONE
_SEND = T.SEND


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


def _has_single_metadata(message: OutMessage) -> bool:
    """Whether ``message`` in a batch needs more single-message metadata than its payload size and sequence id."""
    return bool(
        message.properties
        or message.partition_key is not None
        or message.ordering_key is not None
        or message.event_time
    )


@dataclass(slots=True)
class _Entry:
    """An entry sent (or to be sent again after a reconnection) and not yet receipted."""

    sequence_id: int
    highest_sequence_id: int
    #: The tokens of its messages, in order.
    tokens: list[Any]
    #: Whether it is in the batch format (its messages' ids carry batch indexes).
    batched: bool
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
        #: The broker answered a SEND with TopicTerminatedError: every send fails from then on.
        self.terminated = False
        self.last_sequence_id = -1 if config.initial_sequence_id is None else config.initial_sequence_id
        self._next_sequence = self.last_sequence_id + 1
        # The open batch: its messages' payloads and tokens, in order; by index, those of its messages that carry
        # more than a payload (an OutMessage: single-message metadata, their own sequence id); the message that
        # opened it, whose batch-level fields (transaction, key, schema version, replication) it takes (None: a
        # payload alone, sent by send_payload).
        self._batch_payloads: list[bytes] = []
        self._batch_tokens: list[Any] = []
        self._batch_detailed: dict[int, OutMessage] = {}
        self._batch_head: OutMessage | None = None
        self._batch_bytes = 0
        self._batch_deadline: float | None = None
        self._pending: deque[_Entry] = deque()
        #: Messages queued (in the open batch) or in flight (in ``_pending``).
        self.pending_count = 0
        self.max_message_size = 5 * 1024 * 1024
        #: Where publish times come from (epoch seconds): the wall clock, or a simulation's clock so that a run
        #: is a function of its seed.
        self.wall_clock: Callable[[], float] = time.time

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

    def send(self, message: OutMessage, now: float) -> bool:
        """Queue ``message``: into the open batch, or as an entry of its own. True if the shell has work: a batch
        opened (a timer :meth:`poll_timeout` now reports) or an entry sent (bytes to transmit)."""
        self._check_open()
        if len(message.payload) > self.max_message_size:
            raise MessageTooBig(f"message of {len(message.payload)} bytes exceeds {self.max_message_size}")
        if not self.config.batching_enabled or message.deliver_at is not None:
            self.flush(now)
            self._send_single(message, now)
            return True
        detailed = message.sequence_id is not None or _has_single_metadata(message)
        return self._add(message.payload, message.token, message, detailed, now)

    def send_payload(self, payload: bytes, token: Any, now: float) -> bool:
        """Queue a message that is a payload and nothing else (no transaction, keys, properties, event time or
        sequence id of its own): :meth:`send` of ``OutMessage(payload, token)`` without building one when batching."""
        if not self.config.batching_enabled:
            return self.send(OutMessage(payload, token), now)
        self._check_open()
        if len(payload) > self.max_message_size:
            raise MessageTooBig(f"message of {len(payload)} bytes exceeds {self.max_message_size}")
        return self._add(payload, token, None, False, now)

    def _check_open(self) -> None:
        if self.closed:
            raise AlreadyClosed(f"producer on {self.topic} is closed")
        if self.terminated:
            raise TopicTerminated(f"topic {self.topic} was terminated")

    def _add(self, payload: bytes, token: Any, message: OutMessage | None, detailed: bool, now: float) -> bool:
        """Put a message into the open batch (flushed first if the message cannot join it); ``message`` is None for
        a payload alone. Returns what :meth:`send` does."""
        config = self.config
        flushed = False
        if self._batch_payloads:
            head = self._batch_head
            if (
                (None if message is None else message.txn) is not (None if head is None else head.txn)
                or len(self._batch_payloads) >= config.batching_max_messages
                or self._batch_bytes + len(payload) > config.batching_max_allowed_size_in_bytes
            ):
                self.flush(now)
                flushed = True
        payloads = self._batch_payloads
        opened = not payloads
        if opened:
            self._batch_deadline = now + config.batching_max_publish_delay_ms / 1000
            self._batch_head = message
        if detailed:
            self._batch_detailed[len(payloads)] = message  # type: ignore[assignment]
        payloads.append(payload)
        self._batch_tokens.append(token)
        self._batch_bytes += len(payload)
        self.pending_count += 1
        if len(payloads) >= config.batching_max_messages:
            self.flush(now)
            return True
        return opened or flushed

    def flush(self, now: float) -> None:
        """Send the open batch as one entry."""
        if self._batch_payloads:
            payloads, tokens, detailed, head = (
                self._batch_payloads,
                self._batch_tokens,
                self._batch_detailed,
                self._batch_head,
            )
            self._clear_batch()
            self._send_batch(payloads, tokens, detailed, head, now)

    def _clear_batch(self) -> None:
        self._batch_payloads, self._batch_tokens, self._batch_detailed, self._batch_head = [], [], {}, None
        self._batch_bytes, self._batch_deadline = 0, None

    def discard(self, txn: TransactionCore) -> list[Any]:
        """Drop unsent batched messages of ``txn`` (it is being aborted); their tokens are returned to be failed."""
        head = self._batch_head
        if self._batch_payloads and head is not None and head.txn is txn:
            dropped = self._batch_tokens
            self._clear_batch()
            self.pending_count -= len(dropped)
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

    def _send_single(self, message: OutMessage, now: float) -> None:
        """Send ``message`` as an entry of its own (not in the batch format)."""
        meta = MessageMetadata(producer_name=self.name, publish_time=int(self.wall_clock() * 1000))
        sequence = self._sequence(message)
        _fill_metadata(meta, message)
        self.pending_count += 1
        self._send_entry(meta, message.payload, sequence, sequence, [message.token], False, message, now)

    def _send_batch(
        self,
        payloads: list[bytes],
        tokens: list[Any],
        detailed: dict[int, OutMessage],
        head: OutMessage | None,
        now: float,
    ) -> None:
        """Send a batch: its messages each behind their single-message metadata, in one entry."""
        meta = MessageMetadata(producer_name=self.name, publish_time=int(self.wall_clock() * 1000))
        if not detailed:  # payloads alone: consecutive sequence ids, metadata encoded here
            sequence = self._next_sequence
            highest = sequence + len(payloads) - 1
            self._next_sequence = highest + 1
            payload = _plain_batch(payloads, sequence)
        else:
            sequences: list[int] = []
            parts: list[bytes] = []
            for index, data in enumerate(payloads):
                message = detailed.get(index)
                if message is None:
                    seq = self._next_sequence
                    self._next_sequence = seq + 1
                else:
                    seq = self._sequence(message)
                if message is not None and _has_single_metadata(message):
                    single = SingleMessageMetadata(payload_size=len(data), sequence_id=seq)
                    _fill_single(single, message)
                    encoded = single.SerializeToString()
                else:  # payload_size (field 3) and sequence_id (field 8), encoded here: the common case
                    encoded = b"\x18" + _varint(len(data)) + b"\x40" + _varint(seq)
                sequences.append(seq)
                parts += (_U32.pack(len(encoded)), encoded, data)
            sequence, highest = sequences[0], sequences[-1]
            payload = b"".join(parts)
        meta.num_messages_in_batch = len(payloads)
        if head is not None:
            if head.partition_key is not None:
                meta.partition_key = head.partition_key
                meta.partition_key_b64_encoded = head.key_b64
            if head.ordering_key is not None:
                meta.ordering_key = head.ordering_key
        if highest != sequence:
            meta.highest_sequence_id = highest
        self._send_entry(meta, payload, sequence, highest, tokens, True, head, now)

    def _send_entry(
        self,
        meta: MessageMetadata,
        payload: bytes,
        sequence: int,
        highest: int,
        tokens: list[Any],
        batched: bool,
        head: OutMessage | None,
        now: float,
    ) -> None:
        """Finish ``meta`` with the entry-level fields of ``head`` (its first message) and queue the entry."""
        meta.sequence_id = sequence
        txn = None
        if head is not None:
            txn = head.txn
            if head.schema_version is not None:
                meta.schema_version = head.schema_version
            elif self.schema_version is not None:
                meta.schema_version = self.schema_version
            if txn is not None:
                meta.txnid_most_bits, meta.txnid_least_bits = txn.txn_id
            if head.replication_clusters:
                meta.replicate_to.extend(head.replication_clusters)
            elif head.disable_replication:
                meta.replicate_to.append("__local__")
        elif self.schema_version is not None:
            meta.schema_version = self.schema_version
        if self.config.compression_type != _NO_COMPRESSION:
            meta.compression = self.config.compression_type
            meta.uncompressed_size = len(payload)
            payload = compress(self.config.compression_type, payload)
        self.last_sequence_id = highest
        entry = _Entry(
            sequence,
            highest,
            tokens,
            batched,
            make_body(meta, payload),
            now + self.config.send_timeout_millis / 1000 if self.config.send_timeout_millis > 0 else float("inf"),
            txn,
        )
        if txn is not None:
            txn.ops += len(tokens)
        self._pending.append(entry)
        if self.conn is not None and self.conn.ready:
            self._write(entry)

    def _write(self, entry: _Entry) -> None:
        assert self.conn is not None
        fields: dict[str, Any] = {
            "producer_id": self.producer_id,
            "sequence_id": entry.sequence_id,
            "num_messages": len(entry.tokens),
        }
        if entry.highest_sequence_id != entry.sequence_id:
            fields["highest_sequence_id"] = entry.highest_sequence_id
        if entry.txn is not None:
            fields["txnid_most_bits"], fields["txnid_least_bits"] = entry.txn.txn_id
        self.conn.send(make(_SEND, **fields), entry.body)

    # -- receipts and timers -------------------------------------------------------------

    def handle_receipt(self, command: BaseCommand) -> list[SendDone]:
        """A SEND_RECEIPT or SEND_ERROR for this producer."""
        if command.type == T.SEND_ERROR:
            return self._handle_send_error(command.send_error)
        receipt = command.send_receipt
        if not self._pending or self._pending[0].sequence_id > receipt.sequence_id:
            return []  # for an entry that already failed (or timed out): nothing waits for it
        if self._pending[0].sequence_id < receipt.sequence_id:
            # The broker answers in order: a receipt past the oldest entry means answers were lost. As the official
            # clients, close the connection so that everything in flight is sent again (deduplication keeps one).
            if self.conn is not None:
                self.conn.close(ConnectError(f"receipt out of order on {self.topic}"))
            return []
        entry = self._pending.popleft()
        count = len(entry.tokens)
        self.pending_count -= count
        base = WireMessageId.from_proto(receipt.message_id)
        batched = entry.batched
        ledger, entry_id, partition = base.ledger, base.entry, self.partition
        events = [
            SendDone(token, (ledger, entry_id, partition, index if batched else -1, count))
            for index, token in enumerate(entry.tokens)
            if token is not None  # nobody waits for the others
        ]
        if entry.txn is not None:
            entry.txn.ops -= count
        return events

    def _handle_send_error(self, answer: Any) -> list[SendDone]:
        """A SEND_ERROR, handled per error code as the official clients do: a corrupt entry, a send the broker does
        not allow (into a transaction that ended) fail alone; a terminated topic fails everything; any other error
        (the broker could not store, a checksum that was fine here) closes the connection, so that the producer
        registers again and sends what is in flight once more, as it does after any lost connection."""
        error = from_server_error(answer.error, answer.message)
        head = self._pending[0] if self._pending else None
        matches = head is not None and answer.sequence_id in (head.sequence_id, head.highest_sequence_id)
        if answer.error == ServerError.TopicTerminatedError:
            self.terminated = True
            return self.fail_pending(error)
        if answer.error == ServerError.NotAllowedError:
            return self._fail_head(error) if matches else []
        if answer.error == ServerError.ChecksumError and matches and not parse_body(head.body).checksum_ok:  # type: ignore[union-attr]
            return self._fail_head(error)
        if self.conn is not None:
            self.conn.close(ConnectError(f"send error from the broker on {self.topic}: {error}"))
        return []

    def _fail_head(self, error: PulsarException) -> list[SendDone]:
        """Fail the oldest entry in flight alone."""
        entry = self._pending.popleft()
        count = len(entry.tokens)
        self.pending_count -= count
        if entry.txn is not None:
            entry.txn.ops -= count
            entry.txn.failed_ops += count
        return [SendDone(token, None, error) for token in entry.tokens]

    def fail_pending(self, error: PulsarException) -> list[SendDone]:
        """Fail every queued and in-flight message with ``error``."""
        events = []
        for entry in self._pending:
            if entry.txn is not None:
                entry.txn.ops -= len(entry.tokens)
                entry.txn.failed_ops += len(entry.tokens)
            events += [SendDone(token, None, error) for token in entry.tokens]
        self._pending.clear()
        events += [SendDone(token, None, error) for token in self._batch_tokens]
        self._clear_batch()
        self.pending_count = 0
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


def _plain_batch(payloads: list[bytes], first: int) -> bytes:
    """The batch payload of messages that are payloads alone, with sequence ids from ``first`` on: each behind its
    single-message metadata of payload_size (field 3) and sequence_id (field 8), encoded here.

    A sequence id's varint is its low 7 bits (continued) then the varint of the rest, which changes once in 128
    ids: when the payloads are of one size (the usual batch), each message is a start from a table (kept per size),
    that rest and its payload, put together without a Python step per message."""
    count = len(payloads)
    size = len(payloads[0])
    if list(map(len, payloads)).count(size) != count:
        return b"".join(_single_parts(payloads, first))
    starts: list[bytes] = []
    rests: list[bytes] = []
    sequence, end = first, first + count
    while sequence < end:
        high = sequence >> 7
        stop = min(end, (high + 1) << 7)
        rest = _varint(high) if high else b""
        starts += _head_starts(size, len(rest))[sequence & 0x7F : (stop - 1 & 0x7F) + 1]
        rests += [rest] * (stop - sequence)
        sequence = stop
    parts: list[bytes] = [b""] * (3 * count)
    parts[::3] = starts
    parts[1::3] = rests
    parts[2::3] = payloads
    return b"".join(parts)


@functools.lru_cache(maxsize=64)
def _head_starts(size: int, rest: int) -> list[bytes]:
    """For sequence ids whose varint continues with ``rest`` bytes (0: ids below 128), by their low 7 bits: the
    single-message metadata of a ``size``-byte payload up to that varint's rest (all of it for ids below 128)."""
    encoded_size = _varint(size)
    start = _U32.pack(3 + len(encoded_size) + rest) + b"\x18" + encoded_size + b"\x40"
    return [start + low for low in (_CONTINUED if rest else _SMALL)]


def _single_parts(payloads: list[bytes], first: int) -> list[bytes]:
    """:func:`_plain_batch` of payloads of different sizes, as a list of parts to join."""
    parts: list[bytes] = []
    sequence = first
    for data in payloads:
        encoded = b"\x18" + _varint(len(data)) + b"\x40" + _varint(sequence)
        parts += (_U32.pack(len(encoded)) + encoded, data)
        sequence += 1
    return parts


def _varint(value: int) -> bytes:
    """A protobuf varint (``value`` >= 0)."""
    if value < 0x80:
        return _SMALL[value]
    if value < 0x4000:
        return bytes((value & 0x7F | 0x80, value >> 7))
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL = [bytes([i]) for i in range(0x80)]
#: The first byte of a varint of 128 or more, by its low 7 bits.
_CONTINUED = [bytes([i | 0x80]) for i in range(0x80)]
