"""A consumer on one topic partition (or non-partitioned topic), sans I/O: the incoming queue and its permits (FLOW),
batches split into messages, acknowledgements (batch messages acknowledged when their whole batch is, or with an
ack set inside a transaction), negative acknowledgements on a timer, redelivery with consumer epochs (messages
dispatched before a redelivery request are dropped, as the Java client does), and where a reader resumes after a
reconnection."""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError

from pulsar_txn.exceptions import NotConnected
from wire.commands import make
from wire.compression import decompress
from wire.framing import MessageBody, ProtocolError, parse_body
from wire.message_id import MessageId as WireMessageId
from wire.pulsar_api_pb2 import BaseCommand, CommandAck, CommandSubscribe, SingleMessageMetadata

if TYPE_CHECKING:
    from pulsar_txn.core.connection import Connection
    from pulsar_txn.core.transaction import TransactionCore

T = BaseCommand
#: Acknowledgements outside transactions are grouped for this long (the official clients' ack grouping time).
ACK_GROUP_SECONDS = 0.1
#: ... or until this many are waiting.
ACK_GROUP_MAX = 1000
_U32 = struct.Struct(">I")


@dataclass(slots=True)
class ConsumerConfig:
    """What ``subscribe`` / ``create_reader`` take that the core needs (``pulsar-client`` names)."""

    subscription_name: str
    consumer_type: int = CommandSubscribe.Exclusive
    receiver_queue_size: int = 1000
    consumer_name: str | None = None
    negative_ack_redelivery_delay_ms: int = 60000
    is_read_compacted: bool = False
    properties: dict[str, str] = field(default_factory=dict)
    initial_position: int = CommandSubscribe.Latest
    durable: bool = True
    start_message_id: WireMessageId | None = None
    start_message_id_inclusive: bool = False
    replicate_subscription_state_enabled: bool = False
    key_shared_meta: dict[str, Any] | None = None
    schema: Any = None
    #: ``(max messages, max bytes, timeout ms)`` of ``batch_receive``; None: the official defaults.
    batch_receive_policy: tuple[int, int, int] | None = None
    #: Whether subscribing may create the topic (False: a missing topic fails with ``TopicNotFound``).
    force_topic_creation: bool = True
    #: Acknowledge messages of a batch one by one (``batch_index_ack_enabled``): the broker does not deliver the
    #: acknowledged ones again; else a batch is acknowledged once all of it is.
    batch_index_ack_enabled: bool = False


class BatchAcks:
    """The indexes of a received batch not yet acknowledged: without batch-index acknowledgement, the entry is
    acknowledged once all of them are (as the official clients do)."""

    __slots__ = ("size", "unacked")

    def __init__(self, size: int, unacked: set[int]) -> None:
        self.size = size
        self.unacked = unacked


class EntryInfo:
    """What the messages of one received entry share (one per MESSAGE frame, not per message)."""

    __slots__ = (
        "batch",
        "batch_size",
        "consumer",
        "entry",
        "generation",
        "ledger",
        "meta",
        "partition",
        "redeliveries",
    )

    def __init__(
        self,
        consumer: ConsumerCore,
        ledger: int,
        entry: int,
        meta: Any,
        redeliveries: int,
        batch_size: int,
        batch: BatchAcks | None,
    ) -> None:
        self.consumer = consumer
        self.ledger = ledger
        self.entry = entry
        self.partition = consumer.partition
        self.meta = meta
        self.redeliveries = redeliveries
        self.batch_size = batch_size
        self.batch = batch
        #: The consumer's registration it came in (see :attr:`ConsumerCore.generation`).
        self.generation = consumer.generation


class ReceivedMessage:
    """A message taken from the wire; ``batch_index`` is -1 for a message stored alone. Its metadata is read from
    the entry's (and, in a batch, its own ``SingleMessageMetadata``) only when asked for. A shell hands these out
    as they are: its message class (:attr:`ConsumerCore.message_type`) derives from this one and adds the accessors
    users call, so a received message is one object."""

    __slots__ = ("_single", "batch_index", "info", "payload")

    def __init__(self, info: EntryInfo, batch_index: int, payload: bytes, single: Any) -> None:
        self.info = info
        self.batch_index = batch_index
        self.payload = payload
        #: The message's ``SingleMessageMetadata`` in a batch (its bytes until first read); the entry's
        #: ``MessageMetadata`` otherwise.
        self._single = single

    @property
    def single(self) -> Any:
        """The metadata of this message: its ``SingleMessageMetadata`` in a batch, the entry's ``MessageMetadata``
        otherwise (both carry ``properties``, ``partition_key``, ``ordering_key``, ``event_time``, ``null_value``)."""
        single = self._single
        if type(single) is bytes:
            single = self._single = SingleMessageMetadata.FromString(single)
        return single

    consumer = property(lambda self: self.info.consumer)
    ledger = property(lambda self: self.info.ledger)
    entry = property(lambda self: self.info.entry)
    partition = property(lambda self: self.info.partition)
    batch_size = property(lambda self: self.info.batch_size)
    batch = property(lambda self: self.info.batch)
    generation = property(lambda self: self.info.generation)

    @property
    def position(self) -> tuple[int, int, int]:
        info = self.info
        return (info.ledger, info.entry, self.batch_index)


def ack_set(batch_size: int, acked: range) -> list[int]:
    """A batch's ack set as Java's ``BitSet.toLongArray``: a bit set for each index still unacknowledged (trailing
    zero words left out)."""
    bits = sum(1 << i for i in range(batch_size) if i not in acked)
    words = []
    while bits:
        word = bits & 0xFFFFFFFFFFFFFFFF
        words.append(word - (1 << 64) if word >= 1 << 63 else word)
        bits >>= 64
    return words


class ConsumerCore:
    """One partition's consumer; ``partition`` is -1 for a topic that is not partitioned."""

    #: The class of the messages queued (a shell's subclass of :class:`ReceivedMessage`).
    message_type: type[ReceivedMessage] = ReceivedMessage

    def __init__(self, topic: str, partition: int, config: ConsumerConfig) -> None:
        #: Whatever the shell keeps for this consumer (its consumer object); the core never reads it.
        self.owner: Any = None
        self.topic = topic
        self.partition = partition
        self.config = config
        self.conn: Connection | None = None
        self.consumer_id = 0
        self.consumer_name = config.consumer_name or ""
        self.closed = False
        self.epoch = 0
        #: Counts registrations: the broker delivers again whatever was unacknowledged when the consumer registered
        #: anew, so a message of an earlier registration must not be acknowledged in a transaction.
        self.generation = 0
        self.incoming: deque[ReceivedMessage] = deque()
        #: The last message taken (its position is :attr:`last_dequeued`), or None.
        self._last_taken: ReceivedMessage | None = None
        self._last_position: tuple[int, int, int] | None = None
        #: A reader from the latest message: the broker's last message id when it started (the shell fills it in).
        self.latest_at_start: tuple[int, int, int] | None = None
        self._queue_size = max(1, config.receiver_queue_size)
        #: Permits go back to the broker once this many messages left the queue.
        self._flow_at = max(1, self._queue_size // 2)
        self._to_flow = 0
        self._nacks: dict[tuple[int, int], float] = {}
        self._acks: list[dict[str, Any]] = []
        self._cumulative: dict[str, Any] | None = None
        self._ack_deadline: float | None = None
        self._skip_until: tuple[tuple[int, int, int], bool] | None = None
        start = config.start_message_id
        if start is not None and not start.is_earliest and not start.is_latest:
            self._skip_until = ((start.ledger, start.entry, start.batch_index), config.start_message_id_inclusive)

    # -- registration --------------------------------------------------------------------

    def subscribe_command(self, consumer_id: int) -> dict[str, Any]:
        """The fields of the SUBSCRIBE request that registers this consumer as ``consumer_id``."""
        config = self.config
        fields: dict[str, Any] = {
            "topic": self.topic,
            "subscription": config.subscription_name,
            "subType": config.consumer_type,
            "consumer_id": consumer_id,
            "consumer_name": self.consumer_name,
            "durable": config.durable,
            "initialPosition": config.initial_position,
            "read_compacted": config.is_read_compacted,
            "replicate_subscription_state": config.replicate_subscription_state_enabled,
            "consumer_epoch": self.epoch,
        }
        if not config.force_topic_creation:
            fields["force_topic_creation"] = False
        if config.properties:
            fields["metadata"] = [{"key": k, "value": v} for k, v in config.properties.items()]
        if config.key_shared_meta is not None:
            fields["keySharedMeta"] = config.key_shared_meta
        if config.schema is not None:
            fields["schema"] = config.schema
        if not config.durable:
            start = config.start_message_id
            if self.last_dequeued is not None:
                ledger, entry, index = self.last_dequeued
                start = WireMessageId(ledger, entry, -1, index)
                self._skip_until = (self.last_dequeued, False)
            if start is not None:
                fields["start_message_id"] = start._replace(partition=-1, batch_size=0, ack_set=()).to_proto()
        return fields

    def attach(self, conn: Connection, consumer_id: int) -> None:
        """SUBSCRIBE succeeded on ``conn``: messages queued from the old connection are dropped (the broker sends
        the unacknowledged ones again) and the whole queue is granted as permits."""
        self.conn = conn
        self.consumer_id = consumer_id
        self.generation += 1
        conn.consumers[consumer_id] = self
        self.incoming.clear()
        self._to_flow = 0
        if self._queue_size > 0:
            conn.send(make(T.FLOW, consumer_id=consumer_id, messagePermits=self._queue_size))

    def detach(self, conn: Connection) -> None:
        """The registration is lost: what is queued will be delivered again after the next one."""
        if self.conn is conn:
            self.conn = None
            self.incoming.clear()
            self._acks.clear()
            self._cumulative = None
            self._ack_deadline = None

    @property
    def connected(self) -> bool:
        return self.conn is not None and self.conn.ready

    # -- incoming ------------------------------------------------------------------------

    def _parsed(self, body: bytes) -> MessageBody | None:
        """A MESSAGE's body parsed, or None for one that does not parse (its permit is given back)."""
        try:
            return parse_body(body)
        except ProtocolError:
            self._grant(1)
            return None

    def handle_message(self, command: Any, body: bytes) -> bool:
        """A MESSAGE for this consumer; True if it queued something."""
        parsed = self._parsed(body)
        if parsed is None:
            return False
        meta = parsed.metadata
        if command.HasField("consumer_epoch") and command.consumer_epoch < self.epoch:
            # Dispatched before a redelivery request: it comes again. The broker took a permit per message of it.
            self._grant(_dispatched_count(meta, command.ack_set))
            return False
        mid = command.message_id
        ledger, entry = WireMessageId.from_proto(mid)[:2]
        payload = parsed.payload
        if meta.compression:
            payload = decompress(meta.compression, payload, meta.uncompressed_size, 64 * 1024 * 1024)
        redeliveries = command.redelivery_count
        if not meta.HasField("num_messages_in_batch"):
            message = self.message_type(EntryInfo(self, ledger, entry, meta, redeliveries, 0, None), -1, payload, meta)
            if self._skip_until is not None and self._skipped(message):
                self._grant(1)
                return False
            self.incoming.append(message)
            return True
        count = meta.num_messages_in_batch
        acked = command.ack_set
        unacked = (1 << count) - 1
        if acked:
            unacked = sum((w & 0xFFFFFFFFFFFFFFFF) << (64 * i) for i, w in enumerate(acked))
        info = EntryInfo(self, ledger, entry, meta, redeliveries, count, None)
        pending = set(range(count)) if not acked else {i for i in range(count) if unacked >> i & 1}
        info.batch = BatchAcks(count, pending)
        new = self.message_type
        unpack = _U32.unpack_from
        end_of_payload = len(payload)
        out: list[ReceivedMessage] = []
        add = out.append
        offset = 0
        try:
            for index in range(count):
                (size,) = unpack(payload, offset)
                start = offset + 4
                offset = start + size
                single = payload[start:offset]
                # Encoders write fields in order: with no properties nor key, payload_size (field 3, tag 0x18) leads
                # and its varint is read here; the rest of the metadata is parsed when first read.
                if size > 1 and single[0] == 0x18 and single[1] < 0x80:
                    payload_size = single[1]
                elif size > 2 and single[0] == 0x18 and single[2] < 0x80:
                    payload_size = (single[1] & 0x7F) | single[2] << 7
                else:
                    single = SingleMessageMetadata.FromString(single)
                    payload_size = single.payload_size
                end = offset + payload_size
                if end > end_of_payload:
                    raise ProtocolError("batch message runs past the end of the payload")
                add(new(info, index, payload[offset:end], single))
                offset = end
        except (struct.error, DecodeError, ProtocolError):
            # A malformed batch: none of it is delivered.
            self._grant(count)
            return False
        if acked or self._skip_until is not None:
            # Left out: what the broker's ack set says is acknowledged, and what comes before a start or seek point.
            kept = []
            for message in out:
                index = message.batch_index
                if acked and not unacked >> index & 1:
                    continue
                if self._skipped(message):
                    pending.discard(index)
                    continue
                kept.append(message)
            if len(kept) < count:
                self._grant(count - len(kept))
            out = kept
        self.incoming.extend(out)
        return bool(out)

    @property
    def last_dequeued(self) -> tuple[int, int, int] | None:
        """``(ledger, entry, batch index)`` of the last message taken, or None: where a reader resumes."""
        taken = self._last_taken
        return self._last_position if taken is None else taken.position

    @last_dequeued.setter
    def last_dequeued(self, position: tuple[int, int, int] | None) -> None:
        self._last_taken = None
        self._last_position = position

    def _skipped(self, message: ReceivedMessage) -> bool:
        if self._skip_until is None:
            return False
        start, inclusive = self._skip_until
        position = message.position
        if position[:2] != start[:2]:
            return position[:2] < start[:2]
        if start[2] < 0 and message.batch_index >= 0:
            return not inclusive  # the start names the whole entry
        return position[2] < start[2] if inclusive else position[2] <= start[2]

    def _grant(self, count: int) -> None:
        """Messages left the queue (or never entered it): permits go back to the broker in half-queue steps."""
        self._to_flow += count
        if self._to_flow >= self._flow_at and self.conn is not None and self.conn.ready:
            self.conn.send(make(T.FLOW, consumer_id=self.consumer_id, messagePermits=self._to_flow))
            self._to_flow = 0

    @property
    def flow_at(self) -> int:
        """Permits go back to the broker once this many messages left the queue (half the queue)."""
        return self._flow_at

    def take(self) -> ReceivedMessage | None:
        """The next queued message (its permit goes back), or None."""
        incoming = self.incoming
        if not incoming:
            return None
        message = self._last_taken = incoming.popleft()
        self._to_flow += 1
        if self._to_flow >= self._flow_at:
            self._grant(0)
        return message

    # -- acknowledgements ----------------------------------------------------------------

    def ack_message(self, message: ReceivedMessage, now: float) -> bool:
        """Acknowledge a received message individually, outside a transaction (the common case, its fast path);
        False when nothing was queued for the broker (a batch message whose batch is not complete yet)."""
        info = message.info
        batch = info.batch
        index = message.batch_index
        if batch is not None:
            unacked = batch.unacked
            if index not in unacked:
                return False
            unacked.discard(index)
            if unacked:
                if not self.config.batch_index_ack_enabled:
                    return False
                # The broker keeps the indexes acknowledged (an ack set of the ones still to come).
                return self._batch_index_ack(info.ledger, info.entry, index, info.batch_size, False, now)
        self.ack((info.ledger, info.entry, index), info.batch_size, None, False, now)
        return True

    def _batch_index_ack(self, ledger: int, entry: int, index: int, size: int, cumulative: bool, now: float) -> bool:
        """Queue the acknowledgement of messages of a batch by index (``batch_index_ack_enabled``): ``index``, or
        every index up to it when ``cumulative``."""
        conn = self.conn
        if conn is None or not conn.ready:
            return False
        acked = range(index + 1) if cumulative else range(index, index + 1)
        mid = {
            "ledgerId": _u64(ledger),
            "entryId": _u64(entry),
            "batch_index": index,
            "batch_size": size,
            "ack_set": ack_set(size, acked),
        }
        self._group(mid, cumulative, now)
        return True

    def ack(
        self,
        position: tuple[int, int, int],
        batch_size: int,
        batch: BatchAcks | None,
        cumulative: bool,
        now: float,
        txn: TransactionCore | None = None,
        generation: int | None = None,
    ) -> int | None:
        """Acknowledge a message; a request id to wait for when ``txn`` is given (ACK_RESPONSE), else None.

        Outside a transaction, a batch message is acknowledged when its whole batch is (the last one sends the
        entry's acknowledgement); a cumulative acknowledgement of a batch message not its batch's last acknowledges
        up to the entry before it.
        """
        ledger, entry, index = position
        if index < 0:
            self._nacks.pop((ledger, entry), None)  # a batch's other messages leave its negative ack alone
        conn = self.conn
        if conn is None or not conn.ready:
            if txn is not None:
                raise NotConnected(f"consumer on {self.topic} is not connected")
            return None
        if txn is not None and generation is not None and generation != self.generation:
            raise NotConnected(
                f"the consumer on {self.topic} registered again since this message came; the broker delivers it"
                " again: abort the transaction"
            )
        ack_type = CommandAck.Cumulative if cumulative else CommandAck.Individual
        mid: dict[str, Any] = {"ledgerId": _u64(ledger), "entryId": _u64(entry)}
        if txn is not None:
            if index >= 0 and batch_size:
                acked = range(index + 1) if cumulative else range(index, index + 1)
                mid.update(batch_index=index, batch_size=batch_size, ack_set=ack_set(batch_size, acked))
            return conn.request(
                T.ACK,
                now,
                consumer_id=self.consumer_id,
                ack_type=ack_type,
                message_id=[mid],
                txnid_most_bits=txn.txn_id.most,
                txnid_least_bits=txn.txn_id.least,
            )
        by_index = self.config.batch_index_ack_enabled
        if index >= 0 and batch is not None:
            if cumulative:
                if index < batch.size - 1:
                    if by_index:
                        batch.unacked.difference_update(range(index + 1))
                        self._batch_index_ack(ledger, entry, index, batch_size, True, now)
                        return None
                    if entry == 0:
                        return None
                    mid["entryId"] = _u64(entry - 1)
                batch.unacked.difference_update(range(index + 1))
            else:
                if index not in batch.unacked:
                    return None
                batch.unacked.discard(index)
                if batch.unacked:
                    if by_index:
                        self._batch_index_ack(ledger, entry, index, batch_size, False, now)
                    return None
        self._group(mid, cumulative, now)
        return None

    def _group(self, mid: dict[str, Any], cumulative: bool, now: float) -> None:
        """Queue an acknowledgement (outside a transaction) for the next grouped ACK."""
        if cumulative:
            self._cumulative = mid
        else:
            self._acks.append(mid)
        if len(self._acks) >= ACK_GROUP_MAX:
            self.flush_acks()
        elif self._ack_deadline is None:
            self._ack_deadline = now + ACK_GROUP_SECONDS

    def flush_acks(self) -> None:
        """Send the grouped acknowledgements: one ACK of every individual one, one of the last cumulative one."""
        self._ack_deadline = None
        conn = self.conn
        if conn is None or not conn.ready:
            self._acks.clear()
            self._cumulative = None
            return
        if self._acks:
            conn.send(make(T.ACK, consumer_id=self.consumer_id, ack_type=CommandAck.Individual, message_id=self._acks))
            self._acks = []
        if self._cumulative is not None:
            conn.send(
                make(T.ACK, consumer_id=self.consumer_id, ack_type=CommandAck.Cumulative, message_id=[self._cumulative])
            )
            self._cumulative = None

    def negative_ack(self, ledger: int, entry: int, now: float) -> None:
        """Ask for the entry again after ``negative_ack_redelivery_delay_ms``."""
        self._nacks[(ledger, entry)] = now + self.config.negative_ack_redelivery_delay_ms / 1000

    def redeliver_all(self) -> None:
        """Drop the queue, bump the epoch and ask the broker for every unacknowledged message again."""
        self.flush_acks()
        cleared = len(self.incoming)
        self.incoming.clear()
        self._nacks.clear()
        self.epoch += 1
        if self.conn is not None and self.conn.ready:
            self.conn.send(
                make(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=self.consumer_id, consumer_epoch=self.epoch)
            )
            if cleared:
                self._grant(cleared)

    def seeked(self, start: WireMessageId | None) -> None:
        """A SEEK succeeded: drop the queue. After a seek to a message id, delivery starts after it (at it with
        ``start_message_id_inclusive``), as the official client does; a reader resumes from there."""
        self.incoming.clear()
        self.last_dequeued = None
        inclusive = self.config.start_message_id_inclusive
        if start is None or start.is_earliest or start.is_latest:
            self._skip_until = None
        else:
            self._skip_until = ((start.ledger, start.entry, start.batch_index), inclusive)
        if start is not None and not self.config.durable:
            self.config.start_message_id = start

    def poll_timeout(self) -> float | None:
        due = min(self._nacks.values()) if self._nacks else None
        if self._ack_deadline is not None and (due is None or self._ack_deadline < due):
            due = self._ack_deadline
        return due

    def handle_timeout(self, now: float) -> None:
        if self._ack_deadline is not None and now >= self._ack_deadline:
            self.flush_acks()
        due = [key for key, at in self._nacks.items() if at <= now]
        if not due or self.conn is None or not self.conn.ready:
            return
        for key in due:
            del self._nacks[key]
        self.conn.send(
            make(
                T.REDELIVER_UNACKNOWLEDGED_MESSAGES,
                consumer_id=self.consumer_id,
                message_ids=[{"ledgerId": _u64(ledger), "entryId": _u64(entry)} for ledger, entry in due],
            )
        )


def _dispatched_count(meta: Any, acks: Any) -> int:
    """The messages of an entry the broker counted against the permits: those its ack set leaves unacknowledged."""
    if not meta.HasField("num_messages_in_batch"):
        return 1
    if acks:
        return sum(bin(w & 0xFFFFFFFFFFFFFFFF).count("1") for w in acks)
    return meta.num_messages_in_batch


def _u64(value: int) -> int:
    return value % (1 << 64)
