"""A consumer core that hands out whole entries, as the broker stores them: a batch is not split and a compressed
payload is not decompressed. What a reader of ranges of a partition (the Spark source) needs to turn entries into
columns itself; it follows the flow control and reconnection of :class:`ConsumerCore`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pulsar_txn.core.consumer import ConsumerConfig, ConsumerCore
from wire.message_id import MessageId as WireMessageId
from wire.pulsar_api_pb2 import MessageMetadata


@dataclass(slots=True)
class Entry:
    """One stored entry: ``metadata`` is its ``MessageMetadata`` (``num_messages_in_batch`` set for a batch),
    ``payload`` its bytes as stored (compressed with ``metadata.compression``, a batch's messages still inside)."""

    ledger_id: int
    entry_id: int
    partition: int
    metadata: MessageMetadata
    payload: bytes
    #: Whether the payload matched its CRC32-C checksum (True when it carried none).
    checksum_ok: bool = True

    @property
    def message_count(self) -> int:
        """The messages of the entry (1 unless it is a batch)."""
        meta = self.metadata
        return meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1


class EntryConsumerCore(ConsumerCore):
    """A consumer (a reader's non-durable subscription, usually) whose queue holds :class:`Entry` values.

    A ``receiver_queue_size`` of 0 grants no permits: such a consumer receives nothing and serves requests about its
    topic (the last message id). After a reconnection, entries up to the last one taken are not queued again.
    """

    def __init__(self, topic: str, partition: int, config: ConsumerConfig) -> None:
        super().__init__(topic, partition, config)
        self._queue_size = max(0, config.receiver_queue_size)
        self._flow_at = max(1, self._queue_size // 2)
        self._skip_until = None

    def handle_message(self, command: Any, body: bytes) -> bool:
        parsed = self._parsed(body)
        if parsed is None:
            return False
        ledger, entry = WireMessageId.from_proto(command.message_id)[:2]
        found = Entry(ledger, entry, self.partition, parsed.metadata, parsed.payload, parsed.checksum_ok)
        if self._skip_until is not None:
            (last_ledger, last_entry, _), _inclusive = self._skip_until
            if (ledger, entry) <= (last_ledger, last_entry):
                self._grant(found.message_count)
                return False
        self.incoming.append(found)  # type: ignore[arg-type]
        return True

    def take(self) -> Entry | None:  # type: ignore[override]
        """The next queued entry (its permits go back), or None."""
        if not self.incoming:
            return None
        found: Entry = self.incoming.popleft()  # type: ignore[assignment]
        count = found.message_count
        self.last_dequeued = (found.ledger_id, found.entry_id, count - 1)
        self._grant(count)
        return found
