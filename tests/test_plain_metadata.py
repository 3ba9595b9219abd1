"""The scans of plain SENDs (``wire.framing.scan_plain_send``) and of their metadata (``scan_plain_metadata``):
whatever they take, the protobuf parser takes with the same values, and an entry described from the scanned
metadata is the one described from the parsed metadata."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.entry import Entry
from wire.framing import (
    FrameDecoder,
    encode_payload_command,
    make_body,
    parse_body,
    scan_plain_metadata,
    scan_plain_send,
)
from wire.pulsar_api_pb2 import BaseCommand, CommandSend, CompressionType, KeyValue, MessageMetadata

#: Fields the broker reads that the scan must never take.
_READ_FIELDS = (
    "partition_key",
    "ordering_key",
    "txnid_most_bits",
    "txnid_least_bits",
    "marker_type",
    "deliver_at_time",
    "chunk_id",
)

#: The machine may be busy: no deadline, no complaint about slow generation.
_SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
#: Tag bytes (of taken fields and others), continuation and small bytes, for streams of fields.
_PARTS = [b"\x0a", b"\x10", b"\x18", b"\x40", b"\x48", b"\x58", b"\x60", b"\x80", b"\x01", b"\xff", b"\x00"]
_U64 = st.integers(min_value=0, max_value=(1 << 64) - 1)
_I32 = st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)


@st.composite
def _metadata(draw: st.DrawFn) -> MessageMetadata:
    meta = MessageMetadata()
    if draw(st.booleans()):
        meta.producer_name = draw(st.text(max_size=200))
    if draw(st.booleans()):
        meta.sequence_id = draw(_U64)
    if draw(st.booleans()):
        meta.publish_time = draw(_U64)
    if draw(st.booleans()):
        meta.uncompressed_size = draw(st.integers(min_value=0, max_value=(1 << 32) - 1))
    if draw(st.booleans()):
        meta.compression = draw(st.sampled_from(list(CompressionType.values())))
    if draw(st.booleans()):
        meta.num_messages_in_batch = draw(_I32)
    if draw(st.booleans()):
        meta.event_time = draw(_U64)
    # Now and then a field the scan does not take.
    extra = draw(st.sampled_from([None, "properties", *_READ_FIELDS]))
    if extra == "properties":
        meta.properties.append(KeyValue(key="k", value="v"))
    elif extra in ("partition_key", "ordering_key"):
        setattr(meta, extra, "key" if extra == "partition_key" else b"key")
    elif extra is not None:
        setattr(meta, extra, draw(st.integers(min_value=0, max_value=5)))
    return meta


def _check_taken(data: bytes) -> None:
    """If the scan takes ``data``, the parser takes it too, with the values the scan gave and no field it skips."""
    scanned = scan_plain_metadata(data)
    if scanned is None:
        return
    parsed = MessageMetadata.FromString(data)  # must not raise
    publish_time, batch = scanned
    assert publish_time == parsed.publish_time
    assert batch == (parsed.num_messages_in_batch if parsed.HasField("num_messages_in_batch") else None)
    assert not any(parsed.HasField(name) for name in _READ_FIELDS)
    assert not parsed.properties
    body = make_body(data, b"payload")
    assert Entry.from_plain(7, body, publish_time, batch) == Entry.from_metadata(7, body, parsed)


@settings(max_examples=300, **_SETTINGS)
@given(_metadata())
def test_a_scanned_metadata_describes_the_entry_its_parse_does(meta: MessageMetadata) -> None:
    data = meta.SerializePartialToString()
    _check_taken(data)
    plain = not any(meta.HasField(name) for name in _READ_FIELDS) and not meta.properties
    small = all(
        not meta.HasField(name) or getattr(meta, name) < 1 << 63
        for name in ("sequence_id", "publish_time", "event_time")
    ) and (not meta.HasField("num_messages_in_batch") or 0 <= meta.num_messages_in_batch < 1 << 28)
    if plain and small and len(meta.producer_name.encode()) < 128:
        # What clients send for plain messages is taken (the saving is real), and parses lazily to the same.
        assert scan_plain_metadata(data) is not None
        message = parse_body(make_body(data, b"payload"))
        assert message.plain is not None
        assert message.metadata == meta


@settings(max_examples=500, **_SETTINGS)
@given(st.binary(max_size=40))
def test_bytes_the_scan_takes_parse(data: bytes) -> None:
    _check_taken(data)


@settings(max_examples=500, **_SETTINGS)
@given(st.lists(st.sampled_from(_PARTS), max_size=24))
def test_tag_soup_the_scan_takes_parses(parts: list[bytes]) -> None:
    _check_taken(b"".join(parts))


def test_each_metadata_has_its_own_publish_time() -> None:
    """The scan reuses the last publish time it decoded while the bytes are the same (messages sent within one
    millisecond): a new publish time, and one seen before the last, read as they are."""
    times = [1_764_000_000_123, 1_764_000_000_123, 1_764_000_000_124, 1_764_000_000_123, 5, 0, (1 << 63) - 1]
    for publish_time in times:
        meta = MessageMetadata(producer_name="p", sequence_id=1, publish_time=publish_time, uncompressed_size=9)
        assert scan_plain_metadata(meta.SerializeToString()) == (publish_time, None)


def test_encodings_the_scan_leaves_to_the_parser() -> None:
    name = b"\x0a\x03abc"
    for data in (
        name + b"\x98\x00\x05",  # publish_time under an overlong tag
        name + b"\x18" + b"\xff" * 9 + b"\x01",  # a 10-byte varint
        name + b"\x18\x80",  # a varint cut short
        b"\x0a\x05abc",  # a string cut short
        b"\x0a\x80\x01" + b"x" * 128,  # a string of 128 bytes (two-byte length)
        name + b"\x1a\x00",  # publish_time with the wrong wire type
        name + b"\x58\xff\xff\xff\xff\x0f",  # num_messages_in_batch of -1
        name + b"\x32\x01k",  # a partition key
    ):
        assert scan_plain_metadata(data) is None, data


def test_a_broken_metadata_is_still_refused() -> None:
    """What the scan leaves goes to the parser, which refuses what it refused before."""
    import pytest

    from wire.framing import ProtocolError

    with pytest.raises(ProtocolError, match="does not parse"):
        parse_body(make_body(b"\x0a\x05abc", b"payload"))


def _check_send_taken(data: bytes) -> None:
    """If the SEND scan takes ``data``, the parser takes it too: a SEND of the values the scan gave, and no more."""
    scanned = scan_plain_send(data)
    if scanned is None:
        return
    command = BaseCommand.FromString(data)  # must not raise
    assert command.type == BaseCommand.SEND and command.send.IsInitialized()
    send = command.send
    highest = send.highest_sequence_id if send.HasField("highest_sequence_id") else None
    assert scanned == (send.producer_id, send.sequence_id, highest)
    assert {field.name for field, _ in send.ListFields()} <= {
        "producer_id",
        "sequence_id",
        "num_messages",
        "highest_sequence_id",
    }
    assert {field.name for field, _ in command.ListFields()} == {"type", "send"}
    # The decoder hands the scanned SEND on with the command it parses when asked.
    (frame,) = FrameDecoder().decode(encode_payload_command(command, b"body"))[0]
    assert frame.send == scanned and frame.command == command and frame.body == b"body"


@st.composite
def _send(draw: st.DrawFn) -> bytes:
    send = CommandSend(producer_id=draw(_U64), sequence_id=draw(_U64))
    if draw(st.booleans()):
        send.num_messages = draw(_I32)
    if draw(st.booleans()):
        send.highest_sequence_id = draw(_U64)
    extra = draw(st.sampled_from([None, "txnid_least_bits", "txnid_most_bits", "is_chunk", "marker"]))
    if extra is not None:
        setattr(send, extra, draw(st.integers(min_value=0, max_value=1)))
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        send.ClearField(draw(st.sampled_from(["producer_id", "sequence_id"])))
    return BaseCommand(type=BaseCommand.SEND, send=send).SerializePartialToString()


@settings(max_examples=300, **_SETTINGS)
@given(_send())
def test_a_scanned_send_is_the_send_the_parser_reads(data: bytes) -> None:
    _check_send_taken(data)
    command = BaseCommand.FromString(data)
    send = command.send
    plain = send.IsInitialized() and not any(
        send.HasField(name) for name in ("txnid_least_bits", "txnid_most_bits", "is_chunk", "marker")
    )
    small = all(
        not send.HasField(name) or getattr(send, name) < 1 << 63
        for name in ("producer_id", "sequence_id", "highest_sequence_id")
    ) and (not send.HasField("num_messages") or 0 <= send.num_messages < 1 << 28)
    if plain and small:
        assert scan_plain_send(data) is not None  # what clients send is taken


@settings(max_examples=500, **_SETTINGS)
@given(st.lists(st.sampled_from([*_PARTS, b"\x30", b"\x20", b"\x28"]), max_size=20))
def test_send_soup_the_scan_takes_parses(parts: list[bytes]) -> None:
    rest = b"".join(parts)
    _check_send_taken(b"\x08\x06\x32" + bytes([len(rest)]) + rest)


def test_sends_the_scan_leaves_to_the_parser() -> None:
    def command(rest: bytes) -> bytes:
        return b"\x08\x06\x32" + bytes([len(rest)]) + rest

    for data in (
        command(b"\x08\x01"),  # no sequence id: the parser's SEND is missing a required field
        command(b"\x08\x01\x10\x02\x20\x00"),  # in a transaction
        command(b"\x08\x01\x10\x02\x38\x01"),  # a chunk
        command(b"\x08\x01\x10" + b"\xff" * 9 + b"\x01"),  # a 10-byte varint
        command(b"\x08\x01\x10\x02\x18\xff\xff\xff\xff\x0f"),  # num_messages of -1
        command(b"\x08\x01\x10\x02") + b"\x10\x03",  # a field after the send
        b"\x08\x06\x32\x05\x08\x01\x10\x02",  # the send cut short
    ):
        assert scan_plain_send(data) is None, data
