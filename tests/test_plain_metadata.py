"""The metadata scan of plain messages (``wire.framing.scan_plain_metadata``): whatever it takes, the protobuf parser
takes with the same values, and an entry described from the scan is the one described from the parsed metadata."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.entry import Entry
from wire.framing import make_body, parse_body, scan_plain_metadata
from wire.pulsar_api_pb2 import CompressionType, KeyValue, MessageMetadata

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


@settings(max_examples=1000, **_SETTINGS)
@given(st.binary(max_size=40))
def test_bytes_the_scan_takes_parse(data: bytes) -> None:
    _check_taken(data)


@settings(max_examples=1000, **_SETTINGS)
@given(st.lists(st.sampled_from(_PARTS), max_size=24))
def test_tag_soup_the_scan_takes_parses(parts: list[bytes]) -> None:
    _check_taken(b"".join(parts))


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
