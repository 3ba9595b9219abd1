"""Batch entries: ``N x [u32 size][SingleMessageMetadata][payload]`` in one message payload."""

from __future__ import annotations

import struct
from collections.abc import Iterable

from google.protobuf.message import DecodeError

from wire.framing import ProtocolError
from wire.pulsar_api_pb2 import SingleMessageMetadata

_U32 = struct.Struct(">I")


def split_batch(payload: bytes, count: int) -> list[tuple[SingleMessageMetadata, bytes]]:
    """Return the ``count`` messages of an uncompressed batch payload."""
    messages = []
    offset = 0
    try:
        for _ in range(count):
            (size,) = _U32.unpack_from(payload, offset)
            offset += 4
            meta = SingleMessageMetadata()
            meta.ParseFromString(payload[offset : offset + size])
            offset += size
            end = offset + meta.payload_size
            if end > len(payload):
                raise ProtocolError("batch message runs past the end of the payload")
            messages.append((meta, payload[offset:end]))
            offset = end
    except (struct.error, DecodeError) as exc:
        raise ProtocolError(f"malformed batch payload: {exc}") from None
    return messages


def build_batch(messages: Iterable[tuple[SingleMessageMetadata, bytes]]) -> bytes:
    """Concatenate messages into an uncompressed batch payload (``payload_size`` is filled in)."""
    parts = []
    for meta, payload in messages:
        meta.payload_size = len(payload)
        data = meta.SerializeToString()
        parts += (_U32.pack(len(data)), data, payload)
    return b"".join(parts)
