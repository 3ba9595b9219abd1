"""Entries of a topic log: a stored message body plus what dispatch needs to know about it."""

from __future__ import annotations

from dataclasses import dataclass

from wire.framing import stored_metadata
from wire.message_id import signed64
from wire.pulsar_api_pb2 import MessageMetadata
from wire.validate import MAX_BATCH_MESSAGES

#: The sticky key of a message with neither ordering key nor partition key (as Pulsar does).
NONE_KEY = b"NONE_KEY"


@dataclass(slots=True)
class Entry:
    """One entry: a single message or a whole batch, stored as ``[0x0e01][crc][metaSize][meta][payload]``."""

    entry_id: int
    body: bytes
    num_messages: int
    is_batch: bool
    publish_time: int
    sticky_key: bytes
    #: ``(most, least)`` bits of the transaction the entry was published in, if any.
    txn: tuple[int, int] | None = None
    #: ``MarkerType`` of a server-written marker (0 for messages).
    marker: int = 0
    #: Delayed delivery: epoch milliseconds before which (Key_)Shared subscriptions hold the entry back (0: none).
    deliver_at: int = 0

    @classmethod
    def from_metadata(cls, entry_id: int, body: bytes, meta: MessageMetadata) -> Entry:
        """Describe a body whose metadata is already parsed."""
        has = meta.HasField  # bound once: this runs for every published message
        if has("ordering_key"):
            key = meta.ordering_key
        elif has("partition_key"):
            key = meta.partition_key
            # A key that is not UTF-8 comes as the bytes it was (as Pulsar, which hashes the key's bytes).
            key = key.encode() if isinstance(key, str) else key
        else:
            key = NONE_KEY
        txn = None
        if has("txnid_most_bits") or has("txnid_least_bits"):
            txn = (meta.txnid_most_bits, meta.txnid_least_bits)
        # Unset, deliver_at_time and marker_type read 0: no delay, no marker. The count is batch_count's, inline.
        count = meta.num_messages_in_batch
        return cls(
            entry_id,
            body,
            0 if count < 0 else count if count < MAX_BATCH_MESSAGES else MAX_BATCH_MESSAGES,
            has("num_messages_in_batch"),
            signed64(meta.publish_time),
            key,
            txn,
            meta.marker_type,
            meta.deliver_at_time,
        )

    @classmethod
    def from_plain(
        cls, entry_id: int, body: bytes, publish_time: int, batch: int | None, txn: tuple[int, int] | None = None
    ) -> Entry:
        """Describe a body whose metadata holds only what :func:`wire.framing.scan_plain_metadata` takes: its publish
        time and its ``num_messages_in_batch`` (None if absent), and the ``(most, least)`` ids of its transaction if
        it names one (:func:`wire.framing.scan_txn_metadata`); as :meth:`from_metadata` describes it."""
        if batch is None:
            return cls(entry_id, body, 1, False, publish_time, NONE_KEY, txn)
        count = batch if batch < MAX_BATCH_MESSAGES else MAX_BATCH_MESSAGES
        return cls(entry_id, body, count, True, publish_time, NONE_KEY, txn)

    @classmethod
    def from_body(cls, entry_id: int, body: bytes) -> Entry:
        """Describe a stored body (parses its metadata)."""
        return cls.from_metadata(entry_id, body, stored_metadata(body))
