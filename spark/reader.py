"""Reading one topic partition between two positions, and asking a broker where a partition ends.

A :class:`Position` names one message as ``(ledger, entry, index)``: ``index`` is the message's place in
a batch entry, 0 for a message stored alone. Reads are ranges ``(after, until]``: everything after one
position, up to and including another. Only what the broker dispatches is read: committed
transactional messages and ordinary ones, never aborted or still-open transactions, and never past the
last message id the broker reported (its ``maxReadPosition``).
"""

from __future__ import annotations

import base64
import binascii
import logging
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from google.protobuf.message import DecodeError

from pulsar_txn import Client, MessageId, PulsarException, Timeout, TopicNotFound
from pulsar_txn.core.names import full_topic_name, split_partition
from pulsar_txn.entries import EntryReader
from wire import compression
from wire.batch import split_batch
from wire.message_id import MessageId as WireMessageId
from wire.pulsar_api_pb2 import MessageIdData, MessageMetadata, SingleMessageMetadata

log = logging.getLogger(__name__)

_U32 = struct.Struct(">I")
#: Messages the broker may push ahead of the reader (also the most it sends past the end of a range).
RECEIVER_QUEUE = 5_000
#: Without traffic for this long, the reader asks the broker whether more is coming.
IDLE_CHECK_SECONDS = 1.0


class DataLossError(PulsarException):
    """Messages a read was planned to cover can no longer be read (deleted topic or data)."""


class Position(NamedTuple):
    """A message position ``(ledger, entry, index)``; ``EARLIEST`` is before every message."""

    ledger: int
    entry: int
    index: int

    @classmethod
    def from_message_id(cls, mid: MessageIdData) -> Position:
        """From a ``MessageIdData``: signed ledger and entry ids, as Pulsar reads them (entry -1: before the first)."""
        signed = WireMessageId.from_proto(mid)
        return cls(signed.ledger, signed.entry, max(signed.batch_index, 0))

    @classmethod
    def of(cls, mid: MessageId) -> Position:
        """From a client's message id (entry -1: before the first)."""
        return cls(mid.ledger_id(), mid.entry_id(), max(mid.batch_index(), 0))

    def before(self) -> Position:
        """The position just before this message (reading after it starts at this message)."""
        return Position(self.ledger, self.entry, self.index - 1)

    def to_list(self) -> list[int]:
        return [self.ledger, self.entry, self.index]


EARLIEST = Position(-1, -1, -1)


def message_id_bytes(ledger: int, entry: int, partition: int, index: int, batch_size: int) -> bytes:
    """The protobuf ``MessageIdData`` of one message, as Pulsar's ``MessageId.toByteArray``."""
    mid = MessageIdData(ledgerId=ledger, entryId=entry)
    if partition >= 0:
        mid.partition = partition
    if batch_size > 0:
        mid.batch_index = index
        mid.batch_size = batch_size
    return mid.SerializeToString()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


#: ``batch_index`` fields (tag 4) of serialized message ids, precomputed.
_BATCH_INDEX = [b"\x20" + _varint(i) for i in range(4096)]


def _batch_index_field(index: int) -> bytes:
    return _BATCH_INDEX[index] if index < len(_BATCH_INDEX) else b"\x20" + _varint(index)


def parse_message_id(data: bytes | list[int]) -> Position:
    """A position from serialized ``MessageIdData`` bytes (or the signed byte list of pulsar-spark JSON)."""
    raw = bytes(b & 0xFF for b in data) if isinstance(data, list) else data
    mid = MessageIdData()
    mid.ParseFromString(raw)
    return Position.from_message_id(mid)


# -- payloads -----------------------------------------------------------------------------------------


def decompress(metadata: MessageMetadata, payload: bytes) -> bytes:
    """The uncompressed payload of an entry, whatever codec its producer chose."""
    try:
        return compression.decompress(metadata.compression, payload, metadata.uncompressed_size)
    except compression.CompressionError as exc:
        raise PulsarException(f"a payload does not decompress: {exc}") from None


def key_bytes(partition_key: str | bytes, b64: bool) -> bytes:
    """A message key as bytes (base64-encoded keys are keys set as bytes). The protobuf runtime gives a key that is
    not UTF-8 as bytes; a key flagged base64 that does not decode is taken as it was written."""
    raw = partition_key.encode() if isinstance(partition_key, str) else partition_key
    if b64:
        try:
            return base64.b64decode(raw, validate=True)
        except binascii.Error:
            pass
    return raw


@dataclass(slots=True)
class Message:
    """One message read from a partition."""

    position: Position
    value: bytes | None
    key: bytes | None
    properties: dict[str, str]
    publish_time: int
    event_time: int
    message_id: bytes
    schema_version: bytes


def entry_messages(
    ledger: int, entry: int, partition: int, metadata: MessageMetadata, payload: bytes
) -> Iterator[Message]:
    """The messages of one entry (a batch is split), in order."""
    if metadata.num_chunks_from_msg > 1:
        raise PulsarException("chunked messages are not supported by the Spark connector")
    payload = decompress(metadata, payload)
    publish_time = metadata.publish_time
    version = metadata.schema_version
    if not metadata.HasField("num_messages_in_batch"):
        key = key_bytes(metadata.partition_key, metadata.partition_key_b64_encoded) if metadata.HasField(
            "partition_key"
        ) else None
        yield Message(
            Position(ledger, entry, 0),
            None if metadata.null_value else payload,
            key,
            {kv.key: kv.value for kv in metadata.properties},
            publish_time,
            metadata.event_time,
            message_id_bytes(ledger, entry, partition, 0, 0),
            version,
        )
        return
    count = metadata.num_messages_in_batch
    for index, (single, value) in enumerate(split_batch(payload, count)):
        if single.compacted_out:
            continue
        key = key_bytes(single.partition_key, single.partition_key_b64_encoded) if single.HasField(
            "partition_key"
        ) else None
        yield Message(
            Position(ledger, entry, index),
            None if single.null_value else value,
            key,
            {kv.key: kv.value for kv in single.properties},
            publish_time,
            single.event_time,
            message_id_bytes(ledger, entry, partition, index, count),
            version,
        )


class Columns:
    """Messages of a range gathered column by column: the fast path from entries to Arrow batches.

    ``decode(payload, schema_version)`` turns a value into its cells (None: the raw bytes are the one
    value column). Messages outside ``(after, until]`` are left out.
    """

    def __init__(
        self,
        topic: str,
        after: Position,
        until: Position,
        width: int,
        decode: Callable[[bytes | None, bytes], tuple] | None,
    ) -> None:
        self.topic = topic
        self.partition = split_partition(topic)[1]
        self.after = after
        self.until = until
        self.decode = decode
        self.values: list[list[Any]] = [[] for _ in range(width)]
        self.keys: list[bytes | None] = []
        self.ids: list[bytes] = []
        self.published: list[int] = []
        self.events: list[int | None] = []
        self.properties: list[list[tuple[str, str]] | None] = []
        self._single = SingleMessageMetadata()

    def __len__(self) -> int:
        return len(self.ids)

    def _value(self, value: bytes | None, version: bytes) -> None:
        if self.decode is None:
            self.values[0].append(value)
        else:
            for column, cell in zip(self.values, self.decode(value, version), strict=True):
                column.append(cell)

    def add(self, ledger: int, entry: int, metadata: MessageMetadata, payload: bytes) -> None:
        """Add the messages of one entry that fall in the range."""
        if metadata.num_chunks_from_msg > 1:
            raise PulsarException("chunked messages are not supported by the Spark connector")
        payload = decompress(metadata, payload)
        prefix = MessageIdData(ledgerId=ledger, entryId=entry)
        if self.partition >= 0:
            prefix.partition = self.partition
        head = prefix.SerializeToString()
        after, until = self.after, self.until
        first = after.index + 1 if (ledger, entry) == (after.ledger, after.entry) else 0
        last = until.index if (ledger, entry) == (until.ledger, until.entry) else 1 << 31
        publish = metadata.publish_time * 1000
        version = metadata.schema_version
        if not metadata.HasField("num_messages_in_batch"):
            if first > 0 or last < 0:
                return
            key = metadata.partition_key
            self._value(None if metadata.null_value else payload, version)
            self.keys.append(key_bytes(key, metadata.partition_key_b64_encoded) if key else None)
            self.ids.append(head)
            self.published.append(publish)
            self.events.append(metadata.event_time * 1000 if metadata.event_time else None)
            props = metadata.properties
            self.properties.append([(kv.key, kv.value) for kv in props] if props else None)
            return
        count = metadata.num_messages_in_batch
        size_field = b"\x30" + _varint(count)
        single = self._single
        keys, ids, published, events, properties = self.keys, self.ids, self.published, self.events, self.properties
        plain = self.decode is None
        values = self.values[0]
        unpack = _U32.unpack_from
        offset = 0
        try:
            for index in range(count):
                (size,) = unpack(payload, offset)
                offset += 4
                single.ParseFromString(payload[offset : offset + size])
                offset += size
                end = offset + single.payload_size
                if first <= index <= last and not single.compacted_out:
                    value = None if single.null_value else payload[offset:end]
                    if plain:
                        values.append(value)
                    else:
                        self._value(value, version)
                    key = single.partition_key
                    keys.append(key_bytes(key, single.partition_key_b64_encoded) if key else None)
                    ids.append(head + _batch_index_field(index) + size_field)
                    published.append(publish)
                    event = single.event_time
                    events.append(event * 1000 if event else None)
                    props = single.properties
                    properties.append([(kv.key, kv.value) for kv in props] if props else None)
                offset = end
        except (struct.error, DecodeError) as exc:
            raise PulsarException(f"{self.topic}: malformed batch in entry {ledger}:{entry}: {exc}") from None

    def clear(self) -> None:
        for column in (*self.values, self.keys, self.ids, self.published, self.events, self.properties):
            column.clear()


# -- subscriptions ------------------------------------------------------------------------------------


def _open(client: Client, topic: str, start: Position | None) -> EntryReader:
    """A reader of ``topic``'s entries from the one holding the message after ``start`` (None: reads nothing, only
    answers last-message-id requests); a missing topic raises ``TopicNotFound`` rather than being created."""
    if start is None:
        return client.create_entry_reader(topic, MessageId.latest, 0, force_topic_creation=False)
    # With a batch index set, Pulsar starts at the entry itself; the reader drops what it has seen. An entry of -1
    # (before the ledger's first entry) starts at its first entry.
    start_id = MessageId.earliest if start.ledger < 0 else MessageId(-1, start.ledger, start.entry, max(start.index, 0))
    return client.create_entry_reader(topic, start_id, RECEIVER_QUEUE, force_topic_creation=False)


def is_empty(position: Position) -> bool:
    """True for a "last message id" that names no message (empty topic)."""
    return position.ledger < 0 or position.entry < 0


class PartitionReader:
    """Reads the messages of one partition in ``(after, until]``.

    ``poll_timeout`` bounds how long the reader waits for messages it was told exist; then it raises
    :class:`DataLossError` (``fail_on_data_loss``) or logs and stops.
    """

    def __init__(
        self,
        client: Client,
        topic: str,
        after: Position,
        until: Position,
        *,
        poll_timeout: float = 120.0,
        fail_on_data_loss: bool = True,
    ) -> None:
        self.client = client
        self.topic = full_topic_name(topic)
        self.after = after
        self.until = until
        self.poll_timeout = poll_timeout
        self.fail_on_data_loss = fail_on_data_loss
        self.last_seen = after

    def _lost(self, why: str) -> None:
        text = f"{self.topic}: messages in ({self.after.to_list()}, {self.until.to_list()}] {why}"
        if self.fail_on_data_loss:
            raise DataLossError(text + " (set failOnDataLoss=false to go on)")
        log.warning("%s; going on without them", text)

    def entries(self) -> Iterator[tuple[int, int, MessageMetadata, bytes]]:
        """``(ledger, entry, metadata, payload)`` of the entries that hold messages of the range."""
        if self.until <= self.after:
            return
        try:
            reader = _open(self.client, self.topic, self.after)
        except TopicNotFound:
            self._lost("are gone: the topic does not exist")
            return
        try:
            yield from self._entries(reader)
        finally:
            reader.close()

    def _entries(self, reader: EntryReader) -> Iterator[tuple[int, int, MessageMetadata, bytes]]:
        idle_since = time.monotonic()
        next_check = idle_since + IDLE_CHECK_SECONDS
        until, after = self.until, self.after
        while True:
            wait = min(next_check, idle_since + self.poll_timeout) - time.monotonic()
            try:
                found = reader.read_entry(max(1, int(wait * 1000)))
            except Timeout:
                found = None
            if found is not None:
                ledger, entry = found.ledger_id, found.entry_id
                last = Position(ledger, entry, found.message_count - 1)
                if last <= after:
                    continue
                if Position(ledger, entry, 0) > until:
                    return
                self.last_seen = last
                yield ledger, entry, found.metadata, found.payload
                if last >= until:
                    return
                idle_since = time.monotonic()
                next_check = idle_since + IDLE_CHECK_SECONDS
                continue
            now = time.monotonic()
            if now >= next_check:
                broker_last = Position.of(reader.get_last_message_id())
                if is_empty(broker_last) or broker_last <= self.last_seen:
                    if self.last_seen < until:
                        self._lost(f"end at {self.last_seen.to_list()}: the broker has no more")
                    return
                next_check = now + IDLE_CHECK_SECONDS
            if now - idle_since > self.poll_timeout:
                self._lost(f"did not arrive within {self.poll_timeout:.0f} s")
                return

    def messages(self) -> Iterator[Message]:
        """The messages of the range, in order."""
        partition = split_partition(self.topic)[1]
        after, until = self.after, self.until
        for ledger, entry, metadata, payload in self.entries():
            for message in entry_messages(ledger, entry, partition, metadata, payload):
                if after < message.position <= until:
                    yield message


def count_until(
    client: Client, topic: str, after: Position, latest: Position, budget: int, poll_timeout: float = 30.0
) -> tuple[Position, int]:
    """Where to cut ``(after, latest]`` so it holds at most ``budget`` messages: ``(cut, messages)``."""
    if budget <= 0 or latest <= after:
        return after, 0
    reader = PartitionReader(client, topic, after, latest, poll_timeout=poll_timeout, fail_on_data_loss=False)
    taken = 0
    cut = after
    for ledger, entry, metadata, _ in reader.entries():
        count = metadata.num_messages_in_batch if metadata.HasField("num_messages_in_batch") else 1
        first = after.index + 1 if (ledger, entry) == (after.ledger, after.entry) else 0
        last = count - 1
        if (ledger, entry) == (latest.ledger, latest.entry):
            last = min(last, latest.index)
        available = last - first + 1
        if available <= 0:
            continue
        if taken + available >= budget:
            return Position(ledger, entry, first + budget - taken - 1), budget
        taken += available
        cut = Position(ledger, entry, last)
    return (latest if reader.last_seen >= latest else cut), taken


class TopicProbe:
    """Asks the broker for the last message id of partitions, keeping one idle reader per partition."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._readers: dict[str, EntryReader] = {}

    def last_position(self, topic: str) -> Position | None:
        """The last dispatchable message of ``topic`` (None when the topic does not exist)."""
        topic = full_topic_name(topic)
        for attempt in range(2):
            reader = self._readers.get(topic)
            try:
                if reader is None or not reader.is_connected():
                    if reader is not None:
                        reader.close()
                    reader = self._readers[topic] = _open(self.client, topic, None)
                return Position.of(reader.get_last_message_id())
            except TopicNotFound:
                self._readers.pop(topic, None)
                return None
            except PulsarException:
                self._readers.pop(topic, None)
                if attempt:
                    raise
        return None

    def close(self) -> None:
        """Close every reader."""
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()
