"""Payload compression in the formats Pulsar's codecs write: a raw LZ4 block, a ZLIB stream, a ZSTD frame and raw
(unframed) Snappy; the uncompressed size travels in the metadata (``uncompressed_size``).

ZLIB comes from the standard library; LZ4, ZSTD and Snappy from ``cramjam``.
"""

from __future__ import annotations

import zlib

import cramjam

from wire.framing import DEFAULT_MAX_MESSAGE_SIZE
from wire.pulsar_api_pb2 import CompressionType

#: Decoders that write into a buffer and return how many bytes they wrote.
_INTO = {
    CompressionType.LZ4: cramjam.lz4.decompress_block_into,
    CompressionType.ZSTD: cramjam.zstd.decompress_into,
    CompressionType.SNAPPY: cramjam.snappy.decompress_raw_into,
}


class CompressionError(ValueError):
    """A payload that does not decompress to its stated size, or a codec this module does not know."""


def decompress(kind: int, payload: bytes, size: int, limit: int = DEFAULT_MAX_MESSAGE_SIZE) -> bytes:
    """``payload`` decompressed with codec ``kind`` (``CompressionType``); ``size`` is the uncompressed size.

    A stated size above ``limit`` (the max message size) is refused before anything is allocated for it.
    """
    if kind == CompressionType.NONE:
        return payload
    if size > limit:
        raise CompressionError(f"uncompressed size {size} exceeds the max message size {limit}")
    # Never more than the stated size: a payload that holds more than it claims cannot take more memory.
    if kind == CompressionType.ZLIB:
        stream = zlib.decompressobj()
        try:
            data = stream.decompress(payload, size + 1)
        except zlib.error as exc:
            raise CompressionError(f"corrupt ZLIB data: {exc}") from None
        if len(data) != size or not stream.eof:
            raise CompressionError(f"ZLIB data does not hold {size} bytes")
        return data
    decoder = _INTO.get(kind)
    if decoder is None:
        raise CompressionError(f"unknown compression type {kind}")
    out = bytearray(size)
    try:
        written = decoder(payload, out)
    except cramjam.DecompressionError as exc:
        raise CompressionError(f"corrupt {CompressionType.Name(kind)} data, or more than {size} bytes: {exc}") from None
    if written != size:
        raise CompressionError(f"{CompressionType.Name(kind)} data has {written} bytes, {size} expected")
    return bytes(out)


def compress(kind: int, data: bytes) -> bytes:
    """``data`` compressed with codec ``kind`` (``CompressionType``), as the clients' codecs write it."""
    if kind == CompressionType.NONE:
        return data
    if kind == CompressionType.ZLIB:
        return zlib.compress(data)
    if kind == CompressionType.LZ4:
        return bytes(cramjam.lz4.compress_block(data, store_size=False))
    if kind == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    if kind == CompressionType.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    raise CompressionError(f"unknown compression type {kind}")
