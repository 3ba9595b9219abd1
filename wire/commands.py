"""Building commands: ``make(BaseCommand.SUCCESS, request_id=1)`` fills the sub-message of that type."""

from __future__ import annotations

import struct
import threading
from collections.abc import Sequence
from typing import Any

from wire.framing import encode_command
from wire.pulsar_api_pb2 import BaseCommand

#: The BaseCommand field that carries each command type (field number == type value).
FIELD_OF_TYPE: dict[int, str] = {f.number: f.name for f in BaseCommand.DESCRIPTOR.fields if f.name != "type"}

_HEADER = struct.Struct(">II")

#: uint64 encoding of -1, as the Java broker writes "no entry" positions.
NO_ID = (1 << 64) - 1


def make(kind: int, **fields: Any) -> BaseCommand:
    """A BaseCommand of type ``kind`` whose sub-message has ``fields`` (nested messages as dicts)."""
    return BaseCommand(type=kind, **{FIELD_OF_TYPE[kind]: fields})


def frame(kind: int, **fields: Any) -> bytes:
    """:func:`make`, encoded as a simple frame.

    The fields are set on a command kept per type and thread (cleared first), which costs a sixth of building a
    command from keyword arguments: scalars, and lists of scalars or of sub-messages given as dicts; a nested message
    given as a dict goes through :func:`make`.
    """
    kept = _kept.__dict__
    pair = kept.get(kind)
    if pair is None:
        command = BaseCommand(type=kind)
        pair = kept[kind] = (command, getattr(command, FIELD_OF_TYPE[kind]))
    command, sub = pair
    sub.Clear()
    try:
        for name, value in fields.items():
            if type(value) is list:
                repeated = getattr(sub, name)
                if value and type(value[0]) is dict:
                    for item in value:
                        repeated.add(**item)
                else:
                    repeated.extend(value)
            else:
                setattr(sub, name, value)
    except (AttributeError, TypeError):
        # A nested message (or a bad value, which make() reports).
        return encode_command(make(kind, **fields))
    data = command.SerializeToString()  # encode_command, inline: this runs for every answer the server sends
    return _HEADER.pack(len(data) + 4, len(data)) + data


#: Per thread: a command per type that :func:`frame` fills and encodes.
_kept = threading.local()


def payload_of(command: BaseCommand) -> Any:
    """The sub-message a command of its type carries."""
    return getattr(command, FIELD_OF_TYPE[command.type])


def type_name(kind: int) -> str:
    """The protocol name of a command type, e.g. ``SEND_RECEIPT``."""
    return BaseCommand.Type.Name(kind)


class MessageEncoder:
    """Encodes MESSAGE frames, what dispatch sends, without building a command per message.

    One command is kept and its fields overwritten for each message (the optional ones cleared only when the message
    before set one): use one encoder per thread.
    """

    def __init__(self) -> None:
        self._command = BaseCommand(type=BaseCommand.MESSAGE)
        self._message = self._command.message
        self._message_id = self._message.message_id
        #: Whether the last message set an optional field (redelivery count, ack set, consumer epoch).
        self._optional = False

    def encode(
        self,
        consumer_id: int,
        ledger_id: int,
        entry_id: int,
        partition: int,
        redelivery_count: int,
        ack_set: list[int] | None,
        epoch: int | None,
        body: bytes,
    ) -> bytes:
        """The frame of one message: ``body`` (a stored message body) delivered to ``consumer_id`` as ``(ledger_id,
        entry_id)`` of ``partition``; a ``redelivery_count`` of 0 and an empty ``ack_set`` are left out, and so is
        ``epoch`` when None."""
        message = self._message
        if self._optional:
            message.ClearField("redelivery_count")
            message.ClearField("ack_set")
            message.ClearField("consumer_epoch")
            self._optional = False
        message.consumer_id = consumer_id
        message_id = self._message_id
        message_id.ledgerId = ledger_id
        message_id.entryId = entry_id
        message_id.partition = partition
        if redelivery_count:
            message.redelivery_count = redelivery_count
            self._optional = True
        if ack_set:
            message.ack_set.extend(ack_set)
            self._optional = True
        if epoch is not None:
            message.consumer_epoch = epoch
            self._optional = True
        data = self._command.SerializeToString()
        return _HEADER.pack(len(data) + 4 + len(body), len(data)) + data + body


class ReceiptEncoder:
    """Encodes SEND_RECEIPT frames, the most frequent answer, without building a command per receipt.

    One command is kept and its fields overwritten for each receipt: use one encoder per thread.
    """

    def __init__(self) -> None:
        self._command = BaseCommand(type=BaseCommand.SEND_RECEIPT)
        self._receipt = self._command.send_receipt
        self._message_id = self._receipt.message_id

    def encode(
        self, producer_id: int, sequence_id: int, ledger_id: int, entry_id: int, highest_sequence_id: int | None
    ) -> bytes:
        """The frame of one receipt; ``highest_sequence_id`` is -1 for a SEND that gave none, as Pulsar answers."""
        receipt = self._receipt
        receipt.producer_id = producer_id
        receipt.sequence_id = sequence_id
        self._message_id.ledgerId = ledger_id
        self._message_id.entryId = entry_id
        receipt.highest_sequence_id = NO_ID if highest_sequence_id is None else highest_sequence_id
        return encode_command(self._command)

    def encode_run(
        self, producer_id: int, ledger_id: int, sends: Sequence[tuple[int, int, object]], entry_ids: Sequence[object]
    ) -> bytes | None:
        """The frames of the receipts of one producer's SENDs ``(sequence id, highest sequence id or NO_ID, ...)``
        stored as ``entry_ids`` in one ledger, joined (as :meth:`encode` each); None if one of ``entry_ids`` is no
        entry id (an error or a duplicate)."""
        receipt = self._receipt
        message_id = self._message_id
        receipt.producer_id = producer_id
        message_id.ledgerId = ledger_id
        serialize = self._command.SerializeToString
        header = _HEADER.pack
        frames = []
        # A producer's SENDs give the same highest sequence id (NO_ID: none given) more often than not: it is set
        # only when it changes.
        last_highest = receipt.highest_sequence_id = NO_ID
        for (sequence_id, highest, _), entry_id in zip(sends, entry_ids, strict=True):
            if type(entry_id) is not int or entry_id < 0:
                return None
            receipt.sequence_id = sequence_id
            message_id.entryId = entry_id
            if highest != last_highest:
                receipt.highest_sequence_id = last_highest = highest
            data = serialize()
            frames.append(header(len(data) + 4, len(data)))
            frames.append(data)
        return b"".join(frames)
