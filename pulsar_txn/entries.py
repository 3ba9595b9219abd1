"""Reading a topic partition entry by entry: :meth:`pulsar_txn.Client.create_entry_reader`.

Lower level than a reader: an :class:`~pulsar_txn.core.entries.Entry` is a stored entry whose batch is not split and
whose payload is not decompressed, for code that decodes entries itself (the Spark source builds Arrow columns from
them). Like a reader it uses a non-durable subscription, survives reconnections (resuming after the last entry
taken) and asks the broker for the topic's last message id without an admin API."""

from __future__ import annotations

from typing import Any, Protocol

from pulsar_txn.core.entries import Entry, EntryConsumerCore
from pulsar_txn.exceptions import ChecksumError, NotConnected
from pulsar_txn.message import MessageId
from wire.message_id import MessageId as WireMessageId
from wire.pulsar_api_pb2 import BaseCommand

T = BaseCommand


class EntryConsumer(Protocol):
    """What the reader uses of the :class:`pulsar_txn.Consumer` that receives its entries (named here, so that this
    module does not import the client that imports it)."""

    _rt: Any

    def receive(self, timeout_millis: int | None = None) -> Any: ...

    def _check(self) -> None: ...

    def is_connected(self) -> bool: ...

    def close(self) -> None: ...


class EntryReader:
    """Entries of one topic partition (or non-partitioned topic) from a start message id."""

    def __init__(self, consumer: EntryConsumer, core: EntryConsumerCore) -> None:
        self._consumer = consumer
        self._core = core

    def topic(self) -> str:
        return self._core.topic

    def read_entry(self, timeout_millis: int | None = None) -> Entry:
        """The next entry; waits for one (raises :class:`~pulsar_txn.Timeout` after ``timeout_millis``, and
        :class:`~pulsar_txn.ChecksumError` for an entry whose payload does not match its checksum)."""
        found: Any = self._consumer.receive(timeout_millis)
        if not found.checksum_ok:
            raise ChecksumError(f"{self._core.topic}: checksum mismatch in entry {found.ledger_id}:{found.entry_id}")
        return found

    def get_last_message_id(self) -> MessageId:
        """The id of the last message the broker would dispatch on the topic (entry -1: none). With batches, its
        ``batch_index`` is the batch's last message's."""
        consumer, core = self._consumer, self._core
        rt = consumer._rt
        with rt.lock:
            consumer._check()
            link = rt.link_of(core)
        if link is None:
            raise NotConnected(f"reader on {core.topic} is not connected")
        response = rt.request(link, T.GET_LAST_MESSAGE_ID, consumer_id=core.consumer_id)
        wire = WireMessageId.from_proto(response.last_message_id)
        return MessageId(core.partition, wire.ledger, wire.entry, wire.batch_index)

    def is_connected(self) -> bool:
        return self._consumer.is_connected()

    def close(self) -> None:
        """Close the reader (its subscription goes away)."""
        self._consumer.close()


__all__ = ["Entry", "EntryReader"]
