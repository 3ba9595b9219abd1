"""The scans of transactional SENDs (``wire.framing.scan_txn_send``) and of their metadata (``scan_txn_metadata``):
whatever they take, the protobuf parser takes with the same values, an entry described from the scanned metadata is
the one described from the parsed metadata, and what the plain scans take they never take (nor the reverse)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.broker import Broker, InlineCommits
from engine.clock import ManualClock
from engine.entry import Entry
from engine.store import Store
from engine.topic import AccessMode, Producer
from engine.transactions import TxnId
from wire.framing import (
    FrameDecoder,
    encode_payload_command,
    make_body,
    parse_body,
    scan_plain_metadata,
    scan_plain_send,
    scan_txn_metadata,
    scan_txn_send,
)
from wire.pulsar_api_pb2 import BaseCommand, CommandSend, KeyValue, MessageMetadata

_SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
_U64 = st.integers(min_value=0, max_value=(1 << 64) - 1)
_I32 = st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)
_TXN_FIELDS = ("txnid_least_bits", "txnid_most_bits")
#: What the Java client (4.x) writes for a non-batched message in a transaction, taken from a recorded pulsar-perf
#: stream: the SEND's command (producer 0, sequence 2, transaction (1, 1)) and its metadata.
_JAVA_SEND = bytes.fromhex("080632080800100220012801")
_JAVA_METADATA = bytes.fromhex("0a0e7374616e64616c6f6e652d312d31100218cdfb8399a2344864b00101b80101")


# -- the command ------------------------------------------------------------------------------------------------


def _check_send_taken(data: bytes) -> None:
    """If the scan takes ``data``, the parser takes it: a SEND in a transaction, of the values the scan gave."""
    scanned = scan_txn_send(data)
    if scanned is None:
        return
    assert scan_plain_send(data) is None
    command = BaseCommand.FromString(data)  # must not raise
    assert command.type == BaseCommand.SEND and command.send.IsInitialized()
    send = command.send
    assert any(send.HasField(name) for name in _TXN_FIELDS)
    assert scanned == (
        send.producer_id,
        send.sequence_id,
        send.highest_sequence_id,
        send.txnid_most_bits,
        send.txnid_least_bits,
    )
    assert {field.name for field, _ in send.ListFields()} <= {
        "producer_id",
        "sequence_id",
        "num_messages",
        "highest_sequence_id",
        *_TXN_FIELDS,
    }
    assert {field.name for field, _ in command.ListFields()} == {"type", "send"}
    # The decoder hands the scanned SEND on with the command it parses when asked.
    (frame,) = FrameDecoder().decode(encode_payload_command(command, b"body"))[0]
    assert frame.send is None and frame.txn_send == scanned
    assert frame.command == command and frame.body == b"body"


@st.composite
def _send(draw: st.DrawFn) -> bytes:
    send = CommandSend(producer_id=draw(_U64), sequence_id=draw(_U64))
    for name in ("num_messages", "highest_sequence_id", *_TXN_FIELDS):
        if draw(st.booleans()):
            setattr(send, name, draw(_I32 if name == "num_messages" else _U64))
    extra = draw(st.sampled_from([None, "is_chunk", "marker"]))
    if extra is not None:
        setattr(send, extra, draw(st.booleans()))
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        send.ClearField(draw(st.sampled_from(["producer_id", "sequence_id"])))
    return BaseCommand(type=BaseCommand.SEND, send=send).SerializePartialToString()


@settings(max_examples=400, **_SETTINGS)
@given(_send())
def test_a_scanned_txn_send_is_the_send_the_parser_reads(data: bytes) -> None:
    _check_send_taken(data)
    send = BaseCommand.FromString(data).send
    in_txn = any(send.HasField(name) for name in _TXN_FIELDS)
    if in_txn:
        assert scan_plain_send(data) is None  # a SEND naming a transaction is never taken as plain
    usual = send.IsInitialized() and in_txn and not send.HasField("is_chunk") and not send.HasField("marker")
    small = all(
        not send.HasField(name) or getattr(send, name) < 1 << 63
        for name in ("producer_id", "sequence_id", "highest_sequence_id", *_TXN_FIELDS)
    ) and (not send.HasField("num_messages") or 0 <= send.num_messages < 1 << 28)
    if usual and small:
        assert scan_txn_send(data) is not None  # what clients send is taken


@settings(max_examples=600, **_SETTINGS)
@given(
    st.lists(
        st.sampled_from([b"\x08", b"\x10", b"\x18", b"\x20", b"\x28", b"\x30", b"\x38", b"\x80", b"\x01", b"\xff"]),
        max_size=24,
    )
)
def test_send_soup_the_scans_take_parses(parts: list[bytes]) -> None:
    rest = b"".join(parts)
    data = b"\x08\x06\x32" + bytes([len(rest)]) + rest
    _check_send_taken(data)
    assert scan_plain_send(data) is None or scan_txn_send(data) is None


def test_the_java_clients_txn_send_is_taken() -> None:
    assert scan_txn_send(_JAVA_SEND) == (0, 2, 0, 1, 1)
    assert scan_plain_send(_JAVA_SEND) is None
    _check_send_taken(_JAVA_SEND)


def test_txn_sends_the_scan_leaves_to_the_parser() -> None:
    def command(rest: bytes) -> bytes:
        return b"\x08\x06\x32" + bytes([len(rest)]) + rest

    for data in (
        command(b"\x08\x01\x10\x02"),  # no transaction: the plain scan's
        command(b"\x08\x01\x20\x01"),  # no sequence id: the parser's SEND is missing a required field
        command(b"\x08\x01\x10\x02\x20\x01\x38\x01"),  # a chunk
        command(b"\x08\x01\x10\x02\x20" + b"\xff" * 9 + b"\x01"),  # a 10-byte varint
        command(b"\x08\x01\x10\x02\x20\x01\x18\xff\xff\xff\xff\x0f"),  # num_messages of -1
        command(b"\x08\x01\x10\x02\xa0\x00\x01"),  # txnid_least_bits under an overlong tag
        command(b"\x08\x01\x10\x02\x20\x01") + b"\x10\x03",  # a field after the send
        b"\x08\x06\x32\x07\x08\x01\x10\x02\x20\x01",  # the send cut short
    ):
        assert scan_txn_send(data) is None, data


# -- the metadata -----------------------------------------------------------------------------------------------

#: Tag bytes (taken, two-byte, cut short, of the wrong wire type), continuation and small bytes.
_METADATA_PARTS = [b"\x10", b"\x18", b"\x48", b"\x58", b"\xb0\x01", b"\xb8\x01", b"\xb0", b"\xb8", b"\xb2\x01"]
_METADATA_PARTS += [b"\x80", b"\x01", b"\xff", b"\x00", b"\x0a"]
_READ_FIELDS = ("partition_key", "ordering_key", "marker_type", "deliver_at_time", "chunk_id")


def _check_metadata_taken(data: bytes) -> None:
    """If the scan takes ``data``, the parser takes it too, with the values the scan gave and no field it skips, and
    the entry is described as from the parsed metadata."""
    scanned = scan_txn_metadata(data)
    if scanned is None:
        return
    assert scan_plain_metadata(data) is None
    parsed = MessageMetadata.FromString(data)  # must not raise
    publish_time, batch, most, least = scanned
    assert publish_time == parsed.publish_time
    assert batch == (parsed.num_messages_in_batch if parsed.HasField("num_messages_in_batch") else None)
    assert (most, least) == (parsed.txnid_most_bits, parsed.txnid_least_bits)
    assert any(parsed.HasField(name) for name in _TXN_FIELDS)
    assert not any(parsed.HasField(name) for name in _READ_FIELDS)
    assert not parsed.properties
    body = make_body(data, b"payload")
    assert Entry.from_plain(7, body, publish_time, batch, (most, least)) == Entry.from_metadata(7, body, parsed)


@st.composite
def _metadata(draw: st.DrawFn) -> MessageMetadata:
    meta = MessageMetadata(producer_name=draw(st.text(max_size=150)))
    for name in ("sequence_id", "publish_time", "event_time", *_TXN_FIELDS):
        if draw(st.booleans()):
            setattr(meta, name, draw(_U64))
    if draw(st.booleans()):
        meta.uncompressed_size = draw(st.integers(min_value=0, max_value=(1 << 32) - 1))
    if draw(st.booleans()):
        meta.num_messages_in_batch = draw(_I32)
    extra = draw(st.sampled_from([None, "properties", *_READ_FIELDS]))
    if extra == "properties":
        meta.properties.append(KeyValue(key="k", value="v"))
    elif extra in ("partition_key", "ordering_key"):
        setattr(meta, extra, "key" if extra == "partition_key" else b"key")
    elif extra is not None:
        setattr(meta, extra, draw(st.integers(min_value=0, max_value=5)))
    return meta


@settings(max_examples=400, **_SETTINGS)
@given(_metadata())
def test_a_scanned_txn_metadata_describes_the_entry_its_parse_does(meta: MessageMetadata) -> None:
    data = meta.SerializePartialToString()
    _check_metadata_taken(data)
    usual = any(meta.HasField(name) for name in _TXN_FIELDS) and not any(meta.HasField(name) for name in _READ_FIELDS)
    small = all(
        not meta.HasField(name) or getattr(meta, name) < 1 << 63
        for name in ("sequence_id", "publish_time", "event_time", *_TXN_FIELDS)
    ) and (not meta.HasField("num_messages_in_batch") or 0 <= meta.num_messages_in_batch < 1 << 28)
    if usual and small and not meta.properties and len(meta.producer_name.encode()) < 128:
        # What clients send is taken, and the body parses lazily to the same metadata.
        assert scan_txn_metadata(data) is not None
        message = parse_body(make_body(data, b"payload"))
        assert message.plain is None and message.txn == scan_txn_metadata(data)
        assert message.metadata == meta


@settings(max_examples=600, **_SETTINGS)
@given(
    st.lists(
        st.sampled_from(_METADATA_PARTS),
        max_size=24,
    )
)
def test_metadata_soup_the_scan_takes_parses(parts: list[bytes]) -> None:
    _check_metadata_taken(b"\x0a\x01p" + b"".join(parts))


def test_the_java_clients_txn_metadata_is_taken() -> None:
    assert scan_txn_metadata(_JAVA_METADATA) == (1_795_885_694_413, None, 1, 1)
    _check_metadata_taken(_JAVA_METADATA)


def test_txn_metadata_the_scan_leaves_to_the_parser() -> None:
    name = b"\x0a\x03abc"
    for data in (
        name + b"\x18\x05",  # no transaction: the plain scan's
        name + b"\xb0\x81\x00\x01",  # txnid_least_bits under an overlong tag
        name + b"\xb0\x01" + b"\xff" * 9 + b"\x01",  # a 10-byte varint
        name + b"\xb2\x01\x01\x01",  # txnid_least_bits with the wrong wire type
        name + b"\xb8\x01\x01\x32\x01k",  # a partition key
        b"\x18\x05\xb0\x01\x01",  # no producer name first
        name + b"\xb0\x01",  # a varint missing
    ):
        assert scan_txn_metadata(data) is None, data


# -- the transactional run ----------------------------------------------------------------------------------------


def test_a_run_stores_each_entry_in_the_sends_transaction(tmp_path: Path) -> None:
    """Engine level: a run of SENDs in one transaction whose metadata was only scanned (naming that transaction, in
    a batch or not) is described as its parse describes it, and one whose metadata names another transaction or none
    is rewritten to name the SEND's: every stored entry, read back from storage, names the SEND's transaction."""
    broker = Broker(Store(tmp_path / "store.sqlite"), ManualClock(), commits=InlineCommits())
    topic = broker.topic("persistent://public/default/txn-scan")
    producer = Producer(1, "p", AccessMode.SHARED, 0, _Sink())
    topic.add_producer(producer)
    txn = TxnId(3, 300)
    metas = [
        MessageMetadata(producer_name="p", sequence_id=0, publish_time=5, txnid_most_bits=3, txnid_least_bits=300),
        MessageMetadata(
            producer_name="p", publish_time=6, num_messages_in_batch=4, txnid_most_bits=3, txnid_least_bits=300
        ),
        MessageMetadata(producer_name="p", sequence_id=2, publish_time=7, txnid_most_bits=3, txnid_least_bits=301),
        MessageMetadata(producer_name="p", sequence_id=3, publish_time=8),
    ]
    messages = [parse_body(make_body(meta, b"m")) for meta in metas]
    assert [m.txn is not None for m in messages] == [True, True, True, False]  # the scans took the first three
    results: list[object] = []
    topic.publish_txn_run(producer, txn, [(n, 0, m) for n, m in enumerate(messages)], results.append)
    broker.flush()
    # The transaction is not open on this topic: its abort marker follows its first entry (as Pulsar's buffer does).
    assert results == [[0, 2, 3, 4]]
    ids = results[0]
    cached = [entry for entry in topic.read(0, 4) if entry.entry_id in ids]
    stored = [Entry.from_body(n, body) for n, body in broker.store.read(topic.topic_id, 0, 4) if n in ids]
    assert cached == stored
    assert [entry.txn for entry in stored] == [(3, 300)] * 4
    assert [(entry.num_messages, entry.is_batch, entry.publish_time) for entry in stored] == [
        (1, False, 5),
        (4, True, 6),
        (1, False, 7),
        (1, False, 8),
    ]


class _Sink:
    def close_producer(self, producer: Producer) -> None:
        pass

    def producer_ready(self, producer: Producer) -> None:
        pass
