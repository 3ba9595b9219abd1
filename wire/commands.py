"""Building commands: ``make(BaseCommand.SUCCESS, request_id=1)`` fills the sub-message of that type."""

from __future__ import annotations

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
    """:func:`make`, encoded as a simple frame."""
    return encode_command(make(kind, **fields))


def payload_of(command: BaseCommand) -> Any:
    """The sub-message a command of its type carries."""
    return getattr(command, FIELD_OF_TYPE[command.type])


def type_name(kind: int) -> str:
    """The protocol name of a command type, e.g. ``SEND_RECEIPT``."""
    return BaseCommand.Type.Name(kind)
