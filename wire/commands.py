"""Building commands: ``make(BaseCommand.SUCCESS, request_id=1)`` fills the sub-message of that type."""

from __future__ import annotations

import threading
from typing import Any

from wire.framing import encode_command
from wire.pulsar_api_pb2 import BaseCommand

#: The BaseCommand field that carries each command type (field number == type value).
FIELD_OF_TYPE: dict[int, str] = {f.number: f.name for f in BaseCommand.DESCRIPTOR.fields if f.name != "type"}

#: uint64 encoding of -1, as the Java broker writes "no entry" positions.
NO_ID = (1 << 64) - 1


def make(kind: int, **fields: Any) -> BaseCommand:
    """A BaseCommand of type ``kind`` whose sub-message has ``fields`` (nested messages as dicts)."""
    return BaseCommand(type=kind, **{FIELD_OF_TYPE[kind]: fields})


def frame(kind: int, **fields: Any) -> bytes:
    """:func:`make`, encoded as a simple frame.

    Most answers hold scalar fields only: those are set on a command kept per type and thread (cleared first), which
    costs a sixth of building a command from keyword arguments; a nested message or a list goes through :func:`make`.
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
            setattr(sub, name, value)
    except (AttributeError, TypeError):
        # A nested message or a repeated field (or a bad value, which make() reports).
        return encode_command(make(kind, **fields))
    return encode_command(command)


#: Per thread: a command per type that :func:`frame` fills and encodes.
_kept = threading.local()


def payload_of(command: BaseCommand) -> Any:
    """The sub-message a command of its type carries."""
    return getattr(command, FIELD_OF_TYPE[command.type])


def type_name(kind: int) -> str:
    """The protocol name of a command type, e.g. ``SEND_RECEIPT``."""
    return BaseCommand.Type.Name(kind)


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
