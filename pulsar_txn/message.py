"""Message ids and received messages, with the accessors of ``pulsar-client``."""

from __future__ import annotations

from functools import total_ordering
from typing import Any

from pulsar_txn.core.consumer import BatchAcks, ConsumerCore, ReceivedMessage
from wire.message_id import INT64_MAX
from wire.message_id import MessageId as WireMessageId
from wire.pulsar_api_pb2 import MessageIdData


@total_ordering
class MessageId:
    """A message id: ``MessageId(partition=-1, ledger_id=-1, entry_id=-1, batch_index=-1)`` as in ``pulsar-client``;
    ``MessageId.earliest`` and ``MessageId.latest`` name the ends of a topic. ``serialize()`` writes the protocol's
    ``MessageIdData``, so ids pass between this client and the official ones."""

    earliest: MessageId
    latest: MessageId

    __slots__ = ("_batch", "_batch_size", "_consumer", "_generation", "_id", "_topic")

    def __init__(self, partition: int = -1, ledger_id: int = -1, entry_id: int = -1, batch_index: int = -1) -> None:
        self._id = WireMessageId(ledger_id, entry_id, partition, batch_index)
        self._batch_size = 0
        self._batch: BatchAcks | None = None
        self._consumer: ConsumerCore | None = None
        self._topic: str | None = None
        self._generation: int | None = None

    def ledger_id(self) -> int:
        return self._id.ledger

    def entry_id(self) -> int:
        return self._id.entry

    def batch_index(self) -> int:
        return self._id.batch_index

    def partition(self) -> int:
        return self._id.partition

    def batch_size(self) -> int:
        """Messages in this id's batch (0: stored alone or unknown)."""
        return self._batch_size

    def topic_name(self) -> str | None:
        return self._topic

    def serialize(self) -> bytes:
        """The id as bytes (the protocol's ``MessageIdData``), for :meth:`deserialize`."""
        data = MessageIdData()
        self._id._replace(batch_size=self._batch_size).to_proto(data)
        return data.SerializeToString()

    @staticmethod
    def deserialize(message_id_bytes: bytes, topic: str | None = None) -> MessageId:
        """The id :meth:`serialize` wrote (by this client or an official one)."""
        wire = WireMessageId.from_proto(MessageIdData.FromString(message_id_bytes))
        out = MessageId(wire.partition, wire.ledger, wire.entry, wire.batch_index)
        out._batch_size = wire.batch_size
        out._topic = topic
        return out

    @property
    def wire(self) -> WireMessageId:
        return self._id

    def _key(self) -> tuple[int, int, int, int]:
        return (self._id.ledger, self._id.entry, self._id.batch_index, self._id.partition)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: MessageId) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        i = self._id
        return f"({i.ledger},{i.entry},{i.partition},{i.batch_index})"

    def __repr__(self) -> str:
        return f"MessageId{self}"


MessageId.earliest = MessageId(-1, -1, -1, -1)
MessageId.latest = MessageId(-1, INT64_MAX, INT64_MAX, -1)


class Message(ReceivedMessage):
    """A received message (``msg.data()``, ``msg.value()``, ``msg.message_id()``... as in ``pulsar-client``): the
    consumer core queues these directly (one object per message)."""

    __slots__ = ("_id",)

    def data(self) -> bytes:
        """The payload as bytes."""
        return self.payload

    def value(self) -> Any:
        """The payload decoded with the consumer's schema."""
        return self.info.consumer.owner._schema.decode(self.payload)

    def properties(self) -> dict[str, str]:
        return {kv.key: kv.value for kv in self.single.properties}

    def partition_key(self) -> str:
        """The key ("" without one, as the official client)."""
        single = self.single
        return single.partition_key if single.HasField("partition_key") else ""

    def ordering_key(self) -> str:
        single = self.single
        key = single.ordering_key if single.HasField("ordering_key") else b""
        return key.decode("utf-8", "replace") if key else ""

    def publish_timestamp(self) -> int:
        """Milliseconds since the epoch."""
        return self.info.meta.publish_time

    def event_timestamp(self) -> int:
        """Milliseconds since the epoch; 0 when not set."""
        return self.single.event_time

    def message_id(self) -> MessageId:
        try:
            return self._id
        except AttributeError:
            pass
        info = self.info
        mid = MessageId(info.partition, info.ledger, info.entry, self.batch_index)
        consumer = info.consumer
        mid._batch_size, mid._batch, mid._consumer, mid._topic = info.batch_size, info.batch, consumer, consumer.topic
        mid._generation = info.generation
        self._id = mid
        return mid

    def topic_name(self) -> str:
        return self.info.consumer.topic

    def redelivery_count(self) -> int:
        return self.info.redeliveries

    def schema_version(self) -> int:
        meta = self.info.meta
        version = meta.schema_version if meta.HasField("schema_version") else None
        return int.from_bytes(version, "big", signed=True) if version and len(version) == 8 else -1

    def producer_name(self) -> str:
        return self.info.meta.producer_name

    def has_null_value(self) -> bool:
        return self.single.null_value

    def __repr__(self) -> str:
        return f"Message({self.message_id()}, {self.payload[:40]!r})"
