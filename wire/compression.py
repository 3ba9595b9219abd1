"""Payload compression as Pulsar's codecs write it: decompression of every codec but ZSTD, with the standard library.

LZ4 (a raw block) and Snappy (raw, unframed) are decoded here; ZLIB by ``zlib``.
"""

from __future__ import annotations

import struct
import zlib

from wire.pulsar_api_pb2 import CompressionType

_U16LE = struct.Struct("<H")
_U32LE = struct.Struct("<I")


class CompressionError(ValueError):
    """A payload that does not decompress, or whose codec is not supported here."""


def decompress(kind: int, payload: bytes, size: int) -> bytes:
    """``payload`` decompressed with codec ``kind`` (``CompressionType``); ``size`` is the uncompressed size."""
    try:
        if kind == CompressionType.NONE:
            return payload
        if kind == CompressionType.ZLIB:
            return zlib.decompress(payload)
        if kind == CompressionType.LZ4:
            return _lz4_block(payload, size)
        if kind == CompressionType.SNAPPY:
            return _snappy(payload)
    except (IndexError, zlib.error) as exc:
        raise CompressionError(str(exc)) from None
    raise CompressionError(f"decompressing {CompressionType.Name(kind)} payloads is not supported here")


def _lz4_block(src: bytes, size: int) -> bytes:
    """Decompress an LZ4 block (the format Pulsar's LZ4 codec writes)."""
    out = bytearray()
    i, n = 0, len(src)
    while i < n:
        token = src[i]
        literal, i = _lz4_length(src, i + 1, token >> 4)
        out += src[i : i + literal]
        i += literal
        if i >= n:
            break
        offset = src[i] | (src[i + 1] << 8)
        length, i = _lz4_length(src, i + 2, token & 15)
        _copy_back(out, offset, length + 4, "LZ4")
    return _sized(out, size, "LZ4")


def _lz4_length(src: bytes, i: int, length: int) -> tuple[int, int]:
    """A length from a token's 4 bits, continued by the bytes at ``i`` when they are all set; and the index after."""
    if length == 15:
        while True:
            extra = src[i]
            i += 1
            length += extra
            if extra != 255:
                break
    return length, i


def _snappy(src: bytes) -> bytes:
    """Decompress raw Snappy (the format Pulsar's Snappy codec writes)."""
    i, shift, size = 0, 0, 0
    while True:
        byte = src[i]
        i += 1
        size |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    out = bytearray()
    while i < len(src):
        tag = src[i]
        i += 1
        kind = tag & 3
        if kind == 0:
            length = tag >> 2
            if length >= 60:
                extra = length - 59
                length = int.from_bytes(src[i : i + extra], "little")
                i += extra
            length += 1
            out += src[i : i + length]
            i += length
            continue
        if kind == 1:
            length = ((tag >> 2) & 7) + 4
            offset = ((tag >> 5) << 8) | src[i]
            i += 1
        elif kind == 2:
            length = (tag >> 2) + 1
            (offset,) = _U16LE.unpack_from(src, i)
            i += 2
        else:
            length = (tag >> 2) + 1
            (offset,) = _U32LE.unpack_from(src, i)
            i += 4
        _copy_back(out, offset, length, "Snappy")
    return _sized(out, size, "Snappy")


def _copy_back(out: bytearray, offset: int, length: int, codec: str) -> None:
    """Append ``length`` bytes copied from ``offset`` bytes back (a copy may overlap what it appends)."""
    start = len(out) - offset
    if offset <= 0 or start < 0:
        raise CompressionError(f"corrupt {codec} data")
    for k in range(length):
        out.append(out[start + k])


def _sized(out: bytearray, size: int, codec: str) -> bytes:
    if len(out) != size:
        raise CompressionError(f"{codec} data has {len(out)} bytes, {size} expected")
    return bytes(out)
