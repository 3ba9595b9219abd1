"""Message ids as they travel in ``MessageIdData``, and the client's earliest/latest sentinels."""

from __future__ import annotations

from typing import NamedTuple

from wire.pulsar_api_pb2 import MessageIdData

#: ``MessageId.earliest`` arrives as the C++ client's -1 cast to uint64 in both fields.
EARLIEST_RAW = (2**64 - 1, 2**64 - 1)
#: ``MessageId.latest`` is ``(INT64_MAX, INT64_MAX)``.
LATEST_RAW = (2**63 - 1, 2**63 - 1)


class MessageId(NamedTuple):
    """A Pulsar message id; ordering is by (ledger, entry, batch_index)."""

    ledger: int
    entry: int
    partition: int = -1
    batch_index: int = -1

    @classmethod
    def from_proto(cls, data: MessageIdData) -> MessageId:
        """Read a ``MessageIdData``."""
        return cls(data.ledgerId, data.entryId, data.partition, data.batch_index)

    def to_proto(self, target: MessageIdData | None = None) -> MessageIdData:
        """Write into ``target`` (or a new ``MessageIdData``); defaults are left unset."""
        out = MessageIdData() if target is None else target
        out.ledgerId = self.ledger
        out.entryId = self.entry
        if self.partition != -1:
            out.partition = self.partition
        if self.batch_index != -1:
            out.batch_index = self.batch_index
        return out

    @property
    def is_earliest(self) -> bool:
        """True for the client's ``MessageId.earliest`` sentinel."""
        return (self.ledger, self.entry) == EARLIEST_RAW

    @property
    def is_latest(self) -> bool:
        """True for the client's ``MessageId.latest`` sentinel."""
        return (self.ledger, self.entry) == LATEST_RAW
