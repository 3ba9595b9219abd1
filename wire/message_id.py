"""Message ids as Pulsar reads them: signed 64-bit ledger and entry ids carried in ``MessageIdData``'s uint64
fields.

Pulsar's brokers and clients treat ledger and entry ids as Java ``long``s; the unsigned protobuf fields carry their
two's complement. So -1 (``MessageId.earliest``, or "the entry before the first" that a client acknowledges
cumulatively before a batch) arrives as 2^64-1. :class:`MessageId` holds the signed values; :func:`signed64` and
:func:`unsigned64` are the only conversions between the two forms.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from wire.pulsar_api_pb2 import MessageIdData

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
_U64 = 1 << 64


def signed64(raw: int) -> int:
    """A uint64 wire value as the Java ``long`` it carries."""
    if raw > INT64_MAX:
        if raw >= _U64:
            raise ValueError(f"{raw} is not a uint64")
        return raw - _U64
    if raw < 0:
        raise ValueError(f"{raw} is not a uint64")
    return raw


def unsigned64(value: int) -> int:
    """A ``long`` as the uint64 wire value that carries it."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{value} is not a 64-bit signed integer")
    return value % _U64


class MessageId(NamedTuple):
    """A Pulsar message id with signed ledger and entry ids; ordering is by (ledger, entry, partition, batch_index).

    ``batch_size`` is 0 when not given; ``ack_set`` holds the ``BitSet`` words of a batch-index acknowledgement
    (bit set: index still unacknowledged), empty when there is none.
    """

    ledger: int
    entry: int
    partition: int = -1
    batch_index: int = -1
    batch_size: int = 0
    ack_set: tuple[int, ...] = ()

    @classmethod
    def checked(cls, ledger: Any, entry: Any, partition: Any = -1, batch_index: Any = -1) -> MessageId:
        """A message id from untrusted values (JSON, paths): 64-bit ledger and entry ids, 32-bit partition and
        batch index, or ValueError."""
        values = (ledger, entry, partition, batch_index)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise ValueError("message id fields must be integers")
        if not (INT64_MIN <= ledger <= INT64_MAX and INT64_MIN <= entry <= INT64_MAX):
            raise ValueError("ledger and entry ids must be 64-bit signed integers")
        if not (INT32_MIN <= partition <= INT32_MAX and INT32_MIN <= batch_index <= INT32_MAX):
            raise ValueError("partition and batch index must be 32-bit signed integers")
        return cls(ledger, entry, partition, batch_index)

    @classmethod
    def from_proto(cls, data: MessageIdData) -> MessageId:
        """Read a ``MessageIdData`` (protobuf has already bounded every field to its wire type)."""
        ack_set = data.ack_set
        fields = (
            signed64(data.ledgerId),
            signed64(data.entryId),
            data.partition,
            data.batch_index,
            max(data.batch_size, 0),
            tuple(ack_set) if ack_set else (),
        )
        return _new(cls, fields)  # NamedTuple's generated __new__ costs a third of a decode on the ACK path

    def to_proto(self, target: MessageIdData | None = None) -> MessageIdData:
        """Write into ``target`` (or a new ``MessageIdData``); defaults are left unset."""
        out = MessageIdData() if target is None else target
        out.ledgerId = unsigned64(self.ledger)
        out.entryId = unsigned64(self.entry)
        if self.partition != -1:
            out.partition = self.partition
        if self.batch_index != -1:
            out.batch_index = self.batch_index
        if self.batch_size > 0:
            out.batch_size = self.batch_size
        if self.ack_set:
            out.ack_set.extend(self.ack_set)
        return out

    def stored_entry(self, ledger: int, last_entry: int) -> int | None:
        """The entry this id names in a log whose only ledger is ``ledger`` and whose last entry is ``last_entry``;
        None for ids before its first entry (entry -1), beyond its end or of another ledger."""
        if self.ledger != ledger or not 0 <= self.entry <= last_entry:
            return None
        return self.entry

    def start_entry(self, ledger: int, first_entry: int, end_entry: int) -> int:
        """Where reading from this id starts in a log whose only ledger is ``ledger``, whose first entry is
        ``first_entry`` and whose next entry is ``end_entry``: as Pulsar's cursors, ids of earlier ledgers and before
        the first entry start at the first entry, ids of later ledgers and beyond the end at the end."""
        if self.ledger > ledger:
            return end_entry
        if self.ledger < ledger:
            return first_entry
        return min(max(self.entry, first_entry), end_entry)

    @property
    def is_earliest(self) -> bool:
        """True for ``MessageId.earliest`` (-1, -1)."""
        return (self.ledger, self.entry) == (-1, -1)

    @property
    def is_latest(self) -> bool:
        """True for ``MessageId.latest`` (``Long.MAX_VALUE`` twice)."""
        return (self.ledger, self.entry) == (INT64_MAX, INT64_MAX)


_new = tuple.__new__
EARLIEST = MessageId(-1, -1)
LATEST = MessageId(INT64_MAX, INT64_MAX)
