"""Malformed and misdirected frames on raw sockets: only the offending connection suffers.

Each case checks what a Pulsar broker does (close the connection, or answer with an error), that the
server logs why it closed a connection, and that an official-client producer and consumer connected
before the bad input keep working afterwards.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import pulsar
import pytest

from pulsar_txn_proxy.conformance.raw import RawConnection
from tests.conftest import Witness, make_client
from tests.server_process import ServerProcess
from wire.commands import frame, make
from wire.framing import (
    DEFAULT_MAX_MESSAGE_SIZE,
    encode_command,
    encode_payload_command,
    make_body,
    max_frame_size,
)
from wire.pulsar_api_pb2 import BaseCommand, CommandAck, MessageMetadata, ServerError

T = BaseCommand


def assert_logged_close(proc: ServerProcess, conn: RawConnection, reason: str) -> None:
    """The server logged closing this connection, naming ``reason``."""
    needle = f"{conn.local} closing connection:"
    deadline = time.monotonic() + 3
    while True:
        lines = [line for line in proc.log().splitlines() if needle in line]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert lines, f"no log line for {conn.local}"
    assert any(reason in line for line in lines), lines


@pytest.fixture
def raw(server: ServerProcess) -> Iterator[RawConnection]:
    conn = RawConnection(server.port)
    yield conn
    conn.close()


def _producer(conn: RawConnection, topic: str, producer_id: int = 1) -> str:
    """Create a producer on a raw connection; its name."""
    conn.send(T.PRODUCER, topic=topic, producer_id=producer_id, request_id=100 + producer_id)
    return conn.expect(T.PRODUCER_SUCCESS).producer_success.producer_name


def _send_frame(pid: int, name: str, sequence_id: int, payload: bytes, corrupt: bool = False) -> bytes:
    """A SEND frame; ``corrupt`` spoils its CRC32C."""
    now = int(time.time() * 1000)
    metadata = MessageMetadata(producer_name=name, sequence_id=sequence_id, publish_time=now)
    body = make_body(metadata, payload)
    if corrupt:
        (crc,) = struct.unpack_from(">I", body, 2)
        body = body[:2] + struct.pack(">I", crc ^ 0xDEADBEEF) + body[6:]
    command = make(T.SEND, producer_id=pid, sequence_id=sequence_id, num_messages=1)
    return encode_payload_command(command, body)


# -- framing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(struct.pack(">II", 10, 50) + b"\0" * 10, "command size 50 exceeds", id="cmd>total"),
        pytest.param(
            struct.pack(">II", max_frame_size(DEFAULT_MAX_MESSAGE_SIZE) + 1, 4), "frame size", id="total-huge"
        ),
        pytest.param(struct.pack(">I", 2) + b"\0\0", "frame size 2", id="total-tiny"),
        pytest.param(struct.pack(">II", 12, 8) + b"\xff" * 8, "command does not parse", id="not-protobuf"),
        # field 1 (type), varint 99: no such command
        pytest.param(struct.pack(">II", 6, 2) + b"\x08\x63", "missing command type", id="unknown-type"),
        pytest.param(struct.pack(">II", 4, 0), "missing command type", id="empty-command"),
    ],
)
@pytest.mark.parametrize("connected", [False, True], ids=["before-connect", "after-connect"])
def test_bad_frame_closes_connection(
    server: ServerProcess, witness: Witness, raw: RawConnection, data: bytes, reason: str, connected: bool
) -> None:
    if connected:
        raw.handshake()
    raw.send_raw(data)
    raw.assert_closed_by_server()
    assert_logged_close(server, raw, reason)


def test_command_before_connect_closes_connection(
    server: ServerProcess, witness: Witness, raw: RawConnection, topic: str
) -> None:
    raw.send(T.PRODUCER, topic=topic, producer_id=1, request_id=1)
    raw.assert_closed_by_server()
    assert_logged_close(server, raw, "PRODUCER before CONNECT")


def test_second_connect_closes_connection(
    server: ServerProcess, witness: Witness, raw: RawConnection
) -> None:
    raw.handshake()
    raw.send(T.CONNECT, client_version="raw-test", protocol_version=20)
    raw.assert_closed_by_server()
    assert_logged_close(server, raw, "second CONNECT")


def test_server_only_command_closes_connection(
    server: ServerProcess, witness: Witness, raw: RawConnection
) -> None:
    raw.handshake()
    raw.send(T.SUCCESS, request_id=1)
    raw.assert_closed_by_server()
    assert_logged_close(server, raw, "only sent by servers")


def test_missing_required_field_closes_connection(
    server: ServerProcess, witness: Witness, raw: RawConnection
) -> None:
    raw.handshake()
    raw.send_raw(encode_command(BaseCommand(type=T.PRODUCER)))  # no topic, producer_id, request_id
    raw.assert_closed_by_server()
    assert_logged_close(server, raw, "required fields are missing")


def test_handshake_answer(raw: RawConnection) -> None:
    connected = raw.handshake().connected
    assert connected.server_version
    assert connected.protocol_version == 20
    assert connected.max_message_size == 5 * 1024 * 1024


# -- producers ------------------------------------------------------------------------------------


def test_wrong_checksum_is_rejected_and_connection_stays(
    server: ServerProcess, witness: Witness, raw: RawConnection, topic: str
) -> None:
    raw.handshake()
    name = _producer(raw, topic)
    raw.send_raw(_send_frame(1, name, 0, b"corrupt", corrupt=True))
    error = raw.expect(T.SEND_ERROR).send_error
    assert (error.producer_id, error.sequence_id, error.error) == (1, 0, ServerError.ChecksumError)
    raw.send_raw(_send_frame(1, name, 1, b"good"))
    receipt = raw.expect(T.SEND_RECEIPT).send_receipt
    assert (receipt.producer_id, receipt.sequence_id) == (1, 1)
    assert receipt.message_id.entryId == 0

    client = make_client(server.url)
    try:
        consumer = client.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
        assert consumer.receive(5000).data() == b"good"
        with pytest.raises(pulsar.Timeout):
            consumer.receive(300)
    finally:
        client.close()


def test_send_for_unknown_producer_closes_connection(
    server: ServerProcess, witness: Witness, raw: RawConnection
) -> None:
    raw.handshake()
    raw.send_raw(_send_frame(42, "nobody", 0, b"x"))
    raw.assert_closed_by_server()
    assert_logged_close(server, raw, "SEND for producer 42")


def test_answers_before_a_violation_are_still_delivered(
    server: ServerProcess, witness: Witness, raw: RawConnection, topic: str
) -> None:
    """Replies to requests pipelined ahead of the bad frame arrive before the orderly close."""
    raw.send_raw(
        frame(T.CONNECT, client_version="raw-test", protocol_version=20)
        + frame(T.PRODUCER, topic=topic, producer_id=1, request_id=1)
        + _send_frame(2, "nobody", 0, b"x")
    )
    raw.expect(T.CONNECTED)
    assert raw.expect(T.PRODUCER_SUCCESS).producer_success.request_id == 1
    raw.assert_closed_by_server()
    assert_logged_close(server, raw, "SEND for producer 2")


def test_send_for_closed_producer_closes_connection(
    server: ServerProcess, witness: Witness, raw: RawConnection, topic: str
) -> None:
    raw.handshake()
    name = _producer(raw, topic)
    raw.send(T.CLOSE_PRODUCER, producer_id=1, request_id=7)
    assert raw.expect(T.SUCCESS).success.request_id == 7
    raw.send_raw(_send_frame(1, name, 0, b"late"))
    raw.assert_closed_by_server()
    assert_logged_close(server, raw, "SEND for producer 1")


def test_close_unknown_producer_and_consumer_succeed(witness: Witness, raw: RawConnection) -> None:
    raw.handshake()
    raw.send(T.CLOSE_PRODUCER, producer_id=77, request_id=5)
    assert raw.expect(T.SUCCESS).success.request_id == 5
    raw.send(T.CLOSE_CONSUMER, consumer_id=78, request_id=6)
    assert raw.expect(T.SUCCESS).success.request_id == 6
    raw.assert_open()


# -- consumers -------------------------------------------------------------------------------------


def test_flow_and_ack_for_unknown_consumer_are_ignored(witness: Witness, raw: RawConnection) -> None:
    raw.handshake()
    raw.send(T.FLOW, consumer_id=55, messagePermits=100)
    for ack_type in (CommandAck.Individual, CommandAck.Cumulative):
        raw.send(T.ACK, consumer_id=55, ack_type=ack_type, message_id=[{"ledgerId": 1, "entryId": 0}])
    raw.send(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=55)
    raw.assert_open()


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        pytest.param(T.SEEK, {"message_id": {"ledgerId": 1, "entryId": 0}}, id="seek"),
        pytest.param(T.UNSUBSCRIBE, {}, id="unsubscribe"),
        pytest.param(T.GET_LAST_MESSAGE_ID, {}, id="get-last-message-id"),
    ],
)
def test_request_for_unknown_consumer_gets_error(
    witness: Witness, raw: RawConnection, kind: int, fields: dict[str, object]
) -> None:
    """Pulsar answers these with ``ERROR MetadataError "Consumer not found"``."""
    raw.handshake()
    raw.send(kind, consumer_id=66, request_id=9, **fields)
    error = raw.expect(T.ERROR).error
    assert (error.request_id, error.error) == (9, ServerError.MetadataError)
    assert error.message == "Consumer not found"
    raw.assert_open()


# -- topic names -----------------------------------------------------------------------------------

BAD_TOPICS = ["bad://x", "persistent://public/default", "persistent://public/default/", "a/b"]


@pytest.mark.parametrize("name", BAD_TOPICS)
def test_partitioned_metadata_invalid_topic(witness: Witness, raw: RawConnection, name: str) -> None:
    raw.handshake()
    raw.send(T.PARTITIONED_METADATA, topic=name, request_id=3)
    response = raw.expect(T.PARTITIONED_METADATA_RESPONSE).partitionMetadataResponse
    assert response.request_id == 3
    assert response.response == response.Failed
    assert response.error == ServerError.InvalidTopicName
    assert response.message
    raw.assert_open()


@pytest.mark.parametrize("name", BAD_TOPICS)
def test_lookup_invalid_topic(witness: Witness, raw: RawConnection, name: str) -> None:
    raw.handshake()
    raw.send(T.LOOKUP, topic=name, request_id=4)
    response = raw.expect(T.LOOKUP_RESPONSE).lookupTopicResponse
    assert response.request_id == 4
    assert response.response == response.Failed
    assert response.error == ServerError.InvalidTopicName
    assert response.message
    raw.assert_open()


@pytest.mark.parametrize("name", BAD_TOPICS)
@pytest.mark.parametrize("kind", [T.PRODUCER, T.SUBSCRIBE])
def test_producer_and_subscribe_invalid_topic(
    witness: Witness, raw: RawConnection, name: str, kind: int
) -> None:
    raw.handshake()
    if kind == T.PRODUCER:
        raw.send(T.PRODUCER, topic=name, producer_id=1, request_id=5)
    else:
        raw.send(T.SUBSCRIBE, topic=name, subscription="s", subType=0, consumer_id=1, request_id=5)
    error = raw.expect(T.ERROR).error
    assert (error.request_id, error.error) == (5, ServerError.InvalidTopicName)
    raw.assert_open()

