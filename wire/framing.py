"""Pulsar frame codec, sans-I/O: bytes in, :class:`Frame` objects out, and back.

Two frame shapes share one header ``[totalSize:u32][commandSize:u32][BaseCommand]``; a payload frame
(SEND from a client, MESSAGE from the server) continues with the message body:
``[0x0e02][bemSize][BrokerEntryMetadata]`` (optional) ``[0x0e01][crc32c][metaSize][MessageMetadata][payload]``.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator

import crc32c
from google.protobuf.message import DecodeError

from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata

MAGIC_CHECKSUM = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
#: Pulsar's default ``maxMessageSize``: the largest message a broker takes, advertised in CONNECTED.
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
#: What a frame may hold beyond the message (its command and metadata): Pulsar's ``MESSAGE_SIZE_FRAME_PADDING``.
MESSAGE_SIZE_FRAME_PADDING = 10 * 1024

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_HEADER = struct.Struct(">II")
#: A normalised body's checksum and metadata size, after its magic.
_CHECKSUM_AND_SIZE = _HEADER
_MAGIC_CRC = _U16.pack(MAGIC_CHECKSUM)
_MAGIC_BEM = _U16.pack(MAGIC_BROKER_ENTRY_METADATA)
_SEND = BaseCommand.SEND


def max_frame_size(max_message_size: int) -> int:
    """The largest ``totalSize`` a frame may declare: Pulsar's frame decoder takes frames of up to ``max_message_size
    + MESSAGE_SIZE_FRAME_PADDING`` bytes counting the 4-byte size field itself, and closes the connection on a larger
    one."""
    return max_message_size + MESSAGE_SIZE_FRAME_PADDING - 4


class ProtocolError(Exception):
    """The peer broke the framing or sent bytes that do not decode; the connection must close."""


class Frame:
    """One decoded frame: the command and, for payload frames, the raw message body after it.

    ``send`` is ``(producer id, sequence id, highest sequence id or None)`` of a SEND whose command holds only those
    (and ``num_messages``), as :func:`scan_plain_send` reads them; ``txn_send`` is what :func:`scan_txn_send` reads of
    a transactional SEND of that shape. Such a command is parsed only when asked for.
    """

    __slots__ = ("_command", "_command_bytes", "body", "send", "txn_send")

    def __init__(
        self,
        command: BaseCommand | None,
        body: bytes | None = None,
        send: tuple[int, int, int | None] | None = None,
        command_bytes: bytes = b"",
        txn_send: tuple[int, int, int, int, int] | None = None,
    ) -> None:
        self._command = command
        self.body = body
        self.send = send
        self._command_bytes = command_bytes
        self.txn_send = txn_send

    @property
    def command(self) -> BaseCommand:
        if self._command is None:
            self._command = BaseCommand.FromString(self._command_bytes)
        return self._command


class FrameDecoder:
    """Incremental decoder: feed it received bytes, get back the complete frames they finish.

    A frame too large for ``max_message_size`` (see :func:`max_frame_size`) is a protocol error.
    """

    def __init__(self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        self._buffer = bytearray()
        #: The bytes the buffer must hold to finish the frame begun in it, when its size is known (else 0).
        self._wanted = 0
        self._max_frame_size = max_frame_size(max_message_size)

    @property
    def buffered(self) -> int:
        """Bytes held of a frame that has not arrived whole."""
        return len(self._buffer)

    def feed(self, data: bytes) -> Iterator[Frame]:
        """Add ``data`` and yield every frame it completes, in order.

        A frame that breaks the protocol raises :class:`ProtocolError` after the good frames before it
        were yielded, so their requests can still be answered before the connection closes.
        """
        frames, error = self.decode(data)
        yield from frames
        if error is not None:
            raise error

    def decode(self, data: bytes) -> tuple[list[Frame], ProtocolError | None]:
        """Add ``data``; the frames it completes, in order, and the protocol error met after them (None if none).

        What :meth:`feed` yields, as a list: the caller handles the good frames, then the error.
        """
        buffer = self._buffer
        if buffer:
            # A frame began in an earlier read: join it with this one. Else the frames are read from ``data`` as it
            # came, and only an unfinished frame at its end is kept.
            buffer += data
            if len(buffer) < self._wanted:
                return [], None  # the frame is still unfinished: nothing to read yet
            data = bytes(buffer)
        size = len(data)
        offset = 0
        wanted = 0
        max_frame_size = self._max_frame_size
        unpack = _U32.unpack_from
        unpack_header = _HEADER.unpack_from
        parse = BaseCommand.FromString
        frames: list[Frame] = []
        error: ProtocolError | None = None
        while size - offset >= 4:
            # A whole frame holds both sizes (8 bytes): read them together when they are there (fewer bytes cannot
            # finish a frame, so its command size is not needed).
            if size - offset >= 8:
                total, command_size = unpack_header(data, offset)
            else:
                (total,) = unpack(data, offset)
            if total < 4 or total > max_frame_size:
                error = ProtocolError(f"frame size {total} outside 4..{max_frame_size}")
                break
            if size - offset - 4 < total:
                wanted = 4 + total
                break
            start = offset + 4
            if command_size > total - 4:
                error = ProtocolError(f"command size {command_size} exceeds frame size {total}")
                break
            command_end = start + 4 + command_size
            end = start + total
            command_bytes = data[start + 4 : command_end]
            # The most frequent command: a SEND that begins with its type (so it has one), read without parsing when
            # its command holds only what a plain SEND does (see scan_plain_send).
            is_send = command_size > 1 and data[start + 4] == 8 and data[start + 5] == _SEND
            if is_send:
                send = scan_plain_send(command_bytes)
                if send is not None:
                    body = data[command_end:end] if end > command_end else None
                    frames.append(Frame(None, body, send, command_bytes))
                    offset = end
                    continue
                txn_send = scan_txn_send(command_bytes)
                if txn_send is not None:
                    body = data[command_end:end] if end > command_end else None
                    frames.append(Frame(None, body, None, command_bytes, txn_send))
                    offset = end
                    continue
            try:
                command = parse(command_bytes)
            except DecodeError as exc:
                error = ProtocolError(f"command does not parse: {exc}")
                break
            if not is_send and not command.HasField("type"):
                error = ProtocolError("unknown or missing command type")
                break
            offset = end
            frames.append(Frame(command, data[command_end:end] if end > command_end else None))
        self._buffer = bytearray(memoryview(data)[offset:]) if offset < size else bytearray()
        self._wanted = wanted
        return frames, error


def encode_command(command: BaseCommand) -> bytes:
    """Encode a simple (payload-less) frame."""
    data = command.SerializeToString()
    return _HEADER.pack(len(data) + 4, len(data)) + data


def encode_payload_command(command: BaseCommand, body: bytes) -> bytes:
    """Encode a payload frame; ``body`` is a stored message body (see :func:`make_body`)."""
    data = command.SerializeToString()
    return _HEADER.pack(len(data) + 4 + len(body), len(data)) + data + body


class MessageBody:
    """A message body split into its parts. ``body`` is the normalised form kept in storage.

    ``plain`` is ``(publish time, num_messages_in_batch or None)`` when the metadata holds nothing else the broker
    reads (see :func:`scan_plain_metadata`), else None; ``txn`` is ``(publish time, num_messages_in_batch or None,
    txnid_most_bits, txnid_least_bits)`` when it holds only those fields and a transaction's ids (see
    :func:`scan_txn_metadata`), else None. The metadata is then parsed only when asked for.
    """

    __slots__ = ("_metadata", "body", "checksum_ok", "plain", "txn")

    def __init__(
        self,
        body: bytes,
        metadata: MessageMetadata | None,
        checksum_ok: bool,
        plain: tuple[int, int | None] | None = None,
        txn: tuple[int, int | None, int, int] | None = None,
    ) -> None:
        self.body = body
        self.checksum_ok = checksum_ok
        self.plain = plain
        self.txn = txn
        self._metadata = metadata

    @property
    def metadata(self) -> MessageMetadata:
        """The parsed metadata (parsed now if it was only scanned)."""
        if self._metadata is None:
            self._metadata = stored_metadata(self.body)
        return self._metadata

    @property
    def payload(self) -> bytes:
        """What follows the metadata: the message, or a batch of them."""
        return stored_payload(self.body)


def stored_payload(body: bytes) -> bytes:
    """The payload of a normalised body ``[0x0e01][crc32c][metaSize][metadata][payload]``."""
    (meta_size,) = _U32.unpack_from(body, 6)
    return body[10 + meta_size :]


def stored_metadata(body: bytes) -> MessageMetadata:
    """The metadata of a normalised body ``[0x0e01][crc32c][metaSize][metadata][payload]``."""
    (meta_size,) = _U32.unpack_from(body, 6)
    return MessageMetadata.FromString(body[10 : 10 + meta_size])


def split_body(body: bytes) -> tuple[MessageMetadata, bytes]:
    """The metadata and the (possibly compressed) payload of a normalised body."""
    return stored_metadata(body), stored_payload(body)


def make_body(metadata: bytes | MessageMetadata, payload: bytes) -> bytes:
    """Build ``[0x0e01][crc32c][metaSize][metadata][payload]``.

    Metadata missing required fields (``producer_name``, ``sequence_id``, ``publish_time``) is written as it is:
    Pulsar's broker stores and answers such a SEND (it reads those fields from the SEND command), so a body the
    server rewrites (naming or dropping a transaction) keeps what the client sent."""
    meta = metadata if isinstance(metadata, bytes) else metadata.SerializePartialToString()
    rest = _U32.pack(len(meta)) + meta + payload
    return _MAGIC_CRC + _U32.pack(crc32c.crc32c(rest)) + rest


def parse_body(data: bytes) -> MessageBody:
    """Split a received message body, verify its checksum, and normalise it for storage.

    Broker entry metadata in front is skipped. A body without a checksum (protocol < 6) gets one.
    """
    if len(data) >= 10 and data[0] == 0x0E and data[1] == 0x01:
        # The usual body, already normalised: its checksum and metadata size read at once.
        expected, meta_size = _CHECKSUM_AND_SIZE.unpack_from(data, 2)
        if 10 + meta_size > len(data):
            raise ProtocolError(f"metadata size {meta_size} exceeds the message body")
        # A small body is cheaper to copy than to view.
        checksum_ok = crc32c.crc32c(data[6:] if len(data) < 4096 else memoryview(data)[6:]) == expected
        meta = data[10 : 10 + meta_size]
        scanned = _scan_metadata(meta)
        if scanned is not None:
            if len(scanned) == 2:
                return MessageBody(data, None, checksum_ok, scanned)  # type: ignore[arg-type]
            return MessageBody(data, None, checksum_ok, None, scanned)  # type: ignore[arg-type]
        try:
            return MessageBody(data, MessageMetadata.FromString(meta), checksum_ok)
        except DecodeError as exc:
            raise ProtocolError(f"message metadata does not parse: {exc}") from None
    try:
        magic = data[:2]
        if magic == _MAGIC_BEM:
            (bem_size,) = _U32.unpack_from(data, 2)
            data = data[6 + bem_size :]
            magic = data[:2]
        if magic == _MAGIC_CRC:
            (expected,) = _U32.unpack_from(data, 2)
            checksum_ok = crc32c.crc32c(data[6:] if len(data) < 4096 else memoryview(data)[6:]) == expected
            body = data
        else:
            checksum_ok = True
            body = _MAGIC_CRC + _U32.pack(crc32c.crc32c(data)) + data
        (meta_size,) = _U32.unpack_from(body, 6)
        if 10 + meta_size > len(body):
            raise ProtocolError(f"metadata size {meta_size} exceeds the message body")
        meta = body[10 : 10 + meta_size]
        plain = scan_plain_metadata(meta)
        metadata = None if plain is not None else MessageMetadata.FromString(meta)
    except struct.error as exc:
        raise ProtocolError(f"truncated message body: {exc}") from None
    except DecodeError as exc:
        raise ProtocolError(f"message metadata does not parse: {exc}") from None
    return MessageBody(body, metadata, checksum_ok, plain)


#: Tags (field number and wire type, as one byte) of BaseCommand's ``send`` and of CommandSend's fields that
#: :func:`scan_plain_send` takes.
_TAG_COMMAND_SEND = 6 << 3 | 2
_TAG_PRODUCER_ID = 1 << 3
_TAG_SEQUENCE_ID_OF_SEND = 2 << 3
_TAG_NUM_MESSAGES = 3 << 3
_TAG_HIGHEST_SEQUENCE_ID = 6 << 3


def scan_plain_send(command: bytes) -> tuple[int, int, int | None] | None:
    """``(producer_id, sequence_id, highest_sequence_id or None if absent)`` of a serialised ``BaseCommand`` of type
    SEND whose ``send`` is all that follows its type and holds only ``producer_id``, ``sequence_id``,
    ``num_messages`` and ``highest_sequence_id`` (a plain SEND, as clients send it); None for anything else.

    As :func:`scan_plain_metadata`, strict: one-byte tags, a one-byte length of the rest, varints of at most 9 bytes
    (``num_messages``: 4, a non-negative int32), both required fields present; whatever it takes, the parser takes
    with the same values, and anything else is left to the parser (which takes or refuses it as before).
    """
    size = len(command)
    if size < 8 or command[0] != 8 or command[1] != _SEND or command[2] != _TAG_COMMAND_SEND or command[3] != size - 4:
        return None
    # What clients send most: a one-byte producer id, the sequence id, and at most a one-byte num_messages.
    if command[4] == _TAG_PRODUCER_ID and command[5] < 128 and command[6] == _TAG_SEQUENCE_ID_OF_SEND:
        sequence_id = command[7]
        i = 8
        if sequence_id > 127:
            sequence_id &= 127
            shift = 7
            byte = 128
            while i < size and i < 16:
                byte = command[i]
                i += 1
                if byte < 128:
                    break
                sequence_id |= (byte & 127) << shift
                shift += 7
            if byte > 127:  # cut short, or longer than 9 bytes: the loop below decides
                sequence_id = -1
            else:
                sequence_id |= byte << shift
        if sequence_id >= 0 and (
            i == size or (i + 2 == size and command[i] == _TAG_NUM_MESSAGES and command[i + 1] < 128)
        ):
            return command[5], sequence_id, None
        if sequence_id >= 0 and i < size:
            # A transactional SEND (see scan_txn_send), maybe with a one-byte num_messages first: the loop below would
            # refuse it at its txnid tag.
            if command[i] == _TAG_NUM_MESSAGES and i + 2 < size and command[i + 1] < 128:
                i += 2
            if command[i] in _TXN_TAGS_OF_SEND:
                return None
    i = 4
    producer_id = sequence_id = highest = None
    try:
        while i < size:
            tag = command[i]
            start = i = i + 1
            value = shift = 0
            byte = command[i]
            while byte > 127:
                value |= (byte & 127) << shift
                shift += 7
                i += 1
                byte = command[i]
            i += 1
            if i - start > 9:
                return None
            value |= byte << shift
            if tag == _TAG_PRODUCER_ID:
                producer_id = value
            elif tag == _TAG_SEQUENCE_ID_OF_SEND:
                sequence_id = value
            elif tag == _TAG_HIGHEST_SEQUENCE_ID:
                highest = value
            elif tag != _TAG_NUM_MESSAGES or i - start > 4:
                return None
    except IndexError:  # a field cut short: the parser refuses it
        return None
    if producer_id is None or sequence_id is None:
        return None
    return producer_id, sequence_id, highest


def scan_txn_send(command: bytes) -> tuple[int, int, int, int, int] | None:
    """``(producer_id, sequence_id, highest_sequence_id, txnid_most_bits, txnid_least_bits)`` of a serialised
    ``BaseCommand`` of type SEND that holds what :func:`scan_plain_send` takes plus at least one of the transaction's
    ids (the Java client's transactional SEND); None for anything else. Absent fields read as protobuf reads them (0).

    As strict as :func:`scan_plain_send`: one-byte tags and length, varints of at most 9 bytes (``num_messages``: 4),
    the last of a repeated field counts; whatever it takes, the parser takes with the same values.
    """
    size = len(command)
    if size < 8 or command[0] != 8 or command[1] != _SEND or command[2] != _TAG_COMMAND_SEND or command[3] != size - 4:
        return None
    # The Java client's shape: a one-byte producer id, the sequence id, maybe a one-byte num_messages, then the ids.
    if command[4] == _TAG_PRODUCER_ID and command[5] < 128 and command[6] == _TAG_SEQUENCE_ID_OF_SEND:
        sequence_id, i = _varint_at(command, 7)
        if 0 < i < size - 1 and command[i] == _TAG_NUM_MESSAGES and command[i + 1] < 128:
            i += 2
        least = most = -1
        if 0 < i < size and command[i] == _TAG_TXNID_LEAST_BITS_OF_SEND:
            least, i = _varint_at(command, i + 1)
        if 0 < i < size and command[i] == _TAG_TXNID_MOST_BITS_OF_SEND:
            most, i = _varint_at(command, i + 1)
        if i == size and (least >= 0 or most >= 0):
            return command[5], sequence_id, 0, most if most >= 0 else 0, least if least >= 0 else 0
    match = _FIELDS_OF_TXN_SEND(command, 4)
    if match is None:
        return None
    producer, sequence, least_bytes, most_bytes, highest = match.groups()
    if producer is None or sequence is None or (least_bytes is None and most_bytes is None):
        return None
    return (
        _varint(producer),
        _varint(sequence),
        0 if highest is None else _varint(highest),
        0 if most_bytes is None else _varint(most_bytes),
        0 if least_bytes is None else _varint(least_bytes),
    )


def _varint_at(data: bytes, i: int) -> tuple[int, int]:
    """The value of the varint of at most 9 bytes at ``data[i]`` and the index after it; ``(-1, -1)`` if it is longer
    or cut short."""
    try:
        byte = data[i]
        if byte < 128:
            return byte, i + 1
        value, shift, last = byte & 127, 7, i + 8
        while i < last:
            i += 1
            byte = data[i]
            if byte < 128:
                return value | byte << shift, i + 1
            value |= (byte & 127) << shift
            shift += 7
    except IndexError:
        pass
    return -1, -1


#: Tags (field number and wire type, as one byte) of the metadata fields :func:`scan_plain_metadata` takes.
_TAG_PRODUCER_NAME = 1 << 3 | 2
_TAG_SEQUENCE_ID = 2 << 3
_TAG_PUBLISH_TIME = 3 << 3
_TAG_COMPRESSION = 8 << 3
_TAG_UNCOMPRESSED_SIZE = 9 << 3
_TAG_NUM_MESSAGES_IN_BATCH = 11 << 3
_TAG_EVENT_TIME = 12 << 3
#: Varints of unread fields the scan skips, by tag.
_SKIPPED_VARINTS = frozenset({_TAG_SEQUENCE_ID, _TAG_COMPRESSION, _TAG_UNCOMPRESSED_SIZE, _TAG_EVENT_TIME})


def scan_plain_metadata(meta: bytes) -> tuple[int, int | None] | None:
    """``(publish_time, num_messages_in_batch or None if absent)`` of serialised ``MessageMetadata`` that holds only
    ``producer_name``, ``sequence_id``, ``publish_time``, ``compression``, ``uncompressed_size``,
    ``num_messages_in_batch`` and ``event_time`` (what clients send for plain messages); None for anything else.

    Cheaper than parsing: the broker reads only these two of such metadata. The scan is strict: each field must come
    with its one-byte tag and a varint of at most 9 bytes (``num_messages_in_batch``: 4, so it is a non-negative
    int32), and a length within the bytes; whatever it takes, the protobuf parser takes too, with the same values
    (the last of a repeated field counts, as in protobuf). Anything else (another field, a longer encoding, truncated
    bytes) gives None: the caller parses the metadata, which then accepts or refuses it as before.
    """
    scanned = _scan_metadata(meta)
    return scanned if scanned is None or len(scanned) == 2 else None  # type: ignore[return-value]


def _scan_metadata(meta: bytes) -> tuple[int, int | None] | tuple[int, int | None, int, int] | None:
    """What :func:`scan_plain_metadata` reads of plain metadata (a pair), or :func:`scan_txn_metadata` of a
    transaction's (four values), in one pass; None for anything else."""
    size = len(meta)
    i = 0
    # The shape clients write (the producer name first, then varints only), matched at once; else the loop below.
    if size > 1 and meta[0] == _TAG_PRODUCER_NAME and meta[1] < 128 and 2 + meta[1] <= size:
        match = _VARINTS_OF_METADATA(meta, 2 + meta[1])
        end = match.end()  # type: ignore[union-attr]  (a repetition matches, if only the empty string)
        if end == size:
            return _matched_times(match)  # type: ignore[arg-type]
        if meta[end] != _TAG_PRODUCER_NAME:
            # The loop below would read the same fields up to here and refuse what follows (another field, or a
            # varint too long or cut short): only a producer name again is read on. A transaction's ids may end it.
            if meta[end] == _TAG_TXNID_LEAST_BITS or meta[end] == _TAG_TXNID_MOST_BITS:
                return _scan_txn_ids(meta, match, end)  # type: ignore[arg-type]
            return None
    publish_time = 0
    batch = None
    try:
        while i < size:
            tag = meta[i]
            if tag == _TAG_PRODUCER_NAME:
                length = meta[i + 1]
                if length > 127:
                    return None
                i += 2 + length
                if i > size:
                    return None
                continue
            start = i = i + 1
            if tag in _SKIPPED_VARINTS:
                while meta[i] > 127:
                    i += 1
                i += 1
                if i - start > 9:
                    return None
            elif tag in (_TAG_PUBLISH_TIME, _TAG_NUM_MESSAGES_IN_BATCH):
                value = shift = 0
                byte = meta[i]
                while byte > 127:
                    value |= (byte & 127) << shift
                    shift += 7
                    i += 1
                    byte = meta[i]
                i += 1
                value |= byte << shift
                if tag == _TAG_PUBLISH_TIME:
                    if i - start > 9:
                        return None
                    publish_time = value
                else:
                    if i - start > 4:
                        return None
                    batch = value
            else:
                return None
    except IndexError:  # a field cut short: the parser refuses it
        return None
    return publish_time, batch


#: A varint of at most 9 bytes (continuation bytes, then a last byte), and of at most 4.
_VARINT_9 = rb"[\x80-\xff]{0,8}[\x00-\x7f]"
_VARINT_4 = rb"[\x80-\xff]{0,3}[\x00-\x7f]"
#: What follows a plain metadata's producer name: the varint fields :func:`scan_plain_metadata` takes, in any order
#: and repeated, as far as they go (groups: the last ``publish_time`` and the last ``num_messages_in_batch``, as
#: protobuf reads them). Each field's extent is fixed by its bytes, so the match ends where the first field it does
#: not take begins.
_VARINTS_OF_METADATA = re.compile(
    rb"(?:[\x10\x40\x48\x60]" + _VARINT_9 + rb"|\x18(" + _VARINT_9 + rb")|\x58(" + _VARINT_4 + rb"))*",
    re.DOTALL,
).match
#: MessageMetadata's ``txnid_least_bits`` and ``txnid_most_bits`` tags: their first bytes (the second is 1).
_TAG_TXNID_LEAST_BITS = 22 << 3 & 127 | 128
_TAG_TXNID_MOST_BITS = 23 << 3 & 127 | 128
#: CommandSend's ``txnid_least_bits`` and ``txnid_most_bits`` tags.
_TAG_TXNID_LEAST_BITS_OF_SEND = 4 << 3
_TAG_TXNID_MOST_BITS_OF_SEND = 5 << 3
_TXN_TAGS_OF_SEND = (_TAG_TXNID_LEAST_BITS_OF_SEND, _TAG_TXNID_MOST_BITS_OF_SEND)
#: What follows a transactional SEND's header: its fields in any order and repeated (groups: the last
#: ``producer_id``, ``sequence_id``, ``txnid_least_bits``, ``txnid_most_bits`` and ``highest_sequence_id``).
_FIELDS_OF_TXN_SEND = re.compile(
    rb"(?:\x08("
    + _VARINT_9
    + rb")|\x10("
    + _VARINT_9
    + rb")|\x18"
    + _VARINT_4
    + rb"|\x20("
    + _VARINT_9
    + rb")|\x28("
    + _VARINT_9
    + rb")|\x30("
    + _VARINT_9
    + rb"))*",
    re.DOTALL,
).fullmatch
#: The last publish time decoded, with its varint's bytes.
_last_publish_time: tuple[bytes, int] = (b"", 0)


def _matched_times(match: re.Match[bytes]) -> tuple[int, int | None]:
    """``(publish_time, num_messages_in_batch)`` of a metadata match of the plain fields (0 and None when absent)."""
    publish_bytes, batch_bytes = match.groups()
    if publish_bytes is None:
        publish_time = 0
    else:
        # Messages sent within one millisecond share their publish time's bytes.
        last = _last_publish_time
        if publish_bytes == last[0]:
            publish_time = last[1]
        else:
            publish_time = _varint(publish_bytes)
            _remember_publish_time(publish_bytes, publish_time)
    return publish_time, None if batch_bytes is None else _varint(batch_bytes)


def scan_txn_metadata(meta: bytes) -> tuple[int, int | None, int, int] | None:
    """``(publish_time, num_messages_in_batch or None, txnid_most_bits, txnid_least_bits)`` of serialised
    ``MessageMetadata`` that begins with ``producer_name``, goes on with the fields :func:`scan_plain_metadata` takes
    and ends with ``txnid_least_bits`` and/or ``txnid_most_bits`` (what clients send for a message in a transaction,
    in field order); None for anything else. An absent id reads 0, as protobuf reads it.

    As strict as :func:`scan_plain_metadata` (the transaction ids: varints of at most 9 bytes, under their two-byte
    tags); whatever it takes, the parser takes with the same values.
    """
    scanned = _scan_metadata(meta)
    return scanned if scanned is not None and len(scanned) == 4 else None  # type: ignore[return-value]


def _scan_txn_ids(meta: bytes, match: re.Match[bytes], i: int) -> tuple[int, int | None, int, int] | None:
    """:func:`scan_txn_metadata`'s values of ``meta``, whose plain fields ``match`` took up to ``i``, where the
    transaction's ids must follow to its end."""
    size = len(meta)
    least = most = -1
    while 0 < i < size - 1 and meta[i + 1] == 1:
        if meta[i] == _TAG_TXNID_LEAST_BITS:
            least, i = _varint_at(meta, i + 2)
        elif meta[i] == _TAG_TXNID_MOST_BITS:
            most, i = _varint_at(meta, i + 2)
        else:
            return None
    if i != size or (least < 0 and most < 0):
        return None
    publish_time, num_messages = _matched_times(match)
    return (
        publish_time,
        num_messages,
        most if most >= 0 else 0,
        least if least >= 0 else 0,
    )


def _remember_publish_time(encoded: bytes, value: int) -> None:
    global _last_publish_time  # one tuple, replaced whole: safe to read from any thread
    _last_publish_time = (encoded, value)


def _varint(encoded: bytes) -> int:
    """The value of a varint's bytes (the last without, the others with, the continuation bit)."""
    value = shift = 0
    for byte in encoded:
        value |= (byte & 127) << shift
        shift += 7
    return value
