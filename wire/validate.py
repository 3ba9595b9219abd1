"""What a client sent, read as Pulsar's broker reads it: range checks and normalisation at the wire boundary.

Pulsar's broker is Java: its protobuf code decodes a ``string`` field that is not UTF-8 with U+FFFD replacement
characters (Python's protobuf hands such a field over as ``bytes``), and it reads every ``uint64`` as a signed
``long`` and every ``uint32`` as a signed ``int``. :func:`check_command` runs once on every decoded command, before
any handler sees it; the other functions are the conversions the handlers and the engine apply to single fields
(``uint64`` fields: :func:`wire.message_id.signed64`).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from wire.commands import FIELD_OF_TYPE
from wire.framing import DEFAULT_MAX_MESSAGE_SIZE, ProtocolError
from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata

#: The most messages a batch is believed to hold: each takes at least 6 bytes of its payload ([u32 size]
#: [SingleMessageMetadata with its required payload_size]), and a payload of Pulsar's default max message size holds
#: this many. Counts above it are not believed, whatever max message size the server is given.
MAX_BATCH_MESSAGES = DEFAULT_MAX_MESSAGE_SIZE // 6

_ACK = BaseCommand.ACK
_STRING = FieldDescriptor.TYPE_STRING
_MESSAGE = FieldDescriptor.TYPE_MESSAGE


def java_int(value: int) -> int:
    """A ``uint32`` field as Java reads it: a signed 32-bit ``int``."""
    return value - (1 << 32) if value >= 1 << 31 else value


@cache
def _has_strings(descriptor: Descriptor) -> bool:
    """Whether a message type holds a ``string`` field, itself or in a message it contains."""
    return _reaches_string(descriptor, set())


def _reaches_string(descriptor: Descriptor, seen: set[Descriptor]) -> bool:
    if descriptor in seen:  # a message type that contains itself (MessageIdData)
        return False
    seen.add(descriptor)
    return any(
        field.type == _STRING or (field.type == _MESSAGE and _reaches_string(field.message_type, seen))
        for field in descriptor.fields
    )


#: Command types that hold no string, whose commands need no look at their strings (SEND, FLOW, ...).
_WITHOUT_STRINGS = frozenset(
    kind
    for kind, name in FIELD_OF_TYPE.items()
    if not _has_strings(BaseCommand.DESCRIPTOR.fields_by_name[name].message_type)
)


#: What :func:`normalize_strings` does with a field: decode it, each of its items, look inside it, inside each item.
_TEXT, _TEXTS, _INSIDE, _INSIDE_EACH = range(4)


@cache
def _string_fields(descriptor: Descriptor) -> dict[FieldDescriptor, int]:
    """The fields of a message type that are strings or hold some (see :func:`_has_strings`), each with what
    :func:`normalize_strings` does with it."""
    actions = {}
    for field in descriptor.fields:
        if field.type == _STRING:
            actions[field] = _TEXTS if field.is_repeated else _TEXT
        elif field.type == _MESSAGE and _has_strings(field.message_type):
            actions[field] = _INSIDE_EACH if field.is_repeated else _INSIDE
    return actions


def normalize_strings(message: Any) -> None:
    """Decode every ``string`` field that is not UTF-8 with U+FFFD replacement characters, as Pulsar's broker does."""
    actions = _string_fields(message.DESCRIPTOR)
    if not actions:
        return
    for field, value in message.ListFields():
        action = actions.get(field)
        if action is None:
            continue
        if action == _TEXT:
            if type(value) is bytes:
                setattr(message, field.name, value.decode("utf-8", "replace"))
        elif action == _INSIDE:
            normalize_strings(value)
        elif action == _INSIDE_EACH:
            for item in value:
                normalize_strings(item)
        else:
            for index, item in enumerate(value):
                if type(item) is bytes:
                    value[index] = item.decode("utf-8", "replace")


def check_command(command: BaseCommand) -> None:
    """Normalise a decoded command in place before it is handled."""
    kind = command.type
    if kind == _ACK:
        ack = command.ack
        for message_id in ack.message_id:
            if message_id.batch_size > MAX_BATCH_MESSAGES:
                message_id.batch_size = MAX_BATCH_MESSAGES
        if ack.properties:
            normalize_strings(ack)
    elif kind not in _WITHOUT_STRINGS:
        normalize_strings(command)


def flow_permits(permits: int) -> int:
    """A FLOW's permits; Pulsar's consumer refuses a count that is not positive as a Java ``int``, which closes the
    connection."""
    count = java_int(permits)
    if count <= 0:
        raise ProtocolError(f"FLOW with {count} permits: the count must be positive")
    return count


def batch_count(metadata: MessageMetadata) -> int:
    """The messages an entry holds as dispatch counts them: 1 when unbatched, else ``num_messages_in_batch`` bounded
    to ``0..MAX_BATCH_MESSAGES`` (a count of 0 or less holds no message, as Pulsar's last-message-id reads it)."""
    count = metadata.num_messages_in_batch
    return min(max(count, 0), MAX_BATCH_MESSAGES)
